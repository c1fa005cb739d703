"""The report's figure workers, forked before the runs are loaded and given them in two hand-offs
(mpvlab/reporting/workers.py): the figures are the serial path's, the statistics hand-off rebuilds the
report process's Collection in the worker, the runs-only figures do not depend on the statistics,
and a worker that dies or a report that fails while loading leaves a clear error and no process."""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from mpvlab.reporting import build_report, workers as W
from mpvlab.reporting import figures as F
from mpvlab.reporting.output import Output
from mpvlab.reporting.synthetic import make_set
from mpvlab.results.aggregate import aggregate, summarise_configs


def _svg_without_ids(data: bytes) -> str:
    text = re.sub(r'(id|xlink:href|clip-path)="[^"]*"', "", data.decode())
    return re.sub(r"url\(#[^)]*\)", "url()", text)      # hatch patterns are referenced by random id too


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    # BBR runs (models: the statistics hand-off) and two scenarios (both hand-offs have several tasks)
    make_set(root, ["sc-a", "sc-b"], ["cubic", "bbr"], ["minrtt"], trials=2, series_s=4)
    return root


@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 1.13–1.31 cores in S6–S8 (the figure worker pool): beside two light tests it would ask more than two CPUs (S8)
def test_the_report_workers_give_the_serial_figures(runs: Path, tmp_path: Path) -> None:
    rep = build_report(runs, tmp_path / "report")
    assert W.default_workers() >= 2 or os.cpu_count() == 1
    serial = W.build_all(aggregate(runs), output=Output(), workers=1)
    want = {f.stem: f for _, figs in serial for f in figs}
    got = {p.stem for p in rep.figures if p.suffix == ".pdf"}
    assert got == set(want) and len(got) >= 8, sorted(got)
    # both hand-offs made figures: over-time ones (runs) and bars and BBR ones (statistics)
    assert any(s.startswith("cwnd-") for s in got) and any(s.startswith("bar-") for s in got)
    assert any(s.startswith("bbr-") for s in got)
    folder = tmp_path / "report" / "figures"
    for stem, f in want.items():
        assert (folder / f"{stem}.pdf").read_bytes() == f.data["pdf"], stem
        assert _svg_without_ids((folder / f"{stem}.svg").read_bytes()) == _svg_without_ids(f.data["svg"]), stem
    # the page lists the sections in BUILDERS' order, whichever hand-off made them
    page = (tmp_path / "report" / "report.html").read_text()
    positions = [page.find(f"<h2>{escape(section)}</h2>") for section, _ in serial]     # as the page's template
    assert -1 not in positions and positions == sorted(positions)
    assert multiprocessing.active_children() == []
    assert gc.get_freeze_count() == 0      # the report's process froze its objects only for its share


def test_the_stats_hand_off_rebuilds_the_collection_in_the_worker(runs: Path) -> None:
    from mpvlab.reporting import bbr
    import pickle
    c = aggregate(runs, stats=False)
    worker_copy = pickle.loads(pickle.dumps(c))          # the first hand-off
    summarise_configs(c)
    models = bbr.config_models(c)
    W.apply_stats_payload(worker_copy, W.stats_payload(c))
    # repr: NaN (an interval of one trial) is not equal to itself
    assert repr([cfg.stats for cfg in worker_copy.configs]) == repr([cfg.stats for cfg in aggregate(runs).configs])
    copied = bbr.config_models(worker_copy)       # the cache, handed over: not computed again
    assert len(copied) == len(models) >= 1
    for cm in copied:      # the models refer to the worker's own configurations and runs, not copies
        assert any(cm.cfg is cfg for cfg in worker_copy.configs)
        assert all(any(m.run is r for r in cm.cfg.runs) for m in cm.runs)
    assert repr([(cm.cfg.key, cm.ratio, cm.shares) for cm in copied]) == repr([(cm.cfg.key, cm.ratio, cm.shares)
                                                                              for cm in models])


def test_the_runs_only_figures_need_no_statistics(runs: Path) -> None:
    bare, full = aggregate(runs, stats=False), aggregate(runs)
    assert all(not cfg.stats for cfg in bare.configs)
    a, b = F.tasks_of_phase(bare, "runs"), F.tasks_of_phase(full, "runs")
    assert {s for s, _ in a} == set(F.RUNS_ONLY) and len(a) == len(b) >= 4
    for (_, ta), (_, tb) in zip(a, b):
        fa, fb = ta(), tb()
        assert [f.id for f in fa] == [f.id for f in fb]
        for x, y in zip(fa, fb):
            assert x.rendered(Output())["pdf"] == y.rendered(Output())["pdf"], x.id
    # every task is in exactly one hand-off, in BUILDERS' order within it
    both = [s for s, _ in F.tasks_of_phase(full, "runs")] + [s for s, _ in F.tasks_of_phase(full, "stats")]
    assert sorted(both) == sorted(section for section, b in F.BUILDERS
                                  for _ in (b.parts(full) if isinstance(b, F.Parts) else [b]))
    with pytest.raises(ValueError, match="runs or stats"):
        F.tasks_of_phase(full, "later")


def test_a_worker_that_dies_fails_the_report_naming_what_is_missing(runs: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The forked worker dies in its first task; the report's process makes every other figure, then
    fails naming the one the dead worker took."""
    from mpvlab.reporting import figure
    parent = os.getpid()
    real_tasks, real_prepare = F.tasks_of_phase, figure.prepare_workers

    def dies_in_a_worker(task: Any) -> Any:
        def run() -> Any:
            if os.getpid() != parent:
                os._exit(7)
            return task()
        return run

    def tasks(c: Any, phase: str) -> list[tuple[str, Any]]:
        return [(section, dies_in_a_worker(t)) for section, t in real_tasks(c, phase)]

    def prepare(output: Output) -> None:
        real_prepare(output)
        # the report's process takes its share only once the worker is gone (with its first task)
        deadline = time.monotonic() + 120
        while os.getpid() == parent and multiprocessing.active_children() and time.monotonic() < deadline:
            time.sleep(0.05)
    monkeypatch.setattr(F, "tasks_of_phase", tasks)    # the worker forks with both
    monkeypatch.setattr(figure, "prepare_workers", prepare)
    with pytest.raises(RuntimeError, match=r"figure workers ended \(exit codes \[7\]\) with 1 of \d+ figure "
                                           r"tasks not done: 'Throughput per path over time' \(task \d of the runs "
                                           r"hand-off\)"):
        build_report(runs, tmp_path / "report")
    assert not (tmp_path / "report").exists()
    assert [p.name for p in tmp_path.iterdir()] == []          # no staging folder left
    assert multiprocessing.active_children() == []


def test_a_report_failing_while_loading_leaves_no_worker(runs: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from mpvlab.results import aggregate as agg

    def fails(c: object) -> None:
        raise ValueError("statistics failed")
    monkeypatch.setattr(agg, "summarise_configs", fails)
    with pytest.raises(ValueError, match="statistics failed"):
        build_report(runs, tmp_path / "report")
    assert multiprocessing.active_children() == []
    assert not (tmp_path / "report").exists()


def test_a_worker_that_cannot_prepare_fails_the_report_with_its_error(runs: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from mpvlab.reporting import figure

    def broken(output: Output) -> None:
        raise OSError("no font here")
    monkeypatch.setattr(figure, "prepare_workers", broken)
    with pytest.raises(OSError, match="no font here"):
        build_report(runs, tmp_path / "report")
    assert multiprocessing.active_children() == []


def test_one_cpu_makes_the_figures_in_the_reports_process(runs: Path) -> None:
    from mpvlab.reporting import bbr
    workers = W.FigureWorkers(Output(), workers=1)
    assert workers.procs == []                       # nothing forked
    c = aggregate(runs, stats=False)
    workers.runs_loaded(c)
    summarise_configs(c)
    bbr.config_models(c)
    workers.stats_ready()
    sections = workers.result()
    serial = W.build_all(aggregate(runs), output=Output(), workers=1)
    assert [(s, [f.id for f in figs]) for s, figs in sections] == [(s, [f.id for f in figs]) for s, figs in serial]
    assert all(f.data["pdf"] == g.data["pdf"] for (_, a), (_, b) in zip(sections, serial) for f, g in zip(a, b))
