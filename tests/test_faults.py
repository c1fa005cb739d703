"""A component dying mid-run fails the run, names the component, and leaves nothing behind
(issue 15; issue 23 for the client node's shell and namespace).

One short real run per fault (8 s of video, no fidelity probe, BBR-S so its loader runs, minrtt so
the steering controller runs). Mid-playback the test kills one component with SIGKILL — its pid
taken from the run's own ledger (each process is registered there with a label, and its start time
is checked so a recycled pid is never hit) — or, for the client node, its Mininet shell (found
among the processes of the run's client namespace, a child of the run's owner) or the namespace's
name. The run must end `failed`, its reason naming the component and how it ended, with no
namespace, ledger entry or process of the run left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpvlab.core import ledger, netns, proc
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
pytestmark = [pytest.mark.netns, pytest.mark.e2e]

SCENARIO = """\
name: fault-{name}
seed: 1
paths:
  wifi: {{down: {{rate: 5mbit, buffer: 100KB, delay: 10ms}}}}
  lte: {{down: {{rate: 5mbit, buffer: 100KB, delay: 20ms}}}}
transport: {{cc: bbr-s, scheduler: minrtt}}
video: {{duration: 8s, bitrate: 1mbit, width: 640, height: 360}}
player: {{decode: false}}
fidelity: {{probe: false}}
"""
# Generous: a run of 8 s of video takes ~14 s here; a busy host may triple that.
RUN_TIMEOUT_S = 180
# How far into playback the fault is injected (the video lasts 8 s, so the run is mid-playback).
FAULT_AFTER_PLAYER_S = 2.0

# fault id -> (ledger label to kill, or a node fault), words the failure reason must contain
FAULTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "apache": ("apache", ("apache", "SIGKILL")),
    "player": ("player", ("player", "SIGKILL")),
    "schedtrace": ("schedtrace", ("schedtrace", "SIGKILL")),
    "qdiscstat": ("qdiscstat wifi", ("qdiscstat wifi", "SIGKILL")),
    "steering": ("scheduler minrtt", ("scheduler minrtt", "SIGKILL")),
    "bbrs-loader": ("bbr-s loader", ("bbr-s loader", "SIGKILL")),
    "client-shell": ("<client shell>", ("client node", "SIGKILL", "after run time zero")),
    "client-netns": ("<client netns>", ("client node", "namespace", "deleted", "after run time zero")),
}


def _ledger(results: Path) -> ledger.Ledger | None:
    """Our run's ledger, found by the run id its result directory is named by (the run uses the
    default runtime directory: Apache serves from it, and www-data cannot enter a pytest tmp dir)."""
    dirs = [d for d in results.glob("fault-*/*") if d.is_dir()] if results.is_dir() else []
    return ledger.load(ledger.LEDGER_DIR / f"{dirs[0].name}.json") if len(dirs) == 1 else None


def _wait_for_player(results: Path, run: subprocess.Popen[str]) -> ledger.Ledger:
    """The run's ledger once its player has started playing: the player is staged before t0 and
    released at t0, after every collector started, so then every component is running."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        led = _ledger(results)
        events = list(results.glob("fault-*/*/logs/player-events.jsonl"))
        started = len(events) == 1 and '"type":"start"' in events[0].read_text()
        if led is not None and started and any(p["label"] == "player" for p in led.procs):
            return led
        if run.poll() is not None:
            pytest.fail(f"the run ended before its player started:\n{run.stdout.read() if run.stdout else ''}")
        time.sleep(0.1)
    pytest.fail("the run's player never started")


def _client_shell(led: ledger.Ledger) -> proc.ProcRef:
    """The Mininet shell of the run's client node: a process of the run's client namespace whose
    parent is the run's owner (the runner)."""
    name = next(n for n in led.netns if n.endswith("-client"))
    for pid in netns.pids_in_netns(os.stat(netns.NETNS_DIR / name).st_ino):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if ppid == led.owner_pid and b"mininet:client" in cmd:
            return proc.ProcRef.of(pid, "client shell")
    pytest.fail(f"no Mininet shell of {name} among its processes")


def _inject(fault: str, target: str, led: ledger.Ledger) -> list[proc.ProcRef]:
    """Kill the component; returns every process the run had (to check none is left)."""
    refs = [proc.ProcRef(int(p["pid"]), int(p["start"]), str(p["label"])) for p in led.procs]
    if target == "<client netns>":
        name = next(n for n in led.netns if n.endswith("-client"))
        refs.append(_client_shell(led))
        subprocess.run(["ip", "netns", "delete", name], check=True)    # our own run's namespace
        return refs
    if target == "<client shell>":
        victim = _client_shell(led)
        refs.append(victim)
    else:
        (victim,) = [r for r in refs if r.label == target]
    assert victim.alive(), f"{target} (pid {victim.pid}) was not running mid-playback"
    os.kill(victim.pid, signal.SIGKILL)
    return refs


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Encode the video once, before any run (cached across runs and test sessions)."""
    d = tmp_path_factory.mktemp("prep")
    f = d / "p.yaml"
    f.write_text(SCENARIO.format(name="prep"))
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "prepare", str(f)], capture_output=True, text=True,
                        cwd=REPO, timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr


@pytest.mark.parametrize("fault", list(FAULTS))
def test_component_death_fails_the_run_and_names_it(fault: str, prepared: None, tmp_path: Path) -> None:
    target, words = FAULTS[fault]
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO.format(name=fault))
    run = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp_path / "results")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        led = _wait_for_player(tmp_path / "results", run)
        time.sleep(FAULT_AFTER_PLAYER_S)
        assert run.poll() is None, "the run ended before the fault"
        refs = _inject(fault, target, led)
        out, _ = run.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, f"exit {run.returncode}\n{out}"
    assert "Traceback" not in out, out
    (run_dir,) = [d for d in (tmp_path / "results" / f"fault-{fault}").iterdir() if d.is_dir()]
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed", status
    print(f"{fault}: {status['reason']}")     # shown with -s: what a user reads
    for w in words:
        assert w in status["reason"], f"{w!r} not in the reason: {status['reason']}"
    assert not (run_dir / "logs" / "runner-traceback.txt").exists(), (run_dir / "logs" / "runner-traceback.txt").read_text()
    # nothing left: no namespace of the run, no ledger entry, no process it started
    assert not [n for n in netns.list_netns() if led.run_id in n], netns.list_netns()
    assert not (ledger.LEDGER_DIR / f"{led.run_id}.json").exists()
    assert not (ledger.OWNER_LOCK_DIR / f"{led.run_id}.lock").exists()
    left = [f"{r.label} (pid {r.pid})" for r in refs if r.alive()]
    assert not left, left


# --- issue 33: the rtp workload's sender and receiver die like every other component: named in words
# with their pid and when, relative to run time zero ---------------------------------------------------

RTP_SCENARIO = """\
name: fault-{name}
seed: 1
topology: {{kind: dumbbell}}
paths:
  link: {{down: {{rate: 1mbit, buffer: 15KB, delay: 20ms}}, up: {{delay: 20ms}}}}
workload: {{kind: rtp, controller: gcc, duration: 8s, playout_deadline: 400ms}}
fidelity: {{probe: false}}
"""


def _wait_for_rtp_stream(results: Path, run: subprocess.Popen[str]) -> ledger.Ledger:
    """The run's ledger once sender, encoder and receiver are registered (the sender registers last)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        led = _ledger(results)
        if led is not None and {"rtp sender", "rtp receiver", "rtp encoder"} <= {str(p["label"]) for p in led.procs}:
            return led
        if run.poll() is not None:
            pytest.fail(f"the run ended before its stream started:\n{run.stdout.read() if run.stdout else ''}")
        time.sleep(0.1)
    pytest.fail("the run's rtp stream never started")


@pytest.mark.parametrize("side", ["sender", "receiver"])
def test_rtp_component_death_names_pid_and_time(side: str, tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(RTP_SCENARIO.format(name=f"rtp-{side}"))
    run = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp_path / "results")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        led = _wait_for_rtp_stream(tmp_path / "results", run)
        time.sleep(FAULT_AFTER_PLAYER_S)      # mid-stream (8 s of media)
        assert run.poll() is None, "the run ended before the fault"
        refs = _inject("rtp", f"rtp {side}", led)
        (victim,) = [r for r in refs if r.label == f"rtp {side}"]
        out, _ = run.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, f"exit {run.returncode}\n{out}"
    assert "Traceback" not in out, out
    (run_dir,) = [d for d in (tmp_path / "results" / f"fault-rtp-{side}").iterdir() if d.is_dir()]
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed", status
    reason = status["reason"]
    assert f"rtp {side} (pid {victim.pid}) killed by SIGKILL" in reason, reason
    assert "run time zero" in reason, reason
    assert not [n for n in netns.list_netns() if led.run_id in n], netns.list_netns()
    assert not (ledger.LEDGER_DIR / f"{led.run_id}.json").exists()
    left = [f"{r.label} (pid {r.pid})" for r in refs if r.alive()]
    assert not left, left
