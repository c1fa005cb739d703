"""Issue 43 (measurement integrity): BBR mode shares per flow, over the flows that carried the video
and its active window (item 2); a summary holding NaN or Infinity is not a complete run (item 7);
warnings reach the researcher (printed by `mpvlab run`, runs with fidelity_ok false kept out of the
report's statistics and figures, CPU-late picture discards never drawn as the network's).

The dash.js run below is built as the runner writes it: `ss` samples of two Chromium connections to
the server's port 443 — the video connection and an idle one (an h2 preconnect that moved 1.4 KB and
never left STARTUP, then sat in PROBE_RTT after the last segment) — and Apache's access log naming
which connection made which requests."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpvlab.cc.bbr_modes import bbr_v1_mode
from mpvlab.cc.registry import REGISTRY
from mpvlab.core import rundir
from mpvlab.results import flows
from mpvlab.results.aggregate import aggregate
from mpvlab.runner import crosschecks, views
from mpvlab.runner.workloads.base import Outcome

SS_HEADER = ("t_s,local,peer,cc,mptcp,cwnd,srtt_ms,rttvar_ms,delivery_rate_bps,pacing_rate_bps,bytes_acked,retrans,"
             "bbr_bw_bps,bbr_min_rtt_ms,mptcp_token,bbr_pacing_gain,bbr_cwnd_gain,bbr_mode,snd_wnd\n")
SERVER = "10.0.100.1:443"
VIDEO, IDLE = "10.0.1.2:50000", "10.0.1.2:50002"
HZ = 5
FIRST_REQ_S, LAST_BYTE_S, END_S = 1.0, 20.0, 44.0     # the idle connection lives on 24 s after the video


def _gains(mode: str) -> tuple[float, float]:
    return {"STARTUP": (2.885, 2.885), "DRAIN": (0.347, 2.885), "PROBE_RTT": (1.0, 1.0),
            "PROBE_BW": (1.0, 2.0)}[mode]


def _video_mode(t: float) -> str:
    """STARTUP for the first 0.4 s of data, DRAIN 0.2 s, then PROBE_BW with 0.2 s of PROBE_RTT every 10 s."""
    if t < FIRST_REQ_S + 0.4:
        return "STARTUP"
    if t < FIRST_REQ_S + 0.6:
        return "DRAIN"
    return "PROBE_RTT" if (t - FIRST_REQ_S) % 10.0 >= 9.8 else "PROBE_BW"


def _ss_rows() -> str:
    rows = []
    for i in range(int(END_S * HZ) + 1):
        t = i / HZ
        if t <= LAST_BYTE_S + 0.5:        # the video connection closes half a second after its last byte
            acked = 1 if t < FIRST_REQ_S + 0.2 else 1 + int(min(t, LAST_BYTE_S) / LAST_BYTE_S * 50_000_000)
            mode = _video_mode(t) if t >= FIRST_REQ_S else "STARTUP"
            pg, cg = _gains(mode)
            rows.append(f"{t:.4f},{SERVER},{VIDEO},bbr,0,40,100.5,1.0,25e6,25e6,{acked},0,24e6,100.0,,{pg},{cg},"
                        f"{bbr_v1_mode(pg, cg)},600000\n")
        # the idle connection: 1.4 KB at t = 0.4, STARTUP until the video ends, then PROBE_RTT
        mode = "STARTUP" if t < LAST_BYTE_S else "PROBE_RTT"
        pg, cg = _gains(mode)
        acked = 1 if t < 0.4 else 1401
        rows.append(f"{t:.4f},{SERVER},{IDLE},bbr,0,10,100.5,1.0,0,0,{acked},0,0,100.0,,{pg},{cg},"
                    f"{bbr_v1_mode(pg, cg)},600000\n")
    return SS_HEADER + "".join(rows)


ACCESS_LOG = (
    '10.0.1.2 49990 [24/Nov/2026:10:00:00 +0000] "HEAD /v/manifest.mpd?mpvlab-preflight=1 HTTP/1.1" 200 0 90 0 '
    '"-" HTTP/1.1 TLSv1.3 x\n'
    + "".join(f'10.0.1.2 50000 [24/Nov/2026:10:00:{i + 1:02d} +0000] "GET /v/seg-{i}.m4s HTTP/2.0" 200 '
              f'{50_000_000 // 20} 900 {i} "-" HTTP/2.0 TLSv1.3 x\n' for i in range(20)))


def _dashjs_run(root: Path, fidelity_ok: bool = True) -> Path:
    run = root / "dashjs-bbr" / "r00001"
    rundir.write_text(run / "data" / "subflows.csv", _ss_rows())
    rundir.write_text(run / "logs" / "apache" / "access.log", ACCESS_LOG)
    return run


def _summarised(run: Path) -> dict[str, Any]:
    """cc_state as the run computes it (views.cc_state_view, the runner's own function)."""
    ctx: Any = SimpleNamespace(data=run / "data", logs=run / "logs", t0_ns=None,
                               scenario=SimpleNamespace(transport=SimpleNamespace(cc_entry=REGISTRY["bbr"])))
    sampler: Any = SimpleNamespace(server_port=443)
    view = views.cc_state_view(ctx, sampler, LAST_BYTE_S + 24.0)   # playback ends as the idle flow does
    assert view is not None
    return view


def test_mode_shares_are_over_the_video_flow_and_its_active_window(tmp_path: Path) -> None:
    """Item 2. Root cause: cc_state time-weighted every flow on the workload's port alike, so the idle
    Chromium connection's STARTUP (and its PROBE_RTT after the last segment) entered the shares."""
    v = _summarised(_dashjs_run(tmp_path))
    by_flow = {f["flow"]: f for f in v["flows"]}
    video, idle = by_flow[f"{SERVER}-{VIDEO}"], by_flow[f"{SERVER}-{IDLE}"]
    # each flow's role and bytes beside its own shares
    assert (video["carried"], video["http_requests"], video["http_bytes"]) == ("media", 20, 50_000_000)
    assert video["bytes_acked"] == 50_000_000 and video["in_shares"]
    assert (idle["carried"], idle["http_requests"], idle["bytes_acked"], idle["in_shares"]) == ("idle", None, 1400, False)
    assert idle["mode_share_whole_run_time_weighted"]["STARTUP"] == pytest.approx(20.0 / 44.2, abs=0.01)
    # the headline: the video flow only, first request → last byte (at the 0.2 s ss interval)
    assert v["window"] == "active" and v["flows_in_shares"] == [f"{SERVER}-{VIDEO}"]
    assert v["window_s"] == pytest.approx([FIRST_REQ_S, LAST_BYTE_S], abs=1.0 / HZ + 1e-9)
    tw = v["mode_share_time_weighted"]
    assert tw["STARTUP"] == pytest.approx(0.4 / 19.0, abs=0.015)     # 0.4 s of 19 s
    assert sum(tw.values()) == pytest.approx(1.0)
    # the all-flows figure the summary used to give, kept beside it for comparison
    everything = v["mode_share_time_weighted_all_workload_flows"]
    assert everything["STARTUP"] > 0.3 and everything["PROBE_RTT"] > 0.3
    assert video["mode_share_active_time_weighted"] == pytest.approx(tw)


def test_mode_share_check_warns_when_an_idle_flow_is_in_the_shares(tmp_path: Path) -> None:
    v = _summarised(_dashjs_run(tmp_path))
    assert flows.mode_share_check(v)["ok"]
    planted = json.loads(json.dumps(v))
    for f in planted["flows"]:
        f["in_shares"] = True                       # the old selection: every workload-port flow
    r = flows.mode_share_check(planted)
    assert not r["ok"] and r["without_workload_bytes"] == [f"{SERVER}-{IDLE}"]


def test_mode_share_check_warns_when_the_log_misses_a_flow_that_moved_data(tmp_path: Path) -> None:
    run = _dashjs_run(tmp_path)
    rundir.write_text(run / "logs" / "apache" / "access.log", ACCESS_LOG.replace(" 50000 ", " 50001 "))
    v = _summarised(run)
    r = flows.mode_share_check(v)
    assert not r["ok"] and not r["flows_in_shares"]
    # through the checks' one entry point, as the run makes it (crosschecks.py)
    ctx: Any = SimpleNamespace(scenario=None, data=tmp_path, logs=tmp_path)
    got = crosschecks.run({"cc_state": v}, crosschecks.CheckState(ctx, Outcome({}, 0.0, "", 0)), "dash.js")
    assert got.warnings and got.warnings[0].startswith("cross-check mode_shares_over_workload_flows failed:")


def test_mode_share_check_flags_a_heavy_flow_left_out() -> None:
    view = {"flows": [
        {"flow": "a", "role": "workload", "in_shares": True, "carried": "media", "bytes_acked": 1_000_000},
        {"flow": "b", "role": "workload", "in_shares": False, "carried": "page", "bytes_acked": 400_000}]}
    r = flows.mode_share_check(view)
    assert not r["ok"] and r["left_out_with_large_bytes"] == ["b"]
    view["flows"][1]["bytes_acked"] = 13_000               # a page connection's 13 KB: fine
    assert flows.mode_share_check(view)["ok"]


def test_page_prefixes_agree_with_the_workload() -> None:
    from mpvlab.runner.workloads.video import PAGE_REQUEST_PREFIXES
    from mpvlab.results import flow_ids
    assert flow_ids.PAGE_PREFIXES == PAGE_REQUEST_PREFIXES


def _set(root: Path, trials: int = 3) -> list[Path]:
    from mpvlab.reporting import synthetic
    synthetic.make_set(root, ["s"], ["cubic"], ["default"], trials)
    return sorted((root / "s").iterdir())


def test_a_summary_with_nan_or_infinity_is_not_a_complete_run(tmp_path: Path) -> None:
    """Item 7. Root cause: Python's json reads the non-JSON NaN and Infinity, run_metrics then took NaN
    for "missing" and let Infinity into the statistics, and nothing refused such a summary."""
    runs = _set(tmp_path)
    for run, (key, token) in zip(runs, (("underflows", "NaN"), ("stall_ratio", "Infinity"))):
        text = (run / "summary.json").read_text()
        s = json.loads(text)
        s[key] = 0.123456789        # a placeholder, replaced by the bare token in the text
        (run / "summary.json").write_text(json.dumps(s).replace("0.123456789", token))
    c = aggregate(tmp_path)
    bad = {Path(b.rel).name: b for b in c.not_aggregated}
    assert {runs[0].name, runs[1].name} == set(bad)
    assert bad[runs[0].name].state == "invalid-summary" and "NaN at underflows" in bad[runs[0].name].reason
    assert "Infinity at stall_ratio" in bad[runs[1].name].reason
    (cfg,) = c.configs
    assert [r.run_dir for r in cfg.runs] == [runs[2]]
    assert cfg.stats["stall_ratio"].n == 1 and cfg.stats["underflows"].n == 1


def _warn(run: Path, fidelity_ok: bool, finding: str) -> None:
    s = json.loads((run / "summary.json").read_text())
    s["fidelity_ok"] = fidelity_ok
    s["fidelity_warnings"] = [] if fidelity_ok else [finding]
    rundir.write_json(run / "summary.json", s)


def test_report_leaves_a_run_with_fidelity_ok_false_out_and_says_so(tmp_path: Path) -> None:
    from mpvlab.reporting import build_report
    runs = _set(tmp_path / "res")
    _warn(runs[0], False, "wifi-down: achieved rate 0.71 of the configured 3 Mbit/s")
    values = [json.loads((r / "summary.json").read_text())["underflows"] for r in runs]
    rep = build_report(tmp_path / "res", tmp_path / "rep", figures=False)
    c = rep.collection
    (cfg,) = c.configs
    assert [r.run_dir for r in cfg.runs] == runs[1:] and rep.n_complete == 2
    assert cfg.stats["underflows"].n == 2 and cfg.stats["underflows"].mean == pytest.approx(sum(values[1:]) / 2)
    assert c.kept_and_left_out() == [(cfg.label, 2, 1, [f"s/{runs[0].name}: fidelity_ok false: wifi-down: achieved "
                                                        "rate 0.71 of the configured 3 Mbit/s"])]
    page = rep.html.read_text()
    assert "1 complete run(s) with fidelity_ok false left out" in page and "achieved rate 0.71" in page
    assert runs[0].name in (tmp_path / "rep" / "left_out.csv").read_text()
    # … and kept on request
    rep2 = build_report(tmp_path / "res", tmp_path / "rep2", figures=False, include_warned=True)
    assert rep2.collection.configs[0].stats["underflows"].n == 3 and not rep2.collection.left_out


def test_run_prints_every_warning_on_its_own_line() -> None:
    from mpvlab.cli import warning_lines
    s = {"fidelity_ok": False, "fidelity_warnings": ["wifi-down: p99 delay error 31 ms"],
         "warnings": ["cross-check collector_lost_events failed: {'lost': 3, 'ok': False}", "two\nlines"],
         "sampler_errors": ["links sampler: gone"]}
    lines = warning_lines(s)
    assert lines[0].startswith("[yellow]  4 warning(s) (fidelity_ok is false")
    assert len(lines) == 5 and all("\n" not in ln for ln in lines)
    assert "fidelity: wifi-down: p99 delay error 31 ms" in lines[1]
    assert "collector_lost_events failed: {'lost': 3" in lines[2]       # the dict's [ ] escaped for rich
    assert lines[-1].endswith("sampler: links sampler: gone[/yellow]")
    assert warning_lines({"fidelity_ok": True, "fidelity_warnings": [], "warnings": []}) == []


def test_sweep_progress_counts_warned_runs() -> None:
    from rich.console import Console

    from mpvlab.sweeps import Event
    from mpvlab.sweeps.display import SweepDisplay
    console = Console(record=True, width=200, force_terminal=False)
    d = SweepDisplay(console, 3, 1, {})
    for key, entry in (("a", {"warnings": 0, "fidelity_ok": True}),
                       ("b", {"warnings": 2, "fidelity_ok": False, "first_warning": "fidelity: rate 0.7"}),
                       ("c", {"warnings": 1, "fidelity_ok": True, "first_warning": "cross-check x failed: {}"})):
        d.event(Event("start", key, entry={"seed": 1}))
        d.event(Event("end", key, "complete", entry))
    assert (d.warned, d.left_out) == (2, 1)
    assert "2 with warnings (1 fidelity_ok false)" in d.render().plain
    out = console.export_text()
    assert "2 warning(s), fidelity_ok false: left out of the report; first: fidelity: rate 0.7" in out


def test_cpu_late_discards_are_not_drawn_as_the_network_s(tmp_path: Path) -> None:
    from mpvlab.reporting.figures import bar_metrics
    from mpvlab.results.aggregate import run_metrics
    bars = [m for m, _, _ in bar_metrics()]
    assert "picture_discards" not in bars         # the total mixes both causes
    assert "picture_discards_network" in bars and "picture_discards_no_underflow" in bars
    titles = {m: t for m, t, _ in bar_metrics()}
    assert "CPU-late" in titles["picture_discards_no_underflow"] and "network" in titles["picture_discards_network"]
    # a run recorded before the split: the network's part from the two counts
    m = run_metrics({"picture_discards": 40, "picture_discards_no_underflow": 30})
    assert m["picture_discards_network"] == 10.0
    from mpvlab.runner.workloads.video import player_view
    assert player_view({"picture_discards": 40, "picture_discards_no_underflow": 30})["picture_discards_network"] == 10
    assert player_view({"picture_discards": 40})["picture_discards_network"] is None
