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

import contextlib
import errno
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

STATES = ("running", "complete", "failed")


def write_json(path: Path, data: Any) -> None:
    """Atomic: a reader never sees half a file."""
    write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_text(path: Path, text: str) -> None:
    """Atomic (a fresh file renamed over the old one); on failure (a full disk) the fresh file is
    removed, so a failed write takes no space and leaves no stray file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; results are for every user of the machine to read
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _overwrite_in_place(path: Path, text: str) -> None:
    """The last resort for status.json on a full filesystem: truncating the old file frees its block,
    which the new (as small) text then reuses. Not atomic, so only used when the atomic write failed."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "w") as f:
        f.write(text)


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
    try:
        write_json(run_dir / "status.json", data)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT) or not (run_dir / "status.json").is_file():
            raise
        _overwrite_in_place(run_dir / "status.json", json.dumps(data, indent=2, default=str) + "\n")


def make_run_dir(results_root: Path, scenario_name: str, run_id: str) -> Path:
    run_dir = results_root / scenario_name / run_id
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / "logs").mkdir()
    (run_dir / "data").mkdir()
    write_status(run_dir, "running")
    return run_dir


def missing_folders(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist, outermost first (what mkdir(parents=True) makes)."""
    out: list[Path] = []
    p = path
    while not p.exists() and not p.is_symlink() and p != p.parent:
        out.append(p)
        p = p.parent
    return out[::-1]


def results_root_problem(root: Path) -> str | None:
    """Why --results cannot hold result directories (a regular file, a folder this user cannot write,
    a read-only or pseudo file system), checked before a run or sweep creates anything; None if fine.
    The folders it makes to find out are removed again: the run makes them itself and removes them if
    it cannot start (issue 45: a run refused on a full disk left an empty --results folder)."""
    made = missing_folders(root)
    try:
        return _root_problem(root)
    finally:
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()


# Two runs started at once into a new --results: each check removes the folders it made, so one
# check can remove the folder between the other's mkdir and its write probe (measured in CI: "cannot
# write in it (no such file or directory)" for one of two concurrent runs). The folder is made again.
_VANISHED_RETRIES = 20


def _root_problem(root: Path) -> str | None:
    for _attempt in range(_VANISHED_RETRIES):
        try:
            root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            # also raised when another check made the folder and removed it again inside this mkdir
            if not root.exists():
                continue
            if not root.is_dir():
                return f"--results {root}: is not a folder; give a folder for the result directories"
        except FileNotFoundError:
            continue        # a parent made by another check was removed under this mkdir
        except OSError as e:
            return (f"--results {root}: cannot create it ({(e.strerror or 'error').lower()}); give a folder this "
                    "user can write")
        if not root.is_dir():
            if not root.exists():
                continue
            return f"--results {root}: is not a folder; give a folder for the result directories"
        probe = root / f".mpvlab-write-check-{os.getpid()}"
        try:        # os.access says yes to root even on a read-only file system: try it
            probe.mkdir()
            probe.rmdir()
        except FileNotFoundError:
            continue        # removed by another run's check after the mkdir above
        except OSError as e:
            return (f"--results {root}: cannot write in it ({(e.strerror or 'error').lower()}); give a folder this "
                    "user can write")
        return None
    return (f"--results {root}: it was removed {_VANISHED_RETRIES} times while this run checked it (another "
            "process removing it?); give a folder that stays")


# A run made by a sweep starts its scenario.yaml with this tag and a JSON object (sweep, run key,
# trial, seed, attempt token): written by the sweep (mpvlab/input/sweep.py), read by the results.
HEADER_TAG = "# mpvlab-sweep: "


def read_header(scenario_text: str) -> dict[str, Any] | None:
    """The `# mpvlab-sweep:` header of a run's scenario.yaml, or None for a run not made by a sweep."""
    for line in scenario_text.splitlines()[:5]:
        if line.startswith(HEADER_TAG):
            try:
                data: dict[str, Any] = json.loads(line[len(HEADER_TAG):])
                return data
            except ValueError:
                return None
    return None
