"""Scenario parsing: strict units, defaults, and errors that name the file, field and what is allowed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mpvlab.core import units
from mpvlab.input.scenario import ScenarioError, load_scenario, override, parse_scenario, resolved_dict
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


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
           "transport": {"cc": "vegas"}}
    with pytest.raises(ScenarioError) as e:
        parse_scenario(bad, "my.yaml")
    msg = str(e.value)
    assert msg.startswith("my.yaml: invalid scenario (3 problems)")
    assert "paths.wifi.down.rate: rate '3mbps'" in msg and "bit, kbit, mbit, gbit" in msg
    assert "paths.wifi.down.delya: unknown key; allowed here: buffer, buffer_counting, burst, capacity, delay, ecn_mark, line_rate, loss, loss_model, order, outages, rate" in msg
    assert "transport.cc:" in msg and "available: cubic, reno, bbr, bbr-s" in msg


def test_dual_path_needs_two_to_eight_paths() -> None:
    with pytest.raises(ScenarioError, match="dual-path takes 2 to 8 paths"):
        parse_scenario({"name": "t", "paths": {"wifi": {}}})


def test_path_names_are_strict() -> None:
    with pytest.raises(ScenarioError, match="paths.*use 1–8 characters: lowercase letters and digits"):
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
    assert cp.returncode == 2
    assert f"{f}: invalid scenario" in cp.stdout and "paths.wifi.down.rate" in cp.stdout
    assert "smoke.yaml: ok" in cp.stdout


def test_shipped_scenarios_validate() -> None:
    files = sorted((REPO / "scenarios").glob("*.yaml"))
    assert files
    for f in files:
        load_scenario(f)


def test_shipped_scenarios_cover_what_a_newcomer_looks_for() -> None:
    """Issue 49 item 8: a scenario with the dash.js player, one with bbr3-s, and the three-path
    scenario stating its own 3 subflows (transport.subflows was capped at 2)."""
    shipped = {f.name: load_scenario(f)[0] for f in sorted((REPO / "scenarios").glob("*.yaml"))}
    assert any(sc.player.kind == "dashjs" for sc in shipped.values())
    assert any(sc.transport.cc == "bbr3-s" for sc in shipped.values())
    three = shipped["three-path.yaml"]
    assert three.transport.subflows == 3 and three.expected_subflows == 3 == len(three.paths)


def test_subflows_up_to_the_path_limit() -> None:
    paths = {f"p{i}": {"down": {"rate": "2mbit", "delay": "5ms"}} for i in range(8)}
    sc = parse_scenario({**MINIMAL, "paths": paths, "transport": {"subflows": 8}})
    assert sc.expected_subflows == 8
    with pytest.raises(ScenarioError, match="transport.subflows"):
        parse_scenario({**MINIMAL, "paths": paths, "transport": {"subflows": 9}}, "s.yaml")
    with pytest.raises(ScenarioError, match="cannot exceed the number of paths"):
        parse_scenario({**MINIMAL, "transport": {"subflows": 3}}, "s.yaml")


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


SHARED = {"name": "t", "topology": {"kind": "shared-bottleneck", "clients": 3},
          "paths": {"shared": {"down": {"rate": "6mbit", "buffer": "256pkt", "delay": "50ms"}, "up": {"delay": "50ms"}}},
          "cross_traffic": {"bulk": {"cc": "reno", "start": "2s"}, "voip": {}}}


def _shared(**changes: object) -> dict[str, object]:
    import copy
    d = copy.deepcopy(SHARED)
    for dotted, value in changes.items():
        node: dict[str, object] = d
        *head, last = dotted.split("__")
        for k in head:
            node = node.setdefault(k, {})  # type: ignore[assignment]
        node[last] = value
    return d


def test_shared_bottleneck_defaults_and_round_trip() -> None:
    sc = parse_scenario(SHARED)
    assert sc.n_clients == 3 and sc.expected_subflows == 1
    data = resolved_dict(sc)
    assert data["cross_traffic"] == {"bulk": {"cc": "reno", "start": "2s", "duration": None},
                                     "voip": {"rate": "80kbit", "packet_size": "150B"}}
    assert resolved_dict(parse_scenario(data)) == data
    # clients default to 2; no cross traffic at all is fine
    sc2 = parse_scenario({**SHARED, "topology": {"kind": "shared-bottleneck"}, "cross_traffic": None})
    assert sc2.n_clients == 2 and sc2.cross_traffic is None
    assert parse_scenario(MINIMAL).n_clients == 1


@pytest.mark.parametrize("changes,expect", [
    ({"topology__clients": 9}, "topology.clients: must be at most 8; got 9"),
    ({"topology__clients": 0}, "topology.clients: must be at least 1; got 0"),
    ({"cross_traffic__bulk__cc": "vegas"}, "cross_traffic.bulk.cc: allowed: cubic, bbr or reno; got 'vegas'"),
    ({"cross_traffic__bulk__duration": "0s"}, "cross_traffic.bulk.duration: duration must be positive"),
    ({"cross_traffic__bulk__start": "-1s"}, "cross_traffic.bulk.start: duration '-1s' must not be negative"),
    ({"cross_traffic__bulk__rate": "1mbit"}, "cross_traffic.bulk.rate: unknown key; allowed here: cc, duration, start"),
    ({"cross_traffic__voip__packet_size": "1501B"}, "cross_traffic.voip.packet_size: packet_size must lie between 36B and 1500B"),
    ({"cross_traffic__voip__packet_size": "20B"}, "cross_traffic.voip.packet_size: packet_size must lie between 36B and 1500B"),
    ({"cross_traffic__voip__rate": "80kbps"}, "cross_traffic.voip.rate: rate '80kbps'"),
    ({"cross_traffic__tcp": {}}, "cross_traffic.tcp: unknown key; allowed here: bulk, voip"),
    ({"paths__lte": {}}, "topology shared-bottleneck needs exactly 1 path, got 2"),
    ({"paths__shared__down__order": "delay-then-shape"},
     "paths.shared.down.order: shared-bottleneck allows only shape-then-delay"),
    ({"paths__shared__up__rate": "1mbit"}, "paths.shared.up.order: shared-bottleneck allows only delay-then-shape"),
    ({"transport__scheduler": "bdp"}, "transport.scheduler: shared-bottleneck players use MPTCP with one subflow, "
                                      "so only 'default' is allowed (got 'bdp')"),
    ({"transport__subflows": 2}, "transport.subflows cannot exceed the number of paths"),
    ({"topology__kind": "star"}, "topology.kind: allowed: dual-path, dumbbell, shared-bottleneck or physical; got 'star'"),
])
def test_shared_bottleneck_errors(changes: dict[str, object], expect: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(_shared(**changes), "s.yaml")
    assert str(e.value).startswith("s.yaml: invalid scenario"), str(e.value)
    assert expect in str(e.value), str(e.value)


def test_shared_only_fields_refused_elsewhere() -> None:
    with pytest.raises(ScenarioError, match="topology.clients is only for kind shared-bottleneck"):
        parse_scenario({**MINIMAL, "topology": {"clients": 2}})
    with pytest.raises(ScenarioError, match="topology.client_stagger is only for kind shared-bottleneck"):
        parse_scenario({**MINIMAL, "topology": {"client_stagger": "20s"}})
    with pytest.raises(ScenarioError, match="cross_traffic is only for topology kind shared-bottleneck"):
        parse_scenario({**MINIMAL, "cross_traffic": {"voip": {}}})


def test_up_rate_with_delay_then_shape_is_allowed() -> None:
    sc = parse_scenario(_shared(paths__shared__up={"rate": "1mbit", "order": "delay-then-shape"}))
    assert sc.paths["shared"].up.rate == 1_000_000


def test_server_addressing_per_path() -> None:
    assert parse_scenario(MINIMAL).topology.server_addressing == "single"
    sc = parse_scenario({**MINIMAL, "topology": {"server_addressing": "per-path"}})
    assert sc.topology.server_addressing == "per-path"
    assert resolved_dict(sc)["topology"]["server_addressing"] == "per-path"
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**MINIMAL, "topology": {"server_addressing": "both"}}, "a.yaml")
    assert "topology.server_addressing" in str(e.value) and "allowed: single or per-path" in str(e.value), str(e.value)
    # The steering schedulers' controller announces the second address itself (userspace PM).
    assert override(sc, {"transport.scheduler": "bdp"}).topology.server_addressing == "per-path"
    with pytest.raises(ScenarioError, match="per-path is only for kind dual-path .this is dumbbell"):
        parse_scenario({"name": "t", "paths": {"p": {}},
                        "topology": {"kind": "dumbbell", "server_addressing": "per-path"}})


def test_a_cc_the_kernel_lists_is_accepted_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CC outside the registry that the kernel lists (tcp_available_congestion_control) is a plain
    kernel CC; other runs' BPF CCs (<base>_<run id>) in that list are never offered."""
    from mpvlab.cc import registry
    listing = tmp_path / "tcp_available_congestion_control"
    listing.write_text("reno cubic bbr vegas bbrs_k3f9za\n")
    monkeypatch.setattr(registry, "AVAILABLE_FILE", listing)
    base = {"name": "k", "paths": {"wifi": {"down": {"rate": "3mbit"}}, "lte": {"down": {"rate": "3mbit"}}}}
    sc = parse_scenario({**base, "transport": {"cc": "vegas"}}, "k.yaml")
    entry = sc.transport.cc_entry
    assert (entry.name, entry.bpf, entry.params, entry.kernel_name("abc123")) == ("vegas", False, None, "vegas")
    assert sc.transport.cc_params == {}
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**base, "transport": {"cc": "bbrs_k3f9za"}}, "k.yaml")
    assert "and from the kernel's list: vegas" in str(e.value) and "bbrs_k3f9za (" not in str(e.value)
    with pytest.raises(ScenarioError, match="takes no parameters"):
        parse_scenario({**base, "transport": {"cc": "vegas", "cc_params": {"x": 1}}}, "k.yaml")


def test_client_stagger_gives_each_client_its_start() -> None:
    """topology.client_stagger (issue 48 §3): client i at i × stagger, default 0 (all at t0), round trip."""
    assert parse_scenario(SHARED).client_starts_ns == [0, 0, 0]
    sc = parse_scenario(_shared(topology__client_stagger="20s"))
    assert sc.client_starts_ns == [0, 20 * 10**9, 40 * 10**9]
    data = resolved_dict(sc)
    assert data["topology"]["client_stagger"] == "20s"
    assert parse_scenario(data).client_starts_ns == sc.client_starts_ns
    # one client: no second player to delay, so a sweep may vary clients over 1 and 2 with one stagger
    assert parse_scenario(_shared(topology__clients=1, topology__client_stagger="20s")).client_starts_ns == [0]
    assert parse_scenario(MINIMAL).client_starts_ns == [0]


def test_start_line_carries_the_players_start() -> None:
    from mpvlab.player.start_signal import parse_start_line
    assert parse_start_line("t0 100\n") == (100, 100)
    assert parse_start_line("t0 100 start 5000000100\n") == (100, 5_000_000_100)
    for bad in ("", "t0", "t0 x", "t0 100 start", "t0 100 start 99", "t0 100 begin 200", "t0 -1", "t0 1 start -5"):
        assert parse_start_line(bad) is None, bad
