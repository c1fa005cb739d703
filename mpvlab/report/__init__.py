"""`mpvlab report`: statistics across trials, tables (CSV, Parquet), figures and one self-contained
HTML file, from result directories alone.

    from mpvlab.report import build_report
    rep = build_report(Path("results/wifi-lte-study"), Path("results/wifi-lte-study/report"))

Modules: stats (mean, median, Student-t CI), aggregate (runs → configurations), tables, figures, html.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core import rundir
from mpvlab.report.aggregate import Collection, aggregate


@dataclass
class Report:
    html: Path
    tables: list[Path]
    n_complete: int
    n_failed: int
    n_configs: int
    collection: Collection


def build_report(source: Path, out: Path, title: str | None = None, figures: bool = True) -> Report:
    from mpvlab.report.figures import build_all
    from mpvlab.report.html import render
    from mpvlab.report.tables import write_tables

    c = aggregate(source, exclude=[out])
    tables = write_tables(c, out)
    sections = build_all(c) if figures else []
    page = render(c, sections, [t.name for t in tables], title or source.resolve().name)
    html_path = out / "report.html"
    rundir.write_text(html_path, page)
    return Report(html_path, tables, len(c.runs), len(c.not_aggregated), len(c.configs), c)
