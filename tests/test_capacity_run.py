"""A capacity trace in a run (scenarios/lte-trace-bulk.yaml): the scenario's `capacity` reaches the
delay line, which serves no more than the trace's delivery opportunities over its lifetime, and every
packet it took is either served or dropped by its queue. (The delay line's departures against
Mahimahi's own model, packet by packet, are tests/test_capacity.py's.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpvlab.links.capacity import MAHIMAHI_OPPORTUNITY_BYTES, SHIPPED_TRACES, read_mahimahi_trace
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


@pytest.mark.netns
@pytest.mark.e2e
def test_lte_trace_bulk_run_is_bounded_by_the_trace(tmp_path: Path) -> None:
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", "scenarios/lte-trace-bulk.yaml", "--results",
                         str(tmp_path)], capture_output=True, text=True, timeout=240, cwd=REPO)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [d for d in (tmp_path / "lte-trace-bulk").iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["bulk"]["bytes_sent"] == s["bulk"]["bytes_received"] > 0
    st = json.loads((run_dir / "logs" / "delay-lte-down.stats.json").read_text())
    cap = st["capacity"]
    trace = read_mahimahi_trace(SHIPPED_TRACES / "mahimahi" / "Verizon-LTE-short.down")
    assert cap["kind"] == "trace" and cap["opportunities_in_trace"] == len(trace.opportunities_ms)
    assert cap["period_ms"] == trace.period_ms and cap["queue_limit_packets"] == 200
    # Conservation: every packet the line took was served or dropped by the capacity queue.
    assert st["accepted"] == cap["served_packets"]
    assert st["packets"] == cap["served_packets"] + cap["queue_drops"] + st["drops_loss"] + st["drops_outage"]
    assert cap["max_queue_packets"] <= 200
    # The trace's bound over the line's lifetime (trace time zero is the run's t0): each opportunity
    # carries at most 1504 bytes of IP length + 4 (Mahimahi's TUN header).
    offered = trace.count_between(st["start_ns"] - st["t0_ns"] - 1, st["end_ns"] - st["t0_ns"])
    assert cap["opportunities_used"] <= offered
    assert cap["served_bytes"] + 4 * cap["served_packets"] <= MAHIMAHI_OPPORTUNITY_BYTES * offered
    # And the bulk payload the receiver got went through it.
    assert s["bulk"]["bytes_received"] <= cap["served_bytes"]
