"""The report's BBR model (mpvlab/reporting/bbr.py) on synthetic result trees: figures and tables per
BBR-family CC, the modes each CC has, shares that sum to 1, intervals, and the workload-only rule
(the synthetic state files hold a probe, a 9.27 Gbit/s loopback check and the preflight request)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

import mpvlab.results
from mpvlab.reporting import build_report
from mpvlab.results.aggregate import aggregate
from mpvlab.reporting.bbr import config_models
from mpvlab.reporting.synthetic import make_set

CCS = ["cubic", "bbr", "bbr-s", "bbr3", "bbr3-s"]
V1 = {"STARTUP", "DRAIN", "PROBE_BW:UP", "PROBE_BW:DOWN", "PROBE_BW:CRUISE", "PROBE_RTT"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bbr") / "src"
    make_set(root, ["sc-a"], CCS, ["default"], trials=3, series_s=12)
    return root


def test_models_per_cc_with_their_modes(tree: Path) -> None:
    models = {cm.cfg.cc: cm for cm in config_models(aggregate(tree))}
    assert set(models) == {"bbr", "bbr-s", "bbr3", "bbr3-s"}           # CUBIC has no BBR model
    for cc, cm in models.items():
        # v1 (kernel BBR from ss's gains, BBR-S from its pacing gain) has no REFILL; v3 names it
        assert set(cm.shares) == (V1 | {"PROBE_BW:REFILL"} if cc.startswith("bbr3") else V1), cc
        for m in cm.runs:
            assert math.fsum(m.view.mode_share_time_weighted.values()) == pytest.approx(1.0)
            assert math.fsum(m.view.mode_share_per_sample.values()) == pytest.approx(1.0)
            # workload flows only: the two subflows at ~3 Mbit/s on 3 Mbit/s paths; the loopback check's
            # 9.27 Gbit/s and the probe's 50 Mbit/s would move the ratio by orders of magnitude
            assert 0.9 < m.ratio < 1.1, (cc, m.ratio)
            assert m.view.flows_by_role.get("workload") == 2
            if cc != "bbr":                       # the BPF CCs' files hold every flow the CC saw
                assert m.view.flows_by_role == {"probe": 1, "check": 2, "workload": 2}
        # means over trials also sum to 1 (a mode a trial never entered counts as 0 there)
        assert math.fsum(s.mean for s in cm.shares.values()) == pytest.approx(1.0)
        assert all(s.n == 3 for s in cm.shares.values())
        startup = cm.shares["STARTUP"]           # the synthetic STARTUP length differs per trial
        assert startup.ci_low < startup.mean < startup.ci_high and startup.method.startswith("bootstrap")


@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 1.47–1.83 cores in S6–S8 (the figure worker pool): beside two light tests it would ask more than two CPUs (S8)
def test_report_has_the_figures_and_table(tree: Path, tmp_path: Path) -> None:
    rep = build_report(tree, tmp_path / "out")
    names = {p.name for p in rep.figures}
    for kind in ("bbr-model", "bbr-modes", "bbr-estimate"):
        assert {f"{kind}-sc-a.{x}" for x in ("pdf", "svg")} <= names      # the default formats
    t = pd.read_csv(tmp_path / "out" / "bbr_model.csv")
    assert set(t.cc) == {"bbr", "bbr-s", "bbr3", "bbr3-s"}
    for cc, g in t.groupby("cc"):
        shares = g[g.quantity.str.startswith("mode_share:")]
        assert shares["mean"].sum() == pytest.approx(1.0), cc
        assert (shares.ci95_low <= shares["mean"] + 1e-12).all() and (shares["mean"] <= shares.ci95_high + 1e-12).all()
        assert {"bw_est_over_link", "min_rtt_ms"} <= set(g.quantity)
        assert g[g.quantity == "min_rtt_ms"]["mean"].iloc[0] == pytest.approx(20.0, abs=0.01)
    assert "mode_share:PROBE_BW:REFILL" in set(t[t.cc == "bbr3"].quantity)
    assert "mode_share:PROBE_BW:REFILL" not in set(t[t.cc == "bbr-s"].quantity)
    page = rep.html.read_text()
    assert "BBR&#39;s model per configuration" in page or "BBR's model per configuration" in page
    assert re.search(r"PROBE_BW:REFILL", page)
    assert page.count('id="bbr-model-sc-a"') == 1 and page.count('id="bbr-modes-sc-a"') == 1


def test_tidy_cc_table_names_flows_and_roles(tree: Path) -> None:
    res = mpvlab.results.load(tree)
    cc = res.cc
    assert set(cc.cc) == {"bbr-s", "bbr3", "bbr3-s"}                  # kernel BBR's state: the subflows table
    assert set(cc.source) == {"data/bbrs_state.csv", "data/bbr3_state.csv", "data/bbr3s_state.csv"}
    assert set(cc.role) == {"workload", "probe", "check"}
    assert (cc[cc.role == "check"].groupby("run_id").flow.nunique() == 2).all()   # loopback + preflight
    w = cc[cc.role == "workload"]
    assert w.path.notna().all() and w.state.notna().all()
    assert w.bw_est_bps.max() < 4e6 < cc.bw_est_bps.max()             # the check's 9.27 Gbit/s is outside
    sf = res.subflows
    assert (sf.role == "workload").all() and sf.flow.notna().all()
    assert (sf[sf.cc == "bbr"].bbr_mode.notna()).all()


def test_mode_strip_segments() -> None:
    from mpvlab.reporting.bbr_figures import mode_segments
    ts = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    segs = mode_segments(ts, ["STARTUP", "STARTUP", "DRAIN", "PROBE_BW:UP", "STARTUP", "STARTUP"])
    assert segs["STARTUP"] == [(0.0, pytest.approx(0.2)), (0.4, pytest.approx(0.1))]   # the last row: no width
    assert segs["DRAIN"] == [(0.2, pytest.approx(0.1))] and segs["PROBE_BW:UP"] == [(0.3, pytest.approx(0.1))]
    # the strip covers the rows' span exactly once
    assert math.fsum(w for s in segs.values() for _, w in s) == pytest.approx(0.5)
