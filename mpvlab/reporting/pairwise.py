"""Pairwise comparisons between configurations, per QoE metric (mpvlab/results/metrics.py: `qoe=True`).

Which configurations are compared: those of one scenario with the same other varied parameters
(`Config.extra`) — i.e. the congestion controls × schedulers a study puts side by side. Each metric
of each such group is one family of tests; Holm's correction keeps the family-wise error rate at 5 %
within it. The test is the metric's (Welch's t for durations, Mann–Whitney U for counts and ratios).
"""

from __future__ import annotations

import math

import pandas as pd

from mpvlab.results.aggregate import Collection, Config
from mpvlab.results.stats import ALPHA, compare_all, min_mannwhitney_p


def groups_of(c: Collection) -> dict[str, list[Config]]:
    out: dict[str, list[Config]] = {}
    for cfg in c.configs:
        out.setdefault(cfg.scenario + (f" ({cfg.extra_label})" if cfg.extra else ""), []).append(cfg)
    return out


def short_label(cfg: Config) -> str:
    return f"{cfg.cc} · {cfg.scheduler}"


def pairwise_frame(c: Collection) -> pd.DataFrame:
    rows = []
    for gname, cfgs in groups_of(c).items():
        if len(cfgs) < 2:
            continue
        for key, m in c.metric_defs.items():
            if not m.qoe:
                continue
            data = {short_label(cfg): [v for r in cfg.runs if (v := r.metrics.get(key)) is not None] for cfg in cfgs}
            if sum(1 for v in data.values() if len(v) >= 2) < 2:
                continue
            cmps = compare_all(data, m)
            family = sum(1 for x in cmps if not math.isnan(x.p))      # Holm's m
            for cmp in cmps:
                floor = (min_mannwhitney_p(cmp.n_a, cmp.n_b) if cmp.test.startswith("Mann") and cmp.n_a and cmp.n_b
                         else math.nan)
                rows.append({"group": gname, "metric": key, "label": m.label, "unit": m.unit, "a": cmp.a, "b": cmp.b,
                             "n_a": cmp.n_a, "n_b": cmp.n_b, "mean_a": cmp.mean_a, "mean_b": cmp.mean_b,
                             "diff_b_minus_a": cmp.mean_b - cmp.mean_a, "test": cmp.test,
                             "statistic": cmp.statistic, "p": cmp.p, "p_holm": cmp.p_holm,
                             "effect": cmp.effect, "significant": cmp.significant, "alpha": ALPHA,
                             "family_size": family,
                             "min_possible_p": floor})
    cols = ["group", "metric", "label", "unit", "a", "b", "n_a", "n_b", "mean_a", "mean_b", "diff_b_minus_a", "test",
            "statistic", "p", "p_holm", "effect", "significant", "alpha", "family_size", "min_possible_p"]
    return pd.DataFrame(rows, columns=cols)
