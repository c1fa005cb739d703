"""Statistics across repeated trials, from SciPy: mean, median, a Student-t confidence interval, a
bootstrap (BCa) interval for skewed or bounded metrics, and pairwise tests between configurations
with Holm's correction.

Which interval a metric gets first, its possible range and its pairwise test are part of the
metric's definition (mpvlab/results/metrics.py). Every interval reported lies inside the metric's range:
a bootstrap percentile interval lies within the observed values by construction; a t interval is
intersected with the range, and `clipped` says when that changed it.

Bootstrap resamples are drawn from a generator seeded by (configuration, metric), so a report built
twice from the same results gives the same intervals.
"""

from __future__ import annotations

import math
import types
import warnings
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

import numpy as np

from mpvlab.results.metrics import MetricDef


def _sps() -> types.ModuleType:
    """scipy.stats, imported on first use (~0.55 s): loading runs needs none of it, so the report
    imports it while its figure workers already draw (mpvlab/reporting/workers.py, issue 36)."""
    import scipy.stats
    return scipy.stats


CONFIDENCE = 0.95
# 4,999 resamples: the BCa end points of a 37-trial count moved by < 1 % of the interval against 9,999
# (bench/bench_report.py), at half the time (3.1 vs 5.7 ms per interval here).
N_RESAMPLES = 4999
ALPHA = 0.05


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with df degrees of freedom (SciPy)."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df >= 1 (got p={p}, df={df})")
    return float(_sps().t.ppf(p, df))


@dataclass(frozen=True)
class Summary:
    """n values (missing ones dropped). `ci_low/ci_high` is the interval the metric's definition names
    (`method`: "t" or "bootstrap-BCa"); the t interval (`t_low/t_high`, intersected with the range; its
    half-width before that in `t_half`) and the bootstrap one (`boot_low/boot_high`, NaN unless the
    metric is bootstrapped) are both kept. NaN intervals when n < 2."""

    n: int
    mean: float
    median: float
    std: float
    ci_low: float
    ci_high: float
    min: float
    max: float
    method: str = "t"
    t_low: float = math.nan
    t_high: float = math.nan
    t_half: float = math.nan
    boot_low: float = math.nan
    boot_high: float = math.nan
    clipped: bool = False        # the t interval reached outside the range and was cut at its bound

    @property
    def ci_half(self) -> float:
        return (self.ci_high - self.ci_low) / 2.0


def _clean(values: Iterable[float | int | None]) -> np.ndarray:
    xs = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return np.sort(np.asarray(xs, dtype=float))


def seed_for(*parts: str) -> int:
    return zlib.crc32("\x1f".join(parts).encode())


def bootstrap_mean_ci(xs: np.ndarray, confidence: float = CONFIDENCE, seed: int = 0,
                      n_resamples: int = N_RESAMPLES) -> tuple[float, float]:
    """BCa bootstrap interval of the mean (SciPy). All-equal values give the zero-width interval at
    that value (BCa's acceleration is undefined there); n < 2 gives NaN."""
    if len(xs) < 2:
        return math.nan, math.nan
    if xs[0] == xs[-1]:
        return float(xs[0]), float(xs[0])
    with warnings.catch_warnings():
        # BCa warns (and returns NaN) on near-degenerate samples; the percentile interval is the fallback.
        warnings.simplefilter("ignore")
        res = _sps().bootstrap((xs,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                            method="BCa", rng=np.random.default_rng(seed), vectorized=True)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isnan(lo) or math.isnan(hi):
            res = _sps().bootstrap((xs,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                                method="percentile", rng=np.random.default_rng(seed), vectorized=True)
            lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    # Percentiles of resampled means lie within [min, max]; guard float round-off at the ends.
    return max(lo, float(xs[0])), min(hi, float(xs[-1]))


def summarise(values: Iterable[float | int | None], metric: MetricDef | None = None,
              confidence: float = CONFIDENCE, seed: int = 0) -> Summary:
    """Mean, median and intervals of one configuration's trials for one metric. Without a metric
    definition: unbounded range, t interval."""
    xs = _clean(values)
    if metric is not None and metric.clamp:
        xs = np.sort(np.clip(xs, metric.lo, metric.hi))
    n = len(xs)
    nan = math.nan
    if n == 0:
        return Summary(0, nan, nan, nan, nan, nan, nan, nan)
    mean = float(math.fsum(xs) / n)
    median = float(np.median(xs))
    lo_b, hi_b = (metric.lo, metric.hi) if metric is not None else (-math.inf, math.inf)
    method = "bootstrap-BCa" if metric is not None and metric.interval == "bootstrap" else "t"
    if n < 2:
        return Summary(n, mean, median, nan, nan, nan, float(xs[0]), float(xs[-1]), method)
    std = float(np.std(xs, ddof=1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)
    t_low, t_high = max(mean - half, lo_b), min(mean + half, hi_b)
    clipped = t_low != mean - half or t_high != mean + half
    b_low = b_high = nan
    if method != "t":
        b_low, b_high = bootstrap_mean_ci(xs, confidence, seed)
        ci = (b_low, b_high)
    else:
        ci = (t_low, t_high)
    return Summary(n, mean, median, std, ci[0], ci[1], float(xs[0]), float(xs[-1]), method,
                   t_low, t_high, half, b_low, b_high, clipped and method == "t")


# ---------------------------------------------------------------------------------------------
# Pairwise comparisons


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error rate), NaNs left out of the family and
    returned as NaN: sorted ascending p_(1..m), adj_(i) = max_{j<=i} min(1, (m − j + 1) · p_(j))."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    m = len(idx)
    out = [math.nan] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    test: str            # "Welch's t" | "Mann–Whitney U"
    statistic: float
    p: float
    p_holm: float = math.nan
    effect: float = math.nan   # Welch: mean_b − mean_a; Mann–Whitney: P(A > B) + ½ P(A = B) = U_A / (n_a n_b)

    @property
    def significant(self) -> bool:
        return not math.isnan(self.p_holm) and self.p_holm < ALPHA


def compare(a: str, xa: Sequence[float], b: str, xb: Sequence[float], metric: MetricDef) -> Comparison:
    """One two-sided test between two configurations' trials; NaN p when either has < 2 values or
    both samples are constant (no test is defined)."""
    va, vb = _clean(xa), _clean(xb)
    if metric.clamp:
        va, vb = np.clip(va, metric.lo, metric.hi), np.clip(vb, metric.lo, metric.hi)
    ma = float(va.mean()) if len(va) else math.nan
    mb = float(vb.mean()) if len(vb) else math.nan
    name = "Welch's t" if metric.test == "welch" else "Mann–Whitney U"
    if len(va) < 2 or len(vb) < 2:
        return Comparison(a, b, len(va), len(vb), ma, mb, name, math.nan, math.nan)
    if metric.test == "welch":
        if np.ptp(va) == 0 and np.ptp(vb) == 0:
            return Comparison(a, b, len(va), len(vb), ma, mb, name, math.nan, math.nan, effect=mb - ma)
        r = _sps().ttest_ind(va, vb, equal_var=False)
        return Comparison(a, b, len(va), len(vb), ma, mb, name, float(r.statistic), float(r.pvalue), effect=mb - ma)
    if np.ptp(np.concatenate([va, vb])) == 0:
        return Comparison(a, b, len(va), len(vb), ma, mb, name, math.nan, math.nan, effect=0.5)
    r = _sps().mannwhitneyu(va, vb, alternative="two-sided")
    return Comparison(a, b, len(va), len(vb), ma, mb, name, float(r.statistic), float(r.pvalue),
                      effect=float(r.statistic) / (len(va) * len(vb)))


def compare_all(groups: Mapping[str, Sequence[float]], metric: MetricDef) -> list[Comparison]:
    """Every pair of configurations (in the given order), Holm-adjusted within this family (one metric,
    these configurations)."""
    names = list(groups)
    raw = [compare(a, groups[a], b, groups[b], metric) for i, a in enumerate(names) for b in names[i + 1:]]
    adj = holm([c.p for c in raw])
    return [Comparison(**{**c.__dict__, "p_holm": p}) for c, p in zip(raw, adj)]


def min_mannwhitney_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p an exact Mann–Whitney test can give for these sample sizes (complete
    separation, no ties): 2 / C(n_a + n_b, n_a). With 5 trials each: 0.0079."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))
