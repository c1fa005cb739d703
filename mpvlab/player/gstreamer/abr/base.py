"""What every ABR algorithm sees and returns: pure decision logic, no I/O, no clock reads.

The DASH client (mpvlab/player/gstreamer/dash_client.py) owns the network and the clock; it hands an algorithm
the ladder once, then, for each segment, (1) asks how low the playout buffer must be before the
next request goes out (`request_threshold_s`: the on/off rule, randomised for FESTIVE), and
(2) asks for the level of that segment (`choose`), passing the buffer level and every finished
download. Times are seconds on one monotonic clock chosen by the caller, so a test can script
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from pydantic import BaseModel, ConfigDict, model_validator


class AbrParams(BaseModel):
    """Base of every algorithm's parameter model: unknown fields are an error (a typo in a
    scenario must not silently fall back to a default)."""
    # no inf/nan: `alpha: .inf` made FESTIVE's score infinite for every choice (issue 45)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # numbers as numbers: `lambda: "1.5"` (text) or `window: true` is refused, as by the JSON Schema
    @model_validator(mode="before")
    @classmethod
    def _strict_numbers(cls, data: Any) -> Any:
        from mpvlab.core.quantities import strict_numbers
        return strict_numbers(cls, data)


@dataclass(frozen=True)
class Ladder:
    """The representations as the ABR sees them: @bandwidth ascending (bit/s), level 0 = lowest."""
    rates_bps: tuple[int, ...]
    segment_s: float
    buffer_max_s: float          # the player's buffer (media seconds it may hold)

    def __post_init__(self) -> None:
        if not self.rates_bps or any(r <= 0 for r in self.rates_bps):
            raise ValueError(f"ladder rates must be positive, got {self.rates_bps}")
        if list(self.rates_bps) != sorted(set(self.rates_bps)):
            raise ValueError(f"ladder rates must be strictly ascending, got {self.rates_bps}")
        if not self.segment_s > 0:
            raise ValueError(f"segment duration must be > 0, got {self.segment_s}")
        if self.buffer_max_s < self.segment_s:
            raise ValueError(f"buffer ({self.buffer_max_s} s) must hold at least one segment "
                             f"({self.segment_s} s)")

    @property
    def top(self) -> int:
        return len(self.rates_bps) - 1

    def highest_at_most(self, bps: float) -> int:
        """Highest level with rate <= bps; the lowest if none."""
        ok = [i for i, r in enumerate(self.rates_bps) if r <= bps]
        return ok[-1] if ok else 0


@dataclass(frozen=True)
class Download:
    """One finished media-segment download."""
    level: int
    bytes: int
    download_s: float            # request sent (or, pipelined, previous response done) -> last byte
    t_end_s: float               # when the last byte arrived

    @property
    def throughput_bps(self) -> float:
        return self.bytes * 8 / self.download_s if self.download_s > 0 else math.inf


@dataclass
class Choice:
    level: int
    info: dict[str, Any] = field(default_factory=dict)   # the rule's intermediate values, for the records


class Abr:
    """Base class. Subclasses set `name`, `Params` and implement `choose`."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[AbrParams]] = AbrParams

    def __init__(self, ladder: Ladder, params: AbrParams | None = None, seed: int = 0) -> None:
        self.ladder = ladder
        self.p = params if params is not None else self.Params()
        if not isinstance(self.p, self.Params):
            raise TypeError(f"{self.name}: parameters must be {self.Params.__name__}")
        self.seed = seed
        self.level = 0           # level of the last chosen segment
        self.validate()

    def validate(self) -> None:
        """Checks that need the ladder as well as the parameters."""

    def request_threshold_s(self) -> float:
        """Send the next request once the buffer is at or below this: room for one more segment
        (the ordinary on/off client). Called once per segment, before `choose`."""
        return self.ladder.buffer_max_s - self.ladder.segment_s

    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        raise NotImplementedError

    def decide(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        c = self.choose(buffer_s, history, now_s)
        if not 0 <= c.level <= self.ladder.top:
            raise AssertionError(f"{self.name} chose level {c.level} outside the ladder")
        self.level = c.level
        return c


def harmonic_mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x > 0]
    if not xs:
        return 0.0
    if any(math.isinf(x) for x in xs):
        xs = [x for x in xs if not math.isinf(x)] or [math.inf]
        if xs == [math.inf]:
            return math.inf
    return len(xs) / sum(1 / x for x in xs)
