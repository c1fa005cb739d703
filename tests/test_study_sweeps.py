"""The two DASH studies' short sweeps end to end (issue 19), each `mpvlab sweep … --quick` through the
CLI, then its report — checked against the records and first principles, not against timings.

- BBR-S DASH study (docs/studies.md §2, sweeps/bbrs-dash-study.yaml --quick): BBR vs BBR-S with BOLA at a
  100 KB and a 10 MB buffer, 10 s of the study's 11-level ladder in 5 s segments, our own client and
  dash.js in headless Chromium (player.kind).
- SABRE residential study (§4, sweeps/sabre-study.yaml --quick): two clients on 6 Mbit/s, 256 packets,
  100 ms RTT with the VoIP probe, on-off vs SABRE, 20 s of video in 2 s segments; the report's per-client
  figure, clients.csv and the fairness metric checked against the players' records.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mpvlab.core.hoststeal import StealMeter
from hostnoise import longest_stall_s
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"
pytestmark = [pytest.mark.netns, pytest.mark.e2e]
# Per test (issue 44): both assert timing bounds (tests/hostnoise.py); the SABRE sweep's runs were measured
# at 0.24 cores, so it may share the machine with one other `cpu_light` test; the BBR-S sweep (0.50) may not.


def _sweep(spec: str, res: Path, parallel: int = 1) -> tuple[subprocess.CompletedProcess[str], float, float]:
    t = time.monotonic()
    with StealMeter() as steal:
        cp = subprocess.run([str(MPVLAB), "sweep", str(REPO / "sweeps" / spec), "--quick", "--results", str(res),
                             "--parallel", str(parallel), "--include-warned"],
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, cwd=REPO)
    return cp, time.monotonic() - t, longest_stall_s(steal.window)


def _runs(root: Path, n: int, cp: subprocess.CompletedProcess[str]) -> list[tuple[dict[str, Any], Path]]:
    man = json.loads((root / "sweep.json").read_text())
    states = {r["key"]: (r["state"], r["reason"]) for r in man["runs"]}
    assert len(states) == n, states
    failed = {k: v for k, v in states.items() if v[0] != "complete"}
    assert not failed and cp.returncode == 0, f"{failed}\n{cp.stdout[-3000:]}\n{cp.stderr[-2000:]}"
    return [(r, root / r["run_dir"]) for r in man["runs"]]


def _check_qoe(ps: dict[str, Any], qoe: dict[str, Any], n_segments: int, frames: int) -> list[int]:
    """The per-run QoE adds up from the per-segment records; returns the levels."""
    segs = ps["segments"]
    assert [s["index"] for s in segs] == list(range(n_segments))
    rates = [r["bitrate_bps"] for r in ps["representations"]]
    levels = [s["level"] for s in segs]
    assert all(0 <= lv < len(rates) and s["bitrate_bps"] == rates[lv] for lv, s in zip(levels, segs))
    d = qoe["dash"]
    assert d["segments"] == n_segments
    assert d["quality_avg"] == pytest.approx(sum(levels) / n_segments)
    assert d["bitrate_avg_bps"] == pytest.approx(sum(rates[lv] for lv in levels) / n_segments)
    assert d["bitrate_switches"] == sum(a != b for a, b in zip(levels, levels[1:]))
    assert d["stall_rate"] >= 0 and d["stall_rate"] == pytest.approx(
        max(0.0, (ps["playback_s"] - ps["video_length_s"]) / ps["video_length_s"]), abs=2e-6)
    assert d["rebuffer_events"] == qoe["underflows"]
    assert d["rebuffer_ratio"] == pytest.approx(qoe["underflow_total_s"] / ps["playback_s"], abs=2e-6)
    assert qoe["startup_delay_s"] is not None and qoe["startup_delay_s"] >= 0
    assert qoe["frames_rendered"] + qoe["picture_discards"] == qoe["frames_expected"] == frames
    return levels


@pytest.mark.cpu   # cpu: asserts timing bounds (tests/hostnoise.py); measured 0.60 cores at --parallel 2
@pytest.mark.first   # first: the suite's second-longest test (110 s in S11): its file is handed out first
def test_bbrs_dash_study_quick_sweep_and_report(tmp_path: Path) -> None:
    # Two runs at once: 58 s against 108–110 s one at a time (S11; this test holds the CPU lock, so its
    # wall is the critical path's). Every figure printed below was the same in both (levels [0, 10] in every
    # run, dash.js one underflow of 0.75–0.84 s per run, our own client none), and what is asserted is a
    # count, a sum or a bound that more time only loosens (bytes ≤ burst + rate × the response's time).
    cp, wall, _ = _sweep("bbrs-dash-study.yaml", tmp_path, parallel=2)
    root = tmp_path / "bbrs-dash-study-quick"
    runs = _runs(root, 8, cp)
    print(f"\nsweep wall {wall:.1f} s")
    rate, burst = 25_000_000, 1_000_000
    for r, d in runs:
        s = json.loads((d / "summary.json").read_text())
        ps = json.loads((d / "logs" / "player-summary.json").read_text())
        p = r["params"]
        assert s["cc"] == p["transport.cc"] and ps["abr"]["name"] == "bola"
        own = p["player.kind"] == "gstreamer"
        assert ps["fetcher"] == ("own" if own else "dashjs")
        if own:
            assert ps["transport"]["so_protocol"] == 262          # IPPROTO_MPTCP
        else:
            assert s["subflows"] and s["cross_checks"]["subflow_addresses"]["ok"]   # Chromium over MPTCP
        levels = _check_qoe(ps, s, 2, 300)
        print(f"{p['player.kind']:9} {p['transport.cc']:6} buffer {p['paths.wan.down.buffer']:>5}: levels {levels}, "
              f"quality {s['dash']['quality_avg']}, stall rate {s['dash']['stall_rate']}, "
              f"startup {s['startup_delay_s']} s, underflows {s['underflows']}")
        # dash.js's request times are the browser's (ms Dates, mapped onto the run's clock): 5 ms of slack.
        slack_s = 0.0 if own else 0.005
        for g in ps["segments"]:
            # One request at a time (BOLA): a response's body passed the token bucket after its request,
            # so it is at most the bucket's burst + rate × (last byte − request).
            if own:
                assert g["outstanding"] == 1
            assert g["bytes"] <= burst + rate / 8 * (g["t_last_byte"] - g["t_request"] + slack_s), g
    figs = {f.stem for f in (root / "report" / "figures").glob("*.svg")}
    # One buffer figure per player (the report splits by every other varied field), one bitrate figure.
    # dash.js takes no player.buffer (its own buffer settings, dash.js's defaults: issue 47), so the
    # players' runs also differ in player.buffer.
    assert "dash-bitrate-bbrs-dash" in figs, figs
    assert {f for f in figs if f.startswith("dash-buffer-bbrs-dash")} == {
        "dash-buffer-bbrs-dash_player.buffer_10s_player.fetcher_own_player.kind_gstreamer",
        "dash-buffer-bbrs-dash_player.buffer_None_player.fetcher_dashdemux_player.kind_dashjs"}, figs
    # Single-client runs: no per-client figure or table (their report is as before).
    assert not any(f.startswith("dash-clients") for f in figs) and not (root / "report" / "clients.csv").exists()
    page = (root / "report" / "report.html").read_text()
    assert "DASH rebuffer ratio" in page and "against the bottleneck buffer" in page


RATE, LIMIT = 6_000_000, 256 * 1514
DRAIN_MS = LIMIT * 8 / RATE * 1e3          # 516.8 ms: a full queue's drain time


@pytest.mark.tools("iperf3")
@pytest.mark.cpu_light   # cpu_light: measured 0.24 cores (docs/testing.md); asserts timing bounds
def test_sabre_study_quick_sweep_and_report(tmp_path: Path) -> None:
    cp, wall, stall_s = _sweep("sabre-study.yaml", tmp_path)
    root = tmp_path / "sabre-study-quick"
    runs = _runs(root, 2, cp)
    print(f"\nsweep wall {wall:.1f} s")
    expected_clients: dict[str, tuple[float, dict[str, Any]]] = {}
    for r, d in runs:
        s = json.loads((d / "summary.json").read_text())
        abr = r["params"]["player.abr"]
        assert set(s["players"]) == {"client0", "client1"}
        for role, qoe in s["players"].items():
            ps = json.loads((d / "logs" / role / "player-summary.json").read_text())
            assert ps["abr"]["name"] == abr and ps["transport"]["so_protocol"] == 262
            levels = _check_qoe(ps, qoe, 10, 600)
            rates = [x["bitrate_bps"] for x in ps["representations"]]
            rcv = ps["transport"]["rcvbuf_bytes"]
            decs = ps["abr_decisions"]
            if abr == "on-off":
                # the paper's baseline: no SO_RCVBUF, the kernel's autotuning sizes the receive buffer
                assert (rcv, ps["transport"]["rcvbuf_source"]) == (None, "kernel autotuning")
                assert all(x["outstanding"] == 1 for x in decs)
            else:
                assert (rcv, ps["transport"]["rcvbuf_source"]) == (262144, "sabre rcvbuf_bytes")
                # SABRE keeps 1 + ceil(rcvbuf·8/(r·s)) requests outstanding for the level current when each
                # went out: every batch of requests (same instant) fills the pipeline to exactly that, or
                # to every segment sent so far, unless the stream ran out of segments.
                def depth(lv: int, rcv: int = rcv, rates: list[int] = rates) -> int:
                    return 1 + math.ceil(rcv * 8 / (rates[lv] * 2.0))
                batches: dict[float, list[dict[str, Any]]] = {}
                for x in decs:
                    assert x["outstanding"] <= depth(x["level_before"]), x
                    batches.setdefault(x["t"], []).append(x)
                full = [b[-1] for b in batches.values() if b[-1]["index"] < 9]
                assert full and all(x["outstanding"] == min(depth(x["level_before"]), x["index"] + 1)
                                    for x in full), decs
                # The general case (§4.2), 10 s buffer, 2 s segments: unpaced until the buffer holds the
                # initial 60 s capped at 10 - 2 = 8 s; then backoff at >= 8 s, refill below min(85 % x 10,
                # 8 - 1) = 7 s; reads throttled exactly while the socket is below 75 % full.
                mode, phase = "refill", "initial"
                for c in ps["sabre_checks"]:
                    if phase == "initial":
                        want_phase = "steady" if c["buffer_s"] >= 8.0 else "initial"
                        want = ("backoff" if c["buffer_s"] >= 8.0 else "refill") if want_phase == "steady" else mode
                        assert c["read_bps"] is None or want_phase == "steady", c
                    else:
                        want_phase = "steady"
                        want = ("backoff" if c["buffer_s"] >= 8.0 else "refill") if mode == "refill" else \
                            ("refill" if c["buffer_s"] < 7.0 else "backoff")
                    assert (c["phase"], c["mode"]) == (want_phase, want), c
                    if c["phase"] == "steady":
                        # the record rounds occupancy to 4 decimals: within 0.00005 of the threshold
                        # the rounded value cannot tell which side the player saw
                        assert c["throttled"] == (c["occupancy"] < 0.75) or abs(c["occupancy"] - 0.75) <= 5e-5, c
                    mode, phase = c["mode"], c["phase"]
            print(f"{abr:6} {role}: levels {levels}, quality {qoe['dash']['quality_avg']}, stall rate "
                  f"{qoe['dash']['stall_rate']}, startup {qoe['startup_delay_s']} s, "
                  f"modes {sum(c['changed'] for c in ps.get('sabre_checks') or [])} changes")
        agg = s["aggregate"]
        for k in ("quality_avg", "stall_rate", "rebuffer_ratio", "bitrate_switches"):
            assert agg[f"{k}_mean"] == pytest.approx(sum(q["dash"][k] for q in s["players"].values()) / 2, abs=1e-6)
        # Between the two clients: Jain's index of their average bitrates, (Σx)²/(N·Σx²), in [1/2, 1], and the
        # range of their bitrates and the worst stall rate — computed here from each player's record.
        rates = [q["dash"]["bitrate_avg_bps"] for q in s["players"].values()]
        jain = sum(rates) ** 2 / (2 * sum(x * x for x in rates))
        assert 0.5 <= jain <= 1.0 and agg["bitrate_fairness_jain"] == pytest.approx(jain, abs=1e-6)
        assert (agg["bitrate_avg_bps_min"], agg["bitrate_avg_bps_max"]) == (min(rates), max(rates))
        assert agg["stall_rate_max"] == max(q["dash"]["stall_rate"] for q in s["players"].values())
        expected_clients[s["run_id"]] = (jain, {role: q for role, q in s["players"].items()})
        v = s["cross_traffic"]["voip"]
        with (d / "data" / "cross" / "voip-probe.csv").open() as f:
            qd = [int(row["queuing_delay_ns"]) / 1e6 for row in csv.DictReader(f)]
        assert len(qd) == v["received"] and v["received"] + v["lost"] == v["sent"]
        assert v["rx_timestamp"] == "kernel SO_TIMESTAMPNS"
        # No packet waits longer than a full queue drains (+ its own serialisation, + 15 ms of delay-line
        # and wake-up latency on this 2-core host, + the longest host stall seen: tests/hostnoise.py).
        assert min(qd) == 0.0 and max(qd) <= DRAIN_MS + 0.2 + 15.0 + stall_s * 1e3, (max(qd), stall_s)
        print(f"{abr:6} VoIP queuing delay ms: p50 {v['queuing_delay_ms']['p50']}, p95 "
              f"{v['queuing_delay_ms']['p95']}, p99 {v['queuing_delay_ms']['p99']}, max {max(qd):.1f}")
        # The named windows, recomputed here from the probe's CSV and the players' own records: the steady
        # state runs from the later of the two players' first segment after which its buffer held >= 8 s to
        # the later of their last segments; its packets are those sent inside, by send time.
        w = v["windows"]
        assert w["whole_run"]["packets"] == v["received"] and w["whole_run"]["max"] == round(max(qd), 3)
        pss = {role: json.loads((d / "logs" / role / "player-summary.json").read_text()) for role in s["players"]}
        reached = [next((g["t_last_byte"] for g in p["segments"] if g["buffer_s_at_done"] >= 8.0 - 1e-6), None)
                   for p in pss.values()]
        st = w["steady_state"]
        if None in reached:
            # 20 s of video: a player whose buffer never held 8 s (the on/off client chasing the bandwidth
            # with its level rule) has no steady state, and the summary says why instead of a number
            assert st is None and "never held 10 s less one segment" in w["steady_state_missing"], w
            print(f"{abr:6} no steady state: {w['steady_state_missing']}")
            continue
        start = max(t for t in reached if t is not None)
        end = max(g["t_last_byte"] for p in pss.values() for g in p["segments"])
        assert (st["start_s"], st["end_s"]) == (round(start, 3), round(end, 3))
        with (d / "data" / "cross" / "voip-probe.csv").open() as f:
            inside = sorted(int(row["queuing_delay_ns"]) / 1e6 for row in csv.DictReader(f)
                            if start <= (int(row["t_send_ns"]) - w["t0_ns"]) / 1e9 <= end)
        assert st["packets"] == len(inside) > 0 and st["max"] == round(inside[-1], 3)
        assert st["share_above_ms"]["100"] == round(sum(x > 100 for x in inside) / len(inside), 6)
        if abr == "sabre":
            assert sum(w[k]["packets"] for k in ("sabre_initial", "sabre_refill", "sabre_backoff", "sabre_mixed")
                       if w.get(k)) == st["packets"]
        print(f"{abr:6} steady state {start:.1f}-{end:.1f} s: {st['packets']} packets, p95 {st['p95']}, "
              f"max {st['max']}, share > 100 ms {st['share_above_ms']['100']}")
    figs = {f.stem for f in (root / "report" / "figures").glob("*.svg")}
    assert {"voip-ccdf-sabre-shared", "dash-bitrate-sabre-shared", "dash-clients-sabre-shared"} <= figs, figs
    # The per-client table behind that figure: one row per run × client, each value the player's own, and
    # the run's Jain index as computed above.
    with (root / "report" / "clients.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((x["run_id"], x["client"]) for x in rows) == sorted(
        (rid, role) for rid, (_, ps) in expected_clients.items() for role in ps)
    for x in rows:
        jain, ps = expected_clients[x["run_id"]]
        q = ps[x["client"]]
        assert int(x["clients"]) == 2 and float(x["bitrate_fairness_jain"]) == pytest.approx(jain, rel=1e-9)
        for k in ("bitrate_avg_bps", "quality_avg", "stall_rate", "rebuffer_ratio", "bitrate_switches"):
            assert float(x[k]) == pytest.approx(q["dash"][k], rel=1e-9, abs=1e-12), (k, x)
        assert float(x["startup_delay_s"]) == pytest.approx(q["startup_delay_s"], rel=1e-9)
    # The fairness is a typed metric of the report: its per-configuration mean (one trial) is the run's index.
    with (root / "report" / "stats.csv").open(newline="") as f:
        st = [x for x in csv.DictReader(f) if x["metric"] == "aggregate.bitrate_fairness_jain"]
    by_cfg = {x["config"]: x for x in rows}
    assert len(st) == 2 and all(
        float(x["mean"]) == pytest.approx(float(by_cfg[x["config"]]["bitrate_fairness_jain"]), abs=1e-6) for x in st)
    for rid, (jain, ps) in expected_clients.items():
        print(f"run {rid}: Jain {jain:.4f}, " + ", ".join(
            f"{role} {q['dash']['bitrate_avg_bps'] / 1e6:.3f} Mbit/s stall rate {q['dash']['stall_rate']}"
            for role, q in ps.items()))
    # The study's per-run numbers are metrics of the report (tables with intervals over trials).
    page = (root / "report" / "report.html").read_text()
    assert "VoIP probe queuing delay, 95th percentile" in page and "DASH average quality level (mean over players)" in page
    assert "DASH bitrate fairness between players (Jain)" in page and "Clients sharing the bottleneck" in page
