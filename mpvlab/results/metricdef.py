"""What a metric is, as metadata on the summary model's field that holds it (mpvlab/results/summary.py).

A field of the typed summary becomes a report metric by carrying a `MetricDef` in its annotation:

    underflows: Annotated[int | None, MetricDef("buffer underflows", "events", 0, INF, "lower", ...)] = None

pydantic keeps such an object in the field's metadata (it does not validate with it: a bound here is
what the value can be, used by the report to keep intervals inside it, not a check that would fail a
run), and `__get_pydantic_json_schema__` writes its meaning into docs/summary.schema.json under
`x-metric`. mpvlab/results/metrics.py walks the model and collects them, with each one's dotted key; the
report's tables, figures and HTML take their metric lists from there (`views`).

Kept apart from summary.py and metrics.py so that both can import it (summary.py imports nothing of
the report; metrics.py imports the model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Direction = Literal["lower", "higher", "none"]
Interval = Literal["t", "bootstrap"]
Test = Literal["welch", "mannwhitney"]
INF = math.inf

STUDY_WIFI_LTE = "Kondo et al., INTERNET 2023 (docs/studies.md §1)"
STUDY_BBRS = "Vargas et al., WWW 2021 (docs/studies.md §2)"
STUDY_SABRE = "Mansy, Ver Steeg, Ammar, MMSys 2013 (docs/studies.md §4)"
STUDY_WEBRTC = "Drucker, Balasubramanian, Gandhi (docs/studies.md §3)"
MPVLAB = "mpvlab (player/README.md)"


@dataclass(frozen=True)
class View:
    """Where the report shows a metric beyond its tables of every metric: position among that view's
    metrics, the column heading or figure title there ({path} is the path's name for per-path
    metrics), and for figures the axis label."""

    pos: int
    heading: str
    axis: str = ""
    only_if_present: bool = False   # left out when no configuration has a value (e.g. DASH metrics)
    per: float = 1.0                # shown in units of this (1e6: bit/s as Mbit/s), mean ± half-width


# The report's views (mpvlab/reporting): `configs` the wide configs table, `summary` the HTML summary
# table, `runs` the HTML per-run table, `bars` one grouped-bar figure each.
ViewName = Literal["configs", "summary", "runs", "bars"]


@dataclass(frozen=True)
class MetricDef:
    label: str
    unit: str
    lo: float                     # possible range (math.inf when unbounded)
    hi: float
    direction: Direction          # which way is better for a viewer / the study ("none": descriptive)
    definition: str
    source: str                   # where the convention comes from
    interval: Interval = "t"      # the confidence interval the report gives first
    test: Test = "welch"          # the pairwise test between configurations
    qoe: bool = False             # listed among the QoE metrics and compared pairwise
    clamp: bool = False           # values outside [lo, hi] are measurement noise: clamp when read
    rank: float = 1000            # order in the report's tables of every metric (ties: model order)
    views: dict[str, View] = field(default_factory=dict, compare=False, hash=False)
    key: str = ""                 # dotted path in summary.json (per-path: below paths.<name>.); set by metrics.py

    def check(self, v: float) -> float:
        """The value clamped to the range when the definition says so (else returned as is)."""
        if self.clamp:
            return min(max(v, self.lo), self.hi)
        return v

    @property
    def range_text(self) -> str:
        def f(x: float) -> str:
            return "∞" if math.isinf(x) else f"{x:g}"
        return f"[{f(self.lo)}, {f(self.hi)}]"

    def at(self, key: str, label: str | None = None) -> MetricDef:
        return replace(self, key=key, label=label or self.label)

    # pydantic: the field's JSON Schema says what the metric is (its report views are presentation, left out)
    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema: dict[str, Any] = handler(core_schema)
        schema["x-metric"] = {"label": self.label, "unit": self.unit,
                              "range": [None if math.isinf(self.lo) else self.lo,
                                        None if math.isinf(self.hi) else self.hi],
                              "direction": self.direction, "definition": self.definition, "source": self.source}
        return schema
