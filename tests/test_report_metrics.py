"""The report's metrics come from the typed summary model (mpvlab/results/summary.py, mpvlab/results/metricdef.py):
every metric the report shows is a field of the model carrying its definition, the definition's unit
and bounds are what the report's tables say and what its intervals stay inside, and a new field with
a definition appears in the report's tables, views and figures with nothing else edited."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import pytest
from pydantic import BaseModel

from mpvlab.results import metrics, summary
from mpvlab.results.metricdef import MetricDef, View
from mpvlab.reporting import build_report
from mpvlab.reporting.synthetic import make_set


def _field_def(key: str) -> MetricDef | None:
    """The MetricDef on the model field a summary key names (paths.<name>.<field>: PathRecord's)."""
    parts = key.split(".")
    if parts[0] == "paths":
        models: list[type[BaseModel]] = [summary.PathRecord]
        parts = parts[2:]
    else:
        models = [summary.EmulatedSummary, summary.PhysicalSummary, summary.SharedSummary]
    for name in parts[:-1]:
        models = [m for model in models if name in model.model_fields
                  for m in metrics._models_in(model.model_fields[name].annotation)]
    for model in models:
        f = model.model_fields.get(parts[-1])
        if f is not None:
            return next((m for m in f.metadata if isinstance(m, MetricDef)), None)
    return None


def _bound(v: Any) -> float:
    return math.inf if pd.isna(v) or v == math.inf else float(v)


def test_every_reported_metric_is_a_model_field_with_its_unit_and_bounds(tmp_path: Path) -> None:
    make_set(tmp_path / "src", ["sc"], ["cubic", "bbr"], ["default"], trials=3)
    make_set(tmp_path / "src" / "d", ["dash"], ["bbr"], ["default"], trials=3, dash_buffers=["10KB", "1MB"])
    build_report(tmp_path / "src", tmp_path / "out", figures=False)
    defs = pd.read_csv(tmp_path / "out" / "metrics.csv")
    stats = pd.read_csv(tmp_path / "out" / "stats.csv")
    assert len(defs) == len(metrics.METRICS) + 2 * len(metrics.PATH_METRICS)     # two paths
    for row in defs.itertuples():
        d = _field_def(row.metric)
        assert d is not None, f"{row.metric}: reported but no field of mpvlab/results/summary.py declares it"
        assert (row.unit, row.range_low, _bound(row.range_high), row.source) == (d.unit, d.lo, d.hi, d.source)
    for row in stats.itertuples():
        d = _field_def(row.metric)
        assert d is not None and (row.unit, row.range_low, _bound(row.range_high)) == (d.unit, d.lo, d.hi)
        # the declared bounds hold every interval the report gives
        if not pd.isna(row.ci95_low):
            assert d.lo <= row.ci95_low <= row.ci95_high <= d.hi, row
    share = stats[stats.metric == "paths.wifi.share"].iloc[0]
    assert (share.unit, share.range_low, share.range_high) == ("fraction", 0, 1)
    under = stats[stats.metric == "underflows"].iloc[0]
    assert (under.unit, under.range_low, _bound(under.range_high)) == ("events", 0, math.inf)
    # and the schema published for summary.json carries the same meaning
    prop = summary.json_schema()["$defs"]["PathRecord"]["properties"]["share"]
    assert prop["x-metric"]["range"] == [0, 1] and prop["x-metric"]["unit"] == "fraction"


def test_metrics_the_report_names_in_code_are_declared() -> None:
    """A few metrics the report uses by meaning (the representative run, the DASH figure) exist."""
    for key in ("picture_discards", "underflows", "path_switches", "dash.quality_avg", "dash.stall_rate"):
        d = _field_def(key)
        assert d is not None and d.at(key) == metrics.BY_KEY[key], key
    for v in ("configs", "summary", "runs", "bars"):
        assert metrics.view(v, ["wifi"]), f"no metric names the {v} view"


class _WithNewMetric(summary.EmulatedSummary):
    """The model with one more metric, declared as any other: bounds [0, 5], a view and a bar figure."""

    rebuffer_events: Annotated[int | None, MetricDef(
        "rebuffer events", "events", 0, 5, "lower", "a test metric", "tests", interval="bootstrap",
        test="mannwhitney", qoe=True,
        views={"configs": View(99, "rebuffers"), "summary": View(99, "rebuffers"),
               "bars": View(99, "Rebuffer events", "rebuffers per run")})] = None


def test_a_new_model_field_with_a_definition_appears_in_the_report(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setattr(metrics, "METRICS", metrics.collect([_WithNewMetric, summary.PhysicalSummary]))
    make_set(tmp_path / "src", ["sc"], ["cubic", "bbr"], ["default"], trials=3)
    for i, f in enumerate(sorted((tmp_path / "src").rglob("summary.json"))):
        s = json.loads(f.read_text())
        s["rebuffer_events"] = i % 4
        f.write_text(json.dumps(s))
    rep = build_report(tmp_path / "src", tmp_path / "out")
    stats = pd.read_csv(tmp_path / "out" / "stats.csv")
    rows = stats[stats.metric == "rebuffer_events"]
    assert len(rows) == 2 and set(rows.unit) == {"events"} and set(rows.range_high) == {5}
    assert set(rows.ci_method) == {"bootstrap-BCa"}
    assert "rebuffer_events" in set(pd.read_csv(tmp_path / "out" / "metrics.csv").metric)
    assert "rebuffer_events_mean" in pd.read_csv(tmp_path / "out" / "configs.csv").columns
    assert "rebuffer_events" in set(pd.read_csv(tmp_path / "out" / "pairwise.csv").metric)   # qoe: compared
    assert (tmp_path / "out" / "figures" / "bar-rebuffer_events.svg").is_file()
    page = rep.html.read_text()
    assert "<th>rebuffers</th>" in page and "rebuffer events" in page
