"""Scenario parsing: strict units, defaults, and errors that name the file, field and what is allowed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mpvlab import units
from mpvlab.scenario import ScenarioError, load_scenario, override, parse_scenario, resolved_dict

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("text,bps", [("3mbit", 3_000_000), ("5.24mbit", 5_240_000), ("1gbit", 10**9),
                                      ("500kbit", 500_000), ("3Mbit", 3_000_000), ("100bit", 100)])
def test_rates(text: str, bps: int) -> None:
    assert units.parse_rate(text) == bps


@pytest.mark.parametrize("bad", ["3", 3, "3mbps", "3 MB", "fast", "-3mbit", "0mbit", "3mbit/s"])
def test_rates_rejected(bad: object) -> None:
    with pytest.raises(units.UnitError):
        units.parse_rate(bad)  # type: ignore[arg-type]


def test_sizes_distinguish_si_and_iec() -> None:
    assert units.parse_size("1MB") == 1_000_000
    assert units.parse_size("1MiB") == 1_048_576
    assert units.parse_size("10KB") == 10_000
    with pytest.raises(units.UnitError):
        units.parse_size("10kb")  # tc's kb is 1024: ambiguous, refused
    assert units.parse_queue_limit("256pkt").to_bytes() == 256 * 1514


def test_durations() -> None:
    assert units.parse_duration_ns("60ms") == 60_000_000
    assert units.parse_duration_ns("1.5s") == 1_500_000_000
    assert units.parse_duration_ns("250us") == 250_000
    assert units.parse_duration_ns(0) == 0
    for bad in ("60", 60, "60 sec", "-1s"):
        with pytest.raises(units.UnitError):
            units.parse_duration_ns(bad)  # type: ignore[arg-type]


def test_probability() -> None:
    assert units.parse_probability("1%") == pytest.approx(0.01)
    assert units.parse_probability(0.2) == 0.2
    for bad in ("1", 1.0, -0.1, "101%", True):
        with pytest.raises(units.UnitError):
            units.parse_probability(bad)  # type: ignore[arg-type]


MINIMAL = {"name": "t", "paths": {"wifi": {}, "lte": {}}}


def test_defaults_are_filled_and_round_trip() -> None:
    sc = parse_scenario(MINIMAL)
    data = resolved_dict(sc)
    assert data["transport"]["cc"] == "cubic"
    assert data["hosts"]["client_tcp_rmem"] == ["4KiB", "128KiB", "6MiB"]
    # The resolved form is itself a valid scenario that resolves to the same thing.
    assert resolved_dict(parse_scenario(data)) == data


def test_errors_name_file_field_and_allowed() -> None:
    bad = {"name": "t", "paths": {"wifi": {"down": {"rate": "3mbps", "delya": 1}}, "lte": {}},
           "transport": {"cc": "reno"}}
    with pytest.raises(ScenarioError) as e:
        parse_scenario(bad, "my.yaml")
    msg = str(e.value)
    assert msg.startswith("my.yaml: invalid scenario (3 problems)")
    assert "paths.wifi.down.rate: rate '3mbps'" in msg and "bit, kbit, mbit, gbit" in msg
    assert "paths.wifi.down.delya: unknown key; allowed here: buffer, burst, delay, loss, order, rate" in msg
    assert "transport.cc:" in msg and "'cubic', 'bbr' or 'bbr-s'" in msg


def test_dual_path_needs_two_paths() -> None:
    with pytest.raises(ScenarioError, match="exactly 2 paths"):
        parse_scenario({"name": "t", "paths": {"wifi": {}}})


def test_path_names_are_strict() -> None:
    with pytest.raises(ScenarioError, match="paths.*pattern"):
        parse_scenario({"name": "t", "paths": {"wi fi;rm": {}, "lte": {}}})


def test_trace_file_must_stay_inside_scenario_folder(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("name: t\npaths:\n  wifi:\n    down:\n      delay: {kind: trace, file: d/../../etc/passwd}\n  lte: {}\n")
    with pytest.raises(ScenarioError, match="leaves the scenario's folder"):
        load_scenario(f)
    (tmp_path / "d.txt").write_text("0 10\n1000 20\n")
    f.write_text("name: t\npaths:\n  wifi:\n    down:\n      delay: {kind: trace, file: d.txt}\n  lte: {}\n")
    assert load_scenario(f)[0].name == "t"


def test_override_revalidates() -> None:
    sc = parse_scenario(MINIMAL)
    assert override(sc, {"transport.cc": "bbr"}).transport.cc == "bbr"
    with pytest.raises(ScenarioError):
        override(sc, {"transport.cc": "vegas"})
    with pytest.raises(ScenarioError, match="no field"):
        override(sc, {"transport.nope.x": 1})


def test_cli_validate_reports_and_exits_nonzero(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: t\npaths: {wifi: {down: {rate: 3}}, lte: {}}\n")
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "validate", str(f), str(REPO / "scenarios" / "smoke.yaml")],
                        capture_output=True, text=True, cwd=REPO)
    assert cp.returncode == 1
    assert f"{f}: invalid scenario" in cp.stdout and "paths.wifi.down.rate" in cp.stdout
    assert "smoke.yaml: ok" in cp.stdout


def test_shipped_scenarios_validate() -> None:
    files = sorted((REPO / "scenarios").glob("*.yaml"))
    assert files
    for f in files:
        load_scenario(f)


def test_dash_fields() -> None:
    sc = parse_scenario({**MINIMAL, "video": {"kind": "dash"}})
    assert sc.dash_ladder[0] == 1_000_000 and sc.dash_ladder[-1] == 25_000_000 and len(sc.dash_ladder) == 11
    assert sc.playout_buffer_ns == 30 * 10**9
    with pytest.raises(ScenarioError, match="bba_reservoir"):
        parse_scenario({**MINIMAL, "video": {"kind": "dash"}, "player": {"abr": "bba", "buffer": "10s"}})
    with pytest.raises(ScenarioError, match="kind: dash"):
        parse_scenario({**MINIMAL, "video": {"bitrates": ["1mbit"]}})


def test_scheduler_params_resolved_and_checked() -> None:
    sc = parse_scenario({**MINIMAL, "transport": {"scheduler": "bdp", "scheduler_params": {"hysteresis": 0.5}}})
    assert sc.transport.scheduler_params["hysteresis"] == 0.5 and "dwell_ms" in sc.transport.scheduler_params
    with pytest.raises(ScenarioError, match="unknown key for scheduler 'minrtt'"):
        parse_scenario({**MINIMAL, "transport": {"scheduler": "minrtt", "scheduler_params": {"hysteresis": 1}}})
