"""Run time zero as the run hands it to a player: one line `t0 NS` on stdin, NS a CLOCK_MONOTONIC
instant the run chose in the future, so that the player's first request, the delay lines' schedules
and the samplers share one zero (mpvlab/runner/runzero.py). Kept free of imports beyond the standard library:
the GStreamer player and the dash.js driver both load it before anything heavy."""

from __future__ import annotations

import sys
import time


def wait_for_t0() -> int | None:
    """Read 't0 NS' from stdin and sleep until CLOCK_MONOTONIC reaches NS; None at end of input or on a
    line of any other form."""
    parts = sys.stdin.readline().split()
    if len(parts) != 2 or parts[0] != "t0" or not parts[1].isdigit():
        return None
    t0 = int(parts[1])
    if (wait_ns := t0 - time.monotonic_ns()) > 0:
        time.sleep(wait_ns / 1e9)
    return t0
