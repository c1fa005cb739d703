"""Two video bitrates of a live RTP stream at the viewer (issue 48: the WebRTC study's "average video
bitrate" is not defined; rtp/README.md, "Which bitrate?").

- **received**: the video RTP bytes (UDP payload, padding apart) the viewer's socket read, per whole
  second of run time by arrival (receiver/rate.csv, the summary's `received_per_second`): what the
  link carried to the viewer, on time or not.
- **on time**: the video RTP bytes (the same unit) of the frames rendered, i.e. complete by capture +
  the playout deadline and decoded (receiver/frames.csv status `on_time`, decode `decoded`), per whole
  second of capture time from the first captured frame (the grid of `rendered_fps`).

Both means are taken over one window, [first capture, first capture + n) run seconds, n the stream's
whole seconds of capture time (as `rendered_fps`): the on-time mean is the bits of rendered frames
captured in it ÷ n; the received mean is the mean of the rate.csv seconds lying wholly inside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

Rows = Sequence[Mapping[str, str]]

DEFINITION = ("received: video RTP bytes (UDP payload, padding apart) the viewer read, x 8, per whole run second "
              "of arrival (receiver/rate.csv); on_time: video RTP bytes of the frames rendered (complete by "
              "capture + playout deadline and decoded; receiver/frames.csv status on_time, decode decoded, "
              "rtp_bytes) x 8, per whole second of capture time from the first captured frame; means over "
              "window_s = [first capture, first capture + whole seconds of capture) run seconds: on_time_mean = "
              "rendered bits captured in it / its seconds, received_mean = mean of the rate.csv seconds wholly "
              "inside it")


def _window(rows: Rows) -> tuple[float, int] | None:
    """(first capture s, whole seconds of capture): the stream ends one frame interval after its last
    capture (as rtp_freezes.from_frames takes it)."""
    caps = sorted(float(r["capture_s"]) for r in rows if r.get("capture_s"))
    if not caps:
        return None
    step = (caps[-1] - caps[0]) / (len(caps) - 1) if len(caps) > 1 else 0.0
    return caps[0], int((caps[-1] + step - caps[0]) + 1e-9)


def on_time_per_second(rows: Rows) -> list[int]:
    """Bits of rendered frames per whole second of capture time from the first captured frame."""
    win = _window(rows)
    if win is None:
        return []
    first, n = win
    per = [0] * n
    for r in rows:
        if r.get("status") == "on_time" and r.get("decode") == "decoded" and r.get("capture_s"):
            i = int(float(r["capture_s"]) - first + 1e-6)     # a capture on a second's edge belongs to it
            if 0 <= i < n:
                per[i] += int(r["rtp_bytes"]) * 8
    return per


def video_bitrate(rows: Rows, rate: Rows) -> dict[str, Any]:
    """The summary's `video_bitrate_bps`: both means over the stated window, the seconds they cover."""
    win = _window(rows)
    if win is None or win[1] == 0:
        return {"window_s": None, "on_time_mean": None, "received_mean": None, "received_seconds": 0,
                "definition": DEFINITION}
    first, n = win
    on_time = on_time_per_second(rows)
    inside = [int(r["received_bps"]) for r in rate
              if int(r["second"]) >= math.ceil(first - 1e-9) and int(r["second"]) + 1 <= first + n + 1e-9]
    return {"window_s": [round(first, 6), round(first + n, 6)],
            "on_time_mean": round(sum(on_time) / n),
            "received_mean": round(sum(inside) / len(inside)) if inside else None,
            "received_seconds": len(inside),
            "definition": DEFINITION}


RTT_DEFINITION = ("the RTT pion's GCC (pkg/gcc v0.1.51) derives from each TWCC feedback, recomputed by the sender "
                  "as it reads the feedback, for either controller: the minimum over the feedback's received "
                  "packets of now - departure - (latest arrival in the feedback - the packet's arrival); one sample "
                  "per feedback (sender/feedback_rtt.csv); p50/p90 nearest rank over all samples of the stream")


def feedback_rtt(rows: Rows) -> dict[str, Any]:
    """The summary's `feedback_rtt_ms`: percentiles of sender/feedback_rtt.csv's samples (ms)."""
    xs = sorted(float(r["rtt_ms"]) for r in rows)
    at = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None  # noqa: E731 — nearest rank
    return {"samples": len(xs), "p50": at(0.5), "p90": at(0.9), "min": xs[0] if xs else None,
            "max": xs[-1] if xs else None, "definition": RTT_DEFINITION}
