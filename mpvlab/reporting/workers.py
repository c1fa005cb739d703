"""The report's figure workers, forked before the runs are loaded (issue 36: what ran one after the
other in the report's process before the workers could start — importing the plotting stack, making
the PDF font's subset — now runs in the workers while the report's process imports SciPy and loads).

The runs reach the workers in two hand-offs, each pickled through a pipe:

1. the loaded Collection without statistics (`runs_loaded`): the workers start on the figures that
   read the runs only (figures.RUNS_ONLY: the over-time ones, the dearest third), while
2. the report's process computes the statistics (the BCa bootstrap) and the BBR models and hands them
   over (`stats_ready`), pickled against the workers' copy of the runs (persistent ids: a Config or
   Run is sent as its index, never copied again); then the workers make the rest of the figures.

Which process makes which figure: the forked workers and, once its tables are written, the report's
process itself each take the next task of a hand-off from a shared counter, dearest first (the tasks
in reverse order: the builders at the end of figures.BUILDERS are the dear multi-panel ones). Only bytes travel back. The figures are the serial
path's, byte for byte for PDF and PNG (tests/test_report_workers.py).

No matplotlib here (and no SciPy): this module is imported before the workers fork, so that each
worker imports the plotting stack itself, in parallel with the report's process."""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import pickle
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpvlab.reporting.figure import Figure
    from mpvlab.reporting.output import Output
    from mpvlab.results.aggregate import Collection

PHASES = ("runs", "stats")        # the two hand-offs, in order; a task is (phase, index in its list)


def default_workers() -> int:
    """As many workers as CPUs, at most 4 (no matplotlib import here: this module is imported before the fork)."""
    return min(os.cpu_count() or 1, 4)


class _ByIndex(pickle.Pickler):
    """Pickles the statistics hand-off with each Config and Run of the Collection as its index: the
    worker already holds them (the first hand-off), and the BBR models refer to both."""

    def __init__(self, f: io.BytesIO, c: Collection) -> None:
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.ids = {id(cfg): ("config", i) for i, cfg in enumerate(c.configs)}
        self.ids.update({id(r): ("run", i) for i, r in enumerate(c.runs)})

    def persistent_id(self, obj: Any) -> Any:   # noqa: ANN401 — pickle's protocol
        return self.ids.get(id(obj))


class _FromIndex(pickle.Unpickler):
    def __init__(self, f: io.BytesIO, c: Collection) -> None:
        super().__init__(f)
        self.c = c

    def persistent_load(self, pid: Any) -> Any:  # noqa: ANN401 — pickle's protocol
        kind, i = pid
        return (self.c.configs if kind == "config" else self.c.runs)[i]


def stats_payload(c: Collection) -> bytes:
    """The statistics of every configuration and the BBR models (bbr.config_models' cache), pickled
    against the Collection's configurations and runs."""
    f = io.BytesIO()
    _ByIndex(f, c).dump(([cfg.stats for cfg in c.configs], getattr(c, "_bbr_models", None)))
    return f.getvalue()


def apply_stats_payload(c: Collection, data: bytes) -> None:
    """The worker's side of stats_payload: its Collection as the report process's one after the
    statistics and the BBR models."""
    stats, models = _FromIndex(io.BytesIO(data), c).load()
    for cfg, s in zip(c.configs, stats):
        cfg.stats = s
    if models is not None:
        setattr(c, "_bbr_models", models)  # noqa: B010 — bbr.config_models' cache (see there)


def _tasks(c: Collection, phase: str) -> list[tuple[str, Any]]:
    from mpvlab.reporting import figures
    return figures.tasks_of_phase(c, phase)


def _read_all(conn: Any, inbox: queue.SimpleQueue[bytes | None]) -> None:
    """A worker's reader thread: each hand-off as soon as it is sent (so the report's process never
    waits on a worker busy with a figure), None when the pipe closes first (the report failed)."""
    for _ in PHASES:
        try:
            data: bytes | None = bytes(conn.recv_bytes())
        except (EOFError, OSError):
            data = None
        inbox.put(data)
        if data is None:
            return


def _die_with_parent(parent: int) -> None:
    """SIGKILL this worker when the report's process dies (prctl PR_SET_PDEATHSIG): a report killed by
    SIGKILL or a timeout never leaves a worker drawing on for minutes (issue 45: 166 MB for 172 s)."""
    import ctypes
    import signal
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:           # the parent died before the prctl took effect
        os._exit(1)


def _worker(output: Output, conn: Any, counters: dict[str, Any], done: Any, parent: int) -> None:
    """A forked worker: imports the plotting stack, then per hand-off: takes tasks from its counter
    (dearest first) and puts (phase, index, figures, None) or (phase, index, None, error) on `done`."""
    _die_with_parent(parent)
    inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    threading.Thread(target=_read_all, args=(conn, inbox), daemon=True).start()
    try:
        from mpvlab.reporting import figure
        figure.prepare_workers(output)     # backends, fontTools, the PDF font's subset: once per worker
    except Exception as e:  # noqa: BLE001 — handed to the report's process, raised there
        done.put(("", -1, None, _travelling(e, "preparing a figure worker")))
        return
    c: Collection | None = None
    for phase in PHASES:
        data = inbox.get()
        if data is None:
            return
        # no collection while unpickling the runs (~100k objects: a full collection every few
        # thousand), and none of them scanned again by later collections (gc.freeze)
        gc.disable()
        try:
            if c is None:
                c = pickle.loads(data)
            else:
                apply_stats_payload(c, data)
        finally:
            gc.enable()
        gc.freeze()
        tasks = _tasks(c, phase)
        while (i := _claim(counters[phase], len(tasks))) is not None:
            try:
                done.put((phase, i, figure._built_and_rendered(tasks[i][1], output), None))
            except Exception as e:  # noqa: BLE001 — handed to the report's process, raised there
                done.put((phase, i, None, _travelling(e, f"figure task {phase} {i}")))


def _claim(counter: Any, n: int) -> int | None:
    """The next task of a hand-off (the last first: dearest first), None when none is left."""
    with counter.get_lock():
        k = counter.value
        if k >= n:
            return None
        counter.value = k + 1
    return n - 1 - k


def _travelling(e: Exception, what: str) -> Exception:
    try:
        pickle.dumps(e)
        return e
    except Exception:  # noqa: BLE001 — an error that cannot travel: its text does
        return RuntimeError(f"{what}: {type(e).__name__}: {e}")


class FigureWorkers:
    """The report's figure workers, started before the runs are loaded (see the module's text): `workers`
    processes make the figures (default: the CPUs, at most 4), of which `workers` − 1 forked ones and the
    report's process itself, in result(), once its tables are written. With one (one CPU), nothing is
    forked and result() makes every figure."""

    def __init__(self, output: Output, workers: int | None = None) -> None:
        self.output = output
        self.procs: list[Any] = []
        self.conns: list[Any] = []
        self.finished = False
        self.c: Collection | None = None
        self.sent: list[str] = []
        n = workers if workers is not None else default_workers()
        if n < 2:
            return
        ctx = multiprocessing.get_context("fork")
        self.done = ctx.Queue()
        self.counters = {p: ctx.Value("i", 0) for p in PHASES}
        for _ in range(n - 1):      # the report's process is the n-th, once its tables are written
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, args=(output, recv, self.counters, self.done, os.getpid()),
                            daemon=True)
            p.start()
            recv.close()
            self.procs.append(p)
            self.conns.append(send)

    def runs_loaded(self, c: Collection) -> None:
        """The first hand-off: the loaded runs, before their statistics."""
        self.c = c
        self._send("runs", pickle.dumps(c, protocol=pickle.HIGHEST_PROTOCOL) if self.conns else b"")

    def stats_ready(self) -> None:
        """The second: the Collection's statistics and BBR models (bbr.config_models, called before)."""
        assert self.c is not None, "runs_loaded first"
        self._send("stats", stats_payload(self.c) if self.conns else b"")

    def _send(self, phase: str, data: bytes) -> None:
        self.sent.append(phase)
        for conn in self.conns:
            try:
                conn.send_bytes(data)
            except (BrokenPipeError, ConnectionResetError):
                pass                     # a worker gone: result() says which tasks are missing

    def result(self, folder: Path | None = None) -> list[tuple[str, list[Figure]]]:
        """(section, figures) in the BUILDERS' order, sections without figures left out; with `folder`,
        each figure also written there. A task's error is raised here."""
        from mpvlab.reporting import figure, figures
        assert self.c is not None and self.sent == list(PHASES), "both hand-offs first"
        c = self.c
        tasks = {phase: _tasks(c, phase) for phase in PHASES}
        try:
            if not self.procs:
                got = {(ph, i): figure._built_and_rendered(t, self.output)
                       for ph in PHASES for i, (_, t) in enumerate(tasks[ph])}
            else:
                got = self._collect(tasks, self._own_share(tasks))
            self.finished = True
        finally:
            self.close()
        parts = [(section, got[(ph, i)]) for ph in PHASES for i, (section, _) in enumerate(tasks[ph])]
        return figures.sections_of(parts, folder)

    def _own_share(self, tasks: dict[str, list[tuple[str, Any]]]) -> dict[tuple[str, int], list[Figure]]:
        """The report's process, its own work done, makes figures too: it takes tasks from the same
        counters as the workers, until none is left. One process fewer to fork and to import the
        plotting stack in (~0.6 CPU-s each), and this process imports it anyway (the figures come back
        as figure.Figure, the BBR models are in bbr.py)."""
        from mpvlab.reporting import figure
        figure.prepare_workers(self.output)
        got: dict[tuple[str, int], list[Figure]] = {}
        # as in the workers: the runs, tables and modules already here are not scanned by the collections
        # the drawing triggers; unfrozen after, since this process may be a caller's (mpvlab.report)
        gc.freeze()
        try:
            for phase in PHASES:
                while (i := _claim(self.counters[phase], len(tasks[phase]))) is not None:
                    got[(phase, i)] = figure._built_and_rendered(tasks[phase][i][1], self.output)
        finally:
            gc.unfreeze()
        return got

    def _collect(self, tasks: dict[str, list[tuple[str, Any]]],
                 got: dict[tuple[str, int], list[Figure]]) -> dict[tuple[str, int], list[Figure]]:
        """`got` (the report process's own share) and the workers' figures, as they come."""
        want = sum(len(t) for t in tasks.values())
        while len(got) < want:
            try:
                phase, i, figs, err = self.done.get(timeout=1.0)
            except queue.Empty:
                if not any(p.is_alive() for p in self.procs):    # all gone: nothing more will come
                    codes = [p.exitcode for p in self.procs]
                    missing = sorted(k for ph in PHASES for k in [(ph, j) for j in range(len(tasks[ph]))]
                                     if k not in got)
                    names = ", ".join(f"{tasks[ph][j][0]!r} (task {j} of the {ph} hand-off)" for ph, j in missing[:5])
                    raise RuntimeError(f"figure workers ended (exit codes {codes}) with {len(missing)} of {want} "
                                       f"figure tasks not done: {names}{' …' if len(missing) > 5 else ''}") from None
                continue
            if err is not None:
                raise err
            got[(phase, i)] = figs
        return got

    def close(self) -> None:
        """Stop: the workers (this report's own processes) are reaped — after every result they exit on
        their own; before (an error, Ctrl-C), closing their pipes ends those still waiting for runs,
        and the others are ended."""
        for conn in self.conns:
            conn.close()
        self.conns = []
        for p in self.procs:
            if self.finished:
                p.join(timeout=5.0)
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join()
        if self.procs:
            self.done.close()
        self.procs = []


def build_all(c: Collection, folder: Path | None = None, output: Output | None = None,
              workers: int | None = None) -> list[tuple[str, list[Figure]]]:
    """Every figure of an already loaded Collection, made the way build_report makes them (both
    hand-offs at once); with `folder`, each also written there. With workers=1, all in this process."""
    from mpvlab.reporting import bbr
    from mpvlab.reporting.output import Output
    fw = FigureWorkers(output or Output(), workers)
    try:
        fw.runs_loaded(c)
        bbr.config_models(c)
        fw.stats_ready()
        return fw.result(folder)
    finally:
        fw.close()
