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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from mpvlab.core import rundir
from mpvlab.reporting import folder
from mpvlab.reporting.folder import ReportFolderError as ReportFolderError
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
    ever goes through a link someone planted (issue 33). `out` is replaced only when it holds exactly
    what an earlier report wrote (its manifest; folder.py, issue 45): anything else is refused, and the
    staging folders of reports that died at the same `out` are removed first."""
    from mpvlab.reporting.workers import FigureWorkers
    step = on_step or (lambda name: None)
    output = output or Output()
    folder.check_replaceable(out)
    folder.reap_stale(out)
    folder.check_writable(out)
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
        with folder.staging_for(out) as staging:
            try:
                tables = write_tables(c, staging, pw)
                step("tables")
                sections = workers.result(staging / FIGURES) if workers is not None else []
                step("figures")
                page = render(c, sections, [t.name for t in tables], title or source.resolve().name, pw,
                              html_dir=staging, output=output if figures else None)
                rundir.write_text(staging / "report.html", page)
                folder.replace(out, staging)
            except OSError as e:       # a full disk, a filesystem that takes no files (--out /proc/…)
                if e.errno is None:    # not the filesystem's: a figure's own error, raised as it is
                    raise
                raise folder.write_failed(out, e) from None
            step("html")
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

