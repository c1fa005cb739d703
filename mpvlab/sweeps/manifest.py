"""The sweep manifest, `<results>/<sweep-name>/sweep.json`, rewritten atomically after every change
of state: every planned run with its parameters, trial, seed, state
(planned | running | complete | failed | interrupted), run directory and every attempt. Running the
same sweep again resumes it: complete runs are skipped, interrupted ones are redone, failed ones only
with `retry_failed`. Each run's `scenario.yaml` is its effective scenario headed by a
`# mpvlab-sweep: {json}` comment (sweep, run key, trial, seed, a per-attempt token — the token is how
the sweep finds the result directory of a run that failed).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mpvlab.core import rundir
from mpvlab.input.sweep import Plan, SweepError

MANIFEST = "sweep.json"
MANIFEST_FORMAT = 1
STATES = ("planned", "running", "complete", "failed", "interrupted")


# ---------------------------------------------------------------------------------------------
# The manifest


def sweep_dir(results_root: Path, plan: Plan) -> Path:
    return results_root / plan.sweep


def load_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise SweepError(f"{path}: unreadable sweep manifest ({e}); move it away to start the sweep afresh") from None
    if data.get("format") != MANIFEST_FORMAT:
        raise SweepError(f"{path}: manifest format {data.get('format')!r}, this mpvlab writes {MANIFEST_FORMAT}")
    return data


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def merge_manifest(plan: Plan, old: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest for this plan, keeping the state of runs an earlier invocation recorded.

    A recorded run whose effective scenario differs from the plan's (the base scenario file or the
    spec changed) is an error if it completed — mixing two setups under one key would corrupt the
    statistics — and is simply replanned otherwise."""
    old_runs = {r["key"]: r for r in (old or {}).get("runs", [])}
    changed = [k for k, r in old_runs.items()
               if r.get("state") == "complete" and any(p.key == k and p.scenario_sha256 != r.get("scenario_sha256")
                                                       for p in plan.runs)]
    if changed:
        raise SweepError(
            f"sweep {plan.sweep}: {len(changed)} completed run(s) were made with a different scenario than the spec "
            f"now gives (e.g. {changed[0]}): a base scenario file or the spec changed. Use a new sweep name or "
            f"--results DIR so the two setups are not mixed.")
    runs = []
    for p in plan.runs:
        entry = {"key": p.key, "config": p.config, "scenario": p.scenario_name, "scenario_file": str(p.scenario_file),
                 "params": p.params, "trial": p.trial, "seed": p.seed, "scenario_sha256": p.scenario_sha256,
                 "state": "planned", "run_dir": None, "reason": "", "attempts": []}
        prev = old_runs.pop(p.key, None)
        if prev is not None:
            for k in ("state", "run_dir", "reason", "attempts", "fidelity_ok", "wall_s", "pid"):
                if k in prev:
                    entry[k] = prev[k]
            if prev.get("scenario_sha256") != p.scenario_sha256:
                entry["state"], entry["run_dir"] = "planned", None
        runs.append(entry)
    return {"format": MANIFEST_FORMAT, "sweep": plan.sweep, "spec_file": str(plan.spec_file), "quick": plan.quick,
            "trials": plan.trials, "base_seed": plan.base_seed, "grid": plan.grid, "overrides": plan.overrides,
            "seed_rule": "sha256(json([base_seed, scenario, sorted(grid values), trial]))[:8] mod (2^31-1) + 1",
            "created": (old or {}).get("created", _now()), "updated": _now(), "runs": runs,
            # runs of an earlier version of the spec that this plan no longer contains: kept, not run
            "retired_runs": [*(old or {}).get("retired_runs", []), *old_runs.values()]}


def select(manifest: dict[str, Any], sweep_root: Path, retry_failed: bool) -> tuple[list[str], dict[str, int]]:
    """Keys of the runs to do now, in plan order, and counts of what is skipped and why."""
    todo: list[str] = []
    skipped = {"complete": 0, "failed": 0}
    for r in manifest["runs"]:
        state = r["state"]
        if state == "complete":
            status = rundir.read_status(sweep_root / r["run_dir"]) if r.get("run_dir") else None
            if status and status.get("state") == "complete":
                skipped["complete"] += 1
                continue
            r["state"], r["reason"] = "planned", "result directory missing or no longer complete; redone"
        elif state == "failed" and not retry_failed:
            skipped["failed"] += 1
            continue
        todo.append(r["key"])
    return todo, skipped


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie or a recycled pid of something else is not our run
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def find_run_dir(results_root: Path, scenario_name: str, token: str) -> Path | None:
    """The result directory whose scenario.yaml carries this attempt's token (runner API gives no
    run dir when a run fails)."""
    parent = results_root / scenario_name
    if not parent.is_dir():
        return None
    needle = f'"token": "{token}"'
    for d in sorted(parent.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            with (d / "scenario.yaml").open() as f:
                head = f.read(4096)
        except OSError:
            continue
        if needle in head:
            return d
    return None
