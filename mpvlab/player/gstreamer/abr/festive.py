"""`festive`: FESTIVE (Jiang, Sekar, Zhang, "Improving Fairness, Efficiency, and Stability in
HTTP-based Adaptive Video Streaming with FESTIVE", CoNEXT 2012, Sections 5.1-5.3).

  * Bandwidth estimate w: harmonic mean of the last `window` (20) segment throughputs.
    The rate the player aims at is p x w (p = `safety`, 0.85).
  * Randomised scheduling (5.1): for each segment a request threshold randbuf is drawn
    uniformly from [target_buffer - delta, target_buffer + delta]; the request goes out when
    the buffer is at or below it (so competing players do not synchronise their on/off
    periods). The draws come from random.Random(seed): a run's seed fixes them.
  * Stateful (gradual) selection (5.2): b* = highest level with rate <= p x w. Above the
    current level i (0-based): go up by ONE level, and only once the last i + 1 segments were
    all at level i ("from level k to k+1 only after k chunks", k 1-based). Below: go down by one
    level at once. Otherwise stay. This gives the reference level b_ref.
  * Delayed update (5.3): switch from b_cur to b_ref only if its combined score is lower:
        score(b) = stability(b) + alpha x efficiency(b)
        stability(b_cur) = 2^n, stability(b_ref) = 2^(n+1), n = switches in the last
            `switch_window_s` seconds (decisions' times)
        efficiency(b) = |R_b / min(p x w, R_ref) - 1|
    alpha = 12 (the paper's value).
The first segment is the lowest level.
"""

from __future__ import annotations

import random
from typing import ClassVar, Sequence

from pydantic import Field

from .base import Abr, AbrParams, Choice, Download, Ladder, harmonic_mean


class FestiveParams(AbrParams):
    window: int = Field(20, ge=1, le=1000)
    safety: float = Field(0.85, gt=0, le=1.0)
    alpha: float = Field(12.0, ge=0)
    switch_window_s: float = Field(20.0, gt=0)
    target_buffer_s: float | None = Field(None, gt=0)   # default: buffer - segment - delta
    delta_s: float | None = Field(None, ge=0)           # default: one segment duration


class Festive(Abr):
    name: ClassVar[str] = "festive"
    Params = FestiveParams
    p: FestiveParams

    def __init__(self, ladder: Ladder, params: FestiveParams | None = None, seed: int = 0) -> None:
        super().__init__(ladder, params, seed)
        self.rng = random.Random(seed)
        self.switch_times: list[float] = []

    def validate(self) -> None:
        lad = self.ladder
        self.delta_s = self.p.delta_s if self.p.delta_s is not None else lad.segment_s
        room = lad.buffer_max_s - lad.segment_s
        self.target_s = self.p.target_buffer_s if self.p.target_buffer_s is not None \
            else room - self.delta_s
        if self.target_s - self.delta_s < 0 or self.target_s + self.delta_s > room:
            raise ValueError(f"festive: target_buffer_s ± delta_s = {self.target_s:g} ± {self.delta_s:g} s "
                             f"must lie within [0, buffer - segment = {room:g} s]")

    def request_threshold_s(self) -> float:
        return self.rng.uniform(self.target_s - self.delta_s, self.target_s + self.delta_s)

    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        if not history:
            return Choice(0, {"w_bps": None})
        rates = self.ladder.rates_bps
        w = harmonic_mean([d.throughput_bps for d in history[-self.p.window:]])
        aim = self.p.safety * w
        i = self.level
        run = 0
        for d in reversed(history):
            if d.level != i:
                break
            run += 1
        b_star = self.ladder.highest_at_most(aim)
        if b_star > i:
            ref = i + 1 if run >= i + 1 else i
        elif b_star < i:
            ref = i - 1
        else:
            ref = i
        info: dict[str, float | int | None] = {"w_bps": round(w, 1), "b_star": b_star, "b_ref": ref,
                                               "run": run}
        if ref == i:
            return Choice(i, info)
        n = sum(1 for t in self.switch_times if t > now_s - self.p.switch_window_s)
        denom = min(aim, rates[ref])
        eff_cur = abs(rates[i] / denom - 1)
        eff_ref = abs(rates[ref] / denom - 1)
        score_cur = 2 ** n + self.p.alpha * eff_cur
        score_ref = 2 ** (n + 1) + self.p.alpha * eff_ref
        info.update(n_switches=n, score_cur=round(score_cur, 6), score_ref=round(score_ref, 6))
        if score_ref < score_cur:
            self.switch_times.append(now_s)
            return Choice(ref, info)
        return Choice(i, info)
