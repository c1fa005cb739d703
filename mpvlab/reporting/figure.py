"""A report figure and its rendering: SVG, PDF and (when asked) PNG bytes, written under the
report's figures/ folder, built and rendered in parallel processes; and the decorations every
over-time figure shares (the grey of a square-wave delay's ON intervals). The figure builders are in
figures.py and bbr.py.

Which formats a report writes is the reader's choice (`mpvlab report --formats`, `--png-dpi`;
`output.Output`): SVG always (report.html inlines it), PDF by default (vector, Type 42 fonts: what a
paper needs), PNG on request (slides, READMEs) — it is the dearest format to render (docs/cost.md)."""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mpvlab.core import units  # noqa: E402
from mpvlab.reporting import pdf_fonts  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.reporting.output import FORMATS, Output  # noqa: E402
from mpvlab.results.aggregate import Run  # noqa: E402

GREY_SHADE = "#BBBBBB"          # a square-wave delay's ON intervals in over-time figures


SAVE_ORDER = ("png", "pdf", "svg")       # PNG first when asked: its bytes stay those of earlier reports


@dataclass
class Figure:
    """One figure, rendered: its bytes per format of the report's Output and, once written, the files
    under the report's figures/ folder."""

    id: str
    title: str
    caption: str
    mpl: Any = None                      # the matplotlib figure until rendered
    data: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    # the figure's numbers as data files beside it (extension → bytes, e.g. {"csv": …}), so a reader
    # (or a test) can check a figure's values without parsing its drawing
    tables: dict[str, bytes] = field(default_factory=dict)
    png_dpi: int | None = None           # the PNG's resolution, once rendered as PNG

    def rendered(self, output: Output | None = None) -> dict[str, bytes]:
        if not self.data:
            output = output or Output()
            self.data = render(self.mpl, output)
            self.mpl = None
            self.png_dpi = output.png_dpi if "png" in output.formats else None
        return self.data

    @property
    def svg(self) -> bytes:
        return self.rendered()["svg"]

    @property
    def stem(self) -> str:
        """A file name from the id: letters, digits, '-', '_', '.' only."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.id).strip("_")[:120]

    def write(self, folder: Path) -> dict[str, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        # listed in FORMATS' order (the page's links follow it), whatever order they were rendered in
        for fmt, data in sorted(self.rendered().items(), key=lambda kv: FORMATS.index(kv[0])):
            p = folder / f"{self.stem}.{fmt}"
            tmp = p.with_name(f".{p.name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(p)            # a reader never sees half a figure
            self.files[fmt] = p
        for ext, data in self.tables.items():
            p = folder / f"{self.stem}.{ext}"
            tmp = p.with_name(f".{p.name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(p)
            self.files[ext] = p
        return self.files


def render(fig: plt.Figure, output: Output | None = None) -> dict[str, bytes]:
    """The figure in the Output's formats, default SVG and PDF (the style's rc settings were active
    while it was drawn; they are set again here because savefig reads pdf/svg font types at save time)."""
    output = output or Output()
    out = {}
    # PDF: the embedded font's subset made once per process, not per figure (pdf_fonts)
    with matplotlib.rc_context(st.RC), pdf_fonts.subset_once():
        # The first save's draw runs the constrained layout (in inches and points, so the same for every
        # format); then drop the engine, or each further savefig re-runs the layout (~0.25 s per
        # multi-panel figure). The first save is the PNG's when PNG is asked (its bytes as before this
        # option), else the PDF's or the SVG's: the layout runs once in any case. None, not "none":
        # "none" leaves a placeholder engine, and savefig makes an extra draw before printing whenever a
        # figure has any engine.
        for i, fmt in enumerate(f for f in SAVE_ORDER if f in output.formats):
            buf = io.BytesIO()
            # metadata: no creation date, so the same results give byte-identical PDF/SVG files
            meta = {"CreationDate": None} if fmt == "pdf" else ({"Date": None} if fmt == "svg" else {})
            if i == 0 and fmt in ("pdf", "svg") and fig.get_layout_engine() is not None:
                _print_vector_with_layout(fig, fmt, buf, meta)
            else:
                fig.savefig(buf, format=fmt, dpi=output.png_dpi if fmt == "png" else None, metadata=meta)
            out[fmt] = buf.getvalue()
            fig.set_layout_engine(None)
    plt.close(fig)
    return out


def _print_vector_with_layout(fig: plt.Figure, fmt: str, buf: io.BytesIO, meta: dict[str, Any]) -> None:
    """The figure's first vector file, printed by its format's canvas, so the constrained layout runs in
    the one draw that writes the file. savefig, given a figure with a layout engine, first draws the
    whole figure with output off to run the layout, then draws it again to print: 18 whole-figure
    draws more per report, ~1.3 CPU-s at 1,000 runs (docs/cost.md). The layout sees the same renderer
    as in savefig's extra draw (the format's own, at 72 dpi: the layout asks the figure for a renderer,
    and a PDF/SVG canvas has none but the printing one), so the file's bytes are savefig's
    (tests/test_report_render.py). Vector formats only: a PNG's dpi handling stays savefig's."""
    from matplotlib.backends.backend_pdf import FigureCanvasPdf
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    # the new canvas becomes fig.canvas; the later savefig calls switch canvases as usual
    if fmt == "pdf":
        FigureCanvasPdf(fig).print_pdf(buf, metadata=meta)
    else:
        FigureCanvasSVG(fig).print_svg(buf, metadata=meta)


def prepare_workers(output: Output) -> None:
    """Import the PDF and SVG backends and fontTools' subsetter (the PDF's font embedding) and make the
    PDF's font subset (pdf_fonts), before the first figure: the report's workers (workers.py), which
    fork before anything is loaded, each call it while the report's process loads the runs, and so
    does that process before its share."""
    import fontTools.subset  # noqa: F401
    import matplotlib.backends.backend_pdf  # noqa: F401
    import matplotlib.backends.backend_svg  # noqa: F401
    if "pdf" in output.formats:
        with matplotlib.rc_context(st.RC):
            pdf_fonts.prepare(str(st.RC["font.family"]))


FigureTask = Callable[[], list[Figure]]


def _built_and_rendered(task: FigureTask, output: Output) -> list[Figure]:
    figs = task()
    for f in figs:
        f.rendered(output)
    return figs


def square_on_intervals(run: Run, path: str, t_end: float) -> list[tuple[float, float]]:
    """When the path's down delay is a square wave: the [start, end) intervals with the amplitude ON."""
    r = run.resolved
    pre = f"paths.{path}.down.delay."
    if r.get(pre + "kind") != "square":
        return []
    try:
        period = units.parse_duration_ns(r[pre + "period"]) / 1e9
        phase = units.parse_duration_ns(r[pre + "phase"]) / 1e9
        duty = float(r[pre + "duty"])
    except (KeyError, ValueError, Exception):  # noqa: BLE001 — a figure decoration, never fatal
        return []
    out, k = [], math.floor((0 - phase) / period)
    while phase + k * period < t_end:
        s = phase + k * period
        out.append((max(s, 0.0), min(s + duty * period, t_end)))
        k += 1
    return [iv for iv in out if iv[1] > iv[0]]
