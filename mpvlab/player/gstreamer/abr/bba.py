"""`bba`: BBA-0 (Huang, Johari, McKeown, Trunnell, Watson, "A Buffer-Based Approach to Rate
Adaptation", SIGCOMM 2014, Algorithm 1).

Rate map f(B): R_min for B <= r (reservoir), R_max for B >= r + c (cushion), linear in between.
From the previous rate: R+ = next higher rate (R_max at the top), R- = next lower (R_min at the
bottom); B <= r -> R_min; B >= r + c -> R_max; f(B) >= R+ -> the highest rate strictly below
f(B); f(B) <= R- -> the lowest rate strictly above f(B); otherwise keep the previous rate.
The first segment is R_min.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from pydantic import Field

from .base import Abr, AbrParams, Choice, Download


@dataclass(frozen=True)
class BbaPolicy:
    """The rate map and decision on a bare tuple of rates (ascending, bit/s): also used by the
    dashdemux-driven player (mpvlab/player/gstreamer/dash.py)."""

    rates: tuple[int, ...]
    reservoir_s: float
    cushion_s: float

    def f(self, buf_s: float) -> float:
        lo, hi = self.rates[0], self.rates[-1]
        if buf_s <= self.reservoir_s:
            return float(lo)
        if buf_s >= self.reservoir_s + self.cushion_s:
            return float(hi)
        return lo + (hi - lo) * (buf_s - self.reservoir_s) / self.cushion_s

    def decide(self, prev_level: int, buf_s: float) -> int:
        r = self.rates
        top = len(r) - 1
        rate_plus = r[min(prev_level + 1, top)]
        rate_minus = r[max(prev_level - 1, 0)]
        if buf_s <= self.reservoir_s:
            return 0
        if buf_s >= self.reservoir_s + self.cushion_s:
            return top
        fb = self.f(buf_s)
        if fb >= rate_plus:
            below = [i for i, x in enumerate(r) if x < fb]
            return below[-1] if below else 0
        if fb <= rate_minus:
            above = [i for i, x in enumerate(r) if x > fb]
            return above[0] if above else top
        return prev_level

    def params(self) -> dict[str, Any]:
        return {"reservoir_s": self.reservoir_s, "cushion_s": self.cushion_s}


class BbaParams(AbrParams):
    reservoir_s: float = Field(5.0, ge=0)
    cushion_s: float = Field(15.0, gt=0)


class Bba(Abr):
    name: ClassVar[str] = "bba"
    Params = BbaParams
    p: BbaParams

    def validate(self) -> None:
        if self.p.reservoir_s + self.p.cushion_s >= self.ladder.buffer_max_s:
            raise ValueError(f"bba: reservoir + cushion ({self.p.reservoir_s + self.p.cushion_s:g} s) "
                             f"must be below the buffer ({self.ladder.buffer_max_s:g} s), or the top "
                             "rate is never reached")
        self.policy = BbaPolicy(self.ladder.rates_bps, self.p.reservoir_s, self.p.cushion_s)

    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        if not history:
            return Choice(0, {"f_bps": None})
        return Choice(self.policy.decide(self.level, buffer_s), {"f_bps": round(self.policy.f(buffer_s), 1)})
