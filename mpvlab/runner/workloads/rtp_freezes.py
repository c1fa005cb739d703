"""Rendered frame rate and freezes of a live RTP stream at the viewer, by WebRTC's definition.

The viewer plays out at a fixed delay (the playout deadline): a frame that is complete by capture time +
deadline and decoded is rendered at that moment, so render times are capture times shifted by one
constant, and the gaps between rendered frames are the gaps between their capture times.

A freeze (W3C webrtc-stats `freezeCount` / `totalFreezesDuration`, as libwebrtc's
VideoQualityObserver computes them): the interval between two consecutively rendered frames is
≥ max(3 × avg, avg + 150 ms), where avg is the mean of the last 30 intervals that were not freezes;
no freeze is judged before 5 intervals are known. The freeze's duration is that interval. A stream that
stops rendering before its end has no next frame: that tail is not an interval and is not counted
(`tail_without_render_s` says how long it was).
"""

from __future__ import annotations

from collections import deque
from typing import Any

AVG_WINDOW = 30          # intervals in the running average
MIN_INTERVALS = 5        # before this many, nothing is judged a freeze
MIN_INCREASE_S = 0.150   # a freeze lasts at least avg + 150 ms


def freezes(render_s: list[float], stream_end_s: float | None = None) -> dict[str, Any]:
    """Freezes over the rendered frames' times (seconds, ascending)."""
    recent: deque[float] = deque(maxlen=AVG_WINDOW)
    durations: list[float] = []
    for prev, cur in zip(render_s, render_s[1:]):
        interval = cur - prev
        if len(recent) >= MIN_INTERVALS:
            avg = sum(recent) / len(recent)
            if interval >= max(3 * avg, avg + MIN_INCREASE_S):
                durations.append(interval)
                continue        # a freeze does not enter the average (libwebrtc)
        recent.append(interval)
    tail = max(0.0, stream_end_s - render_s[-1]) if stream_end_s is not None and render_s else None
    return {"count": len(durations), "total_s": round(sum(durations), 6),
            "longest_s": round(max(durations), 6) if durations else 0.0,
            "tail_without_render_s": None if tail is None else round(tail, 6),
            "definition": "an interval between consecutively rendered frames >= max(3 x avg, avg + 150 ms), avg "
                          "the mean of the last 30 non-freeze intervals, judged from the 6th frame on (W3C "
                          "webrtc-stats freezeCount, libwebrtc VideoQualityObserver); rendered = on time and "
                          "decoded, at capture time + the playout deadline"}


def rendered_fps(render_s: list[float], first_s: float, n_seconds: int) -> dict[str, Any]:
    """Frames rendered per whole second of capture time from `first_s`, and their mean."""
    per = [0] * max(n_seconds, 0)
    for t in render_s:
        i = int(t - first_s + 1e-6)     # a capture on a second's edge belongs to that second
        if 0 <= i < len(per):
            per[i] += 1
    return {"mean": round(sum(per) / len(per), 3) if per else None, "per_second": per}


def from_frames(rows: list[dict[str, str]]) -> dict[str, Any]:
    """Both, from the viewer's logs/rtp/receiver/frames.csv (one row per frame captured)."""
    captured = sorted(float(r["capture_s"]) for r in rows if r.get("capture_s"))
    render = sorted(float(r["capture_s"]) for r in rows
                    if r.get("status") == "on_time" and r.get("decode") == "decoded" and r.get("capture_s"))
    if not captured:
        return {"freezes": freezes([]), "rendered_fps": rendered_fps([], 0.0, 0)}
    # the stream ends one frame interval after the last capture
    step = (captured[-1] - captured[0]) / (len(captured) - 1) if len(captured) > 1 else 0.0
    end = captured[-1] + step
    return {"freezes": freezes(render, end),
            "rendered_fps": rendered_fps(render, captured[0], int((end - captured[0]) + 1e-9))}
