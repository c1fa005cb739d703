"""The Wi-Fi/LTE study's delay direction (issue 48 §2; docs/studies.md §1).

The study does not say whether its +60 ms was added in one direction or in each, so a path-level
delay must name its direction (`down | up | both`), the sweep varies it, and each run reports the
RTT its paths had per delay phase (`paths.<name>.rtt_by_phase`). Checked here:

- the model: the pattern lands in exactly the directions named, never silently in one; a direction
  that has its own delay too is refused; a missing direction is refused with the field's name;
- a sweep's override of the direction leaves no stale copy behind (both → down removes the up delay);
  `paths.*.down.buffer` sets every path's buffer;
- the phase maths on planted schedules and samples;
- a real run with `direction: both`: the Wi-Fi path's srtt in the high phase can never be below the
  configured RTT of that phase (the delay lines hold every packet that long: first principles; with
  the delay on the downlink only the bound would be 60 ms), and each phase's figures equal those
  recomputed from the raw samples of data/subflows.csv. Nothing bounds the low phase's srtt from
  above: a full 100 KB queue at 3 Mbit/s adds up to 267 ms in either phase.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mpvlab.input.scenario import ScenarioError, override, parse_scenario
from mpvlab.input.sweep import expand, load_spec
from mpvlab.links.schedule import Schedule
from mpvlab.links.spec import ConstantDelay
from mpvlab.results import delayphases
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
MS = 1_000_000


def _scenario(direction: str | None) -> dict:
    d = yaml.safe_load((REPO / "scenarios" / "wifi-lte-c-short.yaml").read_text())
    if direction is None:
        del d["paths"]["wifi"]["delay"]["direction"]
    else:
        d["paths"]["wifi"]["delay"]["direction"] = direction
    return d


@pytest.mark.parametrize("direction, down_kind, up_kind", [("down", "square", "constant"),
                                                           ("up", "constant", "square"),
                                                           ("both", "square", "square")])
def test_path_delay_lands_in_the_directions_named(direction: str, down_kind: str, up_kind: str) -> None:
    wifi = parse_scenario(_scenario(direction)).paths["wifi"]
    assert (wifi.down.delay.kind, wifi.up.delay.kind) == (down_kind, up_kind)
    for d in (wifi.down, wifi.up):
        if d.delay.kind == "constant":
            assert d.delay == ConstantDelay()


def test_direction_is_required_and_a_second_delay_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"paths\.wifi\.delay.*direction"):
        parse_scenario(_scenario(None))
    d = _scenario("both")
    d["paths"]["wifi"]["up"] = {"delay": "5ms"}
    with pytest.raises(ScenarioError, match="up.delay and delay \\(direction both\\) both set the up"):
        parse_scenario(d)


def test_override_of_the_direction_leaves_no_stale_copy() -> None:
    both = override(parse_scenario(_scenario("down")), {"paths.wifi.delay.direction": "both"})
    assert both.paths["wifi"].up.delay.kind == "square"
    down = override(both, {"paths.wifi.delay.direction": "down"})
    assert down.paths["wifi"].up.delay == ConstantDelay()
    assert down.paths["wifi"].down.delay.kind == "square"
    # an unrelated override keeps the copies as they are (a resolved scenario reads back unchanged)
    again = override(both, {"transport.cc": "bbr"})
    assert again.paths["wifi"] == both.paths["wifi"]


def test_wildcard_axis_sets_every_path_and_bad_paths_are_errors() -> None:
    sc = override(parse_scenario(_scenario("down")), {"paths.*.down.buffer": "2MB"})
    assert {n: p.down.buffer.to_bytes() for n, p in sc.paths.items()} == {"wifi": 2_000_000, "lte": 2_000_000}
    with pytest.raises(ScenarioError, match="'duration' is a value, not a section"):
        override(sc, {"video.duration.x": 1})


def test_study_sweep_runs_both_directions_and_both_depths() -> None:
    f = REPO / "sweeps" / "wifi-lte-study.yaml"
    spec = load_spec(f)
    plan = expand(spec, f)
    assert len(plan.runs) == 3 * 3 * 3 * 2 * 2 * 5
    assert {r.params["paths.wifi.delay.direction"] for r in plan.runs} == {"down", "both"}
    ups = {r.scenario.paths["wifi"].up.delay.kind for r in plan.runs}
    assert ups == {"constant", "square"}
    quick = expand(spec, f, quick=True)
    assert len(quick.runs) == 27


def test_rtt_by_phase_on_planted_samples() -> None:
    down = Schedule.square(0, 60 * MS, 10_000 * MS, 0.5)
    up = Schedule.square(0, 60 * MS, 10_000 * MS, 0.5)
    # high [0, 5) and [10, 12), low [5, 10); samples every 0.25 s: 130 ms high, 10 ms low, and one
    # 0.1 s after a step, which the settling time must leave out
    samples = [(t / 4, 130.0 if (t / 4) % 10 < 5 else 10.0) for t in range(0, 48)]
    samples.append((5.1, 500.0))
    phases = delayphases.rtt_by_phase(down, up, 12.0, samples)
    assert [p["configured_rtt_ms"] for p in phases] == [0.0, 120.0]
    low, high = phases
    assert (low["seconds"], high["seconds"]) == (5.0, 7.0)
    assert (low["intervals"], high["intervals"]) == (1, 2)
    assert low["srtt_min_ms"] == low["srtt_p90_ms"] == 10.0      # the 500 ms sample was settling
    assert high["srtt_min_ms"] == 130.0
    # samples from [a + 0.5, b): low [5.5, 10) → 18 samples; high [0.5, 5) + [10.5, 12) → 18 + 6
    assert (low["samples"], high["samples"]) == (18, 24)


@pytest.mark.netns
@pytest.mark.e2e
def test_both_directions_run_reports_the_rtt_of_each_phase(tmp_path: Path) -> None:
    d = _scenario("both")
    d["name"] = "dir-both"
    d["video"]["duration"] = "16s"
    d["player"]["decode"] = False
    d["fidelity"] = {"probe": False}
    f = tmp_path / "dir-both.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False))   # path order matters: the first carries the initial subflow
    results = tmp_path / "results"
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                        capture_output=True, text=True, timeout=240, cwd=REPO)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = (results / "dir-both").iterdir()
    s = json.loads((run_dir / "summary.json").read_text())
    wifi, lte = s["paths"]["wifi"]["rtt_by_phase"], s["paths"]["lte"]["rtt_by_phase"]
    assert [p["configured_rtt_ms"] for p in wifi] == [0.0, 120.0]
    assert [p["configured_rtt_ms"] for p in lte] == [30.0]
    low, high = wifi
    assert low["samples"] > 0 and high["samples"] > 0
    assert high["srtt_min_ms"] >= 120.0          # no packet crosses the delay lines faster
    assert lte[0]["srtt_min_ms"] >= 30.0
    # The same figures again from the raw samples, independently of delayphases: the Wi-Fi
    # subflow's rows of data/subflows.csv in [a + 0.5, b) of each phase (high [0, 5) + [10, 15),
    # low [5, 10) + [15, end)), nearest-rank p50.
    addr = json.loads((run_dir / "provenance.json").read_text())["topology"]["paths"]["wifi"]["client_addr"]
    with (run_dir / "data" / "subflows.csv").open() as fh:
        rows = [(float(r["t_s"]), float(r["srtt_ms"])) for r in csv.DictReader(fh)
                if r["peer"].startswith(addr + ":") and r["mptcp"] == "1" and r["srtt_ms"]]
    end = max(t for t, _ in rows)
    for phase, on in ((high, True), (low, False)):
        xs = sorted(v for t, v in rows if (t % 10 >= 0.5 if on else t % 10 >= 5.5) and (t % 10 < 5) == on and t < end)
        assert phase["samples"] == len(xs)
        assert phase["srtt_min_ms"] == xs[0]
        assert phase["srtt_p50_ms"] == xs[math.ceil(len(xs) / 2) - 1]
    resolved = yaml.safe_load((run_dir / "resolved.yaml").read_text())
    assert resolved["paths"]["wifi"]["delay"]["direction"] == "both"
    assert resolved["paths"]["wifi"]["up"]["delay"]["kind"] == "square"
