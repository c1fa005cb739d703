"""The lint and type gates over the product code: `ruff check` and `mypy -p mpvlab`.

Every module's file path is its import path (mpvlab/core/units.py is `mpvlab.core.units`), so mypy
runs as anyone would run it on a fresh clone: `mypy -p mpvlab` in the checkout, with the settings of
pyproject.toml's [tool.mypy] and nothing else on its search path.

Run by hand: `.venv/bin/python tests/lintlab.py` (prints the errors of both, exits 1 if any).
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
PRODUCT = "mpvlab"      # the one package: every product module is a file under mpvlab/


@dataclass(frozen=True)
class GateResult:
    """What one tool said: its exit code and its output, paths relative to the repository."""
    returncode: int
    output: str


def run_mypy(repo: Path = REPO, cache_dir: Path | None = None) -> GateResult:
    venv_bin = Path(sys.executable).parent
    cmd = [str(venv_bin / "mypy"), "--config-file", str(repo / "pyproject.toml"),
           "--cache-dir", str(cache_dir or repo / ".mypy_cache"), "-p", PRODUCT]
    # MYPYPATH would add to the search path; the plain command is what is checked
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    return GateResult(done.returncode, done.stdout + done.stderr)


# ruff reads the tests and benches too (mypy does not): an unused import or a late-bound loop variable
# in a test is a test that may not check what it says. mininet/ holds the Mininet custom topologies.
RUFF_ALSO = ("tests", "bench", "mininet")


def run_ruff(repo: Path = REPO) -> GateResult:
    venv_bin = Path(sys.executable).parent
    cmd = [str(venv_bin / "ruff"), "check", "--no-cache", "--output-format", "concise", PRODUCT,
           *(d for d in RUFF_ALSO if (repo / d).is_dir())]
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)
    return GateResult(done.returncode, done.stdout + done.stderr)


def main() -> int:
    failed = 0
    for name, result in (("ruff", run_ruff()), ("mypy", run_mypy())):
        print(f"== {name} (exit {result.returncode})\n{result.output}")
        failed |= result.returncode != 0
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
