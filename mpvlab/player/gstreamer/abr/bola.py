"""`bola`: BOLA-BASIC (Spiteri, Urgaonkar, Sitaraman, "BOLA: Near-Optimal Bitrate Adaptation for
Online Videos", INFOCOM 2016, arXiv:1601.06748, Algorithm 1).

Segments of duration p; level m has size S_m = R_m x p and utility v_m = ln(S_m / S_1) =
ln(R_m / R_min) (v_1 = 0). With the buffer Q in segments (Q = buffer_s / p), each slot BOLA-BASIC
downloads the level maximising

    (V x v_m + V x gamma_p - Q) / S_m

and downloads nothing while that is negative for every m, i.e. while Q > V (v_M + gamma_p).
V and gamma_p from the buffer size, as in the paper: with a buffer of Q_max segments the bound
Q <= V (v_M + gamma_p) + 1 (its Theorem 1's buffer bound) is kept at Q_max by
V = (Q_max - 1) / (v_M + gamma_p); gamma_p is the paper's trade-off between rebuffering and
utility (the user's knob; default 5, our choice). So requests go out once
Q <= Q_max - 1: when the buffer has room for one segment, as for the on/off client.
Ties go to the higher level (dash.js's BolaRule does the same). The first segment is the
lowest level (BOLA's argmax at Q = 0 is the top level, which the paper's startup does not use;
dash.js also starts low).
"""

from __future__ import annotations

import math
from typing import ClassVar, Sequence

from pydantic import Field

from .base import Abr, AbrParams, Choice, Download


class BolaParams(AbrParams):
    gamma_p: float = Field(5.0, gt=0, le=1000)


class Bola(Abr):
    name: ClassVar[str] = "bola"
    Params = BolaParams
    p: BolaParams

    def validate(self) -> None:
        r = self.ladder.rates_bps
        self.utilities = [math.log(x / r[0]) for x in r]
        self.q_max = self.ladder.buffer_max_s / self.ladder.segment_s
        if self.q_max <= 1:
            raise ValueError("bola: the buffer must hold more than one segment")
        self.V = (self.q_max - 1) / (self.utilities[-1] + self.p.gamma_p)

    def request_threshold_s(self) -> float:
        # Q <= V (v_M + gamma_p) = Q_max - 1, in seconds.
        return self.V * (self.utilities[-1] + self.p.gamma_p) * self.ladder.segment_s

    def scores(self, buffer_s: float) -> list[float]:
        q = buffer_s / self.ladder.segment_s
        s = self.ladder.segment_s
        return [(self.V * v + self.V * self.p.gamma_p - q) / (rate * s)
                for v, rate in zip(self.utilities, self.ladder.rates_bps)]

    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        if not history:
            return Choice(0, {"V": self.V, "gamma_p": self.p.gamma_p})
        sc = self.scores(buffer_s)
        best = max(range(len(sc)), key=lambda i: (sc[i], i))
        return Choice(best, {"V": round(self.V, 6), "q_segments": round(buffer_s / self.ladder.segment_s, 6)})
