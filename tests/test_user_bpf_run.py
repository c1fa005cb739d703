"""A user's own BPF congestion control in a scenario (`transport.cc: {bpf: FILE, params: {...}}`):
the object inside the scenario's folder is loaded for the run under a run-scoped name, carries the
transfer, and is gone from the kernel when the run ends; a bad object path is refused at validate."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
EXAMPLE = REPO / "cc" / "build" / "examples" / "reno_mini.bpf.o"

SCENARIO = """\
name: own-bpf-cc
seed: 1
topology: {{kind: dumbbell}}
paths:
  wan:
    down: {{rate: 10mbit, buffer: 100KB, delay: 5ms}}
    up: {{delay: 5ms}}
transport:
  cc: {{bpf: {obj}, params: {{beta_pct: 70}}}}
workload: {{kind: bulk, duration: 3s}}
fidelity: {{probe: false}}
"""


def _mpvlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpvlab", *args], capture_output=True, text=True, timeout=240,
                          cwd=REPO)


def test_bad_object_paths_are_refused_at_validate(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO.format(obj="nope.bpf.o"))
    cp = _mpvlab("validate", str(f))
    assert cp.returncode != 0 and "transport.cc.bpf:" in cp.stdout and "does not exist" in cp.stdout, cp.stdout
    f.write_text(SCENARIO.format(obj="../x.bpf.o"))
    cp = _mpvlab("validate", str(f))
    assert cp.returncode != 0 and "no '..'" in cp.stdout, cp.stdout


@pytest.mark.netns
@pytest.mark.e2e
def test_own_object_carries_the_run_and_is_removed(tmp_path: Path) -> None:
    if not EXAMPLE.exists():
        pytest.fail(f"{EXAMPLE} missing: ./setup.sh builds it")
    shutil.copy(EXAMPLE, tmp_path / "reno_mini.bpf.o")
    f = tmp_path / "own.yaml"
    f.write_text(SCENARIO.format(obj="reno_mini.bpf.o"))
    cp = _mpvlab("run", str(f), "--results", str(tmp_path / "results"))
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [d for d in (tmp_path / "results" / "own-bpf-cc").iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    name = f"bpf_{run_dir.name}"
    assert s["bulk"]["cc_seen"] == name and s["bulk"]["bytes_sent"] == s["bulk"]["bytes_received"] > 0
    resolved = (run_dir / "resolved.yaml").read_text()
    assert "beta_pct: 70" in resolved and "cc: bpf" in resolved
    # Unregistered with its struct_ops link when the loader exits; the kernel frees it from an RCU
    # callback, so allow it a few seconds.
    deadline = time.monotonic() + 5
    while name in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split():
        assert time.monotonic() < deadline, f"{name} still registered after the run"
        time.sleep(0.1)
