"""`mpvlab report`: statistics across trials, tables (CSV, Parquet), figures and one self-contained
HTML file, from result directories alone.

    from mpvlab.report import build_report
    rep = build_report(Path("results/wifi-lte-study"), Path("results/wifi-lte-study/report"))

Modules: stats (SciPy: t and BCa bootstrap intervals, Welch / Mann–Whitney tests, Holm), aggregate (runs →
configurations; the metrics are declared on the summary model's fields, mpvlab/summary.py, and collected
by mpvlab/metrics.py), pairwise (tests between configurations), tables,
style (colours, markers, hatches, sizes — shared with `mpvlab plot`), figures (PDF, SVG, PNG files), html.
The report folder: report.html, the tables (CSV + Parquet) and figures/. Python API: mpvlab.report()
(mpvlab/api.py, docs/python-api.md): calling this module calls mpvlab.api.report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core import rundir
from mpvlab.callable import make_callable
from mpvlab.report.aggregate import Collection, aggregate


FIGURES = "figures"   # below the report folder: every figure as PDF, SVG and PNG


@dataclass
class Report:
    html: Path
    tables: list[Path]
    figures: list[Path]
    n_complete: int
    n_failed: int
    n_configs: int
    collection: Collection


def build_report(source: Path, out: Path, title: str | None = None, figures: bool = True) -> Report:
    from mpvlab.report.figures import build_all
    from mpvlab.report.html import render
    from mpvlab.report.pairwise import pairwise_frame
    from mpvlab.report.tables import write_tables

    c = aggregate(source, exclude=[out])
    pw = pairwise_frame(c)
    tables = write_tables(c, out, pw)
    sections = build_all(c, out / FIGURES) if figures else []
    page = render(c, sections, [t.name for t in tables], title or source.resolve().name, pw, html_dir=out)
    html_path = out / "report.html"
    rundir.write_text(html_path, page)
    files = [p for _, figs in sections for f in figs for p in f.files.values()]
    return Report(html_path, tables, files, len(c.runs), len(c.not_aggregated), len(c.configs), c)


make_callable(__name__, "report")   # mpvlab.report(source) is the Python API (mpvlab/api.py)
