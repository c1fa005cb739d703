"""Delay schedules as data: the one definition of "what delay should a packet see at run time t".

The Python side (fidelity checks, plots, tests) and the C delay line must agree exactly, so every
schedule kind is lowered to one form — piecewise-constant breakpoints with an optional repeat
period — which `to_file()` writes in the format the delay line reads (links/delayline/README.md).
Time is in integer nanoseconds relative to the run's time zero; before zero a periodic schedule
is extended backwards and a non-periodic one holds its first value.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Schedule:
    """Piecewise-constant delay: delay(t) = delay_ns[i] for times_ns[i] <= t' < times_ns[i+1],
    where t' = t mod period_ns when period_ns > 0, else t (clamped to the first/last value)."""

    times_ns: tuple[int, ...]
    delays_ns: tuple[int, ...]
    period_ns: int = 0

    def __post_init__(self) -> None:
        if not self.times_ns or len(self.times_ns) != len(self.delays_ns):
            raise ValueError("a schedule needs as many delays as breakpoints, and at least one")
        if self.times_ns[0] != 0:
            raise ValueError("a schedule's first breakpoint must be at t = 0")
        if any(b <= a for a, b in zip(self.times_ns, self.times_ns[1:])):
            raise ValueError("schedule breakpoints must be strictly increasing")
        if any(d < 0 for d in self.delays_ns):
            raise ValueError("delays must not be negative")
        if self.period_ns < 0 or (self.period_ns and self.times_ns[-1] >= self.period_ns):
            raise ValueError("every breakpoint must lie inside the repeat period")

    # --- construction from the scenario's kinds -------------------------------------------
    @classmethod
    def constant(cls, delay_ns: int) -> Schedule:
        return cls((0,), (delay_ns,), 0)

    @classmethod
    def square(cls, base_ns: int, amplitude_ns: int, period_ns: int, duty: float, phase_ns: int = 0) -> Schedule:
        """base + amplitude during the first duty·period of every cycle, the cycles starting at
        t = phase (so with phase 0 the extra delay is ON from t = 0 to duty·period)."""
        if period_ns <= 0:
            raise ValueError("square wave period must be positive")
        if not 0.0 < duty < 1.0:
            raise ValueError("square wave duty must lie strictly between 0 and 1")
        on_ns = round(duty * period_ns)
        high, low = base_ns + amplitude_ns, base_ns
        # Edges inside one period [0, P): ON starts at phase, OFF at phase + on (both mod P).
        on_at, off_at = phase_ns % period_ns, (phase_ns + on_ns) % period_ns
        edges = sorted({(on_at, high), (off_at, low)})
        # The value at t = 0 is whatever was switched on last in the previous cycle.
        value_at_zero = high if (on_at == 0 or on_at + on_ns > period_ns) else low
        times, delays = [0], [value_at_zero]
        for t, d in edges:
            if t == 0:
                delays[0] = d
            else:
                times.append(t)
                delays.append(d)
        return cls(tuple(times), tuple(delays), period_ns)._merged()

    @classmethod
    def piecewise(cls, points: list[tuple[int, int]], period_ns: int = 0) -> Schedule:
        times = tuple(t for t, _ in points)
        delays = tuple(d for _, d in points)
        return cls(times, delays, period_ns)._merged()

    def _merged(self) -> Schedule:
        """Drop breakpoints that do not change the delay (keeps the C side's step log honest)."""
        times, delays = [self.times_ns[0]], [self.delays_ns[0]]
        for t, d in zip(self.times_ns[1:], self.delays_ns[1:]):
            if d != delays[-1]:
                times.append(t)
                delays.append(d)
        return Schedule(tuple(times), tuple(delays), self.period_ns)

    # --- evaluation ---------------------------------------------------------------------
    def delay_at(self, t_ns: int) -> int:
        if self.period_ns:
            t_ns %= self.period_ns
        elif t_ns < 0:
            return self.delays_ns[0]
        i = bisect.bisect_right(self.times_ns, t_ns) - 1
        return self.delays_ns[i]

    @property
    def max_delay_ns(self) -> int:
        return max(self.delays_ns)

    def steps_between(self, start_ns: int, end_ns: int) -> list[tuple[int, int]]:
        """(t, new_delay) of every change of delay in [start, end) — for plots and step-timing checks."""
        out: list[tuple[int, int]] = []
        if self.period_ns:
            first_cycle = start_ns // self.period_ns
            cycle = first_cycle
            while cycle * self.period_ns < end_ns:
                for t, d in zip(self.times_ns, self.delays_ns):
                    abs_t = cycle * self.period_ns + t
                    if start_ns <= abs_t < end_ns and self.delay_at(abs_t - 1) != d:
                        out.append((abs_t, d))
                cycle += 1
        else:
            for t, d in zip(self.times_ns[1:], self.delays_ns[1:]):
                if start_ns <= t < end_ns:
                    out.append((t, d))
        return out

    # --- the delay line's input format ---------------------------------------------------
    def to_text(self) -> str:
        lines = ["# mpvlab delay schedule: t_us delay_us, piecewise constant", f"period_us {self.period_ns // 1000}"]
        lines += [f"{t // 1000} {d // 1000}" for t, d in zip(self.times_ns, self.delays_ns)]
        return "\n".join(lines) + "\n"

    def to_file(self, path: Path) -> Path:
        path.write_text(self.to_text())
        return path


def read_trace(path: Path) -> list[tuple[int, int]]:
    """A delay trace file: lines `time_ms delay_ms` (floats allowed, '#' comments), time ascending from 0."""
    points: list[tuple[int, int]] = []
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if len(parts) != 2:
            raise ValueError(f"{path}:{lineno}: expected 'time_ms delay_ms', got {raw!r}")
        try:
            t_ms, d_ms = float(parts[0]), float(parts[1])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: not numbers: {raw!r}") from None
        if d_ms < 0 or t_ms < 0:
            raise ValueError(f"{path}:{lineno}: negative time or delay: {raw!r}")
        points.append((round(t_ms * 1e6), round(d_ms * 1e6)))
    if not points:
        raise ValueError(f"{path}: trace has no points")
    if points[0][0] != 0:
        raise ValueError(f"{path}: the first point must be at time 0 (got {points[0][0] / 1e6} ms)")
    return points
