"""The GStreamer player's counters that need no GStreamer: its event log (JSON lines, run time) and the
grouping of the playout queue's underrun/running signals into underflow episodes."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO


class EventLog:
    """JSON-lines event writer shared by the main loop and streaming threads."""

    def __init__(self, fh: TextIO, t0_ns: int) -> None:
        self._fh = fh
        self._t0 = t0_ns
        self._lock = threading.Lock()

    def set_t0(self, t0_ns: int) -> None:
        """t0 known only after start-up (--t0-from-stdin); nothing is emitted before it."""
        self._t0 = t0_ns

    def t(self, mono_ns: int | None = None) -> float:
        """Seconds since t0 for a CLOCK_MONOTONIC reading (now if None)."""
        if mono_ns is None:
            mono_ns = time.monotonic_ns()
        return (mono_ns - self._t0) / 1e9

    def emit(self, type_: str, t: float | None = None, **fields: Any) -> float:
        if t is None:
            t = self.t()
        rec = {"t": round(t, 6), "type": type_, **fields}
        line = json.dumps(rec, separators=(",", ":"))
        with self._lock:
            self._fh.write(line + "\n")
        return t

    def flush(self) -> None:
        with self._lock:
            self._fh.flush()


@dataclass
class Underflows:
    """Grouping of the queue's per-frame underrun/running signals into episodes.

    An episode starts at an ``underrun`` (queue empty) and ends at the
    ``running`` (data again) after which the queue stays non-empty for at least
    ``merge_s``; shorter non-empty gaps (a trickle of single frames while
    starving) belong to the same episode.  ``empty_s`` is the strict sum of the
    time the queue was actually empty.
    """

    merge_s: float
    episodes: list[list[float]] = field(default_factory=list)
    open_start: float | None = None     # start of the current episode
    empty_since: float | None = None    # queue empty right now, since this time
    last_running: float | None = None   # last `running` inside the open episode
    empty_s: float = 0.0

    def on_underrun(self, t: float) -> bool:
        """Returns True if this starts a new episode."""
        started = False
        if self.open_start is not None and self.last_running is not None \
                and t - self.last_running > self.merge_s:
            self._close(self.last_running)
        if self.open_start is None:
            self.open_start = t
            started = True
        if self.empty_since is None:
            self.empty_since = t
        self.last_running = None
        return started

    def on_running(self, t: float) -> None:
        if self.empty_since is None:
            # GstQueue also emits `running` after an *overrun*, once per buffer that
            # frees room in a full queue.  That is plenty of data, not the end of an
            # empty spell: counting it would keep an episode open for as long as the
            # queue stays full (found with DASH: a 0.7 s underflow reported as 7.4 s).
            return
        self.empty_s += t - self.empty_since
        self.empty_since = None
        if self.open_start is not None:
            self.last_running = t

    def due_close(self, now: float) -> float | None:
        """Close the open episode if the queue has been non-empty for merge_s."""
        if self.open_start is not None and self.last_running is not None \
                and now - self.last_running > self.merge_s:
            end = self.last_running
            self._close(end)
            return end
        return None

    def force_close(self, t: float) -> float | None:
        """Close whatever is open (EOS/stop): at the last `running`, or at t if still empty."""
        if self.empty_since is not None:
            self.empty_s += t - self.empty_since
            self.empty_since = None
        if self.open_start is None:
            return None
        end = self.last_running if self.last_running is not None else t
        self._close(end)
        return end

    def _close(self, end: float) -> None:
        assert self.open_start is not None
        self.episodes.append([self.open_start, end])
        self.open_start = None
        self.last_running = None

    @property
    def total_s(self) -> float:
        return sum(e - s for s, e in self.episodes)
