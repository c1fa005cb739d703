"""The Slurm executor: the planned runs as ONE Slurm job array (`sbatch --array`), each array task
calling the engine-neutral `mpvlab sweep SPEC --run KEY` (mpvlab/sweeps/single.py) for its run — or
for `per_node` runs at once on its node; and the scheduler's view of the tasks (squeue for live ones,
sacct — or `scontrol show job` where the site keeps no accounting — for ended ones).

Nothing here dispatches work itself: Slurm places, starts, kills and accounts the tasks. What the
submitter writes is its own files only: the batch script, the task → keys list and a submission
record `<sweep>/.slurm/<job-id>.json` (derive() reads it to show queued tasks).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpvlab.core.paths import checkout_root
from mpvlab.core import rundir
from mpvlab.input.sweep import Plan, SweepError
from mpvlab.runner.context import MAX_PARALLEL

SLURM_DIR = ".slurm"
PARTITION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# sbatch --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
TIME_RE = re.compile(r"\d{1,6}(:\d{1,2}){0,2}|\d{1,4}-\d{1,2}(:\d{1,2}){0,2}")
REPO = checkout_root()


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    time_limit: str | None = None
    exclusive: bool = True          # runs are timing-sensitive: a whole node each by default
    per_node: int = 1               # runs one array task makes at once on its node

    def check(self) -> None:
        if self.partition is not None and not PARTITION_RE.fullmatch(self.partition):
            raise SweepError(f"--partition {self.partition!r}: allowed letters, digits, _ . - (1..64)")
        if self.time_limit is not None and not TIME_RE.fullmatch(self.time_limit):
            raise SweepError(f"--time {self.time_limit!r}: allowed sbatch formats M, M:S, H:M:S, D-H, D-H:M, D-H:M:S")
        if not 1 <= self.per_node <= MAX_PARALLEL:
            raise SweepError(f"--per-node: allowed 1..{MAX_PARALLEL} (runs per node at once; see docs/cluster.md)")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SweepError(f"the Slurm executor needs `{name}` on PATH (Debian package slurm-client; "
                         "see docs/cluster.md)")
    return path


def job_name(plan: Plan) -> str:
    return f"mpvlab-{plan.sweep}"


def submit(plan: Plan, spec_file: Path, results_root: Path, keys: list[str], opts: SlurmOptions,
           quick: bool) -> dict[str, Any]:
    """One `sbatch --array` for these keys; returns the submission record (with the job id)."""
    opts.check()
    if not keys:
        raise SweepError("nothing to submit")
    for k in keys:
        if "\n" in k or "\r" in k:
            raise SweepError(f"run key {k!r} holds a line break; it cannot go into the array's key list")
    sroot = results_root / plan.sweep
    sdir = sroot / SLURM_DIR
    sdir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    keys_file = sdir / f"{stamp}-{len(keys)}.keys"
    rundir.write_text(keys_file, "".join(k + "\n" for k in keys))
    tasks = [keys[i:i + opts.per_node] for i in range(0, len(keys), opts.per_node)]
    script = sdir / f"{stamp}-{len(keys)}.sbatch"
    run_argv = [sys.executable, "-m", "mpvlab", "sweep", str(spec_file.resolve()), "--results",
                str(results_root.resolve()), *(["--quick"] if quick else [])]
    rundir.write_text(script, _script(plan, keys_file, opts.per_node, run_argv))
    argv = [_tool("sbatch"), "--parsable", f"--job-name={job_name(plan)}", f"--array=0-{len(tasks) - 1}",
            "--nodes=1", "--ntasks=1", f"--chdir={REPO}",
            f"--output={sdir}/%x-%A_%a.out",
            *(["--exclusive"] if opts.exclusive else [f"--cpus-per-task={opts.per_node}"]),
            *([f"--partition={opts.partition}"] if opts.partition else []),
            *([f"--time={opts.time_limit}"] if opts.time_limit else []), str(script)]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        raise SweepError(f"sbatch refused the job array: {cp.stderr.strip() or cp.stdout.strip()}\n  argv: "
                         + " ".join(shlex.quote(a) for a in argv))
    job_id, _, cluster = cp.stdout.strip().partition(";")
    if not job_id.isdigit():
        raise SweepError(f"sbatch answered {cp.stdout.strip()!r}, not a job id")
    record = {"job_id": job_id, "cluster": cluster, "job_name": job_name(plan), "submitted": _now(),
              "tasks": tasks, "per_node": opts.per_node, "exclusive": opts.exclusive,
              "partition": opts.partition, "time": opts.time_limit, "script": str(script), "argv": argv}
    rundir.write_json(sdir / f"{job_id}.json", record)
    return record


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _script(plan: Plan, keys_file: Path, per_node: int, run_argv: list[str]) -> str:
    """The batch script: array task i makes keys i*per_node+1 .. +per_node of the key list, each via
    `mpvlab sweep SPEC --run KEY`, at once, and fails if any of them did not complete."""
    cmd = " ".join(shlex.quote(a) for a in run_argv)
    return f"""#!/bin/bash
# Written by `mpvlab sweep` for sweep {plan.sweep}: one array task = {per_node} run(s), each by
# `mpvlab sweep SPEC --run KEY` (resumable: a complete run is skipped).
set -u
first=$(( SLURM_ARRAY_TASK_ID * {per_node} + 1 ))
last=$(( first + {per_node} - 1 ))
pids=()
while IFS= read -r key; do
  {cmd} --run "$key" </dev/null &
  pids+=("$!")
done < <(sed -n "${{first}},${{last}}p" {shlex.quote(str(keys_file))})
rc=0
for p in "${{pids[@]}}"; do wait "$p" || rc=1; done
exit $rc
"""


def submissions(sweep_root: Path) -> list[dict[str, Any]]:
    out = []
    d = sweep_root / SLURM_DIR
    if d.is_dir():
        for f in sorted(d.glob("*.json")):
            if f.name.startswith("."):
                continue
            try:
                out.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                continue
    return out


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def task_states(job_ids: list[str]) -> dict[tuple[str, str], tuple[str, str]]:
    """(array job id, task index) → (Slurm state, node list) for every task of these job arrays."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    if not job_ids:
        return out
    cp = _run([_tool("squeue"), "--noheader", "--array", f"--jobs={','.join(job_ids)}", "--format=%F|%K|%T|%N"])
    for line in cp.stdout.splitlines():         # squeue exits 1 when every job has left the queue
        f = line.strip().split("|")
        if len(f) == 4 and f[1].isdigit():
            out[(f[0], f[1])] = (f[2], f[3])
    ended = _sacct(job_ids)
    if ended is None:
        ended = _scontrol(job_ids)
    for k, v in ended.items():
        out.setdefault(k, v)
    return out


def _sacct(job_ids: list[str]) -> dict[tuple[str, str], tuple[str, str]] | None:
    """Ended tasks from accounting; None where the site keeps none (accounting_storage/none)."""
    if shutil.which("sacct") is None:
        return None
    cp = _run(["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={','.join(job_ids)}",
               "--format=JobID,State,NodeList"])
    if cp.returncode != 0 or "accounting storage is disabled" in cp.stderr.lower():
        return None
    out = {}
    for line in cp.stdout.splitlines():
        f = line.split("|")
        m = re.fullmatch(r"(\d+)_(\d+)", f[0]) if len(f) == 3 else None
        if m:
            out[(m.group(1), m.group(2))] = (f[1].split()[0], f[2])
    return out


def _scontrol(job_ids: list[str]) -> dict[tuple[str, str], tuple[str, str]]:
    """Ended tasks the controller still remembers (MinJobAge) — where there is no accounting."""
    out = {}
    for jid in job_ids:
        cp = _run([_tool("scontrol"), "--oneliner", "show", "job", jid])
        for line in cp.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if fields.get("ArrayJobId") == jid and fields.get("ArrayTaskId", "").isdigit():
                out[(jid, fields["ArrayTaskId"])] = (fields.get("JobState", "?"), fields.get("NodeList", ""))
    return out
