"""`mpvlab report`: statistics across trials, tables (CSV, Parquet), figures and one self-contained
HTML file, from result directories alone.

    from mpvlab.reporting import build_report
    rep = build_report(Path("results/wifi-lte-study"), Path("results/wifi-lte-study/report"))

Statistics and aggregation live in mpvlab/results/ (stats: SciPy t and BCa bootstrap intervals, Welch /
Mann–Whitney tests, Holm; aggregate: runs → configurations, with the metrics declared on the summary model's
fields, mpvlab/results/summary.py, and collected by mpvlab/results/metrics.py). Modules here: pairwise (tests between configurations), tables,
style (colours, markers, hatches, sizes — shared with `mpvlab plot`), figures (SVG, PDF and, when asked,
PNG files: output.Output), html. The report folder: report.html, the tables (CSV + Parquet) and
figures/. Python API: mpvlab.report() (mpvlab/api.py, docs/python-api.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from mpvlab.core import rundir
from mpvlab.core.errors import InputError
from mpvlab.reporting.output import Output

if TYPE_CHECKING:     # imported in build_report (SciPy: only when a report is made)
    from mpvlab.results.aggregate import Collection


FIGURES = "figures"   # below the report folder: every figure in the formats asked (output.Output)


@dataclass
class Report:
    html: Path
    tables: list[Path]
    figures: list[Path]
    n_complete: int
    n_failed: int
    n_configs: int
    collection: Collection
    output: Output = Output()       # the figure formats written (and the PNG's dpi)


class ReportFolderError(InputError):
    """The report's output folder cannot be (re)placed safely; nothing was written."""


def build_report(source: Path, out: Path, title: str | None = None, figures: bool = True,
                 output: Output | None = None, on_step: Callable[[str], None] | None = None,
                 include_warned: bool = False) -> Report:
    """The report of the runs below `source`, written to `out`; figures in `output`'s formats (default
    SVG and PDF; output.output_choice checks a user's choice). `on_step(name)`, if given, is called as
    each step ends (bench/bench_report.py times them): load, stats, pairwise, tables, figures, html.
    Complete runs whose fidelity_ok is false are left out of every statistic and figure, and counted
    per configuration with why, unless `include_warned` (mpvlab/results/aggregate.py).

    A results folder is untrusted input, and the report runs as root: every file is written into a
    fresh folder of ours (mkdtemp, next to `out`), which then replaces `out` by rename. So no write
    ever goes through a link someone planted (`out` itself a symlink, or `out/runs.csv` one): a
    symlink at `out` is replaced, never followed, and its target is untouched (issue 33)."""
    from mpvlab.reporting.workers import FigureWorkers
    step = on_step or (lambda name: None)
    output = output or Output()
    _check_replaceable(out)
    # The figure workers before the runs are loaded: they import the plotting stack while this process
    # loads the runs, and start on the figures that need only the runs while this process imports SciPy
    # (results/stats.py imports it on first use) and computes the statistics (workers.py, issue 36).
    from mpvlab.results.aggregate import aggregate, summarise_configs
    workers = FigureWorkers(output) if figures else None
    try:
        c = aggregate(source, exclude=[out], stats=False, include_warned=include_warned)
        if workers is not None:
            workers.runs_loaded(c)
        step("load")
        summarise_configs(c)
        from mpvlab.reporting import bbr
        bbr.config_models(c)          # once, here: the tables, the page and the figures share them
        if workers is not None:
            workers.stats_ready()
        step("stats")
        from mpvlab.reporting.html import render
        from mpvlab.reporting.pairwise import pairwise_frame
        from mpvlab.reporting.tables import write_tables
        pw = pairwise_frame(c)
        step("pairwise")
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new.", dir=out.parent))
        try:
            os.chmod(staging, 0o755)      # mkdtemp makes 0700; a report is for every user to read
            tables = write_tables(c, staging, pw)
            step("tables")
            sections = workers.result(staging / FIGURES) if workers is not None else []
            step("figures")
            page = render(c, sections, [t.name for t in tables], title or source.resolve().name, pw,
                          html_dir=staging, output=output if figures else None)
            rundir.write_text(staging / "report.html", page)
            _replace(out, staging)
            step("html")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    finally:
        if workers is not None:
            workers.close()

    def final(p: Path) -> Path:          # where a file written into the staging folder now is
        return out / p.relative_to(staging)
    for _, figs in sections:
        for f in figs:
            f.files = {k: final(p) for k, p in f.files.items()}
    files = [p for _, figs in sections for f in figs for p in f.files.values()]
    return Report(out / "report.html", [final(t) for t in tables], files, len(c.runs), len(c.not_aggregated),
                  len(c.configs), c, output)


def _check_replaceable(out: Path) -> None:
    """`out` may be absent, a symlink (replaced, not followed), or a folder holding an earlier report
    (or nothing); anything else is someone's folder or file, which a report never replaces."""
    if out.is_symlink() or not out.exists():
        return
    if not out.is_dir():
        raise ReportFolderError(f"{out}: exists and is not a folder; the report needs a folder of its own there")
    with os.scandir(out) as it:
        names = {e.name for e in it}
    if names and "report.html" not in names:
        raise ReportFolderError(f"{out}: a folder that holds no earlier report (no report.html); the report "
                                "replaces its output folder whole, so it needs one of its own (--out)")


def _replace(out: Path, staging: Path) -> None:
    """Put the finished `staging` folder at `out`: a symlink there is removed (the link only), an earlier
    report moved aside first and removed after, so `out` is never half old, half new."""
    _check_replaceable(out)       # again: the folder may have changed while the report was built
    old: Path | None = None
    if out.is_symlink():
        out.unlink()
    elif out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        os.rename(out, old / out.name)
    os.rename(staging, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)   # rmtree removes links inside, never their targets

