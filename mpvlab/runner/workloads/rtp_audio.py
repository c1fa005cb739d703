"""The rtp workload's audio stream (issue 48 §1, "the call had audio"; rtp/README.md "The call had
audio"): the summary's `rtp.audio` from both ends' counts, and the accounting that fails a run when
they do not add up. The audio is Opus at libwebrtc 2018's defaults (32 kbit/s mono, 20 ms frames,
PT 111, 48 kHz RTP clock), paced at high priority, without a transport-wide number and not counted
in the controller's bytes (rtp/cmd/mpvlab-rtp/audio.go); it is never in the video's figures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mpvlab.core.errors import RunFailed

Rows = Sequence[Mapping[str, str]]

DEFINITION = ("the audio stream alone (SSRC 0x6d707661, PT 111; never in the video's packets, bytes or bitrates): "
              "packets and bytes (UDP payload: RTP header + Opus frame) sent (sender/sender.json audio) and "
              "received once per sequence number (receiver/receiver.json audio); lost = sent - received; "
              "received_mean_bps = mean of receiver/rate.csv audio_bps over the run seconds wholly inside "
              "window_s (the video's window, video_bitrate_bps.window_s); on time = arrived by its capture "
              "instant (from the 48 kHz RTP timestamp) + the playout deadline; not decoded")


def audio_record(tx: Mapping[str, Any], rx: Mapping[str, Any], rate: Rows,
                 window_s: list[float] | None) -> dict[str, Any]:
    """The summary's `rtp.audio` (tx, rx: sender.json, receiver.json; window_s: the video's window)."""
    s, r = tx.get("audio") or {}, rx.get("audio") or {}
    enabled = bool(s.get("enabled"))
    inside: list[int] = []
    if window_s is not None:
        first, last = window_s
        inside = [int(x.get("audio_bps") or 0) for x in rate
                  if int(x["second"]) >= math.ceil(first - 1e-9) and int(x["second"]) + 1 <= last + 1e-9]
    received = r.get("packets_received", 0)
    on_time = r.get("packets_on_time", 0)
    return {
        "enabled": enabled,
        "bitrate_bps": s.get("bitrate_bps") or None, "frame_ms": s.get("frame_ms") or None,
        "wave": s.get("wave") or None, "payload_type": s.get("payload_type"), "clock_rate": s.get("clock_rate"),
        "frames": s.get("frames", 0), "packets_sent": s.get("packets_sent", 0),
        "packets_unsent_at_end": s.get("packets_unsent_at_end", 0),
        "bytes_sent": s.get("bytes_sent", 0), "payload_bytes_sent": s.get("payload_bytes_sent", 0),
        "packets_received": received, "packets_lost": r.get("packets_lost") or 0,
        "bytes_received": r.get("bytes_received", 0),
        "packets_on_time": on_time, "packets_late": r.get("packets_late", 0),
        "on_time_share": round(on_time / received, 6) if received else None,
        "latency_ms": r.get("latency_ms") or {},
        "playout_deadline_ms": r.get("playout_deadline_ms"),
        "window_s": window_s if enabled else None,
        "received_mean_bps": round(sum(inside) / len(inside)) if enabled and inside else None,
        "received_seconds": len(inside) if enabled else 0,
        "definition": DEFINITION,
    }


def check_audio(tx: Mapping[str, Any], rx: Mapping[str, Any]) -> None:
    """The audio is accounted like the video, apart from it: every packet sent was received or counted
    lost (the end record names how many were sent), no more bytes arrived than left, every packet
    received is on time or late; with audio off, no audio packet at all."""
    s, r = tx.get("audio") or {}, rx.get("audio") or {}
    if not s and not r:
        return      # logs from before the audio stream existed
    sent, received = s.get("packets_sent", 0), r.get("packets_received", 0)
    if not s.get("enabled") and (sent or received):
        raise RunFailed(f"rtp: audio off, yet {sent} audio packets sent and {received} received")
    if r.get("packets_expected") != sent or received + (r.get("packets_lost") or 0) != sent:
        raise RunFailed(f"rtp: {sent} audio packets sent, the viewer expected {r.get('packets_expected')} "
                        f"and received {received}")
    if r.get("bytes_received", 0) > s.get("bytes_sent", 0):
        raise RunFailed(f"rtp: {r.get('bytes_received')} audio bytes received, more than the {s.get('bytes_sent')} sent")
    if r.get("packets_on_time", 0) + r.get("packets_late", 0) != received:
        raise RunFailed(f"rtp: {received} audio packets received, not {r.get('packets_on_time')} on time + "
                        f"{r.get('packets_late')} late")
