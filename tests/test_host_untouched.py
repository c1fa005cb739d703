"""Nothing the platform does may change host-wide settings: the root namespace's sysctls that shape
networking (and the ones Mininet's fixLimits() would raise) read the same before and after
`mpvlab run`, `mpvlab shell` and `mpvlab cleanup`. New namespaces copy tcp_rmem/tcp_wmem from the
root namespace, so a changed host would silently change every later run's buffers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mpvlab.core.paths import checkout_root
from rootsysctls import root_sysctls

REPO = checkout_root()


def mpvlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpvlab", *args], capture_output=True, text=True, timeout=240,
                          cwd=REPO)


@pytest.mark.netns
def test_shell_and_cleanup_leave_root_sysctls_alone(tmp_path: Path) -> None:
    before = root_sysctls()
    shell_dirs = set(Path(tempfile_dir()).glob("mpvlab-shell-*"))
    cmds = tmp_path / "cmds.mn"
    cmds.write_text("client ip -br addr\n")
    cp = mpvlab("shell", "scenarios/smoke.yaml", "--commands", str(cmds))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert root_sysctls() == before
    assert set(Path(tempfile_dir()).glob("mpvlab-shell-*")) == shell_dirs, "mpvlab shell left its folder behind"
    cp = mpvlab("cleanup")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert root_sysctls() == before


@pytest.mark.netns
@pytest.mark.e2e
def test_run_leaves_root_sysctls_alone(tmp_path: Path) -> None:
    before = root_sysctls()
    f = tmp_path / "bulk.yaml"
    f.write_text("name: bulk-host\npaths:\n  wifi: {down: {rate: 10mbit}}\n  lte: {down: {rate: 10mbit}}\n"
                 "workload: {kind: bulk, size: 2MB}\nfidelity: {probe: false}\n")
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "r"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert root_sysctls() == before


def tempfile_dir() -> str:
    import tempfile
    return tempfile.gettempdir()
