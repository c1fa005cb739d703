"""`mpvlab report`: statistics from first principles, aggregation of result directories, tables,
figures and the self-contained HTML — checked in a real headless browser (Debian's chromium).

The inputs are synthetic result directories in the runner's exact layout (mpvlab/reporting/synthetic.py);
the report built from real runs is checked by tests/test_sweep.py's end-to-end sweep."""

from __future__ import annotations

import base64
import math
import re
import statistics
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest

from mpvlab.reporting import browser, build_report
from mpvlab.results.aggregate import aggregate
from mpvlab.results.stats import summarise, t_quantile
from mpvlab.reporting.synthetic import make_set

# Student t, two-sided 95 %: tabulated t_{0.975, df}
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 9: 2.262, 29: 2.045, 120: 1.980}


@pytest.mark.parametrize("df,t", sorted(T975.items()))
def test_t_quantile_matches_tables(df: int, t: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(t, abs=6e-4)


def test_summary_of_known_sample() -> None:
    s = summarise([1, 2, 3, 4, 5, None, float("nan")])
    assert (s.n, s.mean, s.median, s.min, s.max) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s.std == pytest.approx(math.sqrt(2.5))
    assert s.ci_half == pytest.approx(2.776 * math.sqrt(2.5) / math.sqrt(5), rel=2e-4)
    one = summarise([7.0])
    assert one.n == 1 and one.mean == 7.0 and math.isnan(one.ci_low)       # no interval from one trial
    assert summarise([]).n == 0


def _expected(values: list[dict[str, float]], metric: str) -> tuple[float, float, float]:
    xs = [v[metric] for v in values]
    mean = statistics.fmean(xs)
    half = T975[len(xs) - 1] * statistics.stdev(xs) / math.sqrt(len(xs))
    return mean, statistics.median(xs), half


def test_aggregate_groups_trials_and_lists_failures(tmp_path: Path) -> None:
    syn = make_set(tmp_path, ["sc-a", "sc-b"], ["cubic", "bbr"], ["default", "minrtt"], trials=4, n_failed=2)
    c = aggregate(tmp_path)
    assert len(c.runs) == 32 and len(c.configs) == 8
    assert sorted(b.state for b in c.not_aggregated) == ["failed", "failed"]
    assert all("player timed out" in b.reason for b in c.not_aggregated)
    for cfg in c.configs:
        assert len(cfg.runs) == 4 and cfg.extra == {}          # trials differ only in seed: one configuration
        vals = syn.values[(cfg.scenario, cfg.cc, cfg.scheduler)]
        for m in ("underflows", "picture_discards", "path_switches", "startup_delay_s"):
            mean, median, half = _expected(vals, m)
            st = cfg.stats[m]
            assert st.n == 4
            assert st.mean == pytest.approx(mean) and st.median == pytest.approx(median)
            # The Student-t half-width is always computed (before the cut at the range) ...
            assert st.t_half == pytest.approx(half, rel=2e-4)
            assert st.t_low == pytest.approx(max(mean - half, 0.0), abs=2e-4 * half)   # the table has 4 digits
            assert st.t_high == pytest.approx(mean + half, rel=2e-4)
            # ... and the interval reported is the metric's kind (mpvlab/results/metrics.py): counts get a BCa
            # bootstrap interval (inside the observed values), durations far from 0 the t interval.
            if m == "startup_delay_s":
                assert st.method == "t" and st.ci_half == pytest.approx(half, rel=2e-4)
            else:
                xs = [v[m] for v in vals]
                assert st.method == "bootstrap-BCa"
                assert min(xs) <= st.ci_low <= st.ci_high <= max(xs)


def test_a_varied_field_makes_its_own_configuration(tmp_path: Path) -> None:
    make_set(tmp_path, ["sc"], ["bbr"], ["default"], trials=2, dash_buffers=["10KB", "1MB"])
    c = aggregate(tmp_path)
    assert len(c.configs) == 2
    assert sorted(cfg.extra["paths.wifi.down.buffer"] for cfg in c.configs) == ["10KB", "1MB"]


def test_tables_hold_the_statistics(tmp_path: Path) -> None:
    syn = make_set(tmp_path / "src", ["sc-a"], ["cubic", "bbr-s"], ["default"], trials=3, n_failed=1)
    rep = build_report(tmp_path / "src", tmp_path / "out", figures=False)
    assert {p.name for p in rep.tables} == {f"{n}.{x}" for n in ("runs", "stats", "configs", "not_aggregated",
                                                                 "left_out", "metrics", "pairwise") for x in ("csv", "parquet")}
    stats = pd.read_csv(tmp_path / "out" / "stats.csv")
    pq = pd.read_parquet(tmp_path / "out" / "stats.parquet")
    assert len(stats) == len(pq) and list(stats.columns) == list(pq.columns)
    for cc in ("cubic", "bbr-s"):
        row = stats[(stats.cc == cc) & (stats.metric == "picture_discards")].iloc[0]
        mean, median, half = _expected(syn.values[("sc-a", cc, "default")], "picture_discards")
        assert (row.n, row["mean"], row["median"]) == (3, pytest.approx(mean), pytest.approx(median))
        assert row.t_half == pytest.approx(half, rel=2e-4)
        assert row.t_low == pytest.approx(max(mean - half, 0.0), rel=1e-3, abs=1e-6)   # cut at the range (>= 0)
        assert row.ci_method == "bootstrap-BCa" and row["min"] <= row.ci95_low <= row.ci95_high <= row["max"]
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert len(runs) == 6 and sorted(runs.trial.unique()) == [0, 1, 2]
    assert len(pd.read_csv(tmp_path / "out" / "not_aggregated.csv")) == 1
    assert rep.n_complete == 6 and rep.n_failed == 1 and rep.n_configs == 2


def _html_images(page: str) -> list[str]:
    return re.findall(r'<img[^>]*src="([^"]*)"', page)


@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 1.14–1.48 cores in S6–S8 (the figure worker pool): beside two light tests it would ask more than two CPUs (S8)
def test_html_is_self_contained_with_every_figure(tmp_path: Path) -> None:
    make_set(tmp_path / "src", ["sc-a", "sc-b"], ["cubic", "bbr", "bbr-s"], ["default", "bdp"], trials=2,
             series_s=12, n_failed=1)
    rep = build_report(tmp_path / "src", tmp_path / "src" / "report")
    page = rep.html.read_text()
    srcs = _html_images(page)
    # 3 bar figures (underflows, discards, switches) + cwnd and throughput per scenario (2 × 2) + BBR's
    # model over time, its mode shares and its estimate / min RTT per scenario (3 × 2: bbr and bbr-s are
    # BBR-family)
    assert len(srcs) == 14
    # Inline: each figure is its SVG file's exact bytes; the page needs no other file
    assert all(s.startswith("data:image/svg+xml;base64,") for s in srcs)
    svgs = sorted((tmp_path / "src" / "report" / "figures").glob("*.svg"))
    assert len(svgs) == 14
    embedded = sorted(base64.b64decode(s.removeprefix("data:image/svg+xml;base64,")) for s in srcs)
    assert embedded == sorted(p.read_bytes() for p in svgs)
    assert not re.search(r'(src|href)="(https?:|//|/|\.\.)', page), "the report must not reference anything outside"
    # The default figure files: SVG and PDF, no PNG (mpvlab/reporting/output.py), and the page says so
    figdir = tmp_path / "src" / "report" / "figures"
    assert len(list(figdir.glob("*.pdf"))) == 14 and not list(figdir.glob("*.png"))
    assert "Figure files written by this report, under <code>figures/</code>: SVG, PDF\n" in page
    # Relative links (SVG and PDF per figure: the files written, only) all resolve to files inside the report folder
    hrefs = [h for h in re.findall(r'href="([^"]*)"', page) if not h.startswith("#")]   # not in-page anchors
    assert len(hrefs) == 14 * 2 and not [h for h in hrefs if h.endswith(".png")]
    for h in hrefs:
        target = (rep.html.parent / h).resolve()
        assert target.is_file() and target.is_relative_to(rep.html.parent.resolve()), h
    assert "<script" not in page
    for cfg in rep.collection.configs:
        assert cfg.label in page
    assert "1 run(s) not aggregated" in page
    # The report is rebuilt from results alone: a second build (its own folder excluded) is identical data
    again = build_report(tmp_path / "src", tmp_path / "src" / "report", figures=False)
    assert again.n_complete == rep.n_complete == 24


def test_all_zero_bars_and_dash_figures(tmp_path: Path) -> None:
    from mpvlab.reporting.figures import bar_figure, dash_vs_buffer
    make_set(tmp_path, ["dash"], ["bbr", "bbr-s"], ["default"], trials=2, dash_buffers=["10KB", "100KB", "1MB"])
    c = aggregate(tmp_path)
    for r in c.runs:
        r.metrics["underflows"] = 0.0
    for cfg in c.configs:
        cfg.stats["underflows"] = summarise(0.0 for _ in cfg.runs)
    assert bar_figure(c, "underflows", "Buffer underflows", "events per run") is not None
    figs = dash_vs_buffer(c)
    assert len(figs) == 1 and figs[0].rendered()["pdf"].startswith(b"%PDF-")
    assert all(cfg.stats["dash.quality_avg"].n == 2 for cfg in c.configs)


@pytest.mark.chromium
@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 1.10–1.27 cores in S6–S8 (headless Chromium): beside two light tests it would ask more than two CPUs (S8)
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    make_set(tmp_path / "src", ["sc-a"], ["cubic", "bbr"], ["default", "minrtt"], trials=2, series_s=12)
    rep = build_report(tmp_path / "src", tmp_path / "out")
    shot = browser.screenshot(rep.html, tmp_path / "shot.png", 1280, 2400)
    img = mpimg.imread(shot)
    assert img.shape[0] == 2400 and img.shape[1] == 1280
    # A page of tables and figures: a few % of the pixels are ink; a blank or error page has ~0.
    assert browser.ink_fraction(shot) > 0.03
    # The CC colours of the bar figures are on screen: the figures decoded and were painted.
    from mpvlab.reporting.style import STYLE_TABLE
    for cc, hex_colour in (("cubic", STYLE_TABLE["cc"]["cubic"].colour), ("bbr", STYLE_TABLE["cc"]["bbr"].colour)):
        assert browser.colour_fraction(shot, hex_colour) > 1e-4, f"no {cc} bars ({hex_colour}) on screen"
