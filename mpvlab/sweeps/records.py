"""Per-run state on a shared filesystem, and the sweep's state DERIVED from it.

On a cluster many array tasks on many nodes write into one sweep folder at once. A single manifest
every task rewrites would be a single-writer bottleneck and, on NFS, a lost-update race. So every
attempt at a run has its own record, written only by the process making that attempt, atomically
(write to a temporary file, rename):

    <sweep>/.runs/<key-id>/<token>.json   {key, seed, token, state running|complete|failed, host,
                                            boot_id, pid, slurm job ids, run_dir, reason, times}
    <sweep>/.runs/<key-id>/lock           POSIX lock (fcntl.lockf; NFS-aware through lockd) held by
                                            the one process making the run — released by the kernel
                                            when that process dies, however it dies

The run's own result directory (`<sweep>/<scenario>/<run-id>/`, status.json written by the runner;
`complete` only after everything else) stays the truth about its outcome. Nothing else is written
by a task. `derive` reads every record and every run directory of one or more result roots and gives
each planned run one state:

    complete   an attempt whose result directory says complete (duplicates are counted once, listed)
    running    an attempt whose lock is held (or whose Slurm task is running on another node)
    queued     submitted to Slurm, the array task still pending
    failed     an attempt that ended without completing — including one whose process died
               (killed task, dead node): its record still says running, its lock is free and its
               scheduler task is gone, so it is failed, never complete
    planned    no attempt yet
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from mpvlab.core import rundir
from mpvlab.core.rundir import read_header
from mpvlab.input.sweep import Plan, SweepError

RUNS_DIR = ".runs"
DERIVED_STATES = ("planned", "queued", "running", "complete", "failed")


def key_id(key: str) -> str:
    """A file-name-safe id of a run key (keys hold `|`, `=`, quotes of grid values)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def slurm_ids() -> dict[str, str]:
    """This process's Slurm identity, when it is a Slurm task (else empty)."""
    names = {"job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID",
             "cluster": "SLURM_CLUSTER_NAME", "node": "SLURMD_NODENAME"}
    return {k: os.environ[v] for k, v in names.items() if os.environ.get(v)}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------------------------------------
# Writing: one attempt, by the one process making it


@dataclass
class Attempt:
    """The record of one attempt; `save` replaces the file atomically (only this process writes it)."""

    sweep_root: Path
    key: str
    seed: int
    token: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.sweep_root / RUNS_DIR / key_id(self.key) / f"{self.token}.json"

    def start(self) -> None:
        self.data = {"key": self.key, "seed": self.seed, "token": self.token, "state": "running",
                     "host": socket.gethostname(), "boot_id": boot_id(), "pid": os.getpid(),
                     "slurm": slurm_ids(), "started": _now(), "t_start": time.time(), "run_dir": None, "reason": ""}
        rundir.write_json(self.path, self.data)

    def end(self, state: str, run_dir: Path | None, reason: str = "") -> None:
        assert state in ("complete", "failed", "interrupted"), state
        self.data.update(state=state, reason=reason, ended=_now(),
                         wall_s=round(time.time() - self.data.get("t_start", time.time()), 2),
                         run_dir=os.path.relpath(run_dir, self.sweep_root) if run_dir else None)
        rundir.write_json(self.path, self.data)


@contextlib.contextmanager
def run_lock(sweep_root: Path, key: str) -> Iterator[None]:
    """Hold the run's lock for as long as it is being made; SweepError if someone else holds it."""
    p = sweep_root / RUNS_DIR / key_id(key) / "lock"
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SweepError(f"run {key} is being made by another process right now "
                             f"(its lock {p} is held)") from None
        yield
    finally:
        os.close(fd)   # closing releases the POSIX lock


def lock_held(sweep_root: Path, key: str) -> bool:
    """Whether some process (on any node sharing this filesystem) holds the run's lock now."""
    p = sweep_root / RUNS_DIR / key_id(key) / "lock"
    if not p.exists():
        return False
    fd = os.open(p, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)   # an acquired lock is released again here
    return False


# ---------------------------------------------------------------------------------------------
# Reading: the derived state


@dataclass
class RunState:
    key: str
    seed: int
    state: str = "planned"
    reason: str = ""
    root: Path | None = None            # the result root holding the deciding attempt
    run_dir: Path | None = None
    host: str = ""
    slurm: str = ""                     # e.g. "41_3 RUNNING"
    attempts: int = 0
    duplicates: list[Path] = field(default_factory=list)   # further complete result dirs of this key


# (array_job_id, task_id) → (slurm state, node); the scheduler query is injected so `derive` works
# without Slurm (local sweeps) and the Slurm module stays the only one that speaks to it.
SchedulerStates = Callable[[list[str]], dict[tuple[str, str], tuple[str, str]]]
LIVE_SLURM = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}


def _attempts(sweep_root: Path) -> Iterator[dict[str, Any]]:
    base = sweep_root / RUNS_DIR
    if not base.is_dir():
        return
    for d in base.iterdir():
        for f in d.glob("*.json"):
            if f.name.startswith("."):
                continue
            try:
                rec = json.loads(f.read_text())
            except (OSError, ValueError):
                continue            # a record is replaced by rename: never half-written; skip foreign files
            if isinstance(rec, dict) and "key" in rec and "token" in rec:
                yield rec


def _run_dirs(sweep_root: Path, sweep: str) -> dict[str, tuple[Path, dict[str, Any]]]:
    """token → (result dir, its sweep header) for every result dir of this sweep under the root."""
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    if not sweep_root.is_dir():
        return out
    for scen in sweep_root.iterdir():
        if not scen.is_dir() or scen.name.startswith(".") or scen.name == "report":
            continue
        for d in scen.iterdir():
            try:
                with (d / "scenario.yaml").open() as f:
                    head = f.read(4096)
            except OSError:
                continue
            h = read_header(head)
            if h and h.get("sweep") == sweep and h.get("token"):
                out[str(h["token"])] = (d, h)
    return out


def _sweep_lock_held(sweep_root: Path) -> bool:
    """The local executor's whole-sweep flock (mpvlab/sweeps/execute.py)."""
    p = sweep_root / ".sweep.lock"
    if not p.exists():
        return False
    with open(p) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def derive(plan: Plan, roots: list[Path], scheduler: SchedulerStates | None = None,
           submissions: list[dict[str, Any]] | None = None) -> dict[str, RunState]:
    """The state of every planned run, from the records and result dirs under every root (each a
    results root: the sweep lives in <root>/<sweep-name>/). Read-only: nothing is written."""
    planned = {r.key: RunState(r.key, r.seed) for r in plan.runs}
    candidates: dict[str, list[dict[str, Any]]] = {k: [] for k in planned}
    job_ids: set[str] = set()
    for root in roots:
        sroot = root / plan.sweep
        dirs = _run_dirs(sroot, plan.sweep)
        seen_tokens: set[str] = set()
        for rec in _attempts(sroot):
            if rec["key"] not in planned:
                continue            # a run of an earlier version of the spec
            seen_tokens.add(rec["token"])
            d = dirs.get(rec["token"], (None, None))[0]
            if d is None and rec.get("run_dir"):
                d = sroot / rec["run_dir"]
            candidates[rec["key"]].append({**rec, "_root": root, "_sroot": sroot, "_dir": d})
            if rec.get("slurm", {}).get("array_job_id"):
                job_ids.add(rec["slurm"]["array_job_id"])
        for token, (d, h) in dirs.items():  # result dirs the local executor made (no attempt record)
            if token not in seen_tokens and h.get("key") in planned:
                st = rundir.read_status(d) or {}
                candidates[h["key"]].append({"key": h["key"], "token": token, "state": st.get("state", "failed"),
                                             "started": st.get("started", ""), "host": "", "slurm": {},
                                             "_root": root, "_sroot": sroot, "_dir": d,
                                             "_local_sweep": True})
    for sub in submissions or []:
        job_ids.add(str(sub["job_id"]))
    sched = scheduler(sorted(job_ids)) if scheduler and job_ids else {}

    for key, recs in candidates.items():
        rs = planned[key]
        rs.attempts = len(recs)
        complete: list[tuple[dict[str, Any], str, str]] = []
        other: list[tuple[dict[str, Any], str, str]] = []
        for rec in recs:
            state, reason = _judge(rec, sched)
            (complete if state == "complete" else other).append((rec, state, reason))
        if complete:
            complete.sort(key=lambda x: str(x[0].get("started", "")))
            rec = complete[-1][0]
            rs.state, rs.reason, rs.root, rs.run_dir, rs.host = "complete", "", rec["_root"], rec["_dir"], \
                rec.get("host", "")
            rs.duplicates = [c[0]["_dir"] for c in complete[:-1]]
            continue
        if other:
            other.sort(key=lambda x: str(x[0].get("started", "")))
            rec, state, reason = other[-1]
            rs.state, rs.reason, rs.root, rs.run_dir, rs.host = state, reason, rec["_root"], rec["_dir"], \
                rec.get("host", "")
            sl = rec.get("slurm") or {}
            if sl.get("array_job_id"):
                s = sched.get((sl["array_job_id"], sl.get("array_task_id", "")))
                rs.slurm = f"{sl['array_job_id']}_{sl.get('array_task_id', '')} {s[0] if s else 'gone'}"
    # Submitted array tasks that have not started their run yet (no attempt record from them)
    for sub in submissions or []:
        jid = str(sub["job_id"])
        for idx, keys in enumerate(sub["tasks"]):
            s = sched.get((jid, str(idx)))
            for key in keys:
                task = planned.get(key)
                if task is None or task.state in ("complete", "running"):
                    continue
                started_by_this = task.slurm.startswith(f"{jid}_")
                if started_by_this:
                    continue
                if str(sub.get("submitted", "")) < _last_start(candidates[key]):
                    continue        # an attempt newer than this submission decided the state
                if s and s[0] == "PENDING":
                    task.state, task.reason, task.slurm = "queued", "", f"{jid}_{idx} PENDING"
                elif s and s[0] in LIVE_SLURM:
                    task.state, task.reason, task.slurm = "running", "array task starting", f"{jid}_{idx} {s[0]}"
                elif s and task.state == "planned":
                    task.state, task.slurm = "failed", f"{jid}_{idx} {s[0]}"
                    task.reason = f"Slurm array task {jid}_{idx} ended ({s[0]}) before its run began"
    return planned


def _last_start(recs: list[dict[str, Any]]) -> str:
    return max((str(r.get("started", "")) for r in recs), default="")


def _judge(rec: dict[str, Any], sched: dict[tuple[str, str], tuple[str, str]]) -> tuple[str, str]:
    """One attempt's state. A result dir that says complete is complete; a record that says running
    is running only while its maker lives — otherwise the attempt is failed (never complete)."""
    d: Path | None = rec.get("_dir")
    status = rundir.read_status(d) if d is not None else None
    if status and status.get("state") == "complete" and rec.get("state") in ("complete", "running"):
        return "complete", ""
    if rec.get("state") == "complete":
        return "failed", "its record says complete but its result directory is missing or not complete"
    if rec.get("state") in ("failed", "interrupted"):
        return "failed", rec.get("reason") or (status or {}).get("reason", "") or rec["state"]
    # Still "running" by its record: is its maker alive?
    sweep_root: Path = rec["_sroot"]
    if rec.get("_local_sweep"):
        if _sweep_lock_held(sweep_root):
            return "running", ""
        return "failed", "the local sweep making it stopped before the run ended"
    sl = rec.get("slurm") or {}
    s = sched.get((sl.get("array_job_id", ""), sl.get("array_task_id", ""))) if sl else None
    if s is not None and s[0] not in LIVE_SLURM:
        return "failed", (f"its Slurm task {sl['array_job_id']}_{sl.get('array_task_id')} ended {s[0]} on "
                          f"{s[1] or rec.get('host')} before the run finished")
    if lock_held(sweep_root, rec["key"]):
        return "running", ""
    if s is not None and s[0] in LIVE_SLURM and rec.get("host") != socket.gethostname():
        return "running", ""        # another node's lock may not be visible on a filesystem without lockd
    return "failed", f"its process ({rec.get('host')} pid {rec.get('pid')}) died before the run finished"
