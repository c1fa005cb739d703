"""`mpvlab sweep SPEC --run KEY`: exactly one planned run, resumable — the engine-neutral entry point
a Slurm array task, GNU parallel, HTCondor or Ray calls (one process per run; this process's main
thread runs it, so the runner can install its signal handlers).

It holds the run's lock while it works (records.run_lock: a second `--run` of the same key, on any
node sharing the filesystem, refuses instead of making it twice), skips a run that is already
complete, and writes only its own attempt record and the result directory the runner makes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mpvlab.sweeps.execute import RunFn, _classify, real_runner
from mpvlab.sweeps.manifest import find_run_dir
from mpvlab.sweeps.records import Attempt, derive, run_lock
from mpvlab.input.sweep import Plan, PlannedRun, SweepError


@dataclass
class SingleOutcome:
    key: str
    state: str                  # complete | failed | interrupted | already-complete
    run_dir: Path | None
    reason: str = ""


def planned_run(plan: Plan, key: str) -> PlannedRun:
    for r in plan.runs:
        if r.key == key:
            return r
    raise SweepError(f"sweep {plan.sweep}: no planned run has the key {key!r} "
                     f"(`mpvlab sweep SPEC --list-runs` lists the {len(plan.runs)} keys)")


def run_one(plan: Plan, results_root: Path, key: str, runner: RunFn = real_runner,
            progress: Callable[[str], None] = lambda _p: None,
            log: Callable[[str], None] = lambda _m: None) -> SingleOutcome:
    planned = planned_run(plan, key)
    sroot = results_root / plan.sweep
    with run_lock(sroot, key):
        # With the lock held, a record of this key that still says running belongs to a dead process.
        st = derive(plan, [results_root])[key]
        if st.state == "complete":
            return SingleOutcome(key, "already-complete", st.run_dir)
        token = secrets.token_hex(6)
        attempt = Attempt(sroot, key, planned.seed, token)
        attempt.start()
        try:
            run_dir = runner(planned.scenario, planned.scenario_file, planned.text(plan.sweep, token), sroot,
                             progress, log)
        except BaseException as e:  # noqa: BLE001 — every ending is recorded, then passed on or reported
            state, reason = _classify(e)
            found = find_run_dir(sroot, planned.scenario_name, token)
            attempt.end(state, found, reason)
            if isinstance(e, KeyboardInterrupt):
                raise
            return SingleOutcome(key, state, found, reason)
        attempt.end("complete", Path(run_dir))
        return SingleOutcome(key, "complete", Path(run_dir))
