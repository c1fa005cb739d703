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
import multiprocessing
import os
import pickle
import queue
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
    PDF's font subset (pdf_fonts), before the first figure: PendingFigures calls it before its workers
    fork (they share it); the report's workers (workers.py), which fork before anything is loaded,
    each call it while the report's process loads the runs, and so does that process before its share."""
    import fontTools.subset  # noqa: F401
    import matplotlib.backends.backend_pdf  # noqa: F401
    import matplotlib.backends.backend_svg  # noqa: F401
    if "pdf" in output.formats:
        with matplotlib.rc_context(st.RC):
            pdf_fonts.prepare(str(st.RC["font.family"]))


FigureTask = Callable[[], list[Figure]]


@dataclass(frozen=True)
class _WorkerPlan:
    """The tasks and formats of one PendingFigures, handed to each worker as its Process argument: with
    the fork start method that is the parent's object itself, never pickled — the tasks are closures
    over the report's Collection. Only a task's index travels to a worker, only bytes travel back."""

    tasks: list[FigureTask]
    output: Output


def _worker(plan: _WorkerPlan, todo: Any, done: Any) -> None:
    """A forked worker: builds and renders task after task (indices from `todo`, None: stop) and puts
    (index, figures, None) or (index, None, the error) on `done`."""
    while (i := todo.get()) is not None:
        try:
            done.put((i, _built_and_rendered(plan.tasks[i], plan.output), None))
        except Exception as e:  # noqa: BLE001 — handed to the report's process, raised there
            try:
                pickle.dumps(e)
                err: Exception = e
            except Exception:  # noqa: BLE001 — an error that cannot travel: its text does
                err = RuntimeError(f"figure task {i}: {type(e).__name__}: {e}")
            done.put((i, None, err))


def _built_and_rendered(task: FigureTask, output: Output) -> list[Figure]:
    figs = task()
    for f in figs:
        f.rendered(output)
    return figs


def default_workers() -> int:
    return min(os.cpu_count() or 1, 4)


class PendingFigures:
    """Figure tasks started: built and rendered in up to `workers` forked processes (default: the CPUs,
    at most 4) while the report's process goes on (its tables), collected by result(). Building (~3-5
    CPU-s at 1,000 runs) and rendering (the rest of a report's CPU but loading) both run in the
    workers (docs/cost.md). Dearest first: tasks are handed out in reverse order — the builders at
    the end of figures.BUILDERS (BBR model, over-time figures) are the dear multi-panel ones, the
    bars at its start cheap ones that fill the gaps. A worker's PNG and PDF bytes are the serial
    path's (tests/test_report_render.py). With fewer than 2 workers, the tasks run in result()."""

    def __init__(self, tasks: list[FigureTask], output: Output | None = None, workers: int | None = None) -> None:
        self.tasks, self.output = tasks, output or Output()
        n = min(len(tasks), workers if workers is not None else default_workers())
        self.procs: list[Any] = []
        self.finished = False
        if n >= 2:
            prepare_workers(self.output)
            ctx = multiprocessing.get_context("fork")
            self.todo, self.done = ctx.SimpleQueue(), ctx.Queue()
            plan = _WorkerPlan(tasks, self.output)
            self.procs = [ctx.Process(target=_worker, args=(plan, self.todo, self.done), daemon=True)
                          for _ in range(n)]
            for p in self.procs:
                p.start()
            # after the start: a pipe holds a few thousand indices, the workers drain it meanwhile
            for i in reversed(range(len(tasks))):
                self.todo.put(i)
            for _ in range(n):
                self.todo.put(None)

    def result(self) -> list[list[Figure]]:
        """Every task's figures, rendered, in the tasks' order; a task's error raised here."""
        try:
            if not self.procs:
                return [_built_and_rendered(t, self.output) for t in self.tasks]
            got: dict[int, list[Figure]] = {}
            while len(got) < len(self.tasks):
                try:
                    i, figs, err = self.done.get(timeout=1.0)
                except queue.Empty:
                    if not any(p.is_alive() for p in self.procs):    # all gone: nothing more will come
                        codes = [p.exitcode for p in self.procs]
                        raise RuntimeError(f"figure workers ended with {len(self.tasks) - len(got)} of "
                                           f"{len(self.tasks)} figure tasks not done (exit codes {codes})") from None
                    continue
                if err is not None:
                    raise err
                got[i] = figs
            self.finished = True
            return [got[i] for i in range(len(self.tasks))]
        finally:
            self.close()

    def close(self) -> None:
        """Stop: the workers (this report's own processes) are reaped — after every result they exit on
        their own; before (an error, Ctrl-C), they are ended."""
        for p in self.procs:
            if self.finished:
                p.join(timeout=5.0)
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join()
        if self.procs:
            self.done.close()
            self.todo.close()
        self.procs = []


def build_and_render(tasks: list[FigureTask], output: Output | None = None,
                     workers: int | None = None) -> list[list[Figure]]:
    """Every task's figures, built and rendered, in the tasks' order (PendingFigures, waited for)."""
    return PendingFigures(tasks, output, workers).result()


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
