"""More than two paths in the dual-path kind (issue 17): one MPTCP subflow per path, every per-path
check working for N. Three 2.5 Mbit/s paths carry a 5.24 Mbit/s video: no two paths alone hold it
(5 Mbit/s of wire rate, ~4.8 of payload), so each path must carry a real share — at least the
scenario's `observe.min_path_share` (5 %), which the run itself enforces — and the cross-checks
(interface bytes vs the scheduler trace per path, subflow addresses) must pass for all three."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mpvlab.core.paths import checkout_root

REPO = checkout_root()

SCENARIO = """\
name: {name}
seed: 1
paths:
  wifi:
    down: {{rate: 2.5mbit, buffer: 100KB, delay: 10ms}}
  lte:
    down: {{rate: 2.5mbit, buffer: 100KB, delay: 30ms}}
  nr:
    down: {{rate: 2.5mbit, buffer: 100KB, delay: 20ms}}
transport: {{cc: cubic, scheduler: {scheduler}, subflows: 3}}
video: {{duration: 8s, bitrate: 5.24mbit}}
player: {{mode: discard, decode: false}}
fidelity: {{probe: false}}
"""


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.parametrize("scheduler", ["default", "minrtt"])
def test_three_paths_each_carry_data_and_every_check_passes(tmp_path: Path, scheduler: str) -> None:
    name = f"three-path-{scheduler}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(SCENARIO.format(name=name, scheduler=scheduler))
    results = tmp_path / "results"
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                        capture_output=True, text=True, timeout=180, cwd=REPO)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (run_dir,) = (results / name).iterdir()
    s = json.loads((run_dir / "summary.json").read_text())
    assert list(s["paths"]) == ["wifi", "lte", "nr"]
    assert len(s["subflows"]) == 3
    # one subflow per path: the three client addresses, each once
    peers = sorted(sf["peer"].rsplit(":", 1)[0] for sf in s["subflows"])
    assert peers == ["10.0.1.2", "10.0.2.2", "10.0.3.2"], s["subflows"]
    for name_, p in s["paths"].items():
        assert p["share"] >= 0.05, (name_, p["share"])
    assert sum(p["rx_bytes"] for p in s["paths"].values()) == s["bytes_total"]
    failed = {k: v for k, v in s["cross_checks"].items() if not v["ok"]}
    assert not failed, failed
    if scheduler == "minrtt":
        assert s["steering"]["policy"] == "minrtt"


def test_dual_path_takes_two_to_eight_paths(tmp_path: Path) -> None:
    from mpvlab.input.scenario import ScenarioError, parse_scenario
    base = {"name": "n", "transport": {"cc": "cubic"}}
    for n in (2, 3, 8):
        sc = parse_scenario({**base, "paths": {f"p{i}": {"down": {"delay": "10ms"}} for i in range(n)}})
        assert len(sc.paths) == n
    for n in (1, 9):
        with pytest.raises(ScenarioError, match="dual-path takes 2 to 8 paths"):
            parse_scenario({**base, "paths": {f"p{i}": {"down": {"delay": "10ms"}} for i in range(n)}})
