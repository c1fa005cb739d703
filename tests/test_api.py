"""The Python API (mpvlab/api.py) and the version: reachable from `import mpvlab` alone, cheap to import,
the same refusals as the command line, and one real run through `mpvlab.run(dict)`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
PY = sys.executable


def py(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_import_mpvlab_is_cheap_and_exposes_the_api() -> None:
    cp = py("import sys, mpvlab\n"
            "heavy = [m for m in ('pandas', 'pydantic', 'mininet', 'numpy', 'matplotlib') if m in sys.modules]\n"
            "print(mpvlab.__version__, heavy)\n"
            "print(callable(mpvlab.run), callable(mpvlab.sweep), callable(mpvlab.report), mpvlab.results.load.__name__)\n")
    assert cp.returncode == 0, cp.stderr
    first, second = cp.stdout.splitlines()
    assert first.endswith(" []"), first           # nothing heavy loaded by `import mpvlab`
    assert second == "True True True load"


def test_api_names_survive_importing_the_subpackages() -> None:
    """Importing the packages behind the API (reporting, sweeps, runner) leaves the API functions callable."""
    cp = py("import mpvlab.reporting, mpvlab.sweeps, mpvlab.runner.session, mpvlab\n"
            "from mpvlab.reporting import build_report\n"
            "from mpvlab.sweeps import expand\n"
            "print(callable(mpvlab.report), callable(mpvlab.sweep), callable(mpvlab.run))\n"
            "try:\n"
            "    mpvlab.report('/nonexistent-h34-dir')\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, e)\n")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == ["True True True", "InputError /nonexistent-h34-dir: no such results directory"]


def test_version_agrees_everywhere() -> None:
    from mpvlab.version import __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"] == __version__
    assert yaml.safe_load((REPO / "CITATION.cff").read_text())["version"] == __version__
    first_release = next(ln for ln in (REPO / "CHANGELOG.md").read_text().splitlines() if ln.startswith("## [") and ln != "## [Unreleased]")
    assert first_release.startswith(f"## [{__version__}]"), first_release


def test_version_command_prints_version_and_commit() -> None:
    from mpvlab.version import __version__
    cp = subprocess.run([PY, "-m", "mpvlab", "--version"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert cp.returncode == 0, cp.stderr
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert cp.stdout.startswith(f"mpvlab {__version__} (git {head[:12]}"), cp.stdout


def test_version_outside_a_git_checkout(tmp_path: Path) -> None:
    from mpvlab.version import __version__, describe
    assert describe(tmp_path) == f"mpvlab {__version__} (not a git checkout: commit unknown)"


def test_run_refuses_a_bad_dict_before_anything(tmp_path: Path) -> None:
    """Every problem listed, as `mpvlab validate` would, and no result folder created."""
    import mpvlab
    from mpvlab.core.errors import InputError
    sc = yaml.safe_load((REPO / "scenarios/smoke.yaml").read_text())
    sc["transport"]["schedular"] = "default"
    sc["paths"]["wifi"]["down"]["rate"] = "fast"
    with pytest.raises(InputError) as e:
        mpvlab.run(sc, results=tmp_path / "r")
    msg = str(e.value)
    assert msg.startswith("<scenario dict>: invalid scenario"), msg
    assert "schedular" in msg and "rate" in msg, msg
    assert not (tmp_path / "r").exists()
    with pytest.raises(InputError, match="scenario .a path or a dict.: int given"):
        mpvlab.run(42)   # type: ignore[arg-type]


@pytest.mark.netns
@pytest.mark.e2e
def test_run_a_dict_end_to_end(tmp_path: Path) -> None:
    """mpvlab.run(dict) makes a real run: the RunResult is the run directory's summary, and the run's
    tables load through the result."""
    import mpvlab
    sc = yaml.safe_load((REPO / "scenarios/smoke.yaml").read_text())
    sc["name"] = "api-dict"
    sc["video"]["duration"] = "6s"
    sc["fidelity"]["probe_duration"] = "2s"
    r = mpvlab.run(sc, results=tmp_path / "results")
    assert r.run_dir.parent == tmp_path / "results" / "api-dict" and r.run_id == r.run_dir.name
    assert r.summary == json.loads((r.run_dir / "summary.json").read_text())
    assert json.loads((r.run_dir / "status.json").read_text())["state"] == "complete"
    assert yaml.safe_load((r.run_dir / "scenario.yaml").read_text()) == sc     # the dict, as stored
    runs = r.results().runs
    assert list(runs["state"]) == ["complete"] and list(runs["run_id"]) == [r.run_id]
    # By default a run whose fidelity_ok is false is left out of the report (issue 43); kept on request.
    rep = mpvlab.report(tmp_path / "results", figures=False)
    assert rep.n_complete == int(r.summary["fidelity_ok"]) and rep.html.is_file()
    rep = mpvlab.report(tmp_path / "results", tmp_path / "rep-all", figures=False, include_warned=True)
    assert rep.n_complete == 1
