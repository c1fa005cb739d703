"""The results layout — the contract every feature writes into.

results/<scenario>/<runid>/
  scenario.yaml      the scenario exactly as given
  resolved.yaml      every default filled in
  provenance.json    kernel, packages, git commit, seed, host, sysctls, fidelity check
  summary.json       headline metrics (written last, with status)
  status.json        {"state": running|complete|failed, "reason", times}: `complete` only after
                     everything else was written; a failed or interrupted run keeps its files
  logs/              raw per-component logs
  data/              time series (CSV, schema in data/SCHEMA.md)
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

STATES = ("running", "complete", "failed")


def write_json(path: Path, data: Any) -> None:
    """Atomic: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.fchmod(fd, 0o644)  # mkstemp makes 0600; results are for every user of the machine to read
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_status(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return None


def write_status(run_dir: Path, state: str, reason: str = "", **extra: Any) -> None:
    assert state in STATES, state
    previous = read_status(run_dir) or {}
    data = {
        "state": state,
        "reason": reason,
        "started": previous.get("started", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **{k: v for k, v in previous.items() if k not in {"state", "reason", "started", "updated"}},
        **extra,
    }
    write_json(run_dir / "status.json", data)


def make_run_dir(results_root: Path, scenario_name: str, run_id: str) -> Path:
    run_dir = results_root / scenario_name / run_id
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / "logs").mkdir()
    (run_dir / "data").mkdir()
    write_status(run_dir, "running")
    return run_dir
