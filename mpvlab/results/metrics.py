"""Every metric a run's summary.json reports and the report aggregates: collected from the typed summary
model (mpvlab/results/summary.py), where each is declared once, on its field — key in summary.json, label,
unit, possible range, which direction is better, how it is computed, where the convention comes from,
which interval and test the report uses, and where the report shows it (mpvlab/results/metricdef.py).

The report's metric list, its tables' units, the range every confidence interval is kept inside, the
pairwise tests and the columns of its summary views all come from `METRICS` (and `PATH_METRICS`,
instantiated per path). The player computes the QoE values (mpvlab/player/gstreamer/player.py); `stall_ratio()`
here is the one formula both use.

Why two interval methods: a count (underflows, discards, switches) or a ratio bounded by 0 is skewed
and piles up at its bound over few trials, so mean ± t·s/√n (which assumes a symmetric, roughly normal
mean) can leave the possible range — on the project's synthetic set 13 of 324 rows did. For those the
report gives a bootstrap interval (BCa), which by construction lies within the observed values and so
within the range; the Student-t interval is still computed beside it. Durations that are far from
their bound (startup delay, playback time) keep the t interval, intersected with the range.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Iterable

from pydantic import BaseModel

from mpvlab.results import summary
from mpvlab.results.metricdef import (INF, MPVLAB, STUDY_BBRS, STUDY_WIFI_LTE, Direction, Interval, MetricDef, Test,
                              View, ViewName)

__all__ = ["METRICS", "PATH_METRICS", "BY_KEY", "MetricDef", "View", "Direction", "Interval", "Test", "INF",
           "MPVLAB", "STUDY_BBRS", "STUDY_WIFI_LTE", "collect", "path_metric", "lookup", "view", "stall_ratio",
           "jain_index"]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds directly (X, X | None), not inside containers: a list or
    dict of records is not one metric per run."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _models_in(a)]
    return []


def collect(models: Iterable[type[BaseModel]], prefix: str = "") -> list[MetricDef]:
    """Every field carrying a MetricDef in these models (and in the models their fields hold), with its
    dotted key; the first model that declares a key wins. Ordered by the definitions' rank, then by
    where they were found."""
    found: dict[str, MetricDef] = {}

    def walk(model: type[BaseModel], pre: str) -> None:
        for name, f in model.model_fields.items():
            key = pre + name
            for meta in f.metadata:
                if isinstance(meta, MetricDef):
                    found.setdefault(key, meta.at(key))
            for sub in _models_in(f.annotation):
                walk(sub, key + ".")

    for m in models:
        walk(m, prefix)
    order = list(found)
    return sorted(found.values(), key=lambda d: (d.rank, order.index(d.key)))


# The run-level metrics of every kind of run (a shared-bottleneck run's: its players' means and the
# VoIP probe's delay percentiles), and the per-path ones (paths.<name>.<key>).
METRICS: list[MetricDef] = collect([summary.EmulatedSummary, summary.PhysicalSummary, summary.SharedSummary])
PATH_METRICS: list[MetricDef] = collect([summary.PathRecord])

BY_KEY: dict[str, MetricDef] = {m.key: m for m in METRICS}


def path_metric(path: str, base: MetricDef) -> MetricDef:
    return base.at(f"paths.{path}.{base.key}", f"{path}: {base.label}")


def lookup(key: str) -> MetricDef | None:
    """The definition of a summary key, including per-path keys (paths.<name>.<metric>)."""
    if key in BY_KEY:
        return BY_KEY[key]
    if key.startswith("paths."):
        parts = key.split(".")
        if len(parts) == 3:
            base = next((m for m in PATH_METRICS if m.key == parts[2]), None)
            if base is not None:
                return path_metric(parts[1], base)
    return None


def view(name: ViewName, paths: Iterable[str] = (), metrics: list[MetricDef] | None = None,
         path_metrics: list[MetricDef] | None = None) -> list[tuple[str, View]]:
    """The (summary key, View) pairs a report view shows, in its order: run-level metrics and, per
    path in the order given, the per-path ones, each headed with its path's name."""
    rows: list[tuple[int, int, str, View]] = []
    for m in metrics if metrics is not None else METRICS:
        if name in m.views:
            rows.append((m.views[name].pos, 0, m.key, m.views[name]))
    for m in path_metrics if path_metrics is not None else PATH_METRICS:
        if name in m.views:
            v = m.views[name]
            for i, p in enumerate(paths):
                rows.append((v.pos, i, f"paths.{p}.{m.key}",
                             View(v.pos, v.heading.format(path=p), v.axis, v.only_if_present, v.per)))
    return [(key, v) for _, _, key, v in sorted(rows, key=lambda r: (r[0], r[1]))]


def stall_ratio(playback_s: float, video_s: float) -> float:
    """(playback − video) / video, clamped at 0: the player's playback can end a few ms before the
    nominal video length (timestamps of the last frame vs the container's duration), which is not a
    negative stall (a report once showed −5.9e-05)."""
    if video_s <= 0:
        raise ValueError(f"stall_ratio: video length must be > 0 (got {video_s})")
    return max(0.0, (playback_s - video_s) / video_s)


def jain_index(xs: Iterable[float]) -> float:
    """Jain's fairness index (Σx)² / (N·Σx²) of non-negative values: 1 when all are equal, 1/N when one
    value holds everything (Jain, Chiu, Hawe, DEC-TR-301, 1984). The report's fairness between the players
    of a shared-bottleneck run and the run's summary use this one formula."""
    vals = [float(x) for x in xs]
    if not vals or any(x < 0 for x in vals):
        raise ValueError(f"jain_index: needs one or more non-negative values (got {vals})")
    sq = sum(x * x for x in vals)
    if sq == 0:
        raise ValueError("jain_index: undefined when every value is 0")
    return sum(vals) ** 2 / (len(vals) * sq)
