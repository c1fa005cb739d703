"""`throughput`: the rate-based rule (the "throughput-based" ABR of Vargas et al., WWW 2021; the
same rule as dash.js's ThroughputRule without its abandonment and latency terms).

next level = the highest level whose @bandwidth <= safety x estimate, the lowest if none; the
first segment is the lowest level. The estimate is a parameter:
  * harmonic: harmonic mean of the last k segment throughputs (bytes*8 / download time) —
    dash.js's and FESTIVE's choice, robust to one outlier spike;
  * mean: arithmetic mean of the last k;
  * last: the last segment's throughput.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Sequence

from pydantic import Field

from .base import Abr, AbrParams, Choice, Download, harmonic_mean


class ThroughputParams(AbrParams):
    safety: float = Field(0.9, gt=0, le=1.0)           # dash.js bandwidthSafetyFactor default
    estimator: Literal["harmonic", "mean", "last"] = "harmonic"
    k: int = Field(5, ge=1, le=1000)                    # segments in the estimate


def estimate_bps(history: Sequence[Download], estimator: str, k: int) -> float | None:
    xs = [d.throughput_bps for d in history[-k:]]
    if not xs:
        return None
    if estimator == "harmonic":
        return harmonic_mean(xs)
    if estimator == "mean":
        return sum(xs) / len(xs)
    return xs[-1]


class Throughput(Abr):
    name: ClassVar[str] = "throughput"
    Params = ThroughputParams
    p: ThroughputParams

    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        est = estimate_bps(history, self.p.estimator, self.p.k)
        if est is None:
            return Choice(0, {"estimate_bps": None})
        target = self.p.safety * est
        return Choice(self.ladder.highest_at_most(target),
                      {"estimate_bps": round(est, 1), "target_bps": round(target, 1)})
