"""What a command does not import (issue 36): `mpvlab --version` builds no scenario model, and a run
whose CC has no state model never loads pandas/numpy (the warm-up thread leaves them alone and its
flows are named by mpvlab/results/flow_ids.py). Each check in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    cp = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
                        capture_output=True, text=True, timeout=60, check=True)
    return set(cp.stdout.split())


def test_version_loads_no_scenario_model() -> None:
    mods = _modules_after("import contextlib, io\nfrom mpvlab.cli import main\n"
                          "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
                          "    main(['--version'])")
    assert "mpvlab.cli" in mods
    assert not {"pydantic", "mpvlab.input.scenario", "mpvlab.core.ledger", "pandas"} & mods


def test_warmup_and_flow_names_without_a_state_model_load_no_pandas() -> None:
    mods = _modules_after("from mpvlab.runner import warmup\nwarmup.start(needed=False).join(10)\n"
                          "from mpvlab.results import flow_ids")
    assert "mpvlab.results.flow_ids" in mods
    assert not {"pandas", "numpy", "mpvlab.results.flows"} & mods
    mods = _modules_after("from mpvlab.runner import warmup\nwarmup.start(needed=True).join(60)")
    assert {"pandas", "mpvlab.results.flows"} <= mods


def test_the_session_loads_no_backend_until_a_run_of_its_kind() -> None:
    """kinds.py imports a backend's module when a run of its kind starts (issue 36: an emulated run
    paid ~15 ms of CPU for the shared and physical backends' imports)."""
    mods = _modules_after("import mpvlab.runner.session")
    assert not {"mpvlab.runner.emulated", "mpvlab.runner.shared", "mpvlab.runner.physical.backend",
                "mpvlab.runner.physical.video"} & mods
    mods = _modules_after("from mpvlab.runner import kinds\nfrom mpvlab.runner import emulated")
    assert "mpvlab.runner.emulated" in mods
    assert not {"mpvlab.runner.shared", "mpvlab.runner.physical.backend"} & mods
