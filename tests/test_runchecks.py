"""The named whole-run plausibility checks (mpvlab/runner/runchecks.py) through what the run does after
teardown (fidelity.finish_summary, then the checks' one entry point mpvlab/runner/crosschecks.py),
on a planted probe record and player summary against the SABRE study's short scenario: 6 Mbit/s,
256-packet queue (256 x 1514 = 387 584 B, 516.8 ms at 6 Mbit/s), 50 ms each way. Issue 43 item 6:
a host stall delayed probe packets by seconds and stretched playback, and fidelity_ok stayed true.
The same checks on a real run with a planted stall: bench/bench_host_stall.py."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpvlab.input.scenario import load_scenario
from mpvlab.links import path as link_path
from mpvlab.runner import crosschecks, fidelity, runchecks
from mpvlab.runner.workloads.base import Outcome
from mpvlab.runner.steps import NO_FIDELITY_PROBE
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()
SCEN = ROOT / "scenarios" / "sabre-own-short.yaml"
# 387 584 B x 8 / 6e6 = 0.5167787 s + 0.050 s propagation + 0.100 s margin = 0.6667787 s
BOUND_MS = 666.779


def _judge(sc: Any, ctx: Any, schedules: dict[str, Any], fid: dict[str, Any], summary: dict[str, Any]) -> None:
    """The run's steps after teardown (lifecycle.py): the fidelity verdict, then every check."""
    ctx.scenario = sc
    fidelity.finish_summary(sc, ctx, schedules, fid, summary)
    state = crosschecks.CheckState(ctx, Outcome({}, 0.0, "", 0), schedules=schedules)
    crosschecks.apply(summary, fid, crosschecks.run(summary, state), ctx.opts.log)


def _checks(sc: Any, summary: dict[str, Any], tmp: Path) -> tuple[dict[str, Any], list[str]]:
    """The fidelity checks' records and warnings a run of `sc` with no queue or delay known makes."""
    ctx: Any = SimpleNamespace(scenario=sc, data=tmp, logs=tmp)
    r = crosschecks.run(summary, crosschecks.CheckState(ctx, Outcome({}, 0.0, "", 0), schedules={}))
    return r.records.get("fidelity_checks", {}), r.fidelity_warnings


def _probe_csv(path: Path, owds_ms: list[float]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["seq", "t_send_ns", "t_recv_ns", "owd_ns", "queuing_delay_ns", "d_study_ns"])
        for i, owd in enumerate(owds_ms):
            t = i * 15_000_000
            w.writerow([i, t, t + int(owd * 1e6), int(owd * 1e6), int((owd - 50) * 1e6), int((owd - 50) * 1e6)])
    return path


def _finish(tmp: Path, owds_ms: list[float], playback_s: float, stalls_s: float) -> dict[str, Any]:
    sc, _ = load_scenario(SCEN)
    spec = sc.paths["shared"]
    sched = fidelity.PathSchedules(down=link_path.schedule_for(spec.down, SCEN.parent),
                                   up=link_path.schedule_for(spec.up, SCEN.parent))
    csv_path = _probe_csv(tmp / "voip-probe.csv", owds_ms)
    player = {"playback_s": playback_s, "underflow_total_s": stalls_s}
    summary: dict[str, Any] = {"cross_traffic": {"voip": {"csv": str(csv_path)}},
                               "players": {"client1": dict(player), "client2": dict(player)}}
    logged: list[str] = []
    ctx = SimpleNamespace(extra_prov={}, data=tmp, logs=tmp, queue_rows={}, opts=SimpleNamespace(log=logged.append))
    fid = dict(NO_FIDELITY_PROBE)
    _judge(sc, ctx, {"shared": sched}, fid, summary)
    summary["_logged"] = logged
    return summary


def test_the_probe_bound_is_queue_over_rate_plus_propagation_plus_the_margin() -> None:
    assert runchecks.probe_delay_bound_s(387_584, 6e6, 0.050) * 1e3 == pytest.approx(BOUND_MS, abs=1e-3)


def test_a_healthy_record_passes_every_named_check(tmp_path: Path) -> None:
    # a full queue (516.8 ms) + 50 ms: within the bound; playback 20 s of media + 1.5 s of stalls + 1 s
    s = _finish(tmp_path, [50.0, 120.0, 566.8, 60.0], 22.5, 1.5)
    assert s["fidelity_ok"] is True and s["fidelity_warnings"] == []
    p = s["fidelity_checks"]["probe_delay_within_queue_bound"]
    assert (p["ok"], p["probe_owd_max_ms"], p["bound_ms"], p["packets"]) == (True, 566.8, BOUND_MS, 4)
    pl = s["fidelity_checks"]["playback_within_media_and_stalls"]
    assert pl["ok"] and pl["players"]["client1"]["bound_s"] == 23.5     # 20 + 1.5 + 2
    # the checks this run made, and the silence check of the next test, are rows of the one registry
    from mpvlab.results import checks
    assert set(s["fidelity_checks"]) | {"no_simultaneous_silence"} == checks.registered("fidelity_checks")


def test_a_probe_delay_beyond_the_queue_is_a_named_warning(tmp_path: Path) -> None:
    # one packet held 8.4 s (the host stall): no queue of this path can hold it
    s = _finish(tmp_path, [50.0, 8400.0, 60.0], 20.5, 0.0)
    assert s["fidelity_ok"] is False
    # the held packet also left 8.3 s with nothing received (no links.csv here): both are named
    w, silent = s["fidelity_warnings"]
    assert silent.startswith("no_simultaneous_silence: up to 8.325 s ")
    assert w.startswith("probe_delay_within_queue_bound: ") and "8400.0 ms" in w and f"{BOUND_MS:.1f} ms" in w
    assert s["fidelity_checks"]["probe_delay_within_queue_bound"]["ok"] is False
    assert s["fidelity_checks"]["playback_within_media_and_stalls"]["ok"] is True
    assert s["_logged"] == [f"fidelity warning: {w}", f"fidelity warning: {silent}"]
    # just above the bound fails too, just below passes
    assert _finish(tmp_path, [BOUND_MS + 0.01], 20.0, 0.0)["fidelity_ok"] is False
    assert _finish(tmp_path, [BOUND_MS - 0.01], 20.0, 0.0)["fidelity_ok"] is True


def test_playback_longer_than_media_and_stalls_is_a_named_warning(tmp_path: Path) -> None:
    # 20 s of media, no stall recorded, 35.7 s of playback: frozen without a stall
    s = _finish(tmp_path, [50.0], 35.7, 0.0)
    assert s["fidelity_ok"] is False
    (w,) = s["fidelity_warnings"]
    assert w.startswith("playback_within_media_and_stalls: ") and "client1 35.7 s > 22 s" in w
    assert _finish(tmp_path, [50.0], 22.0, 0.0)["fidelity_ok"] is True          # exactly the bound


def test_a_run_without_probe_or_players_has_no_named_check(tmp_path: Path) -> None:
    sc, _ = load_scenario(ROOT / "scenarios" / "rtp-gcc-short.yaml")
    assert _checks(sc, {"warnings": []}, tmp_path) == ({}, [])


# --- no_simultaneous_silence: 20 s of probe packets every 15 ms, 50 ms one way, and a client
# interface sampled every 10 ms (observe.sample_hz 100) that receives 1 514 B per sample. The
# threshold on this scenario: max(1 s floor, 666.8 ms probe bound + 10 ms sample period) = 1 s.

def _silence_run(tmp: Path, probe_gap: tuple[float, float] | None,
                 link_gap: tuple[float, float] | None) -> dict[str, Any]:
    """fidelity.finish_summary over a probe record with no packet received in `probe_gap` and a
    links.csv whose client interface received nothing in `link_gap` (run seconds, t0 = 0)."""
    sc, _ = load_scenario(SCEN)
    spec = sc.paths["shared"]
    sched = fidelity.PathSchedules(down=link_path.schedule_for(spec.down, SCEN.parent),
                                   up=link_path.schedule_for(spec.up, SCEN.parent))
    inside = lambda t, gap: gap is not None and gap[0] < t < gap[1]  # noqa: E731
    probe = tmp / "voip-probe.csv"
    with probe.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["seq", "t_send_ns", "t_recv_ns", "owd_ns", "queuing_delay_ns", "d_study_ns"])
        for i in range(20_000 // 15):
            ts = i * 15_000_000
            if not inside((ts + 50_000_000) / 1e9, probe_gap):
                w.writerow([i, ts, ts + 50_000_000, 50_000_000, 0, 0])
    (tmp / "client1").mkdir(exist_ok=True)
    with (tmp / "client1" / "links.csv").open("w") as fh:
        fh.write("t_s,path,interface,rx_bytes,rx_packets,tx_bytes,tx_packets\n")
        b = 0
        for k in range(2001):
            t = k / 100
            b += 0 if inside(t, link_gap) else 1514
            fh.write(f"{t:.4f},shared,c1,{b},{k},0,0\n")
    summary: dict[str, Any] = {"cross_traffic": {"voip": {"csv": str(probe)}}}
    ctx = SimpleNamespace(extra_prov={}, data=tmp, logs=tmp, queue_rows={}, t0_ns=0,
                          opts=SimpleNamespace(log=lambda _m: None))
    _judge(sc, ctx, {"shared": sched}, dict(NO_FIDELITY_PROBE), summary)
    return summary


def test_every_flow_and_the_probe_silent_for_seconds_is_a_named_warning(tmp_path: Path) -> None:
    # the host stall: 5 s in which the probe and the client's interface received nothing
    s = _silence_run(tmp_path, (8.0, 13.0), (8.0, 13.0))
    assert s["fidelity_ok"] is False
    (w,) = s["fidelity_warnings"]
    # 5 s less one links.csv period (its sample at 13.0 s says bytes arrived after 12.99 s)
    assert w.startswith("no_simultaneous_silence: up to 4.99 s (first at run time [8.0, 12.99] s) ")
    rec = s["fidelity_checks"]["no_simultaneous_silence"]
    assert (rec["ok"], rec["silence_threshold_s"], rec["silences"]) == (False, 1.0, 1)
    assert rec["longest_silence_s"] == 4.99 and rec["intervals_s"] == [[8.0, 12.99]]


def test_silence_of_the_probe_alone_or_shorter_than_the_threshold_passes(tmp_path: Path) -> None:
    # the probe lost 5 s of packets but the flow kept arriving: the emulator forwarded, not a stall
    s = _silence_run(tmp_path, (8.0, 13.0), None)
    assert s["fidelity_ok"] is True and s["fidelity_checks"]["no_simultaneous_silence"]["ok"] is True
    # both silent for 0.9 s: under the 1 s threshold
    assert _silence_run(tmp_path, (8.0, 8.9), (8.0, 8.9))["fidelity_ok"] is True
    # ... and 1.1 s is over it
    assert _silence_run(tmp_path, (8.0, 9.1), (8.0, 9.1))["fidelity_ok"] is False


def test_one_player_runs_playback_is_checked_from_its_duration(tmp_path: Path) -> None:
    """A dual-path run's summary holds its one player's playback as duration_s (no `players`, no
    playback_s): the check runs on it (a real smoke run's summary had no playback check before) and
    names the planted freeze; a bulk summary (duration_s, no stalls) has none."""
    sc, _ = load_scenario(ROOT / "scenarios" / "smoke.yaml")
    ok = runchecks.check_playback(sc, {"duration_s": 20.4, "underflow_total_s": 0.0})
    assert ok is not None and ok["ok"] and set(ok["players"]) == {"player"}
    checks, warnings = _checks(sc, {"duration_s": 31.0, "underflow_total_s": 1.0}, tmp_path)
    assert not checks["playback_within_media_and_stalls"]["ok"]
    assert warnings and warnings[0].startswith("playback_within_media_and_stalls: ") and "player 31 s > 23 s" in warnings[0]
    assert runchecks.check_playback(sc, {"duration_s": 20.0}) is None
