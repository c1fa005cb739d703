"""ECN marking at a shaped link (mpvlab/links/ecn.py, links/ecnmark/): the virtual queue marks nothing below
the link rate, marks ECT packets (and only those) above it, the marks reach the receiver as CE, the
scenario field is validated strictly, and a run leaves no program, map or filter behind — also when
the loader is SIGKILLed (the filter holds the program until the run's namespace goes).

Scripted flows: iperf3 UDP with the ECN bits set through IP_TOS (the kernel keeps them for UDP), on
the tbf dumbbell (mpvlab/testbed/dumbbell.py, 25 Mbit/s). The receiver counts what arrived per ECN
codepoint with iptables `-m ecn` rules in its own namespace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpvlab.core.netns import Netns
from mpvlab.links import ecn
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
RATE = 25_000_000
LIMIT = 300_000
K = 30_000   # 9.6 ms at 25 Mbit/s: a sender stalled and catching up at 5 Mbit/s needs a 48 ms stall to reach it
PORT = 5342

SCENARIO = """\
name: ecn-mark
seed: 1
topology: {{kind: dumbbell}}
paths:
  wan:
    down: {{rate: 25mbit, buffer: {buffer}, delay: 2ms, ecn_mark: {mark}}}
    up: {{delay: 2ms}}
transport:
  cc: cubic
workload: {{kind: bulk, duration: 3s}}
fidelity: {{probe: false}}
"""


def _mpvlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpvlab", *args], capture_output=True, text=True, timeout=240,
                          cwd=REPO)


def _gone(name_prefix: str, timeout_s: float = 5.0) -> dict[str, list[str]]:
    """Kernel programs/maps whose name starts with `name_prefix` still there after `timeout_s` (the
    kernel frees a detached program from an RCU callback: allow it a few seconds)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left: dict[str, list[str]] = {}
        for kind in ("prog", "map"):
            items = json.loads(subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True,
                                              text=True).stdout or "[]")
            left[kind] = [i["name"] for i in items if str(i.get("name", "")).startswith(name_prefix)]
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_scenario_field_is_validated(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    cases = [
        ("{threshold: 0ms}", "125KB", "outside 10us … 1s"),
        ("{threshold: 4}", "125KB", "needs a unit"),
        ("{threshold: 4ms, depth: 3}", "125KB", "unknown key; allowed here: threshold"),
        ("{threshold: 100ms}", "125KB", "not below the buffer"),
        ("{threshold: 100us}", "125KB", "less than one 1514-byte frame"),
    ]
    for mark, buffer, why in cases:
        f.write_text(SCENARIO.format(mark=mark, buffer=buffer))
        cp = _mpvlab("validate", str(f))
        out = cp.stdout + cp.stderr
        assert cp.returncode != 0 and why in out and "ecn_mark" in out and "s.yaml" in out, (mark, out[-1500:])
    # no rate: nothing to drain at
    f.write_text(SCENARIO.format(mark="{threshold: 4ms}", buffer="125KB").replace("rate: 25mbit, ", ""))
    cp = _mpvlab("validate", str(f))
    assert cp.returncode != 0 and "ecn_mark needs a rate" in cp.stdout + cp.stderr, cp.stdout[-1500:]
    f.write_text(SCENARIO.format(mark="{threshold: 12500B}", buffer="125KB"))
    cp = _mpvlab("validate", str(f))
    assert cp.returncode == 0, cp.stdout[-1500:] + cp.stderr[-1500:]
    cp = _mpvlab("validate", str(REPO / "scenarios" / "ecn-bbr3-bulk.yaml"))
    assert cp.returncode == 0, cp.stdout[-1500:] + cp.stderr[-1500:]


def test_threshold_conversion() -> None:
    assert ecn.parse_threshold("4ms").to_bytes(25_000_000) == 12_500
    assert ecn.parse_threshold("12KB").to_bytes(25_000_000) == 12_000
    assert ecn.marker_name("mvk3f9zaai0") == "ecn_k3f9zaai0" and len(ecn.marker_name("mvk3f9zaai10")) <= 15


def _udp(d, mbit: float, tos: int, seconds: float = 2.0) -> None:
    from mpvlab.testbed.dumbbell import RECEIVER_ADDR
    srv = d.bed.popen(d.ns_b, ["iperf3", "-s", "-1", "-B", RECEIVER_ADDR, "-p", str(PORT)],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while f":{PORT}" not in d.ns(d.ns_b, "ss", "-ltnH").stdout:
            assert time.monotonic() < deadline, "iperf3 server did not listen"
            time.sleep(0.05)
        d.ns(d.ns_a, "iperf3", "-c", RECEIVER_ADDR, "-p", str(PORT), "-u", "-b", f"{mbit}M", "-l", "1400",
             "-S", str(tos), "-t", str(seconds), timeout=seconds + 30)
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def _received_by_ecn(d) -> dict[int, int]:
    """UDP packets the receiver got per ECN codepoint (iptables -m ecn counters, zeroed after)."""
    out = Netns(d.ns_b).run(["iptables", "-w", "-L", "INPUT", "-v", "-x", "-n", "-Z"]).stdout
    counts: dict[int, int] = {}
    for line in out.splitlines():
        if "ECN match ECT=" in line:
            counts[int(line.split("ECT=")[1].split()[0])] = int(line.split()[0])
    return counts


@pytest.mark.netns
def test_marks_only_ect_above_the_rate_and_leaves_nothing(tmp_path: Path) -> None:
    from mpvlab.testbed.dumbbell import Dumbbell
    with Dumbbell(prefix="h20e", rate_bit=RATE, burst_bytes=3028, limit_bytes=LIMIT, workdir=tmp_path) as d:
        assert d.bed is not None
        for cp in (0, 1, 2, 3):
            Netns(d.ns_b).run(["iptables", "-w", "-A", "INPUT", "-p", "udp", "-m", "ecn", "--ecn-ip-ect", str(cp)])
        name = ecn.marker_name(f"mv{d.bed.run_id}d0")
        m = ecn.start_marker(Netns(d.ns_r), "h20er1", RATE, K, LIMIT, name=name, label="t", workdir=tmp_path,
                             popen=lambda argv, log: d.bed.popen(d.ns_r, argv, "ecnmark", stdout=log, stderr=log))
        assert ecn.bpf_objects_named(name) == {"progs": [m.ids[0]], "maps": [m.ids[1]]}
        _received_by_ecn(d)   # zero the counters

        # Below the rate (5 of 25 Mbit/s), ECT(0): no queue, no mark.
        s0 = m.snapshot()
        _udp(d, 5, tos=0x02)
        s1 = m.snapshot()
        below = ecn.window(s0, s1)
        assert below["ect"] > 500 and below["marked"] == 0 and below["over_threshold"] == 0, below
        rx = _received_by_ecn(d)
        assert rx.get(3, 0) == 0 and rx.get(2, 0) > 500, rx

        # Above the rate (40 Mbit/s), ECT(0): the queue exceeds K, ECT packets are marked; every mark
        # is one of the ECT packets and reaches the receiver as CE unless the tbf dropped it.
        _udp(d, 40, tos=0x02)
        s2 = m.snapshot()
        above = ecn.window(s1, s2)
        assert above["marked"] > 0 and above["marked"] <= above["ect"] and above["mark_failed"] == 0, above
        assert above["marked"] <= above["over_threshold"], above
        rx = _received_by_ecn(d)
        assert 0 < rx.get(3, 0) <= above["marked"], (rx, above)

        # Above the rate, not-ECT: never marked (counted and on the wire).
        _udp(d, 40, tos=0x00)
        s3 = m.snapshot()
        plain = ecn.window(s2, s3)
        assert plain["not_ect"] > 500 and plain["marked"] == 0 and plain["over_threshold"] > 0, plain
        rx = _received_by_ecn(d)
        assert rx.get(3, 0) == 0 and rx.get(0, 0) > 0, rx

        stats = m.stop()
        assert stats["exit_code"] == 0 and stats["detached"] is True
        assert stats["marked"] == s3["marked"] and stats["ect"] >= s3["ect"]
        assert "ecn" not in Netns(d.ns_r).run(["tc", "filter", "show", "dev", "h20er1", "egress"]).stdout
        assert _gone(name) == {"prog": [], "map": []}
        # A fault ends with a message naming it (here: a device that is not in the namespace).
        with pytest.raises(ecn.EcnMarkError, match="no interface h20enone in this network namespace"):
            ecn.start_marker(Netns(d.ns_r), "h20enone", RATE, K, LIMIT, name=name, label="f", workdir=tmp_path,
                             popen=lambda argv, log: d.bed.popen(d.ns_r, argv, "ecnmark", stdout=log, stderr=log))
        # The virtual backlog was sampled: above the rate it passed K, and, like the tbf it follows,
        # it never holds more than the limit (40 Mbit/s into 25 for 2 s overflows 300 KB: tail drops).
        rows = ecn.load_samples(m.files["samples"])
        peak = max(r["vq_backlog_bytes"] for r in rows)
        assert K < peak <= LIMIT and stats["max_backlog_bytes"] <= LIMIT, (peak, stats)
        assert above["over_limit"] > 0 and below["over_limit"] == 0, (above, below)


@pytest.mark.netns
def test_killed_loader_leaves_the_filter_until_the_namespace_goes(tmp_path: Path) -> None:
    from mpvlab.testbed.dumbbell import Dumbbell
    d = Dumbbell(prefix="h20e", rate_bit=RATE, workdir=tmp_path).open()
    try:
        assert d.bed is not None
        name = ecn.marker_name(f"mv{d.bed.run_id}d1")
        m = ecn.start_marker(Netns(d.ns_r), "h20er1", RATE, K, LIMIT, name=name, label="k", workdir=tmp_path,
                             popen=lambda argv, log: d.bed.popen(d.ns_r, argv, "ecnmark", stdout=log, stderr=log))
        os.kill(m.process.pid, signal.SIGKILL)
        m.process.wait()
        # Still attached (and still marking: the filter holds the program, the program its map) ...
        assert ecn.bpf_objects_named(name)["progs"] == [m.ids[0]]
        assert "direct-action" in Netns(d.ns_r).run(["tc", "filter", "show", "dev", "h20er1", "egress"]).stdout
    finally:
        d.close()   # the ledger's cleanup deletes the run's namespaces
    # ... until the run's namespace is deleted with the device.
    assert _gone(name) == {"prog": [], "map": []}


@pytest.mark.netns
@pytest.mark.e2e
def test_run_marks_records_and_removes_the_marker(tmp_path: Path) -> None:
    root_ecn = Path("/proc/sys/net/ipv4/tcp_ecn").read_text()
    f = tmp_path / "ecn.yaml"
    f.write_text(SCENARIO.format(mark="{threshold: 4ms}", buffer="125KB"))
    cp = _mpvlab("run", str(f), "--results", str(tmp_path / "results"))
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in (tmp_path / "results" / "ecn-mark").iterdir() if p.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    c = s["ecn_marks"]["wan-down"]
    # CUBIC at 25 Mbit/s with a 4 ms RTT fills far more than K = 4 ms = 12.5 KB: marks, on ECT packets only.
    assert c["threshold_bytes"] == 12_500 and c["rate_bit"] == RATE and c["limit_bytes"] == 125_000
    assert c["ect"] > 1000 and 0 < c["marked"] <= c["ect"] and c["mark_failed"] == 0, c
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert len(prov["hosts"]["ecn"]) == 2 and all(v == {"net.ipv4.tcp_ecn": "1"} for v in prov["hosts"]["ecn"].values())
    final = prov["delay_lines"]["wan-down"]["ecn_mark"]
    assert final["detached"] is True and final["exit_code"] == 0 and final["marked"] >= c["marked"]
    assert (run_dir / "data" / "ecn-wan-down.csv").exists()
    assert _gone(f"ecn_{run_dir.name}") == {"prog": [], "map": []}
    assert Path("/proc/sys/net/ipv4/tcp_ecn").read_text() == root_ecn   # the root namespace untouched


@pytest.mark.netns
@pytest.mark.e2e
def test_sigkilled_run_leaves_the_marker_to_cleanup(tmp_path: Path) -> None:
    """A SIGKILLed runner leaves its marker attached (loader, filter, program, map); `mpvlab cleanup`
    — what the next run also does — removes them by the run's ledger (process, then namespaces)."""
    f = tmp_path / "crash.yaml"
    f.write_text(SCENARIO.format(mark="{threshold: 4ms}", buffer="125KB").replace("duration: 3s", "duration: 30s")
                 .replace("name: ecn-mark", "name: ecn-crash"))
    results = tmp_path / "r"
    p = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        run_id = ""
        while time.monotonic() < deadline:
            runs = [d.name for d in (results / "ecn-crash").iterdir()] if (results / "ecn-crash").exists() else []
            if runs and any(_gone(f"ecn_{runs[0]}", 0).values()):
                run_id = runs[0]
                break
            time.sleep(0.2)
        assert run_id, "the run never attached its marker"
    finally:
        p.kill()
        p.wait()
    assert any(_gone(f"ecn_{run_id}", 0.5).values())   # still attached after the runner died
    cp = _mpvlab("cleanup")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert _gone(f"ecn_{run_id}") == {"prog": [], "map": []}
