"""The gates in CI: `ruff check` and `mypy -p mpvlab` over every product package report 0 errors.

The rule sets and their reasons are in pyproject.toml ([tool.ruff], [tool.mypy]); mypy runs as plain
`mypy -p mpvlab` in the checkout (tests/lintlab.py). A failure prints the tools' own messages, with
repository paths, so the fix can start from the test log.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lintlab import REPO, run_mypy, run_ruff


pytestmark = pytest.mark.cpu   # cpu: CPU-bound (mypy over the product)


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


def test_ruff_reports_no_error() -> None:
    result = run_ruff()
    assert result.returncode == 0, f"ruff check found errors (rules: pyproject.toml [tool.ruff]):\n{result.output}"


def test_mypy_reports_no_error() -> None:
    # repo/.mypy_cache makes reruns fast; CI starts without one (cold: ~15 s on this 2-core machine)
    result = run_mypy()
    assert result.returncode == 0, f"mypy found errors (settings: pyproject.toml [tool.mypy]):\n{result.output}"
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
