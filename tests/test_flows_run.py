"""A short real BBR-S run (dumbbell, 4 s video, ~15 s wall): the summary's CC estimate is the mean over
the video flow's rows only, the flow being found here independently of mpvlab/results/flows.py (Apache's
access log names the GET's client port); the probe, the loopback check and the preflight request in
the same state file are named as such and left out."""

from __future__ import annotations

import csv
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import mpvlab.results
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
pytestmark = [pytest.mark.netns, pytest.mark.e2e]

SCENARIO = """\
name: flowroles
topology: {kind: dumbbell}
paths:
  path:
    down: {rate: 10mbit, buffer: 200KB, delay: 20ms}
transport: {cc: bbr-s}
video: {duration: 4s, bitrate: 2mbit, width: 640, height: 360}
fidelity: {probe_duration: 2s}
"""
STATES = {"STARTUP", "DRAIN", "PROBE_BW:UP", "PROBE_BW:DOWN", "PROBE_BW:CRUISE", "PROBE_RTT"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("flowroles")
    (tmp / "s.yaml").write_text(SCENARIO)
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(tmp / "s.yaml"), "--results", str(tmp / "r")],
                        capture_output=True, text=True, timeout=240, cwd=REPO)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (d,) = [p for p in (tmp / "r" / "flowroles").iterdir() if p.is_dir()]
    return d


def _video_port(run_dir: Path) -> tuple[str, int]:
    """The client's address and port of the video's GET (not loopback, not the preflight HEAD)."""
    gets = []
    for ln in (run_dir / "logs" / "apache" / "access.log").read_text().splitlines():
        host, port, rest = ln.split(" ", 2)
        if '"GET ' in rest and not host.startswith("127."):
            gets.append((host, int(port)))
    assert len(set(gets)) == 1, gets            # one progressive download, one connection
    return gets[0]


def _preflight_ports(run_dir: Path) -> set[int]:
    return {int(ln.split(" ", 2)[1]) for ln in (run_dir / "logs" / "apache" / "access.log").read_text().splitlines()
            if "mpvlab-preflight=1" in ln}


def _is_player(r: dict[str, str], client: str, http_port: int, preflight: set[int]) -> bool:
    """A connection of the player: from the client to the HTTP port, not the preflight request (the
    video's GET; a player could open another connection that never makes a request)."""
    return r["daddr"] == client and int(r["sport"]) == http_port and int(r["dport"]) not in preflight


def test_summary_estimate_is_the_video_flows_mean(run_dir: Path) -> None:
    s = json.loads((run_dir / "summary.json").read_text())
    view = s["cc_state"]
    t0 = json.loads((run_dir / "logs" / "player-summary.json").read_text())["t0_ns"]
    # The estimate is taken over the video's active window (its first request to its last byte, at the
    # ss sampling interval: issue 43), inside playback; the playback window is named beside it.
    lo, hi = view["window_s"]
    assert view["window"] == "active" and 0.0 <= lo < hi <= s["duration_s"]
    assert view["playback_window_s"][0] == 0.0 and view["playback_window_s"][1] == pytest.approx(s["duration_s"])
    client, port = _video_port(run_dir)
    with (run_dir / "data" / "bbrs_state.csv").open() as f:
        rows = list(csv.DictReader(f))
    player = [r for r in rows if _is_player(r, client, s["http"]["port"], _preflight_ports(run_dir))]
    # the video's connection (as a rule the only one of the player; another it opened would be workload too)
    assert port in {int(r["dport"]) for r in player}
    inwin = [r for r in player if lo <= (int(r["t_ns"]) - t0) / 1e9 <= hi]
    assert len(inwin) == view["workload_rows"] > 50
    mean = statistics.fmean(float(r["bw_est_bps"]) for r in inwin)
    assert view["bw_est_bps_mean_per_sample"] == pytest.approx(mean, rel=1e-12)
    # time-weighted: each row held to the next; the last for the median step
    ts = [(int(r["t_ns"]) - t0) / 1e9 for r in inwin]
    w = [b - a for a, b in zip(ts, ts[1:])]
    w.append(statistics.median(w))
    tw = math.fsum(float(r["bw_est_bps"]) * x for r, x in zip(inwin, w)) / math.fsum(w)
    assert view["bw_est_bps_mean_time_weighted"] == pytest.approx(tw, rel=1e-9)
    # the file holds other flows (at least the loopback readiness check's), all named and left out
    others = [r for r in rows if r not in player]
    assert others and view["flows_by_role"]["workload"] >= 1 and view["flows_by_role"].get("check", 0) >= 1
    # mode shares: BBR's modes with v1's PROBE_BW sub-phases, summing to 1
    for kind in ("mode_share_time_weighted", "mode_share_per_sample"):
        assert set(view[kind]) <= STATES and math.fsum(view[kind].values()) == pytest.approx(1.0)
    assert view["min_rtt_ms_min"] == pytest.approx(20.0, abs=2.0)        # 20 ms of netem delay


def test_every_flow_is_named(run_dir: Path) -> None:
    client, port = _video_port(run_dir)
    named = {r["flow"]: r["role"] for r in csv.DictReader((run_dir / "data" / "flows.csv").open())}
    with (run_dir / "data" / "bbrs_state.csv").open() as f:
        tuples = {(r["saddr"], int(r["sport"]), r["daddr"], int(r["dport"])) for r in csv.DictReader(f)}
    for sa, sp, da, dp in tuples:
        role = named[f"{sa}:{sp}-{da}:{dp}"]
        if (da, dp) == (client, port) or (da == client and dp not in _preflight_ports(run_dir) and sp == 80):
            assert role == "workload"
        elif sa.startswith("127."):
            assert role == "check"
        elif 5201 in (sp, dp):
            assert role == "probe"
        else:
            assert role == "check", (sa, sp, da, dp)            # the preflight HEAD: same port, not the video
    # the ss samples name the MPTCP connection: one token for the video's subflow
    with (run_dir / "data" / "subflows.csv").open() as f:
        sub = list(csv.DictReader(f))
    assert sub and len({r["mptcp_token"] for r in sub}) == 1 and sub[0]["mptcp_token"] not in ("", "0000")
    # ... the same token as the scheduler trace's connection of the video's subflow (the token `ss -M`
    # shows; the trace may also hold the preflight's connection, depending on when it started)
    (video,) = [f"{sa}:{sp}-{da}:{dp}" for sa, sp, da, dp in tuples if (da, dp) == (client, port)]
    with (run_dir / "data" / "schedtrace" / "subflow_samples.csv").open() as f:
        conns = {r["conn"] for r in csv.DictReader(f) if r["subflow"] == video}
    assert conns == {sub[0]["mptcp_token"]}
    # every series' flows are listed, the scheduler's too, with the connection's token
    listed = list(csv.DictReader((run_dir / "data" / "flows.csv").open()))
    assert {r["series"] for r in listed if r["flow"] == video} == {"subflows.csv", "bbrs_state.csv",
                                                                   "schedtrace/subflow_samples.csv"}
    assert {r["mptcp_token"] for r in listed if r["flow"] == video} == conns
    s = json.loads((run_dir / "summary.json").read_text())
    (vf,) = [f for f in s["cc_state"]["flows"] if f["role"] == "workload"]
    assert vf["flow"] == video and vf["mptcp_token"] in conns


def test_tidy_table_gives_the_same_mean(run_dir: Path) -> None:
    s = json.loads((run_dir / "summary.json").read_text())
    lo, hi = s["cc_state"]["window_s"]
    cc = mpvlab.results.load(run_dir).cc
    w = cc[(cc.role == "workload") & (cc.t_s >= lo) & (cc.t_s <= hi)]
    assert w.bw_est_bps.mean() == pytest.approx(s["cc_state"]["bw_est_bps_mean_per_sample"], rel=1e-12)
    assert set(cc.role) >= {"workload", "check"}
