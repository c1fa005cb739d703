"""Runs never harm each other: a run's orphan detection asks the owner lock of each namespace's run
(mpvlab/core/ledger.py: OWNER_LOCK_DIR), never its own runtime directory, so runs configured with different
runtime directories (two checkouts, two users, a typo) run side by side; a run whose runtime
directory is unusable fails with a message and touches nothing of the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpvlab.core.paths import checkout_root

REPO = checkout_root()

BULK = """\
name: {name}
paths:
  wifi: {{down: {{rate: 10mbit, delay: 5ms}}, up: {{delay: 5ms}}}}
  lte: {{down: {{rate: 10mbit, delay: 5ms}}, up: {{delay: 5ms}}}}
workload: {{kind: bulk, duration: {seconds}s}}
fidelity: {{probe: false}}
"""


def _start(tmp: Path, name: str, seconds: float, runtime: Path) -> subprocess.Popen[str]:
    f = tmp / f"{name}.yaml"
    f.write_text(BULK.format(name=name, seconds=seconds))
    env = {**os.environ, "MPVLAB_RUNTIME_DIR": str(runtime)}
    return subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp / "results")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)


def _summary(tmp: Path, name: str) -> dict:  # type: ignore[type-arg]
    (d,) = [d for d in (tmp / "results" / name).iterdir() if d.is_dir()]
    return json.loads((d / "summary.json").read_text())


@pytest.mark.netns
@pytest.mark.e2e
def test_runs_with_different_runtime_directories_both_complete(tmp_path: Path) -> None:
    first = _start(tmp_path, "iso-a", 8, tmp_path / "runtime-a")
    time.sleep(4)     # A's namespaces exist; B's start-up reaps what it takes for orphans
    second = _start(tmp_path, "iso-b", 2, tmp_path / "runtime-b")
    out_b, _ = second.communicate(timeout=180)
    out_a, _ = first.communicate(timeout=180)
    assert second.returncode == 0, out_b
    assert first.returncode == 0, out_a
    for name, seconds in (("iso-a", 8), ("iso-b", 2)):
        b = _summary(tmp_path, name)["bulk"]
        assert b["bytes_received"] == b["bytes_sent"] > 0
        # sent for `seconds` at up to 20 Mbit/s: a first-principles ceiling on what can have arrived
        assert b["bytes_received"] <= 20e6 / 8 * (seconds + 1)


@pytest.mark.netns
def test_unusable_runtime_directory_fails_cleanly_and_spares_a_live_run(tmp_path: Path) -> None:
    live = _start(tmp_path, "iso-live", 6, tmp_path / "runtime-live")
    time.sleep(3)
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("x")
    f = tmp_path / "bad.yaml"
    f.write_text(BULK.format(name="iso-bad", seconds=1))
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp_path / "results")],
                        capture_output=True, text=True, timeout=120, cwd=REPO,
                        env={**os.environ, "MPVLAB_RUNTIME_DIR": str(not_a_dir)})
    assert cp.returncode != 0
    assert "Traceback" not in cp.stdout + cp.stderr, cp.stdout + cp.stderr
    assert "runtime" in (cp.stdout + cp.stderr).lower() or "ledger" in (cp.stdout + cp.stderr).lower(), cp.stdout
    out, _ = live.communicate(timeout=120)
    assert live.returncode == 0, out


@pytest.mark.netns
def test_orphan_namespaces_of_a_dead_run_go_together_and_a_live_runs_stay() -> None:
    """reap_stale: the namespaces of a run whose owner lock nobody holds (its runner died, no ledger
    left) are deleted in one batch, each named in what it returns; a live run's (lock held) stay."""
    from mpvlab.core import ledger, naming, netns

    dead, live = naming.new_run_id("zq"), naming.new_run_id("zq")
    ledger.OWNER_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    (ledger.OWNER_LOCK_DIR / f"{dead}.lock").write_text("0\n")          # a lock file nobody holds: dead
    fd = ledger.hold_owner_lock(live)
    names = {rid: [naming.netns_name(rid, r) for r in ("client", "server", "router")] for rid in (dead, live)}
    try:
        for n in names[dead] + names[live]:
            subprocess.run(["ip", "netns", "add", n], check=True)
        removed = ledger.reap_stale()
        assert {f"orphan netns {n}" for n in names[dead]} <= set(removed), removed
        left = set(netns.list_netns())
        assert not left & set(names[dead]) and set(names[live]) <= left
    finally:
        os.close(fd)
        for n in names[dead] + names[live]:
            subprocess.run(["ip", "netns", "delete", n], capture_output=True)
        for rid in (dead, live):
            (ledger.OWNER_LOCK_DIR / f"{rid}.lock").unlink(missing_ok=True)
