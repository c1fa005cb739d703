"""Kernel BBR's modes per connection over INET_DIAG (mpvlab/cc/bbr_diag.py, issue 47).

* The gains → mode table is tcp_bbr.c's constants, each pair one mode, anything else unknown.
* A scripted flow whose mode sequence is known (mpvlab/testbed/bbr_flow.py: a dumbbell with a
  100 ms RTT; connection 1 sends, idles, sends again; connection 2 is new): each connection goes
  STARTUP → DRAIN → PROBE_BW in that order (DRAIN, about one round, is seen), has exactly one
  STARTUP episode (v1 does not re-enter STARTUP after idle), carried bytes in it, and both connections
  are told apart by their 4-tuple. No timing bound: the sampling rate reached is a figure of the host
  (bench/bench_bbr_diag.py prints it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mpvlab.cc import bbr_diag
from mpvlab.cc.bbr_diag import mode_from_gains


def test_gains_name_kernel_bbr_v1_modes_exactly() -> None:
    assert (bbr_diag.HIGH_GAIN, bbr_diag.DRAIN_GAIN, bbr_diag.CWND_GAIN) == (739, 88, 512)
    assert mode_from_gains(739, 739) == "STARTUP"
    assert mode_from_gains(88, 739) == "DRAIN"
    assert [mode_from_gains(p, 512) for p in (320, 192, 256)] == ["PROBE_BW"] * 3
    assert mode_from_gains(256, 256, 5_000_000) == "PROBE_RTT"
    assert mode_from_gains(256, 256, 0) == "INIT"          # no bandwidth sample yet (active side)
    assert mode_from_gains(0, 0, 0) == "INIT"              # the same, passive side
    for pg, cg in ((739, 512), (300, 512), (88, 512), (256, 739), (0, 0)):
        assert mode_from_gains(pg, cg) is None
    assert mode_from_gains(None, None) is None


def test_episodes_shares_and_startup_bytes_from_rows() -> None:
    """Hand-made rows whose answers are known: INIT then STARTUP form one STARTUP episode with both
    parts' bytes; shares are time-weighted up to the next sample."""
    def row(t: int, mode: str, acked: int, port: int = 1) -> dict:
        return {"t_ns": t, "src": "a", "sport": port, "dst": "b", "dport": 80, "mode": mode, "cong": "bbr",
                "bytes_acked": acked, "bytes_sent": acked}
    rows = [row(0, "INIT", 0), row(10, "STARTUP", 100), row(30, "STARTUP", 500), row(40, "DRAIN", 900),
            row(50, "PROBE_BW", 1000), row(100, "PROBE_BW", 2000), row(5, "INIT", 0, port=2)]
    conns = bbr_diag.connections(rows)
    c = conns[("a", 1, "b", 80)]
    assert c.sequence() == ["INIT", "STARTUP", "DRAIN", "PROBE_BW"]
    (st,) = c.startup()
    assert (st.start_ns, st.end_ns, st.bytes_acked) == (0, 40, 900)
    sh = c.shares()
    assert sh["INIT"] == pytest.approx(0.1) and sh["STARTUP"] == pytest.approx(0.3)
    assert sh["DRAIN"] == pytest.approx(0.1) and sh["PROBE_BW"] == pytest.approx(0.5)
    assert conns[("a", 2, "b", 80)].bytes_acked == 0


@pytest.mark.netns
def test_scripted_flow_goes_startup_drain_probe_bw_per_connection(tmp_path: Path) -> None:
    from mpvlab.testbed import bbr_flow
    s = bbr_flow.run(tmp_path / "bbr-diag.csv")
    conns = [c for c in s["connections"] if c["bytes_acked"] > 0]
    assert s["connections_with_data"] == len(conns) == 2, s
    for c in conns:
        assert c["cong"] == "bbr", c
        modes = [m for m in bbr_diag.iter_modes(c["modes"]) if m != "INIT"]
        assert modes[:3] == ["STARTUP", "DRAIN", "PROBE_BW"], c["modes"]
        assert c["modes"][0] in ("INIT", "STARTUP"), c["modes"]       # a new connection: INIT, then STARTUP
        assert None not in c["modes"], c["modes"]                    # every pair of gains named a mode
        (startup,) = c["startup_episodes"]                           # once: not again after the idle
        assert startup["duration_s"] > 0 and 0 < startup["bytes_acked"] <= c["bytes_acked"], c
        assert c["shares"]["DRAIN"] > 0 and sum(c["shares"].values()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.netns
@pytest.mark.e2e
def test_run_records_bbr_modes_per_server_connection(tmp_path: Path) -> None:
    """observe.bbr_modes_hz in a dumbbell run with kernel BBR: the summary's bbr_diag names the
    connections the server's `ss` sampler saw (same 4-tuples), each media connection began in
    STARTUP (INIT first when sampled that early) and has exactly one STARTUP episode."""
    import json
    import subprocess
    import sys

    import yaml

    from mpvlab.core.paths import checkout_root
    d = {"name": "bbrdiag-t", "seed": 1, "topology": {"kind": "dumbbell"},
         "paths": {"wan": {"down": {"rate": "10mbit", "buffer": "200KB", "delay": "40ms"}}},
         "transport": {"cc": "bbr"}, "video": {"duration": "8s", "bitrate": "2mbit", "width": 640, "height": 360},
         "fidelity": {"probe_duration": "1s"}, "observe": {"bbr_modes_hz": 200}}
    f = tmp_path / "bbrdiag-t.yaml"
    f.write_text(yaml.safe_dump(d))
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp_path / "r")],
                        capture_output=True, text=True, timeout=400, cwd=checkout_root())
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run,) = [p for p in (tmp_path / "r" / "bbrdiag-t").iterdir() if p.is_dir()]
    s = json.loads((run / "summary.json").read_text())
    diag = s["bbr_diag"]
    assert (run / "data" / "bbr_diag.csv").exists() and diag["samples"] > 0
    media = [c for c in diag["connections"] if c["bytes_acked"] > 0]
    assert diag["connections_with_data"] == len(media) >= 1, diag
    seen_by_ss = {f"{x['local']}-{x['peer']}" for x in s["subflows"]}
    for c in media:
        assert c["conn"] in seen_by_ss, (c["conn"], seen_by_ss)
        assert c["cong"] == "bbr" and c["modes"][0] in ("INIT", "STARTUP"), c
        assert len(c["startup_episodes"]) == 1 and c["startup_episodes"][0]["bytes_acked"] > 0, c
    # the connections the player used for media, from the access log: every video request is on a
    # connection INET_DIAG saw (the server's request count, less the pre-run check), and only
    # connections that carried a request are counted
    logged = s["http"]["requests"]
    assert sum(c["http_requests"] for c in diag["connections"]) == logged > 0, diag
    assert diag["connections_with_requests"] == sum(1 for c in diag["connections"] if c["http_requests"]) >= 1
    assert all(c["bytes_acked"] > 0 for c in diag["connections"] if c["http_requests"]), diag


def test_video_requests_are_counted_per_client_connection(tmp_path: Path) -> None:
    """The access log's client address and port name the connection; loopback, the pre-run protocol
    check and the dash.js page's own files are not the video's requests."""
    from mpvlab.runner.workloads.video import video_requests_by_connection
    log = tmp_path / "access.log"
    tail = '200 4560 292 1 "-" HTTP/2.0 TLSv1.3 TLS_AES_256_GCM_SHA384'
    log.write_text("\n".join([
        f'127.0.0.1 35952 [30/Nov/2026:01:38:21 +0000] "HEAD /v/manifest.mpd HTTP/2.0" {tail}',
        f'10.0.1.2 37024 [30/Nov/2026:01:38:21 +0000] "HEAD /v/manifest.mpd?mpvlab-preflight=1 HTTP/2.0" {tail}',
        f'10.0.1.2 37040 [30/Nov/2026:01:38:22 +0000] "GET /mpvlab-dashjs/player.html HTTP/2.0" {tail}',
        f'10.0.1.2 37040 [30/Nov/2026:01:38:22 +0000] "GET /v/manifest.mpd HTTP/2.0" {tail}',
        f'10.0.1.2 37040 [30/Nov/2026:01:38:23 +0000] "GET /v/seg-0-1.m4s HTTP/2.0" {tail}',
        f'10.0.1.2 37050 [30/Nov/2026:01:38:24 +0000] "GET /v/seg-0-2.m4s HTTP/2.0" {tail}']) + "\n")
    assert dict(video_requests_by_connection(log)) == {("10.0.1.2", "37040"): 2, ("10.0.1.2", "37050"): 1}
    assert video_requests_by_connection(tmp_path / "missing.log") == {}


def test_observe_bbr_modes_hz_is_refused_where_no_backend_runs_it() -> None:
    """The emulated backend (dumbbell, dual-path) starts the reader; elsewhere the field would be
    ignored, so validate refuses it, naming the topologies that take it."""
    from mpvlab.input.scenario import Scenario
    d = {"name": "x", "topology": {"kind": "shared-bottleneck", "clients": 2},
         "paths": {"shared": {"down": {"rate": "6mbit", "delay": "20ms"}, "up": {"delay": "20ms"}}},
         "video": {"kind": "dash", "duration": "10s"}, "player": {"fetcher": "own", "abr": "bola", "buffer": "8s"},
         "observe": {"bbr_modes_hz": 200}}
    with pytest.raises(ValueError, match="observe.bbr_modes_hz is for topology dual-path or dumbbell, not shared-bottleneck"):
        Scenario.model_validate(d)
    del d["observe"]
    Scenario.model_validate(d)
    with pytest.raises(ValueError, match="bbr_modes_hz"):
        Scenario.model_validate({"name": "y", "paths": {"a": {}}, "observe": {"bbr_modes_hz": 0}})
