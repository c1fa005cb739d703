"""The bulk workload (mpvlab/runner/workloads/bulk.py) against the Linux MPTCP selftests' two-path bound.

tools/testing/selftests/net/mptcp/simult_flows.sh moves 16 MiB over two paths of r1 and r2 Mbit/s
(one-way delays d1/d2 in both directions) and requires the transfer to finish within
    size · 8 · 10 / ((r1 + r2) · 9)  +  0.4 s
— the aggregate rate less 10 % for headers, plus the join handshakes. Six cases: 10+10 and 15+5
Mbit/s, each with delays 0/0, 1/25 and 25/1 ms. A transfer is a timing figure a busy host can
lengthen: each second the hypervisor steals from the run can add at most a second (the delay line,
the shaper or an end stops for it), so the bound gives way by the steal measured over the transfer
and by nothing on a quiet host (tests/hostnoise.py). Bytes and the cross-checks must hold exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostnoise import stolen_at_most_s
from mpvlab.core.hoststeal import StealWindow
from mpvlab.results import checks
from mpvlab.core.paths import checkout_root

pytestmark = pytest.mark.cpu   # cpu (not cpu_light, though measured at 0.23 cores): a transfer's time or goodput bound, and the kernel's forwarding work is not in the measured CPU (S4, docs/testing.md); asserts timing bounds (tests/hostnoise.py)

REPO = checkout_root()
SIZE = 16 * 1024 * 1024      # simult_flows.sh: 2 * 2048 * 4096 bytes

SCENARIO = """\
name: {name}
seed: 1
paths:
  wifi:
    down: {{rate: {r1}mbit, buffer: 200KB, delay: {d1}ms}}
    up: {{delay: {d1}ms}}
  lte:
    down: {{rate: {r2}mbit, buffer: 200KB, delay: {d2}ms}}
    up: {{delay: {d2}ms}}
transport: {{cc: cubic, scheduler: default}}
workload: {{kind: bulk, size: {size}B}}
fidelity: {{probe: false}}
"""

CASES = [(10, 10, 0, 0), (10, 10, 1, 25), (10, 10, 25, 1), (15, 5, 0, 0), (15, 5, 1, 25), (15, 5, 25, 1)]


def selftest_bound_s(r1_mbit: int, r2_mbit: int) -> float:
    return SIZE * 8 * 10 / ((r1_mbit + r2_mbit) * 1e6 * 9) + 0.4


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.parametrize("r1,r2,d1,d2", CASES, ids=[f"{a}+{b}mbit-{c}/{d}ms" for a, b, c, d in CASES])
def test_two_path_transfer_within_selftest_bound(tmp_path: Path, r1: int, r2: int, d1: int, d2: int) -> None:
    name = f"bulk-{r1}-{r2}-{d1}-{d2}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(SCENARIO.format(name=name, r1=r1, r2=r2, d1=d1, d2=d2, size=SIZE))
    results = tmp_path / "results"
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                        capture_output=True, text=True, timeout=180, cwd=REPO)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (run_dir,) = [d for d in (results / name).iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    b = s["bulk"]
    # Correctness: every byte arrived, over both paths, on the chosen CC, every cross-check held.
    assert b["bytes_sent"] == b["bytes_received"] == SIZE
    assert b["cc_seen"] == "cubic" and s["workload"] == "bulk"
    assert all(c["ok"] for c in s["cross_checks"].values()), s["cross_checks"]
    # exactly the registry's records for a bulk run without pcap, probe or CC state model
    want = checks.expected_records("bulk", {"mptcp-trace"}, list(s["paths"]))
    assert set(s["cross_checks"]) == want["cross_checks"] and not s["fidelity_checks"], (s["cross_checks"], want)
    assert "fidelity_checks" not in want
    assert set(s["paths"]) == {"wifi", "lte"} and all(p["share"] >= 0.05 for p in s["paths"].values())
    assert sum(p["rx_bytes"] for p in s["paths"].values()) >= SIZE
    # The selftests' bound, giving way only by what the host stole during the transfer.
    steal = StealWindow.from_dict(s["host_steal_during_playback"])
    bound = selftest_bound_s(r1, r2) + stolen_at_most_s(steal)
    assert b["transfer_s"] <= bound, (b, steal.as_dict())
