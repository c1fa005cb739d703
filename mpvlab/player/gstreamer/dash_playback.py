"""How a DASH presentation played, segment by segment: the part of a DASH session that is the same for
dashdemux's (dash.py) and our own fetcher (dash_client.py)."""

from __future__ import annotations

import math
import threading
from typing import Any

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402


class SegmentPlayback:
    """The playback side of a DASH session, the same for dashdemux's and our own fetcher: frames
    rendered and discarded per segment, and when each segment's first frame played. Kept per
    presentation index, not per download record: with a low buffer a segment's first frames play
    before the segment has been fully pushed (its record created). Needs `segment_s`, `_lock` and
    `_play` (index -> [t_play, rendered, discarded]) on the session."""

    segment_s: float
    _lock: threading.Lock
    _play: dict[int, list[Any]]

    def _index_of_pts(self, pts_ns: int) -> int | None:
        if pts_ns is None or pts_ns < 0 or pts_ns == Gst.CLOCK_TIME_NONE or self.segment_s <= 0:
            return None
        return int(math.floor(pts_ns / 1e9 / self.segment_s + 1e-6))

    def on_render(self, pts_ns: int, t: float) -> None:
        i = self._index_of_pts(pts_ns)
        if i is not None:
            with self._lock:
                p = self._play.setdefault(i, [None, 0, 0])
                if p[0] is None:
                    p[0] = t
                p[1] += 1

    def on_discard(self, pts_ns: int) -> None:
        i = self._index_of_pts(pts_ns)
        if i is not None:
            with self._lock:
                self._play.setdefault(i, [None, 0, 0])[2] += 1
