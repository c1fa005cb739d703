"""The rtp workload's summary figures and their cross-checks (issue 43 items 4 and the checks table,
rtp/README.md "Cross-checks"), on a stream's logs written here: a consistent stream passes every
check; each planted disagreement fails its check by name; the steady target leaves out the time a
paused encoder's target was 0."""

from __future__ import annotations

import copy
import csv
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpvlab.runner import crosschecks
from mpvlab.runner.workloads.base import Outcome
from mpvlab.runner.workloads.rtp import rtp_record
from mpvlab.workloads.rtp import RtpWorkloadSpec

FPS, T0, END = 10, 1.0, 21.0        # frames every 0.1 s of capture time from 1.0 s to 21.0 s
RATE = 480_000                      # the controller's target while the encoder runs (bit/s)
PAUSES = [(12.0, 12.5), (15.0, 16.0), (18.3, 18.6)]      # target 0: webrtc-bbr's paused encoder
RTP_HEADER = 12
AUDIO_BYTES = 92                    # an audio packet's UDP payload: 12 B RTP header + an 80 B Opus frame


def _paused(t: float) -> bool:
    return any(a <= t < b for a, b in PAUSES)


# sender.json repair.counts and receiver.json repair as mpvlab-rtp writes them (send.go, recv_repair.go)
REPAIR_TX_COUNTS = ("nack_messages_received", "nacked_packets", "resend_not_in_history", "resend_refused_too_soon",
                    "resend_rate_limited", "retransmissions_queued", "retransmissions_sent", "retransmission_bytes_sent",
                    "retransmissions_unsent_at_end", "pli_received", "keyframe_requests_to_encoder",
                    "keyframe_requests_rate_limited", "keyframes_forced")
REPAIR_RX_COUNTS = ("nack_messages_sent", "nacked_packets", "nack_send_errors", "nack_gave_up", "rtx_packets_received",
                    "rtx_bytes_received", "rtx_packets_lost", "rtx_duplicate", "packets_repaired", "repaired_in_time",
                    "repaired_too_late", "packets_lost_unrepaired", "frames_repaired", "frames_repaired_on_time",
                    "pli_sent")


def _stream() -> dict[str, Any]:
    """A stream as mpvlab-rtp's two ends log it: one packet per frame, every frame on time."""
    targets = [{"t_s": "0.500000", "target_bps": str(RATE), "encoder_set_bps": str(RATE), "controller_stats": "{}"}]
    for a, b in PAUSES:
        targets += [{"t_s": f"{a:.6f}", "target_bps": "0", "encoder_set_bps": "0", "controller_stats": "{}"},
                    {"t_s": f"{b:.6f}", "target_bps": str(RATE), "encoder_set_bps": str(RATE), "controller_stats": "{}"}]
    size = RATE // 8 // FPS
    caps = [T0 + i / FPS for i in range(round((END - T0) * FPS)) if not _paused(T0 + i / FPS + 1e-9)]
    frames = [{"frame": str(n), "capture_ns": str(round(c * 1e9)), "capture_s": f"{c:.6f}", "encode_to_pacer_ms": "1.0",
               "keyframe": "false", "bytes": str(size), "nal_bytes": str(size), "packets": "1",
               "encoder_bps": str(RATE), "target_bps": str(RATE), "forced_keyframe": "false"} for n, c in enumerate(caps)]
    packets = [{"t_s": f"{c + 0.01:.6f}", "transport_seq": str(n), "rtp_seq": str(n), "frame": str(n),
                "udp_payload_bytes": str(size + RTP_HEADER), "padding": "false", "rtx": "false", "original_seq": "",
                "audio": "false"} for n, c in enumerate(caps)]
    # the call's audio: one 20 ms Opus frame per packet from T0 to END, no transport-wide number
    audio_caps = [T0 + k * 0.02 for k in range(round((END - T0) / 0.02))]
    packets += [{"t_s": f"{c + 0.01:.6f}", "transport_seq": "-1", "rtp_seq": str(k), "frame": "",
                 "udp_payload_bytes": str(AUDIO_BYTES), "padding": "false", "rtx": "false", "original_seq": "",
                 "audio": "true"} for k, c in enumerate(audio_caps)]
    encoder = []
    for w in range(math.ceil(END - T0)):
        a = T0 + w
        n = sum(1 for c in caps if a <= c + 1e-9 < a + 1)
        # the sender's encoder.csv: the time-weighted target with the pauses' zeros in it
        run = 1.0 - sum(max(0.0, min(b, a + 1) - max(p, a)) for p, b in PAUSES)
        encoder.append({"window_start_s": f"{a:.6f}", "frames": str(n), "achieved_bps": str(n * size * 8),
                        "achieved_wire_bps": str(n * (size + RTP_HEADER + 28) * 8),
                        "target_bps_mean": f"{RATE * run:.0f}", "encoder_set_bps_mean": f"{RATE * run:.0f}"})
    latencies = [50.0 + (n % 7) for n in range(len(caps))]
    rx_frames = [{"frame": str(n), "capture_s": f"{c:.6f}", "status": "on_time", "latency_ms": f"{latencies[n]:.3f}",
                  "packets_received": "1", "packets_in_frame": "1", "decode": "decoded",
                  "rtp_bytes": str(size + RTP_HEADER), "packets_repaired": "0"} for n, c in enumerate(caps)]
    rate = []
    for s in range(int(T0), int(END) + 1):
        got = [n for n, c in enumerate(caps) if s <= c + 0.01 < s + 1]
        heard = [c for c in audio_caps if s <= c + 0.01 < s + 1]
        rate.append({"second": str(s), "received_bps": str(len(got) * (size + RTP_HEADER) * 8),
                     "packets": str(len(got)), "padding_bps": "0", "rtx_bps": "0",
                     "audio_bps": str(len(heard) * AUDIO_BYTES * 8)})
    lat = sorted(latencies)
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731 — the viewer's nearest rank
    n, nbytes = len(caps), len(caps) * (size + RTP_HEADER)
    na, abytes = len(audio_caps), len(audio_caps) * AUDIO_BYTES
    tx = {"frames_captured": n, "packets_sent": n, "rtp_bytes_sent": nbytes, "packets_unsent_at_end": 0,
          # the sender's TWCC ledger as mpvlab-rtp writes it (feedback.go feedbackSummary): every number
          # reported received, one feedback per RTCP datagram every 50 ms of the 20 s stream
          "feedback": {"transport_seqs_sent": n, "transport_seqs_reported": n, "transport_seqs_reported_received": n,
                       "transport_seqs_reported_lost": 0, "transport_seqs_without_feedback": 0,
                       "transport_seqs_without_feedback_first": None, "missing_feedback_at_tail": 0,
                       "twcc_feedback_packets": 400, "rtcp_datagrams": 400, "rtcp_bytes": 400 * 28},
          "padding": True, "padding_packets_sent": 0, "padding_bytes_sent": 0, "target_updates": len(targets),
          "final_target_bps": RATE, "cpu": None,
          "repair": {"nack": True, "pli": True, "counts": dict.fromkeys(REPAIR_TX_COUNTS, 0)},
          "audio": {"enabled": True, "bitrate_bps": 32000, "frame_ms": 20, "wave": "pink-noise", "payload_type": 111,
                    "clock_rate": 48000, "frames": na, "packets_handed": na, "packets_sent": na, "bytes_sent": abytes,
                    "payload_bytes_sent": abytes - na * RTP_HEADER, "packets_unsent_at_end": 0}}
    rx = {"end_record_seen": True, "frames_accounted": n, "frames_on_time": n, "frames_late": 0, "frames_lost": 0,
          "frames_lost_incomplete": 0, "frames_lost_unseen": 0, "frames_reassembly_mismatch": 0,
          "packets_expected": n, "packets_received": n, "packets_lost": 0, "rtp_bytes_received": nbytes,
          "padding_packets_expected": 0, "padding_packets_received": 0, "padding_packets_lost": 0,
          "padding_bytes_received": 0, "udp_payload_bytes_received": nbytes + abytes, "udp_datagrams_received": n + na,
          "feedback_interval_ms": 50, "feedback_own_target_bps": 300000, "playout_deadline_ms": 400.0,
          "decode": {"frames_decoded": n, "frames_decode_error": 0, "frames_undecodable": 0, "decoder_failure": "",
                     "decoder": None, "definition": "decoded + decode_error + undecodable = on time"},
          "latency_ms": {"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "max": pct(1.0),
                         "definition": "capture to the arrival of the frame's last missing packet"}, "cpu": None,
          "repair": {**dict.fromkeys(REPAIR_RX_COUNTS, 0), "rtx_packets_expected": 0, "pli_sent_by_reason": {},
                     "nack_rtt_ms": 100, "definition": "as the viewer writes it"},
          "audio": {"packets_received": na, "packets_expected": na, "packets_lost": 0, "duplicate_packets": 0,
                    "bytes_received": abytes, "payload_bytes_received": abytes - na * RTP_HEADER,
                    "packets_on_time": na, "packets_late": 0, "playout_deadline_ms": 400.0,
                    "latency_ms": {"p50": 10.0, "p95": 10.0, "max": 10.0}, "definition": "as the viewer writes it"}}
    return {"tx": tx, "rx": rx, "sender/frames.csv": frames, "sender/packets.csv": packets,
            "sender/targets.csv": targets, "sender/encoder.csv": encoder, "receiver/frames.csv": rx_frames,
            "receiver/rate.csv": rate}


def _write(root: Path, stream: dict[str, Any]) -> None:
    for name, rows in stream.items():
        if "/" not in name:
            continue
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def _record(tmp_path: Path, stream: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The summary's rtp part as the run makes it, from the logs written under tmp_path: the record and
    its warnings, then its checks through their one entry point (crosschecks.py) as the run's end does."""
    _write(tmp_path, stream)
    ctx: Any = SimpleNamespace(scenario=SimpleNamespace(workload=RtpWorkloadSpec(kind="rtp", controller="webrtc-bbr",
                                                                                 encoder="vp8")), extra_prov={})
    record, warnings, evidence = rtp_record(ctx, stream["tx"], stream["rx"], tmp_path)
    summary: dict[str, Any] = {"rtp": record, "warnings": warnings}
    state = crosschecks.CheckState(ctx, Outcome({}, 0.0, "rtp_streams", 1, evidence={"rtp_logs": evidence}))
    crosschecks.apply(summary, {}, crosschecks.run(summary, state, "rtp-webrtc-bbr"), lambda _m: None)
    return record, summary["warnings"]


def _named(warnings: list[str]) -> list[str]:
    return sorted(w.split(" failed:")[0].removeprefix("cross-check ") for w in warnings if w.startswith("cross-check rtp_"))


def test_a_consistent_stream_passes_every_check(tmp_path: Path) -> None:
    record, warnings = _record(tmp_path, _stream())
    assert warnings == []
    assert set(record["checks"]) == {"encoder_vs_setting", "steady_target_vs_frames", "encoder_per_second_vs_frames",
                                     "received_per_second_vs_totals", "latency_vs_frames", "packets_vs_frames",
                                     "viewer_counts_vs_frames", "encoder_targets_vs_log", "encoder_wire_vs_packets",
                                     "repair_vs_logs", "audio_vs_logs"}
    # every check the run makes is a row of the one registry (mpvlab/results/checks.py), and every
    # rtp row there is a check the run makes
    from mpvlab.results import checks
    assert set(record["checks"]) == checks.registered("rtp.checks")
    assert all(c["ok"] for c in record["checks"].values())
    assert record["checks"]["encoder_vs_setting"]["ratio"] == pytest.approx(1.0, abs=1e-3)


def test_steady_target_leaves_out_the_paused_encoder(tmp_path: Path) -> None:
    """Issue 43 item 4: the target is 480 kbit/s whenever the encoder runs. 19 of the 20 windows have
    frames (15-16 s is one pause), the second half of those starts at 10 s, the last is left out:
    [10, 20) s, with 1.8 s of pauses in it. The steady target is 480 kbit/s over the running time,
    with that window and its paused seconds beside it; averaging the windows' time-weighted targets,
    zeros in (main before the fix), gave (7 × 480 + 240 + 336) / 9 = 437 kbit/s."""
    record, _ = _record(tmp_path, _stream())
    t = record["target_bps"]
    assert t["steady_mean"] == RATE
    assert t["steady_window_s"] == [10.0, 20.0]
    assert t["steady_paused_s"] == pytest.approx(1.8, abs=1e-6)


def _plant(tmp_path: Path, change: Any) -> list[str]:
    stream = copy.deepcopy(_stream())
    change(stream)
    _, warnings = _record(tmp_path, stream)
    return _named(warnings)


def _overshoot_after_pauses(s: dict[str, Any]) -> None:
    """The first frame after each pause carries the pause's budget, as VP8 did before the fix."""
    for a, b in PAUSES:
        first = next(f for f in s["sender/frames.csv"] if float(f["capture_s"]) >= b - 1e-9)
        first["bytes"] = str(int(first["bytes"]) + round(RATE / 8 * (b - a)) * 2)


def test_encoder_overshoot_after_pauses_is_named(tmp_path: Path) -> None:
    # encoder.csv is left as it was: its per-second figure now disagrees with frames.csv too
    assert _plant(tmp_path, _overshoot_after_pauses) == ["rtp_encoder_per_second_vs_frames", "rtp_encoder_vs_setting"]


def test_encoder_undershoot_is_named(tmp_path: Path) -> None:
    def halve(s: dict[str, Any]) -> None:
        for f in s["sender/frames.csv"]:
            f["bytes"] = str(int(f["bytes"]) * 4 // 10)
        s["sender/encoder.csv"] = _rebinned(s)
    assert _plant(tmp_path, halve) == ["rtp_encoder_vs_setting"]


def _rebinned(s: dict[str, Any]) -> list[dict[str, str]]:
    rows = copy.deepcopy(s["sender/encoder.csv"])
    first = int(s["sender/frames.csv"][0]["capture_ns"])
    for i, r in enumerate(rows):
        r["achieved_bps"] = str(sum(int(f["bytes"]) * 8 for f in s["sender/frames.csv"]
                                    if (int(f["capture_ns"]) - first) // 10**9 == i))
    return rows


def test_steady_target_against_the_frames_targets_is_named(tmp_path: Path) -> None:
    """The frames were handed over at another target than targets.csv says was in force."""
    def other_target(s: dict[str, Any]) -> None:
        for f in s["sender/frames.csv"]:
            f["target_bps"] = str(RATE * 13 // 10)
    assert _plant(tmp_path, other_target) == ["rtp_steady_target_vs_frames"]


def test_encoder_per_second_against_the_frames_is_named(tmp_path: Path) -> None:
    def miscount(s: dict[str, Any]) -> None:
        s["sender/encoder.csv"][3]["frames"] = str(int(s["sender/encoder.csv"][3]["frames"]) + 1)
    assert _plant(tmp_path, miscount) == ["rtp_encoder_per_second_vs_frames"]


def test_received_per_second_against_the_totals_is_named(tmp_path: Path) -> None:
    def lose_a_second(s: dict[str, Any]) -> None:
        s["receiver/rate.csv"][4]["received_bps"] = "0"
    assert _plant(tmp_path, lose_a_second) == ["rtp_received_per_second_vs_totals"]


def test_latency_against_the_frames_is_named(tmp_path: Path) -> None:
    def other_p95(s: dict[str, Any]) -> None:
        s["rx"]["latency_ms"]["p95"] += 1.0
    assert _plant(tmp_path, other_p95) == ["rtp_latency_vs_frames"]


def test_packets_against_the_packet_log_is_named(tmp_path: Path) -> None:
    def drop_a_row(s: dict[str, Any]) -> None:
        del s["sender/packets.csv"][7]
    # the row's bytes are missing from the wire bytes' evidence too
    assert _plant(tmp_path, drop_a_row) == ["rtp_encoder_wire_vs_packets", "rtp_packets_vs_frames"]


def test_steady_window_and_running_mean_by_hand() -> None:
    """The step function's running mean: 300 kbit/s for 1 s, paused 0.5 s, 600 kbit/s for 0.5 s →
    (300 + 300) / 1.5 = 400 kbit/s over the running time; 0.5 s paused."""
    from mpvlab.runner.workloads import rtp_checks
    targets = [{"t_s": "0.0", "target_bps": "300000", "encoder_set_bps": "300000"},
               {"t_s": "1.0", "target_bps": "0", "encoder_set_bps": "0"},
               {"t_s": "1.5", "target_bps": "600000", "encoder_set_bps": "600000"}]
    assert rtp_checks.running_mean(targets, "target_bps", 0.0, 2.0) == pytest.approx(400_000)
    assert rtp_checks.paused_s(targets, 0.0, 2.0) == pytest.approx(0.5)


def test_viewer_counts_against_its_frame_log_are_named(tmp_path: Path) -> None:
    """receiver.json says 3 frames were undecodable; frames.csv says every frame was decoded."""
    def recount(s: dict[str, Any]) -> None:
        s["rx"]["decode"]["frames_decoded"] -= 3
        s["rx"]["decode"]["frames_undecodable"] += 3
    assert _plant(tmp_path, recount) == ["rtp_viewer_counts_vs_frames"]


def test_encoder_window_targets_against_the_target_log_are_named(tmp_path: Path) -> None:
    """encoder.csv's window means with a pause targets.csv does not have."""
    def no_pause_in_log(s: dict[str, Any]) -> None:
        s["sender/targets.csv"] = [r for r in s["sender/targets.csv"] if r["t_s"] not in ("18.300000", "18.600000")]
    # the steady target then counts 0.3 s more of running time at the same rate: unchanged; the
    # encoder-vs-setting ratio moves by 0.3 s of 9: within its bounds
    assert _plant(tmp_path, no_pause_in_log) == ["rtp_encoder_targets_vs_log"]


def test_encoder_wire_bytes_against_the_packet_log_are_named(tmp_path: Path) -> None:
    def fatter_packets(s: dict[str, Any]) -> None:
        for p in s["sender/packets.csv"][:10]:
            p["udp_payload_bytes"] = str(int(p["udp_payload_bytes"]) + 4)
        s["tx"]["rtp_bytes_sent"] += 40
        s["rx"]["rtp_bytes_received"] += 40
        s["rx"]["udp_payload_bytes_received"] += 40
        s["receiver/rate.csv"][0]["received_bps"] = str(int(s["receiver/rate.csv"][0]["received_bps"]) + 320)
    assert _plant(tmp_path, fatter_packets) == ["rtp_encoder_wire_vs_packets"]


def test_audio_counts_against_the_logs_are_named(tmp_path: Path) -> None:
    def unreported_audio_packet(s: dict[str, Any]) -> None:
        # an audio packet in packets.csv that sender.json does not count
        last = [p for p in s["sender/packets.csv"] if p["audio"] == "true"][-1]
        s["sender/packets.csv"].append({**last, "rtp_seq": str(int(last["rtp_seq"]) + 1)})
    assert _plant(tmp_path, unreported_audio_packet) == ["rtp_audio_vs_logs"]

    def audio_numbered_for_feedback(s: dict[str, Any]) -> None:
        # an audio packet with a transport-wide number: 2018's default audio has none
        next(p for p in s["sender/packets.csv"] if p["audio"] == "true")["transport_seq"] = "9999"
    assert _plant(tmp_path, audio_numbered_for_feedback) == ["rtp_audio_vs_logs"]

    def audio_bytes_only_in_the_rate_log(s: dict[str, Any]) -> None:
        s["receiver/rate.csv"][3]["audio_bps"] = str(int(s["receiver/rate.csv"][3]["audio_bps"]) + 8)
    assert _plant(tmp_path, audio_bytes_only_in_the_rate_log) == ["rtp_audio_vs_logs"]


def test_audio_is_apart_from_the_video_figures(tmp_path: Path) -> None:
    """The audio rows of packets.csv count in no video figure: the consistent stream with audio passes the
    video's packet checks, and the summary's rtp.audio holds the audio's own counts and mean."""
    record, warnings = _record(tmp_path, _stream())
    a = record["audio"]
    assert warnings == []
    assert record["packets_sent"] == len([p for p in _stream()["sender/packets.csv"] if p["audio"] == "false"])
    assert a["enabled"] and a["packets_sent"] == a["packets_received"] == round((END - T0) / 0.02)
    assert a["packets_lost"] == 0 and a["on_time_share"] == 1.0
    # 50 packets of 92 B a second, over the video's whole seconds
    assert a["received_mean_bps"] == 50 * AUDIO_BYTES * 8 and a["received_seconds"] > 0
    assert a["window_s"] == record["video_bitrate_bps"]["window_s"]


def test_repair_counts_against_the_logs_are_named(tmp_path: Path) -> None:
    def unreported_retransmission(s: dict[str, Any]) -> None:
        # a retransmission of packet 3 in packets.csv that sender.json does not count
        first = s["sender/packets.csv"][3]
        s["sender/packets.csv"].append({**first, "t_s": f"{float(first['t_s']) + 0.05:.6f}", "rtp_seq": "0",
                                        "transport_seq": str(len(s["sender/packets.csv"])), "rtx": "true",
                                        "original_seq": first["rtp_seq"]})
    assert _plant(tmp_path, unreported_retransmission) == ["rtp_repair_vs_logs"]

    def repaired_only_in_the_frame_log(s: dict[str, Any]) -> None:
        # the viewer's frame log names a repaired packet that its totals do not count
        s["receiver/frames.csv"][3]["packets_repaired"] = "1"
    assert _plant(tmp_path, repaired_only_in_the_frame_log) == ["rtp_repair_vs_logs"]
