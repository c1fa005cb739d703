"""Where a run's wall time goes: the life cycle's steps, each timed, recorded in provenance
(`lifecycle_s`). A run costs its video length plus this overhead, so a study's wall time is set by
it (docs/studies.md); the benchmark bench/bench_fidelity_parallel.py reads it to say which step to
shorten."""

from __future__ import annotations

import os
import time


class Timeline:
    """Steps in order; each lasts from its mark to the next mark (or to `close`)."""

    def __init__(self) -> None:
        self.created = time.monotonic()
        self._marks: list[tuple[str, float]] = []

    def mark(self, step: str) -> None:
        self._marks.append((step, time.monotonic()))

    def as_dict(self) -> dict[str, float]:
        """Seconds per step (a step marked twice adds up), plus `total`: from creation to now."""
        now = time.monotonic()
        out: dict[str, float] = {}
        ends = [t for _, t in self._marks[1:]] + [now]
        for (step, began), ended in zip(self._marks, ends):
            out[step] = round(out.get(step, 0.0) + ended - began, 3)
        out["total"] = round(now - self.created, 3)
        return out


def since_process_start(tl: Timeline) -> float:
    """Seconds from this process's start (interpreter, imports, scenario checks) to the timeline's
    creation: /proc/self/stat's start time is in clock ticks since boot, CLOCK_BOOTTIME's clock."""
    with open("/proc/self/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    started_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")     # field 22 of proc(5)
    created_s = time.clock_gettime(time.CLOCK_BOOTTIME) - (time.monotonic() - tl.created)
    return round(created_s - started_s, 3)


def lifecycle(tl: Timeline) -> dict[str, float]:
    """The run's `lifecycle_s`: the interpreter's start and what ran before the timeline
    (`process_start_to_run_s`) first, then the steps, and `total` over the whole process —
    from its start, interpreter included, to now — so the steps add up to `total`."""
    start = since_process_start(tl)
    steps = tl.as_dict()
    run_total = steps.pop("total")
    return {"process_start_to_run_s": start, **steps, "total": round(start + run_total, 3)}
