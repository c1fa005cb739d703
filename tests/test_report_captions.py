"""The report says what its intervals and counts are (issue 34): results before the method, a bootstrap
whisker at n = 2 called what it is (the two trials' min–max), each path-switch figure labelled with
what it counts. On synthetic result directories (mpvlab/reporting/synthetic.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from mpvlab.reporting import build_report
from mpvlab.results.stats import bootstrap_mean_ci
from mpvlab.reporting.synthetic import make_set


def test_bootstrap_interval_of_two_trials_is_their_min_max() -> None:
    rng = np.random.default_rng(34)
    for _ in range(20):
        xs = np.sort(rng.uniform(0, 100, 2))
        assert bootstrap_mean_ci(xs, 0.95, seed=int(rng.integers(1 << 30))) == (xs[0], xs[1])


def test_report_results_first_and_captions_say_what_they_show(tmp_path: Path) -> None:
    make_set(tmp_path / "set", ["sc-a"], ["cubic", "bbr"], ["default"], trials=2, seed=3)
    rep = build_report(tmp_path / "set", tmp_path / "report", figures=False)   # figures built once, below
    html = rep.html.read_text()
    heads = re.findall(r"<h2[^>]*>([^<]*)</h2>", html)
    assert heads.index("Summary per configuration") < heads.index("Method") < heads.index("Metrics")
    assert heads.index("Pairwise comparisons") < heads.index("Method")
    captions = {f.id: f.caption for _, figs in _sections(rep) for f in figs}
    switch = captions["bar-path_switches"]
    assert switch.startswith("Path switches per scheduler decision") and "Counts: data-carrying MPTCP scheduling" in switch
    assert "n = 2 per configuration" in switch and "where n = 2 the whisker is the min–max of the two trials" in switch
    assert "At n = 2 it is exactly the min–max" in html


def _sections(rep):  # type: ignore[no-untyped-def]
    from mpvlab.reporting.workers import build_all
    return build_all(rep.collection, rep.html.parent / "figures")
