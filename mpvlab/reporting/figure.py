"""A report figure and its rendering: PDF, SVG and PNG (style.PNG_DPI) bytes, written under the
report's figures/ folder, rendered in parallel processes; and the decorations every over-time figure
shares (the grey of a square-wave delay's ON intervals). The figure builders are in figures.py and
bbr.py."""

from __future__ import annotations

import io
import math
import multiprocessing
import os
import pickle
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mpvlab.core import units  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.results.aggregate import Run  # noqa: E402

GREY_SHADE = "#BBBBBB"          # a square-wave delay's ON intervals in over-time figures


FORMATS = ("pdf", "svg", "png")


@dataclass
class Figure:
    """One figure, rendered: its bytes per format (PDF, SVG, PNG at style.PNG_DPI) and, once written,
    the files under the report's figures/ folder."""

    id: str
    title: str
    caption: str
    mpl: Any = None                      # the matplotlib figure until rendered
    data: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    # the figure's numbers as data files beside it (extension → bytes, e.g. {"csv": …}), so a reader
    # (or a test) can check a figure's values without parsing its drawing
    tables: dict[str, bytes] = field(default_factory=dict)

    def rendered(self) -> dict[str, bytes]:
        if not self.data:
            self.data = render(self.mpl)
            self.mpl = None
        return self.data

    @property
    def png(self) -> bytes:
        return self.rendered()["png"]

    @property
    def svg(self) -> bytes:
        return self.rendered()["svg"]

    @property
    def stem(self) -> str:
        """A file name from the id: letters, digits, '-', '_', '.' only."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.id).strip("_")[:120]

    def write(self, folder: Path) -> dict[str, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        for fmt, data in self.rendered().items():
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


def render(fig: plt.Figure) -> dict[str, bytes]:
    """The figure as PDF, SVG and PNG bytes (the style's rc settings were active while it was drawn;
    they are set again here because savefig reads pdf/svg font types at save time)."""
    out = {}
    with matplotlib.rc_context(st.RC):
        # PNG first: its draw runs the constrained layout (in inches and points, so the same for every
        # format); then drop the engine, or each further savefig re-runs the layout (~0.25 s per
        # multi-panel figure). None, not "none": "none" leaves a placeholder engine, and savefig makes an
        # extra draw before printing whenever a figure has any engine — PDF and SVG were each drawn twice
        # (108 draws for 18 figures, now 72; PNG and PDF bytes unchanged).
        for fmt in ("png", "pdf", "svg"):
            buf = io.BytesIO()
            # metadata: no creation date, so the same results give byte-identical PDF/SVG files
            meta = {"CreationDate": None} if fmt == "pdf" else ({"Date": None} if fmt == "svg" else {})
            fig.savefig(buf, format=fmt, dpi=st.PNG_DPI if fmt == "png" else None, metadata=meta)
            out[fmt] = buf.getvalue()
            if fmt == "png":
                fig.set_layout_engine(None)
    plt.close(fig)
    return out


def _import_backends() -> None:
    """Import the PDF and SVG backends and fontTools' subsetter (the PDF's font embedding) before the
    workers fork: savefig imports them lazily, ~0.4 CPU-s that each worker otherwise paid again
    (cProfile of the first PDF a process writes, issue 36)."""
    import fontTools.subset  # noqa: F401
    import matplotlib.backends.backend_pdf  # noqa: F401
    import matplotlib.backends.backend_svg  # noqa: F401


def _render_pickled(blob: bytes) -> dict[str, bytes]:
    return render(pickle.loads(blob))


def render_all(figs: list[Figure], workers: int | None = None) -> None:
    """Render every figure, in up to `workers` processes (default: the CPUs, at most 4). Rendering is
    ~85 % of a 1,000-run report's CPU (3 formats, PNG at 300 dpi; per figure and format in
    docs/cost.md). The figures travel pickled (matplotlib supports it); the workers are forked, so
    nothing else is re-imported; a worker's PNG and PDF bytes are the serial path's
    (tests/test_report_render.py)."""
    todo = [f for f in figs if not f.data]
    n = min(len(todo), workers if workers is not None else min(os.cpu_count() or 1, 4))
    if n < 2:
        for f in todo:
            f.rendered()
        return
    _import_backends()
    blobs = [pickle.dumps(f.mpl) for f in todo]
    for f in todo:
        plt.close(f.mpl)
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("fork")) as pool:
        for f, data in zip(todo, pool.map(_render_pickled, blobs)):
            f.data, f.mpl = data, None


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
