"""`pip install .` gives everything Python that mpvlab imports (issue 49 item 3): every third-party
module the installed packages import is a declared dependency in pyproject.toml, or one of the two
Debian-only modules ./setup.sh provides, which `mpvlab run` names in one line when missing instead of
failing on a bare ModuleNotFoundError."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mpvlab.runner import system_parts
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
# what pyproject.toml installs: every product module is a file under mpvlab/
PACKAGE_DIRS = ["mpvlab"]
SYSTEM_ONLY = {m for m, _ in system_parts.MODULES}


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _declared() -> set[str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}


def test_every_imported_third_party_module_is_declared() -> None:
    imported: dict[str, set[str]] = {}
    for d in PACKAGE_DIRS:
        for f in (REPO / d).rglob("*.py"):
            if "vendor" in f.parts:
                continue
            for name in _top_level_imports(f):
                imported.setdefault(name, set()).add(str(f.relative_to(REPO)))
    third = {n: fs for n, fs in imported.items()
             if n not in sys.stdlib_module_names and n != "mpvlab"}
    dists = importlib.metadata.packages_distributions()
    declared = _declared()
    undeclared = {}
    for name, files in sorted(third.items()):
        if name in SYSTEM_ONLY:
            continue
        owners = {o.lower().replace("_", "-") for o in dists.get(name, [])}
        if not owners & declared:
            undeclared[name] = (sorted(owners), sorted(files)[:3])
    assert not undeclared, f"imported but not in pyproject.toml dependencies: {undeclared}"


def test_missing_system_parts_are_named_in_one_line(tmp_path: Path) -> None:
    # a checkout without the native builds: both programs named, and ./setup.sh
    msg = system_parts.problem("run", repo=tmp_path)
    assert msg is not None and "\n" not in msg
    assert "./setup.sh" in msg
    for rel, _ in system_parts.PROGRAMS:
        assert rel in msg
    # this checkout, after ./setup.sh: nothing missing
    assert system_parts.missing() == []


@pytest.mark.root
def test_run_without_mininet_says_what_and_setup_sh(tmp_path: Path) -> None:
    """The interpreter of a plain venv (no system site-packages) cannot import Debian's mininet or gi:
    `mpvlab run` exits 2 with the one line, no traceback. Simulated by this venv's interpreter with the
    system's dist-packages taken off sys.path, as in a fresh `pip install .` venv."""
    code = ("import sys; sys.path[:] = [p for p in sys.path if 'dist-packages' not in p]; "
            "sys.argv = ['mpvlab', 'run', 'scenarios/smoke.yaml', '--results', sys.argv[1]]; "
            "from mpvlab.cli import main; raise SystemExit(main())")
    env = {**os.environ, "COLUMNS": "400"}
    cp = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r")], capture_output=True, text=True,
                        cwd=REPO, env=env, timeout=120)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2, out
    assert "Traceback" not in out and "ModuleNotFoundError" not in out, out
    assert "Mininet's Python package" in out and "./setup.sh" in out, out
    assert not (tmp_path / "r").exists()
