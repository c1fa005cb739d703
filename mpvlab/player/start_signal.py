"""Run time zero as the run hands it to a player: one line `t0 NS` on stdin, NS a CLOCK_MONOTONIC
instant the run chose in the future, so that the player's first request, the delay lines' schedules
and the samplers share one zero (mpvlab/runner/runzero.py). A player that starts later than t0
(topology.client_stagger) gets `t0 NS start NS2`, NS2 ≥ NS: it sleeps until NS2 but keeps NS as
its zero, so every time it records is on the run's clock. Kept free of imports beyond the standard
library: the GStreamer player and the dash.js driver both load it before anything heavy."""

from __future__ import annotations

import sys
import time


def parse_start_line(line: str) -> tuple[int, int] | None:
    """(t0, start) from `t0 NS` (start = t0) or `t0 NS start NS2` with NS2 ≥ NS; None for any other form."""
    parts = line.split()
    if len(parts) not in (2, 4) or parts[0] != "t0" or not all(p.isdigit() for p in parts[1::2]):
        return None
    t0 = int(parts[1])
    if len(parts) == 2:
        return t0, t0
    if parts[2] != "start" or int(parts[3]) < t0:
        return None
    return t0, int(parts[3])


def wait_for_t0() -> int | None:
    """Read the start line from stdin and sleep until CLOCK_MONOTONIC reaches the player's start; the
    run's t0, or None at end of input or on a line of any other form."""
    got = parse_start_line(sys.stdin.readline())
    if got is None:
        return None
    t0, start = got
    if (wait_ns := start - time.monotonic_ns()) > 0:
        time.sleep(wait_ns / 1e9)
    return t0
