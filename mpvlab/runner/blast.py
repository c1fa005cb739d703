"""The pre-check's UDP sender (mpvlab/runner/precheck.py, `rate_check`), run inside a server
namespace: `collectors/build/mpvlab-blast` (collectors/blast.c), one process for all its paths.

Its pacing constants live here, not in the C program: `command` passes them on its command line,
so the sender and the verdict that reads FRAME_BITS cannot disagree. It was a Python module run as
`python -m mpvlab.runner.blast` until issue 36 (an interpreter's start was ~50 ms of CPU per run).
"""

from __future__ import annotations

from mpvlab.collectors import COLLECTORS_DIR

BLAST_BIN = COLLECTORS_DIR / "build" / "mpvlab-blast"
FILL_EXCESS = 2.0
FILL_S = 0.04
HOLD_EXCESS = 1.1
FRAME_BITS = 1514 * 8
DISCARD_PORT = 9               # nothing listens: the client's kernel drops the datagrams


def bytes_beyond_rate(rate_bps: int, seconds: float) -> int:
    """What the sender puts out beyond `rate_bps` for a target held `seconds` after the fill: what a
    token bucket must hold back before any of it queues (a deeper bucket never builds a backlog)."""
    return int(((FILL_EXCESS - 1) * FILL_S + (HOLD_EXCESS - 1) * seconds) * rate_bps / 8)


def command(targets: list[tuple[str, int, float]]) -> list[str]:
    """The sender's argv for (dst, rate_bps, seconds) targets: paced UDP (1472-byte payloads: 1514-byte
    frames) to each at once, FILL_EXCESS × rate_bps for FILL_S, then HOLD_EXCESS × for `seconds`, each
    paced by the total due so far (a stall is caught up at once: the tbf drops what its buffer cannot
    hold; the intervals the queue ran empty are left out of the measurement)."""
    if not BLAST_BIN.is_file():
        raise RuntimeError(f"{BLAST_BIN} is missing: run ./setup.sh (it builds collectors/ with make)")
    argv = [str(BLAST_BIN), "--fill", f"{FILL_EXCESS!r},{FILL_S!r}", "--hold", repr(HOLD_EXCESS),
            "--frame-bits", str(FRAME_BITS), "--port", str(DISCARD_PORT)]
    for dst, rate_bps, seconds in targets:
        argv += ["--to", f"{dst},{int(rate_bps)},{seconds!r}"]
    return argv
