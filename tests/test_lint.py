"""The gates in CI, each reporting 0 errors: `ruff check` and `mypy -p mpvlab` over every product package,
gofmt and go vet over rtp/, shellcheck over every shell script, `reuse lint` (tests/lintlab.py GATES);
.pre-commit-config.yaml runs the same gates before a commit, and a test here keeps the two lists equal.
A new gate goes into GATES: CI then runs it and the pre-commit check asks for its hook.

The rule sets and their reasons are in pyproject.toml ([tool.ruff], [tool.mypy]); mypy runs as plain
`mypy -p mpvlab` in the checkout (tests/lintlab.py). A failure prints the tools' own messages, with
repository paths, so the fix can start from the test log. Also here: every C Makefile builds with -Werror.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import lintlab
from lintlab import REPO, run_mypy, run_ruff


# Not `cpu` (issue 44): mypy and ruff are CPU-bound in one process and assert no bound a busy host can
# move (their timeouts are minutes). Only go vet is marked: the Go toolchain compiles on every core.


def test_every_product_module_is_under_mpvlab() -> None:
    """`-p mpvlab` and `ruff check mpvlab` see every product module: no Python package outside
    mpvlab/ (the top-level component folders hold C, BPF, Makefiles, traces and pages)."""
    outside = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("*/__init__.py")
                     if p.parent.name != "mpvlab")
    assert outside == [], f"Python packages outside mpvlab/, which the gates would not check: {outside}"


def _scratch_repo(root: Path, module: str) -> Path:
    """A repository with this one's pyproject.toml and an mpvlab/ holding `module` as _probe.py: the
    gates run on it exactly as on the real one."""
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    (root / "mpvlab").mkdir()
    (root / "mpvlab" / "__init__.py").write_text("")
    (root / "mpvlab" / "_probe.py").write_text(module)
    return root


@pytest.mark.parametrize("gate", [pytest.param(g, marks=[pytest.mark.cpu] if g == "go-vet" else [])
                                  for g in lintlab.GATES])
def test_gate_reports_no_error(gate: str) -> None:
    # repo/.mypy_cache makes mypy's reruns fast; CI starts without one (cold: ~15 s on this 2-core machine)
    result = lintlab.GATES[gate]()
    assert result.returncode == 0, f"{gate} found errors:\n{result.output}"
    if gate == "mypy":
        assert "Success: no issues found" in result.output


@pytest.mark.parametrize("gate", ["ruff", "mypy"])
def test_gate_catches_an_error(gate: str, tmp_path: Path) -> None:
    """The gates can fail: a module with an unused import and a wrong return type, in a scratch
    repository with this one's settings, is reported by file, line and rule."""
    repo = _scratch_repo(tmp_path, "from __future__ import annotations\n\nimport os\n\n\n"
                                   "def half(n: int) -> str:\n    return n / 2\n")
    result = run_ruff(repo) if gate == "ruff" else run_mypy(repo, cache_dir=tmp_path / "cache")
    assert result.returncode != 0
    if gate == "ruff":
        assert "mpvlab/_probe.py:3:8: F401" in result.output, result.output
    else:
        assert "mpvlab/_probe.py:7: error: Incompatible return value type" in result.output, result.output


C_COMPILERS = {"cc", "gcc", "clang"}


def _compile_commands(makefile_dir: Path) -> list[list[str]]:
    """The C compiler lines `make` would run to build everything in `makefile_dir` from scratch (dry run:
    -n prints and runs nothing, -B as if no target existed). CFLAGS from the environment, as a user or a
    packager may set it, must not take -Werror away."""
    env = {**os.environ, "CFLAGS": "-O1"}
    done = subprocess.run(["make", "-s", "-n", "-B", "-C", str(makefile_dir)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"make -n in {makefile_dir}: {done.stderr}"
    lines = [shlex.split(line) for line in done.stdout.splitlines() if line.strip()]
    return [words for words in lines if Path(words[0]).name in C_COMPILERS]


def test_every_c_makefile_turns_warnings_into_errors() -> None:
    """Every compiler line of every Makefile that builds C (BPF objects included) carries -Werror, so a
    new warning fails setup.sh instead of scrolling past. A Makefile beside C sources must compile some."""
    listed = subprocess.run(["git", "ls-files", "*Makefile"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    checked = 0
    for rel in listed:
        folder = (REPO / rel).parent
        commands = _compile_commands(folder)
        if any(folder.glob("*.c")) or any(folder.glob("src/*.c")):
            assert commands, f"{rel}: C sources beside it but no compiler line in `make -n`"
        for words in commands:
            assert "-Werror" in words, f"{rel}: compiles without -Werror: {shlex.join(words)}"
        checked += bool(commands)
    assert checked >= 7, f"only {checked} Makefiles compile C: the dry run found less than the repository has"


def _scratch_git_repo(root: Path) -> Path:
    """A git repository holding, unformatted or unsafe, one file of each kind the non-Python gates read:
    a shell script with an unquoted expansion, a Go module with a mis-typed Printf and an unformatted
    file, and no licensing information at all."""
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)
    (root / "tool").write_text("#!/bin/sh -e\necho $1\n")
    (root / "tool.py").write_text("#!/usr/bin/env python3\nprint(1)\n")
    (root / "rtp").mkdir()
    (root / "rtp" / "go.mod").write_text("module example.org/probe\n\ngo 1.21\n")
    (root / "rtp" / "main.go").write_text('package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Printf("%d\\n", "s")\n}\n')
    (root / "rtp" / "unformatted.go").write_text("package main\nfunc f(){}\n")
    return root


@pytest.mark.parametrize("gate, says", [
    pytest.param("shellcheck", "tool:2:6: note: Double quote to prevent globbing and word splitting. [SC2086]",
                 id="shellcheck"),
    pytest.param("gofmt", "rtp/unformatted.go", id="gofmt"),
    pytest.param("go-vet", 'main.go:6:14: fmt.Printf format %d has arg "s" of wrong type string', id="go-vet"),
    pytest.param("reuse", "rtp/main.go", id="reuse"),
])
def test_other_gates_catch_an_error(gate: str, says: str, tmp_path: Path) -> None:
    """The gates beyond Python can fail too, and name the file (and line) at fault."""
    repo = _scratch_git_repo(tmp_path)
    run = {"shellcheck": lintlab.run_shellcheck, "gofmt": lintlab.run_gofmt, "go-vet": lintlab.run_go_vet,
           "reuse": lintlab.run_reuse}[gate]
    result = run(repo)
    assert result.returncode != 0 and says in result.output, result.output
    if gate == "shellcheck":
        assert lintlab.shell_scripts(repo) == ["tool"]     # found by its #! line; the Python one is not shell


def _precommit_hooks() -> list[dict[str, object]]:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    assert [r["repo"] for r in config["repos"]] == ["local"], "hooks from elsewhere would be fetched at commit time"
    hooks: list[dict[str, object]] = config["repos"][0]["hooks"]
    return hooks


def test_precommit_runs_exactly_the_ci_gates() -> None:
    """.pre-commit-config.yaml has one hook per CI gate (GATES, which test_gate_reports_no_error runs),
    none more, each calling that gate's function from the checkout's .venv over the whole checkout."""
    hooks = _precommit_hooks()
    assert [h["id"] for h in hooks] == list(lintlab.GATES)
    for hook in hooks:
        assert hook["entry"] == f".venv/bin/python tests/lintlab.py {hook['id']}", hook
        assert hook["language"] == "system" and hook["pass_filenames"] is False, hook


def test_precommit_config_is_valid_and_a_hook_runs(tmp_path: Path) -> None:
    """pre-commit (pinned in requirements.txt) accepts the file and runs a hook with no network: the
    shellcheck hook passes on this checkout as the shellcheck gate does."""
    precommit = str(Path(sys.executable).with_name("pre-commit"))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "home")}
    done = subprocess.run([precommit, "validate-config", ".pre-commit-config.yaml"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([precommit, "run", "--all-files", "shellcheck"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Passed" in done.stdout, done.stdout + done.stderr
