"""mpvlab/reporting/dash.py's pure parts: the CCDF, the bitrate steps and the per-client values with Jain's
index, from hand-made records."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpvlab.results.metrics import jain_index
from mpvlab.results.aggregate import Run
from mpvlab.reporting.dash import bitrate_steps, ccdf, client_values, run_fairness


def test_ccdf_is_the_share_strictly_above_each_distinct_value() -> None:
    xs, ps = ccdf([3.0, 1.0, 1.0, 2.0])
    assert xs == [1.0, 2.0, 3.0]
    assert ps == [0.5, 0.25, 0.0]          # P(X > 1) = 2/4, P(X > 2) = 1/4, P(X > 3) = 0
    assert ccdf([]) == ([], [])
    xs, ps = ccdf([0.0] * 5)
    assert (xs, ps) == ([0.0], [0.0])


def test_bitrate_steps_hold_each_level_until_the_next_request_and_the_last_until_its_last_byte() -> None:
    ps = {"segments": [
        {"index": 1, "t_request": 2.0, "t_last_byte": 3.5, "bitrate_bps": 2_000_000},
        {"index": 0, "t_request": 0.5, "t_last_byte": 1.0, "bitrate_bps": 500_000},
        {"index": 2, "t_request": 4.0, "t_last_byte": 6.0, "bitrate_bps": 1_000_000},
        {"index": 3, "bitrate_bps": 1_000_000},              # no request time: not drawn
    ]}
    assert bitrate_steps(ps) == ([0.5, 2.0, 4.0, 6.0], [0.5, 2.0, 1.0, 1.0])
    assert bitrate_steps({}) == ([], [])


def test_jain_index_by_hand() -> None:
    assert jain_index([3.0, 3.0]) == 1.0                        # equal shares
    assert jain_index([4.0, 0.0]) == 0.5                        # one took all: 1/N
    assert jain_index([1.0, 2.0, 3.0]) == pytest.approx(36 / 42)   # (1+2+3)² / (3·(1+4+9))
    for bad in ([], [0.0, 0.0], [1.0, -1.0]):
        with pytest.raises(ValueError):
            jain_index(bad)


def _run(players: dict[str, object] | None) -> Run:
    summary = {"run_id": "x", "players": players} if players is not None else {"run_id": "x"}
    return Run(Path("/nonexistent"), "x", summary, {}, {}, None)


def test_client_values_only_for_several_dash_players() -> None:
    two = {"client1": {"startup_delay_s": 0.5, "dash": {"bitrate_avg_bps": 750_000.0, "stall_rate": 0.0,
                                                          "quality_avg": 0.5, "bitrate_switches": 1}},
           "client0": {"startup_delay_s": 0.4, "dash": {"bitrate_avg_bps": 1_600_000, "stall_rate": 0.01}}}
    v = client_values(_run(two))
    assert v is not None and list(v) == ["client0", "client1"]
    assert v["client0"] == {"bitrate_avg_bps": 1_600_000.0, "stall_rate": 0.01, "startup_delay_s": 0.4}
    assert v["client1"]["quality_avg"] == 0.5 and v["client1"]["bitrate_switches"] == 1.0
    assert run_fairness(v) == pytest.approx(2.35e6 ** 2 / (2 * (1.6e6 ** 2 + 0.75e6 ** 2)))
    # one player, no players, a player without a DASH record: no per-client view
    assert client_values(_run({"client0": two["client0"]})) is None
    assert client_values(_run(None)) is None
    assert client_values(_run({**two, "client2": {"dash": None}})) is None


def test_voip_delays_of_a_named_window_by_send_time(tmp_path: Path) -> None:
    from mpvlab.reporting.dash import voip_delays_ms
    (tmp_path / "data" / "cross").mkdir(parents=True)
    t0 = 5_000_000_000
    # packets sent at 1, 2, 3, 4 s after t0 with delays 10, 20, 30, 40 ms
    (tmp_path / "data" / "cross" / "voip-probe.csv").write_text(
        "seq,t_send_ns,queuing_delay_ns\n" + "".join(f"{i},{t0 + i * 10**9},{i * 10**7}\n" for i in (1, 2, 3, 4)))
    win = {"t0_ns": t0, "steady_state": {"start_s": 2.0, "end_s": 3.0}}
    run = Run(tmp_path, "x", {"cross_traffic": {"voip": {"windows": win}}}, {}, {}, None)
    assert voip_delays_ms(run) == [10.0, 20.0, 30.0, 40.0]              # the whole run
    assert voip_delays_ms(run, "steady_state") == [20.0, 30.0]          # bounds inclusive
    assert voip_delays_ms(run, "sabre_refill") == []                    # no such window in this run
    win["steady_state"] = None
    assert voip_delays_ms(run, "steady_state") == []


def test_advertised_windows_from_ss_samples(tmp_path: Path) -> None:
    from mpvlab.reporting.dash import advertised_windows
    (tmp_path / "data").mkdir()
    run = Run(tmp_path, "x", {}, {}, {}, None)
    f = tmp_path / "data" / "subflows.csv"
    f.write_text("t_s,local,peer,snd_wnd\n0.2,a,10.0.1.2:1,65536\n0.4,a,10.0.1.2:1,\n0.4,a,10.0.1.3:2,700000\n")
    # an empty cell is a closed window (ss prints snd_wnd only when it is non-zero)
    assert advertised_windows(run) == {"10.0.1.2:1": ([0.2, 0.4], [65536, 0]), "10.0.1.3:2": ([0.4], [700000])}
    f.write_text("t_s,local,peer,snd_wnd\n0.2,a,10.0.1.2:1,\n")       # never reported: no series at all
    assert advertised_windows(run) == {}
    f.write_text("t_s,local,peer\n0.2,a,10.0.1.2:1\n")                 # a run from before the column existed
    assert advertised_windows(run) == {}
