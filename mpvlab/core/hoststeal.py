"""CPU time the hypervisor took from this virtual machine ("steal"), as the guest kernel counts it.

Emulation fidelity needs the CPUs: while the host deschedules a vCPU, a tbf on it cannot release
packets (and a stall longer than its bucket loses those tokens), a delay line releases late and a
sampler skips ticks. The guest sees this only as steal time: the 8th field of each `cpuN` line of
/proc/stat, in USER_HZ ticks. A run records it beside its fidelity figures, so a shortfall can be
told apart from an emulator fault.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def read_steal_ticks(proc_stat: Path = Path("/proc/stat")) -> tuple[int, ...]:
    """Per-CPU steal, in USER_HZ ticks since boot (zeros where the hypervisor reports none)."""
    ticks = []
    for line in proc_stat.read_text().splitlines():
        fields = line.split()
        if fields and fields[0].startswith("cpu") and fields[0] != "cpu":
            ticks.append(int(fields[8]) if len(fields) > 8 else 0)
    return tuple(ticks)


@dataclass(frozen=True)
class StealWindow:
    wall_s: float
    steal_s: tuple[float, ...]   # per CPU

    @property
    def lost(self) -> float:
        """Time lost by all CPUs together, as a fraction of the window: a stall of any CPU may
        stall the packet path, so this is the share of the window it may have been stalled."""
        return sum(self.steal_s) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def tick_s(self) -> float:
        """The counter's resolution (one USER_HZ tick)."""
        return _TICK_S

    @property
    def lost_at_most(self) -> float:
        """`lost` plus the counter's resolution: /proc/stat prints whole ticks, so each CPU's
        difference of two readings may fall short of the true steal by up to one tick."""
        if self.wall_s <= 0:
            return 0.0
        return (sum(self.steal_s) + len(self.steal_s) * self.tick_s) / self.wall_s

    def describe(self) -> str:
        per_cpu = ", ".join(f"{s * 1e3:.0f}" for s in self.steal_s)
        return f"steal {self.lost:.1%} of the window over {self.wall_s:.1f} s (per CPU ms: {per_cpu})"

    def as_dict(self) -> dict[str, Any]:
        return {"fraction": round(self.lost, 4), "window_s": round(self.wall_s, 3),
                "per_cpu_s": [round(s, 2) for s in self.steal_s]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StealWindow:
        """The window a run recorded with `as_dict` (steal kept to the counter's 10 ms ticks)."""
        return cls(wall_s=float(d["window_s"]), steal_s=tuple(float(x) for x in d["per_cpu_s"]))


class StealMeter:
    """`with StealMeter() as m: ...`, then `m.window`; or `m = StealMeter().start()` ... `m.stop()`
    where the measured span does not fit one block."""

    window: StealWindow

    def start(self) -> StealMeter:
        self._t0 = time.monotonic()
        self._s0 = read_steal_ticks()
        return self

    def stop(self) -> StealWindow:
        s1 = read_steal_ticks()
        self.window = StealWindow(wall_s=time.monotonic() - self._t0,
                                  steal_s=tuple((b - a) * _TICK_S for a, b in zip(self._s0, s1)))
        return self.window

    def __enter__(self) -> StealMeter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
