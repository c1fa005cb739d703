"""mpvlab/runner/liveness.py without a run: exit statuses in words, a zombie's status read without
reaping it, and a Watch that names the first component gone (ledger process or node) and leaves
alone what ends on its own (the player, bulk endpoints). Real processes, no namespaces."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mpvlab.core import proc
from mpvlab.core.errors import RunFailed
from mpvlab.runner import liveness


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _until_zombie(pid: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return
        time.sleep(0.01)
    pytest.fail(f"pid {pid} never became a zombie")


def test_describe_status() -> None:
    assert liveness.describe_status(-9) == "killed by SIGKILL"
    assert liveness.describe_status(-15) == "killed by SIGTERM"
    assert liveness.describe_status(3) == "exited with status 3"
    assert liveness.describe_status(None) == "status unknown"


@pytest.mark.parametrize("how,words", [("kill", "killed by SIGKILL"), ("exit", "exited with status 7")])
def test_zombie_status_is_read_without_reaping(how: str, words: str) -> None:
    p = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(60 if sys.argv[1] == 'kill' else 0);"
                          " sys.exit(7)", how])
    try:
        if how == "kill":
            p.send_signal(signal.SIGKILL)
        _until_zombie(p.pid)
        assert liveness.zombie_status(p.pid) == words
        assert liveness.zombie_status(p.pid) == words          # still there: nothing reaped it
    finally:
        p.kill()
        p.wait()
    assert p.returncode == (-9 if how == "kill" else 7)         # the Popen still gets the same status
    assert liveness.zombie_status(p.pid) is None                # reaped: no status left to read


@dataclass
class FakeNs:
    name: str
    present: bool = True

    def exists(self) -> bool:
        return self.present


@dataclass
class FakeMn:
    name: str
    shell: subprocess.Popen[bytes]


@dataclass
class FakeNode:
    mn: FakeMn
    ns: FakeNs

    @property
    def pid(self) -> int:
        return self.mn.shell.pid


@dataclass
class Procs:
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> subprocess.Popen[bytes]:
        p = _sleeper()
        self.started.append(p)
        return p

    def stop(self) -> None:
        for p in self.started:
            p.kill()
            p.wait()


@pytest.fixture
def procs() -> Procs:
    ps = Procs()
    yield ps  # type: ignore[misc]
    ps.stop()


def _entry(p: subprocess.Popen[bytes], label: str) -> dict[str, object]:
    ref = proc.ProcRef.of(p.pid, label)
    return {"pid": ref.pid, "start": ref.start, "label": label}


def test_watch_names_a_dead_ledger_process(procs: Procs) -> None:
    apache, player = procs.start(), procs.start()
    entries = [_entry(apache, "apache"), _entry(player, "player")]
    watch = liveness.Watch(time.monotonic_ns(), entries)
    watch.check()
    player.kill()                 # the player ends on its own: the workload reports it, not the watch
    _until_zombie(player.pid)
    watch.check()
    apache.send_signal(signal.SIGKILL)
    _until_zombie(apache.pid)
    with pytest.raises(RunFailed) as e:
        watch.check()
    msg = str(e.value)
    assert f"apache (pid {apache.pid}) killed by SIGKILL" in msg and "after run time zero" in msg, msg


def test_watch_sees_processes_registered_after_it_was_made(procs: Procs) -> None:
    entries: list[dict[str, object]] = []
    watch = liveness.Watch(time.monotonic_ns(), entries)
    late = procs.start()
    entries.append(_entry(late, "schedtrace"))     # the ledger's list grows as the run registers
    late.kill()
    _until_zombie(late.pid)
    with pytest.raises(RunFailed, match=r"schedtrace \(pid \d+\) killed by SIGKILL"):
        watch.check()


def test_watch_names_a_node_whose_shell_died_or_whose_namespace_went(procs: Procs) -> None:
    client = FakeNode(FakeMn("client", procs.start()), FakeNs("mpv-abc123-client"))
    server = FakeNode(FakeMn("server", procs.start()), FakeNs("mpv-abc123-server"))
    watch = liveness.Watch(time.monotonic_ns(), [], {"client": client, "server": server})
    watch.check()
    server.ns.present = False
    with pytest.raises(RunFailed) as e:
        watch.check()
    assert "server node's namespace mpv-abc123-server was deleted" in str(e.value), str(e.value)
    server.ns.present = True
    client.mn.shell.send_signal(signal.SIGKILL)
    client.mn.shell.wait()
    with pytest.raises(RunFailed) as e:
        watch.check()
    assert (f"client node's shell (pid {client.pid}, namespace mpv-abc123-client) killed by SIGKILL"
            in str(e.value)), str(e.value)


def test_which_labels_are_watched() -> None:
    for label in ("apache", "schedtrace", "qdiscstat wifi", "scheduler minrtt", "bbr-s loader"):
        assert liveness.watched(label), label
    for label in ("player", "player client0", "bulk sender", "bulk receiver", "iperf3 client bulk",
                  "voip sender probe", "netns member", "delayline wifi-down"):
        assert not liveness.watched(label), label


def test_a_death_before_run_time_zero_is_placed_before_it(procs: Procs) -> None:
    p = procs.start()
    watch = liveness.Watch(time.monotonic_ns() + 3_600 * 10**9, [_entry(p, "apache")])   # t0 an hour ahead
    watch.check()
    p.kill()
    _until_zombie(p.pid)
    with pytest.raises(RunFailed, match=r"between 3\d\d\d\.\d s and 3\d\d\d\.\d s before run time zero"):
        watch.check()


def test_dead_at_the_first_check_is_not_dated_after_it(procs: Procs) -> None:
    p = procs.start()
    entry = _entry(p, "apache")
    p.kill()
    _until_zombie(p.pid)
    watch = liveness.Watch(time.monotonic_ns(), [entry])
    with pytest.raises(RunFailed, match=r"killed by SIGKILL by \d+\.\d s after run time zero \(found at the first check\)"):
        watch.check()
