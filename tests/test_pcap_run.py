"""observe.pcap in a real run (issues 22, 23): the smoke scenario on two 25 Mbit/s paths with captures at
the client and the server. Bytes must match: every capture against its interface's counters over the
same window, and the server capture's MPTCP data against the BPF trace's count of bytes handed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpvlab.collectors.pcap import FULL_FRAME, INFLIGHT_FRAMES_ALLOWED, RELATIVE_ALLOWANCE
from mpvlab.results import checks
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
pytestmark = [pytest.mark.netns, pytest.mark.e2e]

# scenarios/smoke.yaml at 25 Mbit/s and 8 s of its video (cached by setup), no fidelity probe: ~15 s wall.
SCENARIO = """\
name: pcap-smoke
seed: 1
paths:
  wifi:
    down: {rate: 25mbit, buffer: 100KB, delay: {kind: square, base: 5ms, amplitude: 60ms, period: 10s, duty: 0.5}}
  lte:
    down: {rate: 25mbit, buffer: 100KB, delay: 20ms}
transport: {cc: cubic, scheduler: default}
video: {duration: 8s, bitrate: 5.24mbit}
player: {mode: discard}
fidelity: {probe: false}
observe:
  pcap: {points: [client, server], snaplen: 128, max_mb: 100}
"""


def test_pcap_run_bytes_match_the_interface_counters(tmp_path: Path) -> None:
    f = tmp_path / "pcap-smoke.yaml"
    f.write_text(SCENARIO)
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp_path / "results")],
                        capture_output=True, text=True, timeout=240, cwd=REPO)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (run,) = [d for d in (tmp_path / "results" / "pcap-smoke").iterdir() if d.is_dir()]
    s = json.loads((run / "summary.json").read_text())
    cap = s["capture"]
    client_ifs = {p["interface"] for p in s["paths"].values()}
    files = {(r["point"], r["interface"]): r for r in cap["files"]}
    server_ifs = [i for (pt, i) in files if pt == "server"]
    assert {i for (pt, i) in files if pt == "client"} == client_ifs and len(server_ifs) == 1
    for r in cap["files"]:
        assert (run / "data" / "pcap" / r["file"]).stat().st_size > 24, r
        assert not r["truncated"], r
        assert r["packets"] > 1000, r   # the video crossed it
        # Same window, same frames: equal up to packets that crossed between a counter read and the
        # capture's start or stop (mpvlab/collectors/pcap.py; nothing flows then, measured 0-1 frame).
        allowed = INFLIGHT_FRAMES_ALLOWED * FULL_FRAME + RELATIVE_ALLOWANCE * r["counter_bytes"]
        assert abs(r["bytes"] - r["counter_bytes"]) <= allowed, r
        assert abs(r["ratio"] - 1) <= 0.01, r
        assert r["ok"] and s["cross_checks"][f"pcap_bytes_{r['point']}_{r['interface']}"]["ok"]
        assert isinstance(r["dropped_by_kernel"], int), r      # a reported figure (0 in every run seen)
    # Per path: the client's capture of that path's interface against the run's own interface count.
    for name, p in s["paths"].items():
        r = files[("client", p["interface"])]
        assert r["counter_bytes"] >= p["rx_bytes"], (name, r, p)

    # Wire-order switches from the server's capture: the reader lost nothing, its new data is exactly
    # the bytes the BPF trace saw handed to the subflows, and every data-sequence-order switch is a
    # decision-level switch (one decision hands one contiguous range to one subflow) when nothing was
    # reinjected. Not every decision-level switch shows in data order: when the kernel pushes on a
    # subflow without calling the scheduler (collectors/README.md, Limits), the trace credits those
    # bytes to the decision in progress and may count a switch there and back that the data order
    # does not have (16 runs: equal in 13; in the other three the data order had 2 to 4 fewer).
    w = s["wire_switches"]
    assert w["parse"]["unmapped_segments"] == 0 and w["parse"]["mapping_mismatch"] == 0
    assert w["parse"]["options_truncated"] == 0
    t = w["totals"]
    assert t["connections"] >= 1 and s["path_switches_wire"] == t["wire_switches"]
    trace = json.loads((run / "data" / "schedtrace" / "decisions_summary.json").read_text())
    reinjected = s["mptcp"]["reinjected_segments"]
    if reinjected == 0:
        assert t["new_bytes"] == trace["totals"]["bytes_handed"]
        assert s["path_switches"] == t["decision_path_switches"]
        assert t["dsn_order_switches"] <= t["decision_path_switches"], t
    else:
        # The scheduler hands a reinjected range again (counted by the trace); on the wire that range
        # is data already seen, so the surplus is bounded by the capture's re-sent bytes. One
        # reinjection (MIB count 1) may re-hand several segments: CI runs saw 842 B and 8856 B,
        # against 26112 B and 28736 B re-sent.
        assert 0 <= trace["totals"]["bytes_handed"] - t["new_bytes"] <= t["retransmitted_bytes"]
    assert t["wire_switches"] >= t["dsn_order_switches"]
    assert {sf["path"] for sf in w["subflows"].values()} == set(s["paths"])
    # Per path, the capture's data bytes (each once) against the subflows' ss bytes_acked: both paths
    # compared, within the check's tolerance; and the run holds exactly the registry's records for a
    # progressive run with client and server captures.
    pb = s["cross_checks"]["pcap_path_bytes_vs_subflow_counters"]
    assert pb["ok"] and set(pb["paths"]) == set(s["paths"]), pb
    want = checks.expected_records("progressive", {"mptcp-trace", "pcap", "pcap-server"}, list(s["paths"]), tuple(files))
    assert set(s["cross_checks"]) == want["cross_checks"], (sorted(s["cross_checks"]), want)

    # Nothing left running: no tcpdump on this run's interfaces.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not [ln for ln in ps.splitlines() if ln.startswith("tcpdump") and f"mv{s['run_id']}" in ln]
