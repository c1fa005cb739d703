"""Making the runs of a sweep: each in its own spawned process (the runner installs signal handlers,
which only a main thread may do, and a crash of one run must not take the sweep down), `parallel` of
them at once; Ctrl-C and SIGTERM stop starting runs and let the running ones tear down; every outcome
is recorded in the manifest before the next run starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import multiprocessing as mp
import os
import queue
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from mpvlab.core import rundir
from mpvlab.input.scenario import Scenario
from mpvlab.sweeps.manifest import (
    MANIFEST, STATES, _now, _pid_alive, find_run_dir, load_manifest, merge_manifest, select, sweep_dir,
)
from mpvlab.input.sweep import Plan, PlannedRun, SweepError
from mpvlab.results.checks import all_warnings

# ---------------------------------------------------------------------------------------------
# Executing runs


class RunFn(Protocol):
    """How one run is made: the real one is `real_runner`; tests inject fakes. Returns the complete
    run dir; raises on failure (after leaving a failed run dir, like the runner does)."""

    def __call__(self, scenario: Scenario, scenario_file: Path, scenario_text: str, results_root: Path,
                 progress: Callable[[str], None], log: Callable[[str], None]) -> Path: ...


def real_runner(scenario: Scenario, scenario_file: Path, scenario_text: str, results_root: Path,
                progress: Callable[[str], None], log: Callable[[str], None]) -> Path:
    from mpvlab.runner.context import RunOptions
    from mpvlab.runner.session import run_scenario
    return run_scenario(scenario, scenario_file, scenario_text,
                        RunOptions(results_root=results_root, progress=progress, log=log))


@dataclass
class Event:
    """What the sweep tells its display: kind ∈ start | phase | log | end | note."""

    kind: str
    key: str = ""
    text: str = ""
    entry: dict[str, Any] | None = None


@dataclass
class Outcome:
    state: str                  # complete | failed | interrupted
    run_dir: Path | None
    reason: str = ""


def _classify(exc: BaseException) -> tuple[str, str]:
    reason = str(exc).split("\n  results kept")[0] or type(exc).__name__
    if isinstance(exc, KeyboardInterrupt) or "interrupted" in reason.split(":", 1)[-1][:60]:
        return "interrupted", reason or "interrupted"
    return "failed", reason


def _child_main(runner: RunFn, job: dict[str, Any], q: Any) -> None:
    """Entry of a run's own process (spawned, so it is its process's main thread)."""
    key = job["key"]

    def progress(phase: str) -> None:
        q.put(("phase", key, phase))

    def log(msg: str) -> None:
        q.put(("log", key, msg))

    try:
        run_dir = runner(job["scenario"], job["scenario_file"], job["text"], job["results_root"], progress, log)
        q.put(("end", key, "complete", str(run_dir), ""))
    except BaseException as e:  # noqa: BLE001 — the parent must always learn how the run ended
        state, reason = _classify(e)
        q.put(("end", key, state, "", reason))


@dataclass
class _Active:
    key: str
    token: str
    started: float
    process: mp.process.BaseProcess | None = None
    outcome: Outcome | None = None
    phase: str = "starting"


@dataclass
class Sweeper:
    """Runs a plan against its manifest. `isolate=False` runs in this process, one at a time (tests
    with fake runners); otherwise every run gets its own spawned process, `parallel` at once."""

    plan: Plan
    results_root: Path
    runner: RunFn = real_runner
    parallel: int = 1
    retry_failed: bool = False
    isolate: bool = True
    on_event: Callable[[Event], None] = lambda _e: None
    kill_grace_s: float = 120.0
    manifest: dict[str, Any] = field(default_factory=dict)
    todo: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    _stop: str = ""

    @property
    def root(self) -> Path:
        return sweep_dir(self.results_root, self.plan)

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def _entry(self, key: str) -> dict[str, Any]:
        return next(r for r in self.manifest["runs"] if r["key"] == key)

    def save(self) -> None:
        self.manifest["updated"] = _now()
        counts = {s: 0 for s in STATES}
        for r in self.manifest["runs"]:
            counts[r["state"]] += 1
        self.manifest["counts"] = counts
        rundir.write_json(self.manifest_path, self.manifest)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".sweep.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                raise SweepError(f"sweep {self.plan.sweep} is already running in {self.root} "
                                 f"(pid {lock.read().strip() or '?'})") from None
            lock.seek(0)
            lock.truncate()
            lock.write(str(os.getpid()))
            lock.flush()
            yield

    def prepare(self) -> None:
        """Merge the manifest, settle runs an earlier (killed) sweep left `running`, pick the todo list."""
        self.manifest = merge_manifest(self.plan, load_manifest(self.manifest_path))
        for r in self.manifest["runs"]:
            if r["state"] != "running":
                continue
            if _pid_alive(r.get("pid")) and r.get("pid") != os.getpid():
                raise SweepError(f"run {r['key']} of sweep {self.plan.sweep} is still being made by pid {r['pid']} "
                                 "(a sweep that was killed left it); wait for it or end it, then resume")
            last = r["attempts"][-1] if r["attempts"] else None
            found = find_run_dir(self.results_root / self.plan.sweep, r["scenario"], last["token"]) if last else None
            status = rundir.read_status(found) if found else None
            if found and status and status.get("state") == "complete":
                self._record(r, last, Outcome("complete", found), time.time())
            else:
                self._record(r, last, Outcome("interrupted", found, "the sweep stopped while this run was going"),
                             time.time())
        self._adopt_other_executors()
        self.todo, self.skipped = select(self.manifest, self.root, self.retry_failed)
        busy = set(self._busy_elsewhere)
        self.todo = [k for k in self.todo if k not in busy]
        self.save()

    _busy_elsewhere: tuple[str, ...] = ()

    def _adopt_other_executors(self) -> None:
        """Runs made by `--run KEY` (a Slurm array task, GNU parallel, …) write no manifest entry, only
        their own records (records.py): a complete one counts as complete here, one being made right
        now is not started a second time."""
        from mpvlab.sweeps.records import derive, lock_held
        ext = derive(self.plan, [self.results_root])
        for r in self.manifest["runs"]:
            d = ext[r["key"]]
            if d.state == "complete" and r["state"] != "complete" and d.run_dir is not None:
                self._record(r, None, Outcome("complete", d.run_dir), time.time())
        self._busy_elsewhere = tuple(r.key for r in self.plan.runs if lock_held(self.root, r.key))

    def _record(self, entry: dict[str, Any], attempt: dict[str, Any] | None, out: Outcome, t_end: float) -> None:
        rel = os.path.relpath(out.run_dir, self.root) if out.run_dir else None
        entry.update(state=out.state, run_dir=rel, reason=out.reason)
        entry.pop("pid", None)
        if attempt is not None:
            attempt.update(state=out.state, run_dir=rel, reason=out.reason, ended=_now(),
                           wall_s=round(t_end - attempt.get("t_start", t_end), 2))
            entry["wall_s"] = attempt["wall_s"]
        if out.state == "complete" and out.run_dir is not None:
            try:
                s = json.loads((out.run_dir / "summary.json").read_text())
                entry["fidelity_ok"] = s.get("fidelity_ok")
                warned = all_warnings(s)
                entry["warnings"] = len(warned)
                entry["first_warning"] = warned[0][:300] if warned else None
                entry["run_id"] = s.get("run_id")
            except (OSError, ValueError):
                pass

    def run(self) -> dict[str, int]:
        """Do the todo runs. Returns counts by final state of the whole manifest."""
        with self._locked():
            self.prepare()
            self.on_event(Event("note", text=f"{len(self.todo)} to run, {self.skipped['complete']} already "
                                              f"complete, {self.skipped['failed']} failed earlier (skipped"
                                              f"{'' if self.retry_failed else '; --retry-failed redoes them'})"))
            if self.isolate:
                self._run_processes()
            else:
                self._run_inline()
            self.save()
        return dict(self.manifest["counts"])

    def _begin(self, key: str) -> tuple[dict[str, Any], PlannedRun, str, str]:
        entry = self._entry(key)
        planned = next(p for p in self.plan.runs if p.key == key)
        token = secrets.token_hex(6)
        entry["attempts"].append({"token": token, "started": _now(), "t_start": time.time(), "state": "running"})
        entry.update(state="running", reason="")
        return entry, planned, token, planned.text(self.plan.sweep, token)

    def _finish(self, key: str, token: str, out: Outcome) -> None:
        entry = self._entry(key)
        if out.run_dir is None:
            out.run_dir = find_run_dir(self.results_root / self.plan.sweep, entry["scenario"], token)
        if self._stop and out.state == "failed":
            out.state = "interrupted"       # a run that failed because the sweep was stopped is redone on resume
        attempt = next(a for a in entry["attempts"] if a["token"] == token)
        self._record(entry, attempt, out, time.time())
        self.save()
        self.on_event(Event("end", key, out.state, entry))

    def _run_inline(self) -> None:
        for key in self.todo:
            entry, planned, token, text = self._begin(key)
            self.save()
            self.on_event(Event("start", key, entry=entry))
            def on_phase(ph: str, k: str = key) -> None:
                self.on_event(Event("phase", k, ph))

            def on_log(m: str, k: str = key) -> None:
                self.on_event(Event("log", k, m))

            try:
                run_dir = self.runner(planned.scenario, planned.scenario_file, text, self.root, on_phase, on_log)
                out = Outcome("complete", Path(run_dir))
            except KeyboardInterrupt:
                self._stop = "interrupted (Ctrl-C)"
                self._finish(key, token, Outcome("interrupted", None, self._stop))
                raise
            except Exception as e:  # noqa: BLE001 — a run's failure is recorded, the sweep goes on
                out = Outcome(*_classify_outcome(e))
            self._finish(key, token, out)

    def _run_processes(self) -> None:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        pending = list(self.todo)
        active: dict[str, _Active] = {}

        def on_term(signum: int, _frame: Any) -> None:
            # SIGTERM/SIGHUP: stop starting runs; ask our runs to stop with SIGINT, which their runner
            # turns into a clean teardown (and ignores during that teardown).
            if not self._stop:
                self._stop = f"interrupted by {signal.Signals(signum).name}"
                for a in active.values():
                    if a.process is not None and a.process.pid and a.process.is_alive():
                        os.kill(a.process.pid, signal.SIGINT)

        old = {s: signal.signal(s, on_term) for s in (signal.SIGTERM, signal.SIGHUP)}
        stop_deadline: float | None = None
        try:
            while pending or active:
                try:
                    while pending and len(active) < self.parallel and not self._stop:
                        key = pending.pop(0)
                        entry, planned, token, text = self._begin(key)
                        job = {"key": key, "scenario": planned.scenario, "scenario_file": planned.scenario_file,
                               "text": text, "results_root": self.root}
                        p = ctx.Process(target=_child_main, args=(self.runner, job, q), name=f"mpvlab-sweep-{key}")
                        p.start()
                        entry["pid"] = p.pid
                        active[key] = _Active(key, token, time.monotonic(), p)
                        self.save()
                        self.on_event(Event("start", key, entry=entry))
                    self._pump(q, active, timeout=0.25)
                    if self._stop:
                        pending.clear()
                        stop_deadline = stop_deadline or time.monotonic() + self.kill_grace_s
                        if time.monotonic() > stop_deadline:
                            for a in active.values():
                                if a.process is not None and a.process.is_alive():
                                    a.process.kill()  # its ledger lets the next run clean up after it
                except KeyboardInterrupt:
                    # Ctrl-C reached our runs too (same process group): let them tear down, then record.
                    self._stop = self._stop or "interrupted (Ctrl-C)"
                    self.on_event(Event("note", text="interrupted: waiting for running runs to clean up"))
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        if self._stop:
            raise KeyboardInterrupt(self._stop)

    def _pump(self, q: Any, active: dict[str, _Active], timeout: float) -> None:
        """Handle messages from the runs; retire runs whose process ended."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            kind, key = msg[0], msg[1]
            a = active.get(key)
            if a is None:
                continue
            if kind == "phase":
                a.phase = msg[2]
                self.on_event(Event("phase", key, msg[2]))
            elif kind == "log":
                self.on_event(Event("log", key, msg[2]))
            elif kind == "end":
                a.outcome = Outcome(msg[2], Path(msg[3]) if msg[3] else None, msg[4])
        for key, a in list(active.items()):
            assert a.process is not None
            if a.process.is_alive():
                continue
            a.process.join()
            if a.outcome is None:   # its last message may still be in the pipe
                with contextlib.suppress(queue.Empty):
                    while True:
                        msg = q.get(timeout=0.5)
                        if msg[0] == "end" and msg[1] in active:
                            active[msg[1]].outcome = Outcome(msg[2], Path(msg[3]) if msg[3] else None, msg[4])
            out = a.outcome or Outcome("failed", None, f"run process exited with code {a.process.exitcode} "
                                                       "without reporting (see the run's logs/)")
            del active[key]
            self._finish(key, a.token, out)


def _classify_outcome(e: BaseException) -> tuple[str, Path | None, str]:
    state, reason = _classify(e)
    return state, None, reason


def run_keys_by_state(manifest: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {s: [] for s in STATES}
    for r in manifest["runs"]:
        out[r["state"]].append(r["key"])
    return out


def estimate_run_s(scenario: Scenario) -> float:
    """Before any run has finished: media length plus the platform's fixed cost per run (topology,
    probes and lead-in, teardown — ~15 s measured here)."""
    probe = scenario.fidelity.probe_duration / 1e9 + 4.0 if scenario.fidelity.probe else 2.0
    return scenario.media_s + probe + 8.0
