"""A relative results root is made absolute before a run starts: the run writes paths under it into
configs other programs read from their own working directory (apache2 -f resolves against /etc/apache2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mpvlab.runner.context import RunOptions


def test_relative_results_root_becomes_absolute_against_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    opts = RunOptions(results_root=Path("results"))
    assert opts.results_root.is_absolute()
    assert opts.results_root == Path(os.getcwd()) / "results"


def test_absolute_results_root_is_kept(tmp_path: Path) -> None:
    assert RunOptions(results_root=tmp_path / "r").results_root == tmp_path / "r"
