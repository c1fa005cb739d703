"""mpvlab.results.load: tidy tables from result directories, their Parquet export, and the docs'
example (docs/results-data.md), run as written, reproducing the report's throughput figure from
the tables. Inputs: a synthetic 5-trial sweep in the runner's exact layout (mpvlab/reporting/synthetic.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import mpvlab
from mpvlab.reporting import build_report
from mpvlab.reporting.figures import throughput_series
from mpvlab.reporting.synthetic import PATHS, make_set
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
TRIALS = 5


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep") / "results" / "wifi-lte-study"
    make_set(root, ["wifi-lte-a", "wifi-lte-c"], ["cubic", "bbr"], ["default", "minrtt"], trials=TRIALS, series_s=12,
             n_failed=1)
    return root


def test_runs_table_has_every_run_with_keys_and_metrics(sweep: Path) -> None:
    res = mpvlab.results.load(sweep)
    runs = res.runs
    assert len(runs) == 2 * 2 * 2 * TRIALS + 1
    assert runs.state.value_counts().to_dict() == {"complete": 40, "failed": 1}
    done = runs[runs.state == "complete"]
    assert done.groupby("config").size().tolist() == [TRIALS] * 8
    assert sorted(done.trial.unique()) == list(range(TRIALS))
    assert done.run_id.is_unique and done[["scenario", "cc", "scheduler", "seed"]].notna().all().all()
    # summary.json flattened: per-path shares add up to 1 (rounded to 4 digits when written)
    assert np.allclose(done["paths.wifi.share"] + done["paths.lte.share"], 1.0, atol=1e-4)
    assert "player timed out" in runs[runs.state == "failed"].reason.iloc[0]


def test_time_series_carry_keys_and_path(sweep: Path) -> None:
    res = mpvlab.results.load(sweep)
    sf = res.subflows
    # 12 s at 5 Hz, 2 paths, 40 runs; every subflow mapped to its path through provenance
    assert len(sf) == 40 * 12 * 5 * 2
    assert sf.path.notna().all()
    expected = {addr: p for p, addr in PATHS.items()}
    assert (sf.peer.str.rsplit(":", n=1).str[0].map(expected) == sf.path).all()
    assert (sf.cc_observed == sf.cc).all()              # what ss saw (synthetic), beside the configured cc
    assert set(sf.cc.unique()) == {"cubic", "bbr"}
    links = res.links
    assert len(links) == len(sf) and set(links.path.unique()) == set(PATHS)
    # cumulative counters never decrease within a run and path
    assert (links.sort_values("t_s").groupby(["run_id", "path"]).rx_bytes.diff().dropna() >= 0).all()
    for name in mpvlab.results.TIME_SERIES:
        df = res.table(name)
        assert list(df.columns[:len(mpvlab.results.KEYS)]) == mpvlab.results.KEYS, name


def test_parquet_round_trip(sweep: Path, tmp_path: Path) -> None:
    res = mpvlab.results.load(sweep)
    files = res.to_parquet(tmp_path / "pq")
    assert sorted(p.name for p in files) == sorted(f"{t}.parquet" for t in mpvlab.results.TABLES)
    for name in ("runs", "subflows", "links"):
        back = pd.read_parquet(tmp_path / "pq" / f"{name}.parquet")
        pd.testing.assert_frame_equal(back.reset_index(drop=True), res.table(name).reset_index(drop=True),
                                      check_dtype=False)


def _docs_example() -> str:
    text = (REPO / "docs" / "results-data.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/results-data.md: one python example"
    return blocks[0]


@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 1.11–1.55 cores in S6–S8 (the report's workers): beside two light tests it would ask more than two CPUs (S8)
def test_docs_example_reproduces_the_report_throughput_figure(sweep: Path, tmp_path: Path) -> None:
    rep = build_report(sweep, sweep / "report")
    code = _docs_example()
    assert '"results/wifi-lte-study"' in code
    cwd = os.getcwd()
    os.chdir(tmp_path)
    ns: dict[str, object] = {}
    try:
        exec(compile(code.replace('"results/wifi-lte-study"', repr(str(sweep))), "docs/results-data.md", "exec"), ns)
    finally:
        os.chdir(cwd)
    # The example's figure: a 300 dpi PNG, one panel per configuration of the first scenario
    png = tmp_path / "figures" / "throughput-from-tables.png"
    with Image.open(png) as im:
        assert round(im.info["dpi"][0]) == 300
    # Same runs as the report's figure of that scenario, in the same panel order ...
    scenario = "wifi-lte-a"
    report_cfgs = [cfg for cfg in rep.collection.configs if cfg.scenario == scenario]
    series = ns["series"]
    assert isinstance(series, dict)
    assert list(series) == [cfg.label for cfg in report_cfgs]
    chosen = ns["chosen"]
    assert isinstance(chosen, pd.DataFrame)
    assert list(chosen.run_id) == [cfg.representative().run_id for cfg in report_cfgs]
    # ... and the same numbers the report plotted (mpvlab/reporting/figures.py: throughput_series)
    for cfg in report_cfgs:
        theirs = throughput_series(cfg.representative())
        ours = series[cfg.label]
        assert set(ours) == set(theirs)
        for path, (ts, vs) in theirs.items():
            assert np.allclose(ours[path].t_s, ts) and np.allclose(ours[path].mbit_s, vs, rtol=1e-12, atol=1e-12)
            assert 1.5 < float(np.mean(vs)) < 4.5      # synthetic: 3 Mbit/s ± 20 % per sample
    # The report wrote that figure too, in its default formats (PNG only with --formats …,png)
    stems = {p.name for p in rep.figures}
    assert {f"throughput-{scenario}.{x}" for x in ("pdf", "svg")} <= stems
    # The bars: configuration means of runs.underflows are the report's stats
    stats = pd.read_csv(sweep / "report" / "stats.csv")
    runs = ns["runs"]
    assert isinstance(runs, pd.DataFrame)
    mine = runs.groupby(["scenario", "cc", "scheduler"]).underflows.mean()
    theirs_u = stats[stats.metric == "underflows"].set_index(["scenario", "cc", "scheduler"])["mean"]
    assert np.allclose(mine.sort_index(), theirs_u.sort_index())
