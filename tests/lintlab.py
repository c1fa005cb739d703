"""The gates CI runs (GATES below, each run by tests/test_lint.py) and .pre-commit-config.yaml runs
before a commit: `ruff check`, `mypy -p mpvlab`, gofmt and go vet over rtp/, shellcheck over every shell
script, `reuse lint`. One function per gate, here, so both run the same command.

Every module's file path is its import path (mpvlab/core/units.py is `mpvlab.core.units`), so mypy
runs as anyone would run it on a fresh clone: `mypy -p mpvlab` in the checkout, with the settings of
pyproject.toml's [tool.mypy] and nothing else on its search path.

Run by hand: `.venv/bin/python tests/lintlab.py [GATE ...]` (every gate when none is named; prints
each one's errors, exits 1 if any).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

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


def go_binary() -> Path:
    """The Go that builds rtp/ (rtp/Makefile: the one on PATH, else /usr/local/go/bin/go); gofmt beside it."""
    found = shutil.which("go")
    return Path(found) if found else Path("/usr/local/go/bin/go")


def _go_env() -> dict[str, str]:
    # as rtp/Makefile builds: the machine's own Go, never a downloaded toolchain; go.mod/go.sum unchanged
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}


def run_gofmt(repo: Path = REPO) -> GateResult:
    """`gofmt -l` exits 0 even when it lists files: a listed file is the failure."""
    gofmt = go_binary().with_name("gofmt")
    if not gofmt.is_file():
        return GateResult(1, f"no gofmt at {gofmt} (beside the Go rtp/Makefile builds with)")
    done = subprocess.run([str(gofmt), "-l", "rtp"], cwd=repo, capture_output=True, text=True, timeout=120)
    listed = done.stdout.strip()
    out = f"not gofmt-formatted (run {gofmt} -w on them):\n{listed}" if listed else ""
    return GateResult(done.returncode or int(bool(listed)), out + done.stderr)


def run_go_vet(repo: Path = REPO) -> GateResult:
    if not go_binary().is_file():
        return GateResult(1, f"no Go at {go_binary()} (rtp/Makefile builds with the machine's own Go)")
    done = subprocess.run([str(go_binary()), "vet", "./..."], cwd=repo / "rtp", env=_go_env(),
                          capture_output=True, text=True, timeout=600)
    return GateResult(done.returncode, done.stdout + done.stderr)


def shell_scripts(repo: Path = REPO) -> list[str]:
    """Every shell script git knows of (tracked, or new and not ignored): *.sh, or a #! line naming sh
    or bash (.ci/run)."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=repo, capture_output=True,
                           text=True, check=True, timeout=60).stdout.splitlines()
    scripts = []
    for name in sorted(set(names)):
        path = repo / name
        if not path.is_file() or path.is_symlink():
            continue
        if name.endswith(".sh"):
            scripts.append(name)
            continue
        with open(path, "rb") as f:
            first = f.readline(128)
        if _interpreter(first) in ("sh", "bash"):
            scripts.append(name)
    return scripts


def _interpreter(first_line: bytes) -> str:
    """The program a #! line runs: `#!/bin/sh -e` -> sh, `#!/usr/bin/env bash` -> bash; "" if none."""
    words = first_line[2:].decode(errors="replace").split() if first_line.startswith(b"#!") else []
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return Path(words[0]).name if words else ""


def run_shellcheck(repo: Path = REPO) -> GateResult:
    """All of shellcheck's findings, style included; a deliberate exception is a `# shellcheck disable=`
    line in the script that says why."""
    if shutil.which("shellcheck") is None:
        return GateResult(1, "shellcheck is not installed: ./setup.sh installs it (Debian package shellcheck)")
    scripts = shell_scripts(repo)
    if not scripts:
        return GateResult(1, "no shell script found: the gate would check nothing")
    done = subprocess.run(["shellcheck", "--format", "gcc", *scripts], cwd=repo, capture_output=True,
                          text=True, timeout=300)
    return GateResult(done.returncode, done.stdout + done.stderr)


def run_reuse(repo: Path = REPO) -> GateResult:
    """`reuse lint`: every file has copyright and licence information, every licence its text."""
    reuse = Path(sys.executable).with_name("reuse")
    done = subprocess.run([str(reuse), "--root", str(repo), "lint"], capture_output=True, text=True, timeout=300)
    return GateResult(done.returncode, done.stdout[-3000:] + done.stderr)


# Every gate CI runs (tests/test_lint.py runs each) and .pre-commit-config.yaml runs before a commit
# (tests/test_lint.py checks that its hooks are exactly these, each calling this file).
GATES: dict[str, Callable[[], GateResult]] = {
    "ruff": run_ruff, "mypy": run_mypy, "gofmt": run_gofmt, "go-vet": run_go_vet,
    "shellcheck": run_shellcheck, "reuse": run_reuse,
}


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in GATES]
    if unknown:
        print(f"unknown gate(s) {unknown}; the gates: {', '.join(GATES)}", file=sys.stderr)
        return 2
    failed = 0
    for name in argv or list(GATES):
        result = GATES[name]()
        print(f"== {name} (exit {result.returncode})\n{result.output}")
        failed |= result.returncode != 0
    return int(failed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
