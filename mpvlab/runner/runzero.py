"""Run time zero set when the run is ready, not guessed ahead of it.

The delay lines must run before t0 (the pre-run check and the HTTP preflight go through them), and
their schedules are on the t0 clock. They start on a provisional t0 (now), and once everything
before the workload is done, `fix` moves them to now + MARGIN_NS (links.emulator.set_t0, each line
acknowledges) — so no run waits out a fixed lead. Lines with a capacity model or outages move too:
what they already decided keeps its absolute time, a trace restarts on the new clock and the outages
are still to come (links/delayline/src/main.c, shift_clock).
"""

from __future__ import annotations

import time
from typing import Any

from mpvlab.links.emulator import DirectionHandle, set_t0

# Between fixing t0 and reaching it: the lines' acknowledgement (a signal and a file, ~1 ms at
# SCHED_FIFO) fits many times over.
MARGIN_NS = 50_000_000



def fix(handles: list[DirectionHandle], provisional_ns: int, extra_prov: dict[str, Any]) -> int:
    """Returns the run's t0: now + MARGIN_NS, applied to every delay line. Recorded in provenance (`t0`)."""
    t0 = time.monotonic_ns() + MARGIN_NS
    set_t0(handles, t0)
    extra_prov["t0"] = {"set": "when ready", "margin_ms": MARGIN_NS / 1e6,
                        "after_link_up_s": round((t0 - provisional_ns) / 1e9, 3)}
    return t0
