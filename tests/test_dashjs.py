"""Player kind dashjs: the dash.js reference player in headless Chromium (mpvlab/player/dashjs/player.py).

* validate refuses what dash.js cannot do (an ABR it lacks, a progressive video, a missing browser,
  GStreamer-only settings), naming the field and what is allowed;
* a 12 s run over MPTCP (HTTP/2 over TLS, the run's own certificate trusted by SPKI): every segment
  dash.js requested appears once in Apache's access log with the same byte count, and the summary's
  QoE recomputed from that log and the <video> element's events agrees with dash.js's own figures;
* SIGKILL of the runner mid-playback: `mpvlab cleanup` leaves no Chromium process, namespace or file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpvlab.core import ledger, netns
from mpvlab.input.scenario import Scenario
from mpvlab.player.dashjs import parts as dashjs_setup, qoe as dashjs_qoe
from mpvlab.results import checks
from mpvlab.core.paths import checkout_root
from mpvlab.workloads.video import PlayerSpec

# Per test (issue 44): `cpu` on every test that starts headless Chromium (a browser's processes
# take both cores; the runs also assert QoE timing); the validation, QoE-arithmetic and namespace
# tests start no browser.

REPO = checkout_root()

BASE: dict[str, Any] = {
    "name": "dashjs-t", "seed": 1, "topology": {"kind": "dumbbell"},
    "paths": {"wired": {"down": {"rate": "20mbit", "buffer": "100KB", "delay": "10ms"}}},
    "transport": {"cc": "cubic"},
    "video": {"kind": "dash", "duration": "12s", "bitrates": ["500kbit", "1mbit", "2mbit"], "segment": "2s",
              "width": 640, "height": 360},
    "player": {"kind": "dashjs"},
    "server": {"protocol": "h2"},
    "fidelity": {"probe_duration": "2s"},
}


# dash.js 3.0.3's own Settings defaults (seconds), the kind's defaults; test_page_takes_exactly_the_
# configured_settings reads them from the shipped bundle too.
DASHJS_DEFAULTS = {"stableBufferTime": 12.0, "bufferTimeAtTopQuality": 30.0, "bufferTimeAtTopQualityLongForm": 60.0,
                   "longFormContentDurationThreshold": 600.0}


def scenario(**changes: Any) -> dict[str, Any]:
    d = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        d[key] = value
    return d


def refused(d: dict[str, Any]) -> str:
    with pytest.raises(Exception) as e:
        Scenario.model_validate(d)
    return str(e.value)


def test_defaults_to_dynamic_and_validates_rule_params() -> None:
    sc = Scenario.model_validate(scenario())
    assert sc.player.kind == "dashjs" and sc.player.abr == "dynamic"
    sc = Scenario.model_validate(scenario(player={"kind": "dashjs", "abr": "festive"}))
    assert sc.player.abr_params == {"window": 20, "safety": 0.85, "alpha": 12.0, "switch_window_s": 20.0}


def test_validate_refuses_what_dashjs_cannot_do(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = refused(scenario(player={"kind": "dashjs", "abr": "sabre"}))
    assert "player" in msg and "'sabre' is not an ABR of kind dashjs" in msg and "dynamic, bola, throughput, bba, festive" in msg
    msg = refused(scenario(video={"kind": "progressive", "duration": "12s"}))
    assert "video.kind must be dash" in msg and "player.kind: dashjs" in msg
    msg = refused(scenario(player={"kind": "dashjs", "fetcher": "own"}))
    assert "fetcher is for kind gstreamer" in msg
    msg = refused(scenario(player={"kind": "dashjs", "mode": "rebuffer", "cpu": 1}))
    assert "cpu, mode: not a setting of kind dashjs" in msg
    msg = refused(scenario(player={"kind": "dashjs", "abr": "bba", "abr_params": {"reservoir": 3}}))
    assert "reservoir: unknown key" in msg and "keys: reservoir_s, cushion_s" in msg
    msg = refused(scenario(player={"kind": "dashjs", "abr": "bba", "dashjs_stable_buffer_time": "8s",
                                   "dashjs_buffer_time_at_top_quality": "10s",
                                   "abr_params": {"reservoir_s": 5, "cushion_s": 6}}))
    assert "reservoir_s + cushion_s must be smaller than the most dash.js buffers for this video (10 s" in msg
    gst = {"kind": "gstreamer", "mode": "discard"}
    for field, value in (("dashjs_start", "autoplay"), ("dashjs_end_of_stream", "stock")):
        msg = refused(scenario(video={"kind": "dash", "duration": "12s"}, player={**gst, field: value}))
        assert f"{field} is for kind dashjs" in msg
    msg = refused(scenario(player={"kind": "dashjs", "dashjs_end_of_stream": "never"}))
    assert "dashjs_end_of_stream" in msg and "'recheck' or 'stock'" in msg
    assert Scenario.model_validate(scenario()).player.dashjs_end_of_stream == "recheck"
    monkeypatch.setattr(dashjs_setup, "CHROMIUM", Path("/nonexistent/h30/chromium"))
    msg = refused(scenario())
    assert "player.kind: dashjs needs Debian's chromium (/nonexistent/h30/chromium is missing)" in msg
    # `mpvlab validate` is the same check, before anything touches the kernel.


def test_validate_cli_names_the_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(scenario(player={"kind": "dashjs", "abr": "on-off"})))
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "validate", str(f)], capture_output=True, text=True,
                        cwd=REPO, timeout=60)
    assert cp.returncode != 0 and "player" in cp.stdout + cp.stderr and "festive" in cp.stdout + cp.stderr


def test_qoe_definitions_on_a_recorded_timeline() -> None:
    """Stall episodes and ratios from a hand-made record whose answers are known."""
    raw = {"started_ms": 1000.0,
           "events": [[1000.0, "PLAYBACK_STARTED", None], [1500.0, "video.playing", None],
                      [5500.0, "video.waiting", None], [6500.0, "video.playing", None],
                      [14500.0, "video.ended", None]],
           "bitrates": [{"q": 0, "bps": 500_000}, {"q": 1, "bps": 1_000_000}],
           "fragments": [{"mediaType": "video", "type": "MediaSegment", "ok": True, "index": i, "quality": q,
                          "bytes": 250_000, "media_duration_s": 2.0, "request_ms": 1000.0 + i, "first_byte_ms": 1100.0 + i,
                          "end_ms": 1300.0 + i, "ttfb_ms": 100.0, "duration_ms": 300.0}
                         for i, q in [(1, 0), (2, 1), (3, 1), (4, 0)]],
           "playback_quality": {"dropped": 3, "total": 360}}
    s = dashjs_qoe.summarize(raw, t0_ns=0, page_offset_ns=0.0, video_length_s=12.0, frames_expected=360)
    assert s["startup_delay_s"] == 0.5 and s["playback_s"] == 13.0
    assert s["underflow_episodes"] == [[5.5, 6.5]] and s["underflow_total_s"] == 1.0
    assert s["rebuffer_ratio"] == round(1 / 13, 6) and s["stall_rate"] == round(1 / 12, 6)
    assert s["quality_avg"] == 0.5 and s["bitrate_switches"] == 2 and s["segment_s"] == 2.0
    assert [g["size_bps"] for g in s["segments"]] == [1_000_000] * 4
    assert s["frames_rendered"] == 357 and s["picture_discards"] == 3 and s["frames_accounted"]


def test_stalls_with_data_judged_by_the_element_not_dashjs_level() -> None:
    """The start-up stall as recorded (run h30b-stall-25mbit, player/README.md): the element held
    [0, 1.83) at t_media 0.0026 while dash.js's level still read 0 (NaN) -> a stall with data; a
    later stall 0.25 s before the buffered end is a real underflow. A record without the element's
    snapshot falls back to dash.js's sampled level."""
    snap = lambda t, rng: {"t_media": t, "ready_state": 4, "buffered": rng}   # noqa: E731
    events = [[1948.3, "video.playing", snap(0.0025, [[0, 1.833333]])],
              [1950.3, "video.waiting", snap(0.0026, [[0, 1.833333]])],
              [6698.4, "video.playing", snap(0.0043, [[0, 9.999999]])],
              [11443.0, "video.waiting", snap(4.75, [[0, 4.999999]])],
              [11900.0, "video.playing", snap(4.751, [[0, 9.999999]])],
              [17000.0, "video.ended", snap(9.999999, [[0, 9.999999]])]]
    buffer = [[1951.0, 0, 0.0026], [2050.0, 5.0, 0.0026], [11500.0, 0.25, 4.75], [11800.0, 0.25, 4.75]]
    _, _, eps = dashjs_qoe.stall_episodes(events)
    assert eps == [(1950.3, 6698.4), (11443.0, 11900.0)]
    (only,) = dashjs_qoe.stalls_with_data(eps, buffer, events)
    assert only["start_ms"] == 1950.3 and only["element_ahead_s"] == pytest.approx(1.831, abs=1e-3)
    assert only["buffer_s_min"] == 0.0                   # dash.js's own level said empty
    # Without snapshots (records before the page kept them): dash.js's samples decide; the 0 sampled
    # in the first episode hides it.
    bare = [[t, n, None] for t, n, _ in events]
    assert dashjs_qoe.stalls_with_data(eps, buffer, bare) == []
    assert [x["start_ms"] for x in dashjs_qoe.stalls_with_data(eps, buffer[1:], bare)] == [1950.3]


def test_stall_figures_count_only_stalls_without_video() -> None:
    """Issue 43 item 1: the start-up stall dash.js raised with 1.83 s in the element (readyState 4) is
    not a stall: it is out of underflows, rebuffer_events, rebuffer_ratio and stall_rate, and listed
    with its reason; the later one (0.25 s left) counts. Before, both counted."""
    snap = lambda t, rng, rs=4: {"t_media": t, "ready_state": rs, "buffered": rng}   # noqa: E731
    raw = {"started_ms": 1000.0,
           "events": [[1948.3, "video.playing", snap(0.0025, [[0, 1.833333]])],
                      [1950.3, "video.waiting", snap(0.0026, [[0, 1.833333]])],
                      [6698.4, "video.playing", snap(0.0043, [[0, 9.999999]])],
                      [11443.0, "video.waiting", snap(4.75, [[0, 4.999999]], 2)],
                      [11900.0, "video.playing", snap(4.751, [[0, 9.999999]])],
                      [17900.0, "video.ended", snap(9.999999, [[0, 9.999999]])]],
           "buffer": [[1951.0, 0, 0.0026], [11500.0, 0.25, 4.75]]}
    s = dashjs_qoe.summarize(raw, t0_ns=0, page_offset_ns=0.0, video_length_s=10.0, frames_expected=None)
    counted, excluded = 0.457, 4.7481
    assert s["underflows"] == s["rebuffer_events"] == 1
    assert s["underflow_episodes"] == [[11.443, 11.9]]
    assert s["underflow_total_s"] == pytest.approx(counted, abs=1e-6)
    playback = (17900.0 - 1948.3) / 1000
    assert s["rebuffer_ratio"] == pytest.approx(counted / playback, abs=1e-6)
    assert s["stall_rate"] == pytest.approx((playback - excluded - 10.0) / 10.0, abs=1e-6)
    assert s["stalls_excluded"] == 1 and s["stalls_excluded_s"] == pytest.approx(excluded, abs=1e-6)
    (x,) = s["stalls_with_data"]
    assert x["start"] == 1.9503 and x["ready_state"] == 4 and "held 1.831 s beyond its playhead" in x["why"]
    # The same stall with the element out of data (readyState 2) counts.
    raw["events"][1][2]["ready_state"] = 2
    assert dashjs_qoe.summarize(raw, 0, 0.0, 10.0, None)["rebuffer_events"] == 2


# A dash.js run's access log (HTTP/2, run mtxdtk): the preflight, the page loaded before t0 on client
# port 39634, then the MPD and segments on a new connection 39648, the only one the scheduler trace
# (started at t0) saw. The page's connection carried nothing while the trace ran.
_LOG_H2 = """\
127.0.0.1 46962 [27/Nov/2026:06:29:15 +0000] "HEAD /v/manifest.mpd HTTP/2.0" 200 1832 463 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39630 [27/Nov/2026:06:29:15 +0000] "HEAD /v/manifest.mpd?mpvlab-preflight=1 HTTP/2.0" 200 1832 340 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39634 [27/Nov/2026:06:29:16 +0000] "GET /mpvlab-dashjs/player.html HTTP/2.0" 200 430 708 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39634 [27/Nov/2026:06:29:16 +0000] "GET /mpvlab-dashjs/vendor/dash.all.min.js HTTP/2.0" 200 595378 211039 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39634 [27/Nov/2026:06:29:16 +0000] "GET /mpvlab-dashjs/mpvlab-dashjs.js HTTP/2.0" 200 11276 210984 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39634 [27/Nov/2026:06:29:16 +0000] "GET /favicon.ico HTTP/2.0" 404 236 446 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39648 [27/Nov/2026:06:29:17 +0000] "GET /v/manifest.mpd HTTP/2.0" 200 1832 372 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39648 [27/Nov/2026:06:29:17 +0000] "GET /v/init-1.m4s HTTP/2.0" 200 802 364 1 "-" HTTP/2.0 TLSv1.3 X
10.0.1.2 39648 [27/Nov/2026:06:29:17 +0000] "GET /v/seg-1-00001.m4s HTTP/2.0" 200 279828 80798 1 "-" HTTP/2.0 TLSv1.3 X
"""
_TRACED_H2 = 1   # that run's decisions_summary.json: totals.connections, the one subflow 10.0.1.2:39648


def test_page_connection_before_t0_is_not_expected_in_the_trace(tmp_path: Path) -> None:
    from mpvlab.runner.workloads.video import apache_connections
    log = tmp_path / "access.log"
    log.write_text(_LOG_H2)
    assert apache_connections(log) == 1 <= _TRACED_H2   # was 2 > 1: the cross-check failed
    # The page's connection reused for the video counts (by its video requests), once.
    log.write_text(_LOG_H2.replace(" 39648 ", " 39634 "))
    assert apache_connections(log) == 1
    # HTTP/1.1: the page on two connections, the video on a third and a fourth: two to trace.
    lines = _LOG_H2.replace("HTTP/2.0", "HTTP/1.1").splitlines()
    lines[3] = lines[3].replace(" 39634 ", " 39636 ")
    lines[-1] = lines[-1].replace(" 39648 ", " 39650 ")
    log.write_text("\n".join(lines) + "\n")
    assert apache_connections(log) == 2
    # A video request on the page's folder's lookalike is still video (prefix is the folder, with its /).
    log.write_text(_LOG_H2.replace("/v/init-1.m4s", "/mpvlab-dashjs-v/init-1.m4s").replace(
        "39648 [27/Nov/2026:06:29:17 +0000] \"GET /mpvlab-dashjs-v", "39652 [27/Nov/2026:06:29:17 +0000] \"GET /mpvlab-dashjs-v"))
    assert apache_connections(log) == 2


def _run(tmp_path: Path, d: dict[str, Any]) -> Path:
    f = tmp_path / f"{d['name']}.yaml"
    f.write_text(yaml.safe_dump(d))
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp_path / "r")],
                        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in (tmp_path / "r" / d["name"]).iterdir() if p.is_dir()]
    return run_dir


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu
def test_dashjs_run_over_mptcp_h2_agrees_with_apache(tmp_path: Path) -> None:
    run = _run(tmp_path, scenario())
    s = json.loads((run / "summary.json").read_text())
    p = json.loads((run / "logs" / "player-summary.json").read_text())
    raw = json.loads((run / "data" / "dashjs" / "dashjs-raw.json").read_text())
    prov = json.loads((run / "provenance.json").read_text())
    assert p["status"] == "eos" and p["player"] == "dashjs"
    assert prov["dashjs"]["dashjs_version"] == raw["dashjs_version"] == "3.0.3"
    # dash.js ran on exactly its own default buffer settings: sent, and read back from getSettings()
    assert prov["dashjs"]["settings"] == DASHJS_DEFAULTS
    assert p["dashjs_settings"] == {"configured": DASHJS_DEFAULTS, "read_back": DASHJS_DEFAULTS, "ok": True}
    assert raw["codec_support"]["avc1.42c01e"] is True
    # Every request over HTTP/2 and TLS (the run checks it too), the browser's sockets MPTCP: the
    # server saw MPTCP subflows from the client's address on the one path.
    assert s["http"]["by_protocol"] == {"HTTP/2.0": s["http"]["requests"]}
    assert s["subflows"] and s["cross_checks"]["subflow_addresses"]["ok"]
    # The trace (from t0) saw every connection that carried video; the page's pre-t0 one is not expected.
    assert s["cross_checks"]["collector_saw_every_connection"]["ok"], s["cross_checks"]
    assert not [w for w in s["warnings"] if "collector_saw_every_connection" in w], s["warnings"]
    # The stall figures against the element's own buffered ranges: the check ran on this player, found
    # the page's clock offset in its summary, and every counted stall (if any) opened at a `waiting`.
    st = s["cross_checks"]["stalls_vs_element_buffered"]
    assert st["ok"] and p["page_offset_ns"] is not None, st
    (one,) = st["players"].values()
    assert one["counted_stalls"] == len(p["underflow_episodes"]), st
    # the run's checks are exactly the registry's rows for dash.js without pcap, probe or CC state model
    want = checks.expected_records("dash.js", {"mptcp-trace"}, list(s["paths"]))
    assert set(s["cross_checks"]) == want["cross_checks"], (sorted(s["cross_checks"]), want)
    assert set(s["fidelity_checks"] or {}) == want["fidelity_checks"], (s["fidelity_checks"], want)
    # (the connection was set up before t0, when the page loaded: the MIB's handshake counters moved
    # before the playback window; the msk's own byte counter shows the video went over MPTCP)
    assert s["mptcp"]["sent_bytes"] >= sum(g["bytes"] for g in json.loads(
        (run / "logs" / "player-summary.json").read_text())["segments"])
    # Every media segment dash.js completed appears exactly once in the access log, same bytes.
    log = dashjs_qoe.access_log_segments((run / "logs" / "apache" / "access.log").read_text().splitlines())
    segs = p["segments"]
    assert [g["index"] for g in segs] == list(range(6))   # 12 s of 2 s segments (dash.js counts from 0)
    for g in segs:
        path = "/" + g["url"].split("/", 3)[3]
        assert log.get(path) == [g["bytes"]], (path, log.get(path), g["bytes"])
    # Each segment's real size beside the manifest's bandwidth: size_bps is the file's size on disk
    # (the content's sidecar) over its duration, bitrate_bps the level's MPD @bandwidth.
    sidecar = json.loads(Path(prov["content"]["sidecar"]).read_text())
    on_disk = {sg["file"]: (sg["size_bytes"], sg["duration_s"], r["bitrate_bps"])
               for r in sidecar["representations"] for sg in r["segments"]}
    for g in segs:
        size, dur, bandwidth = on_disk[g["url"].rsplit("/", 1)[1]]
        assert g["bytes"] == size and g["bitrate_bps"] == bandwidth
        assert g["size_bps"] == round(size * 8 / dur)
    seg_paths = [k for k in log if "/seg-" in k]
    assert len(seg_paths) == len(segs)        # nothing requested that dash.js did not report
    # The QoE recomputed: quality from the access log's segment names (seg-<level>-<n>), stalls and
    # playback from the <video> element's waiting/playing/ended events, against the summary.
    levels = [int(k.rsplit("/", 1)[1].split("-")[1]) for k in sorted(seg_paths, key=lambda k: k[-9:])]
    assert s["dash"]["quality_avg"] == pytest.approx(sum(levels) / len(levels))
    assert s["dash"]["bitrate_switches"] == sum(1 for a, b in zip(levels, levels[1:]) if a != b)
    first, ended, all_eps = dashjs_qoe.stall_episodes(raw["events"])
    assert first is not None and ended is not None
    assert s["startup_delay_s"] == pytest.approx((first - raw["started_ms"]) / 1000, abs=1e-3)
    # stalls dash.js raised with video in the element are listed, not counted (issue 43 item 1)
    excluded = {(x["start_ms"], x["end_ms"]) for x in dashjs_qoe.stalls_with_data(all_eps, raw["buffer"], raw["events"])}
    eps = [e for e in all_eps if e not in excluded]
    assert len(p["stalls_with_data"]) == len(excluded)
    assert s["dash"]["rebuffer_events"] == len(eps) == s["underflows"]
    playback = (ended - first) / 1000
    assert s["duration_s"] == pytest.approx(playback, abs=1e-3)
    stalled = sum(b - a for a, b in eps) / 1000
    assert s["dash"]["rebuffer_ratio"] == pytest.approx(stalled / playback, abs=1e-5)
    # Playback cannot be shorter than the video (the element's clock runs at 1x) and lasts the video
    # plus the stalls (± 0.3 s: the element's start and end events against media time).
    stalled_all = sum(b - a for a, b in all_eps) / 1000
    assert playback >= 12.0 - 0.05 and playback == pytest.approx(12.0 + stalled_all, abs=0.3)
    assert raw["start_gate"]["start"] == "gated" and raw["start_gate"]["dashjs_level_s"] >= 0.5
    # The page's stall evidence (player README, "Start-up stall"): every element event and buffer
    # state change carries the element's and the SourceBuffer's ranges (one video SourceBuffer: the
    # element's ranges are its ranges); every append ended, and the whole video ended up as ONE range
    # from 0 to its length (the content's timeline has no gap or overlap as the browser sees it).
    for _, name, d in raw["events"]:
        if name.startswith("video.") or name in ("BUFFER_EMPTY", "BUFFER_LOADED"):
            assert {"t_media", "ready_state", "buffered", "source_buffers", "dashjs_buffer_level_s"} <= d.keys()
            if d["source_buffers"]:
                assert d["buffered"] == d["source_buffers"][0]["buffered"], (name, d)
    sb_ends = [d for _, name, d in raw["events"] if name == "sb.updateend"]
    assert len(sb_ends) >= len(segs) + 1          # the init segment and every media segment
    (only_range,) = sb_ends[-1]["buffered"]
    assert only_range[0] == pytest.approx(0.0, abs=1e-3) and only_range[1] == pytest.approx(12.0, abs=0.04)
    # dash.js's own HTTP request list (DashMetrics) names the same media segments.
    dm = [r["url"] for r in raw["http_requests"] if r["type"] == "MediaSegment"]
    assert sorted(dm) == sorted(g["url"] for g in segs)
    assert s["frames_expected"] == 360 and p["frames_decoded"] == 360
    # The browser's CPU was measured, and no Chromium process outlived the run.
    assert s["player_cpu"]["user_s"] > 0
    assert not _chromium_pids_of(run.name)


def _chromium_pids_of(run_id: str) -> list[int]:
    """Chromium processes whose command line names this run's profile folder (the browser process;
    its children are in the run's client namespace, which the run deletes after killing its members)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "chromium" in cmd and f"/{run_id}/data/dashjs" in cmd:
                out.append(int(d))
    return out


def _netns_pids(run_id: str) -> list[int]:
    pids: list[int] = []
    for name in netns.list_netns():
        if run_id in name:
            pids += netns.pids_in_netns(os.stat(netns.NETNS_DIR / name).st_ino)
    return pids


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu
def test_sigkilled_dashjs_run_leaves_no_browser(tmp_path: Path) -> None:
    d = scenario(name="dashjs-kill")
    d["video"]["duration"] = "30s"
    f = tmp_path / "k.yaml"
    f.write_text(yaml.safe_dump(d))
    results = tmp_path / "r"
    p = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    deadline = time.monotonic() + 90
    run = None
    while time.monotonic() < deadline and run is None:
        for ev in results.glob("dashjs-kill/*/logs/player-events.jsonl"):
            if '"type": "start"' in ev.read_text():
                run = ev.parent.parent
        time.sleep(0.2)
    if run is None:
        p.kill()
        raise AssertionError("run never reached playback: " + (p.communicate()[0] or ""))
    time.sleep(2.0)   # mid-playback: dash.js is fetching segments
    browser = _chromium_pids_of(run.name)
    members = _netns_pids(run.name)
    assert browser and set(browser) <= set(members)   # Chromium runs inside the run's client namespace
    p.send_signal(signal.SIGKILL)
    p.wait()
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "cleanup"], capture_output=True, text=True, cwd=REPO,
                        timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not _chromium_pids_of(run.name)
    assert not [pid for pid in members if Path(f"/proc/{pid}").exists()
                and "Z" != Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]]
    assert not [n for n in netns.list_netns() if run.name in n]
    assert not (ledger.LEDGER_DIR / f"{run.name}.json").exists(), cp.stdout + cp.stderr
    assert not (ledger.WWW_DIR / run.name).exists(), cp.stdout + cp.stderr


def test_resolved_dashjs_scenario_round_trips() -> None:
    """resolved.yaml and a sweep's overrides spell out every default: they must validate again."""
    from mpvlab.input.scenario import override, resolved_dict
    sc = Scenario.model_validate(scenario(player={"kind": "dashjs", "abr": "bba", "dashjs_stable_buffer_time": "20s"}))
    again = Scenario.model_validate(resolved_dict(sc))
    assert again.player == sc.player
    assert resolved_dict(sc)["player"]["dashjs_stable_buffer_time"] == "20s"   # recorded in resolved.yaml
    own = Scenario.model_validate(scenario(player={"fetcher": "own", "abr": "bola", "buffer": "10s"}))
    swapped = override(own, {"player": {"kind": "dashjs", "abr": "bola"}})
    assert swapped.player.kind == "dashjs" and swapped.player.fetcher == "dashdemux"
    # The sweep's dimension player.kind: the other kind starts from its defaults, abr kept; dash.js
    # takes no player.buffer and starts from dash.js's own buffer settings (issue 47),
    # and back to gstreamer with an ABR of mpvlab/player/gstreamer/abr is our own client.
    js = override(own, {"player.kind": "dashjs"})
    assert (js.player.kind, js.player.abr, js.player.buffer, js.player.fetcher) == ("dashjs", "bola", None,
                                                                                     "dashdemux")
    assert js.player.dashjs_settings() == DASHJS_DEFAULTS
    back = override(js, {"player.kind": "gstreamer"})
    assert (back.player.kind, back.player.fetcher, back.player.abr) == ("gstreamer", "own", "bola")


@pytest.mark.dashjs
@pytest.mark.cpu
def test_custom_rules_decide_as_the_python_abrs(tmp_path: Path) -> None:
    """BBA and FESTIVE as dash.js rules (player/dashjs/mpvlab-dashjs.js) against mpvlab/player/gstreamer/abr's
    implementations of the same papers, on the same inputs, in Debian's Chromium (a file:// page
    and --dump-dom: no network, no DevTools port)."""
    from mpvlab.player.gstreamer.abr import Download, Ladder
    from mpvlab.player.gstreamer.abr.bba import BbaPolicy
    from mpvlab.player.gstreamer.abr.festive import Festive, FestiveParams
    rates = (1_000_000, 2_500_000, 5_000_000, 7_500_000, 10_000_000)
    bba_cases = [(prev, b / 4) for prev in range(len(rates)) for b in range(0, 121)]
    bba_py = [BbaPolicy(rates, 5.0, 15.0).decide(prev, buf) for prev, buf in bba_cases]
    # FESTIVE: a deterministic throughput sequence with rises and drops; the Python rule decides, and
    # each step's inputs (history, previous level, time) go to the JS rule in the same order.
    fest = Festive(Ladder(rates, 2.0, 30.0), FestiveParams(), seed=1)
    hist: list[Download] = []
    steps, fest_py = [], []
    tputs = [3e6, 4e6, 6e6, 8e6, 9e6, 12e6, 12e6, 11e6, 12e6, 13e6, 4e6, 3e6, 2e6, 8e6, 9e6, 15e6, 15e6, 15e6,
             15e6, 15e6, 15e6, 6e6, 6e6, 9e6, 9e6, 9e6, 9e6, 9e6, 9e6, 20e6]
    for k, bps in enumerate(tputs):
        now = 2.0 * k
        steps.append({"hist": [{"q": d.level, "bps": d.throughput_bps} for d in hist],
                      "prev": fest.level if hist else None, "now": now})
        c = fest.decide(10.0, hist, now)
        fest_py.append(c.level)
        hist.append(Download(c.level, int(bps * 2 / 8), 2.0, now + 2.0))
    page = tmp_path / "rules.html"
    js = (dashjs_setup.PAGE_DIR / "mpvlab-dashjs.js").as_uri()
    page.write_text(f"""<!DOCTYPE html><html><head><script src="{js}"></script></head><body><pre id="o"></pre><script>
const R = window.mpvlabRules, levels = {list(rates)};
const bba = {json.dumps(bba_cases)}.map(([prev, b]) => R.bba({{reservoir_s: 5, cushion_s: 15}}, levels, prev, b));
const st = {{switchTimes: []}}, p = {{window: 20, safety: 0.85, alpha: 12, switch_window_s: 20}};
const fest = {json.dumps(steps)}.map((s) => R.festive(p, levels, s.hist, s.prev, s.now, st).q);
document.getElementById("o").textContent = "RESULT" + JSON.stringify({{bba: bba, fest: fest}}) + "END";
</script></body></html>""")
    profile = tmp_path / "profile"
    cp = subprocess.run([str(dashjs_setup.CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
                         "--no-first-run", "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", "--allow-file-access-from-files", f"--user-data-dir={profile}",
                         "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    out = cp.stdout
    assert "RESULT" in out, cp.stderr[-2000:]
    got = json.loads(out[out.index("RESULT") + 6:out.index("END")])
    assert got["bba"] == bba_py
    assert got["fest"] == fest_py
    assert len(set(fest_py)) >= 3   # the sequence exercised switching up and down, not one level


def _chromium_dump(tmp_path: Path, body: str) -> Any:
    """Run `body` (JS that sets `out`) on a file:// page with the shipped dash.js bundle and the page's
    own script, in Debian's headless Chromium (--dump-dom: no network, no DevTools port)."""
    page = tmp_path / "page.html"
    page.write_text(f"""<!DOCTYPE html><html><head>
<script src="{dashjs_setup.DASHJS_JS.as_uri()}"></script>
<script src="{(dashjs_setup.PAGE_DIR / "mpvlab-dashjs.js").as_uri()}"></script></head>
<body><pre id="o"></pre><script>
let out = null;
try {{ {body} }} catch (err) {{ out = {{error: String(err)}}; }}
document.getElementById("o").textContent = "RESULT" + JSON.stringify(out) + "END";
</script></body></html>""")
    cp = subprocess.run([str(dashjs_setup.CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
                         "--no-first-run", "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}",
                         "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    out = cp.stdout
    assert "RESULT" in out, cp.stderr[-2000:]
    return json.loads(out[out.index("RESULT") + 6:out.index("END")])


def test_buffer_settings_are_fields_with_dashjs_defaults() -> None:
    """Each dash.js buffer setting is its own field (issue 47); unset, they are dash.js's defaults;
    the driver's argument takes exactly those four keys, positive seconds."""
    from mpvlab.player.dashjs.player import settings_arg, settings_read_back
    sc = Scenario.model_validate(scenario())
    assert sc.player.dashjs_settings() == DASHJS_DEFAULTS
    assert sc.playout_buffer_ns == 30 * 10**9            # a 12 s video: the short-form top-quality target
    long_ = Scenario.model_validate(scenario(video={**BASE["video"], "duration": "600s"}))
    assert long_.playout_buffer_ns == 60 * 10**9         # 600 s ≥ the 600 s threshold: long form
    set_ = Scenario.model_validate(scenario(player={"kind": "dashjs", "dashjs_stable_buffer_time": "7s",
                                                    "dashjs_buffer_time_at_top_quality": "19s",
                                                    "dashjs_buffer_time_at_top_quality_long_form": "45s",
                                                    "dashjs_long_form_content_duration_threshold": "10s"}))
    assert set_.player.dashjs_settings() == {"stableBufferTime": 7.0, "bufferTimeAtTopQuality": 19.0,
                                             "bufferTimeAtTopQualityLongForm": 45.0,
                                             "longFormContentDurationThreshold": 10.0}
    assert set_.playout_buffer_ns == 45 * 10**9          # 12 s ≥ 10 s: long form
    assert settings_arg(json.dumps(DASHJS_DEFAULTS)) == DASHJS_DEFAULTS
    for bad in ({**DASHJS_DEFAULTS, "bufferToKeep": 20}, {"stableBufferTime": 12}, {**DASHJS_DEFAULTS, "stableBufferTime": -1},
                {**DASHJS_DEFAULTS, "stableBufferTime": "12"}, [12, 30]):
        with pytest.raises(argparse.ArgumentTypeError):
            settings_arg(json.dumps(bad))
    assert settings_read_back(DASHJS_DEFAULTS, {"settings_read_back": dict(DASHJS_DEFAULTS)})["ok"]
    assert not settings_read_back(DASHJS_DEFAULTS, {"settings_read_back": {**DASHJS_DEFAULTS, "stableBufferTime": 30}})["ok"]
    assert not settings_read_back(DASHJS_DEFAULTS, {})["ok"]


@pytest.mark.dashjs
@pytest.mark.cpu
def test_page_takes_exactly_the_configured_settings(tmp_path: Path) -> None:
    """In Debian's Chromium with the shipped dash.js: a fresh player's own defaults are the kind's
    defaults (so an unset scenario runs dash.js as shipped), and the page's settings function leaves
    dash.js holding exactly the scenario's values, read back from getSettings(), with nothing else of
    `streaming` changed but the ABR."""
    sets = [Scenario.model_validate(scenario()).player.dashjs_settings(),
            Scenario.model_validate(scenario(player={"kind": "dashjs", "dashjs_stable_buffer_time": "7s",
                                                     "dashjs_buffer_time_at_top_quality": "19.5s",
                                                     "dashjs_buffer_time_at_top_quality_long_form": "45s",
                                                     "dashjs_long_form_content_duration_threshold": "300s"})
                                    ).player.dashjs_settings()]
    got = _chromium_dump(tmp_path, f"""
const keys = {json.dumps(sorted(DASHJS_DEFAULTS))};
const pick = (o) => Object.fromEntries(keys.map((k) => [k, o[k] === undefined ? null : o[k]]));
const fresh = dashjs.MediaPlayer().create();
out = {{version: fresh.getVersion(), defaults: pick(fresh.getSettings().streaming), runs: []}};
for (const cfg of {json.dumps(sets)}) {{
  const p = dashjs.MediaPlayer().create();
  const before = JSON.parse(JSON.stringify(p.getSettings().streaming));
  const recorded = window.mpvlabApplySettings(p, cfg, {{ABRStrategy: "abrBola", useDefaultABRRules: true}});
  const after = p.getSettings().streaming;
  const changed = Object.keys(after).filter((k) => k !== "abr" && JSON.stringify(after[k]) !== JSON.stringify(before[k]));
  out.runs.push({{read_back: pick(after), recorded: recorded, record: window.mpvlabRecord.settings_read_back,
                  changed: changed.sort(), strategy: after.abr.ABRStrategy}});
}}""")
    assert got["version"] == "3.0.3" and got["defaults"] == DASHJS_DEFAULTS, got
    for want, run in zip(sets, got["runs"]):
        assert run["read_back"] == want and run["recorded"] == want and run["record"] == want, run
        assert run["strategy"] == "abrBola"
        assert set(run["changed"]) <= set(want), run      # nothing but the four (and abr) moved
    assert got["runs"][1]["changed"] == sorted(DASHJS_DEFAULTS)   # the non-default set moved all four


def _segments_match_access_log(run: Path, ps: dict[str, Any], client_addr: str | None = None) -> None:
    lines = (run / "logs" / "apache" / "access.log").read_text().splitlines()
    if client_addr is not None:
        lines = [ln for ln in lines if ln.startswith(client_addr + " ")]
    log = dashjs_qoe.access_log_segments(lines)
    for g in ps["segments"]:
        assert log.get("/" + g["url"].split("/", 3)[3]) == [g["bytes"]], g
    assert len([k for k in log if "/seg-" in k]) == len(ps["segments"])


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.first
@pytest.mark.cpu
def test_dashjs_dual_path_bba_over_http1_tls(tmp_path: Path) -> None:
    """Two paths: Chromium's MPTCP connections have a subflow on each, each path carries a share of
    the bytes (the run's cross-checks), HTTP/1.1 over TLS, the BBA rule's decisions are the levels."""
    d = scenario(name="dashjs-dual", paths={"wifi": {"down": {"rate": "3mbit", "buffer": "100KB", "delay": "5ms"}},
                                            "lte": {"down": {"rate": "3mbit", "buffer": "100KB", "delay": "20ms"}}},
                 player={"kind": "dashjs", "abr": "bba", "dashjs_stable_buffer_time": "8s",
                         "abr_params": {"reservoir_s": 2, "cushion_s": 4}},
                 server={"protocol": "http/1.1", "tls": True})
    del d["topology"]
    run = _run(tmp_path, d)
    s = json.loads((run / "summary.json").read_text())
    ps = json.loads((run / "logs" / "player-summary.json").read_text())
    raw = json.loads((run / "data" / "dashjs" / "dashjs-raw.json").read_text())
    assert s["http"]["by_protocol"] == {"HTTP/1.1": s["http"]["requests"]} and s["http"]["tls"]
    seen = {tuple(x) for x in s["cross_checks"]["subflow_addresses"]["seen"]}
    assert seen == {tuple(v) for v in s["cross_checks"]["subflow_addresses"]["expected"].values()}
    assert all(p["share"] >= 0.1 for p in s["paths"].values()), s["paths"]
    # HTTP/1.1 loads the page on up to 6 connections before t0; only the video's must be in the trace.
    assert s["cross_checks"]["collector_saw_every_connection"]["ok"], s["cross_checks"]
    _segments_match_access_log(run, ps)
    # The BBA rule made the choices: every segment's level is one of its decisions, the first the lowest.
    decided = {x["quality"] for x in raw["decisions"] if x["rule"] == "bba"}
    assert {g["level"] for g in ps["segments"]} <= decided
    assert ps["segments"][0]["level"] == 0     # BBA-0 starts at the lowest rate


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.first
@pytest.mark.cpu
def test_dashjs_two_players_share_a_bottleneck(tmp_path: Path) -> None:
    d = scenario(name="dashjs-shared", topology={"kind": "shared-bottleneck", "clients": 2},
                 paths={"shared": {"down": {"rate": "6mbit", "buffer": "256pkt", "delay": "20ms"},
                                   "up": {"delay": "20ms"}}},
                 player={"kind": "dashjs", "abr": "festive", "dashjs_stable_buffer_time": "10s"},
                 server={"protocol": "http/1.1", "tls": False})
    d["video"]["duration"] = "20s"
    run = _run(tmp_path, d)
    s = json.loads((run / "summary.json").read_text())
    assert set(s["players"]) == {"client0", "client1"}
    for role in ("client0", "client1"):
        ps = json.loads((run / "logs" / role / "player-summary.json").read_text())
        assert ps["status"] == "eos" and ps["segments_downloaded"] == 10 and ps["abr"]["name"] == "festive"
        raw = json.loads((run / "data" / "dashjs" / role / "dashjs-raw.json").read_text())
        assert raw["decisions"] and all(x["rule"] == "festive" for x in raw["decisions"])
    log = (run / "logs" / "apache" / "access.log").read_text().splitlines()
    clients = {ln.split()[0] for ln in log if "/seg-" in ln}
    assert len(clients) == 2                       # one address per player, both fetched segments
    # The media bytes Apache sent are the media bytes the two dash.js players report.
    total = sum(int(ln.split('" 200 ')[1].split()[0]) for ln in log if "/seg-" in ln and '" 200 ' in ln)
    assert total == sum(g["bytes"] for r in ("client0", "client1")
                        for g in json.loads((run / "logs" / r / "player-summary.json").read_text())["segments"])


# ---- issue 51: the page's readiness, and the address change that killed dash.js mid-transfer ----

def test_readiness_names_what_is_missing() -> None:
    """Each missing part of the page is named on its own (the driver's error is made of these)."""
    from mpvlab.player.dashjs.player import PAGE_FUNCTIONS, describe_problems, missing_parts
    ready = {"dashjs": True, "dashjs_version": "3.0.3", "media_player": True, "mse": True, "h264": True,
             "page_functions": list(PAGE_FUNCTIONS)}
    assert missing_parts(ready, "3.0.3") == []
    # the CI failure of issue 51: mpvlab-dashjs.js ran, dash.js did not
    assert missing_parts({**ready, "dashjs": False, "dashjs_version": None, "media_player": False}, "3.0.3") == [
        "dash.js did not run (window.dashjs is undefined)"]
    assert missing_parts({**ready, "dashjs_version": "4.7.4"}, "3.0.3") == [
        "dash.js reports version '4.7.4', the vendored one is '3.0.3'"]
    assert missing_parts({**ready, "mse": False, "h264": False}, "3.0.3") == [
        "Media Source Extensions are not available (window.MediaSource)"]
    assert missing_parts({**ready, "page_functions": ["mpvlabStart"]}, None) == [
        "mpvlab-dashjs.js did not run (mpvlabState, mpvlabDump undefined)"]
    said = describe_problems([
        {"method": "Network.loadingFailed", "requestId": "1.2", "url": "https://s/mpvlab-dashjs/vendor/dash.all.min.js",
         "errorText": "net::ERR_NETWORK_CHANGED"},
        {"method": "Log.entryAdded", "requestId": "1.2", "level": "error",
         "text": "Failed to load resource: net::ERR_NETWORK_CHANGED",
         "url": "https://s/mpvlab-dashjs/vendor/dash.all.min.js"},
        {"method": "Log.entryAdded", "requestId": "1.3", "level": "error",
         "text": "Failed to load resource: the server responded with a status of 404", "url": "https://s/a.js"}])
    assert said == ("https://s/mpvlab-dashjs/vendor/dash.all.min.js: net::ERR_NETWORK_CHANGED; "
                    "https://s/a.js: Failed to load resource: the server responded with a status of 404")
    assert describe_problems([]) == "the browser reported no failed request and no exception"


@pytest.mark.netns
def test_run_namespaces_get_no_address_after_their_links_come_up(tmp_path: Path) -> None:
    """The root of issue 51: with IPv6 on, each veth of a run got an IPv6 link-local address 2-3 s after
    its carrier came up (linkwatch, then duplicate-address detection); the browser, started by then,
    took that address change for a network change and closed its HTTP/2 session mid-page-load
    (net::ERR_NETWORK_CHANGED). A node's namespace now has IPv6 off before its links exist: once the
    link is up and DAD's longest time (1 s linkwatch + 1 s random delay + 1 s probe) has passed, no
    interface holds an IPv6 address and nothing changed after the link came up."""
    from mpvlab.core import ledger, naming
    from mpvlab.core.netns import delete_netns
    from mpvlab.emulation.nodes import add_link, add_node, stop_node
    run_id = naming.new_run_id()
    book = ledger.Ledger.create(run_id, tmp_path)      # a killed test's namespaces go with the next cleanup
    nodes = []
    try:
        for role in ("client", "server"):
            book.add_netns(naming.netns_name(run_id, role))
            nodes.append(add_node(naming.netns_name(run_id, role), role))
        a, b = naming.ifname(run_id, "c0"), naming.ifname(run_id, "s0")
        add_link(nodes[0], nodes[1], a, b)
        client, server = nodes[0].ns, nodes[1].ns
        client.ip_batch([["addr", "add", "10.0.1.2/24", "dev", a], ["link", "set", a, "up"]])
        server.ip_batch([["addr", "add", "10.0.1.1/24", "dev", b], ["link", "set", b, "up"]])
        mon = client.popen(["ip", "-o", "monitor", "address"], stdout=subprocess.PIPE)
        try:
            time.sleep(3.5)
        finally:
            mon.terminate()
            changes = mon.communicate(timeout=5)[0].decode()
        assert changes.strip() == "", changes
        for ns, dev in ((client, a), (server, b)):
            assert ns.run(["ip", "-6", "-o", "addr", "show"]).stdout.strip() == ""
            assert ns.read_sysctl(f"net.ipv6.conf.{dev}.disable_ipv6") == "1"
        # IPv4 over the link still works (the run's network is IPv4 only).
        assert client.run(["ping", "-c", "1", "-W", "2", "10.0.1.1"], check=False).returncode == 0
    finally:
        for n in nodes:
            stop_node(n)
            delete_netns(n.ns.name)
        ledger.cleanup_run(book)


class _PageBed:
    """Two fresh namespaces (client, server) joined by one veth, the run's Apache serving a web root
    with the dash.js page folder, and the dash.js driver started in the client's namespace exactly
    as a run starts it (staged: it loads the page, writes page-loaded and waits for t0 on stdin)."""

    def __init__(self, tmp: Path, files: list[str] | None, rate: str | None, content: Path | None = None) -> None:
        from mpvlab.core import ledger, naming, proc
        from mpvlab.emulation.nodes import add_link, add_node
        from mpvlab.runner import server, tls
        self.tmp, self.nodes, self.apache, self.driver = tmp, [], None, None
        tmp.mkdir(parents=True, exist_ok=True)
        run_id = naming.new_run_id()
        # A run's ledger, written before anything exists: if the test is killed, the next run or
        # `mpvlab cleanup` removes exactly these namespaces and processes.
        self.ledger = ledger.Ledger.create(run_id, tmp)
        for role in ("client", "server"):
            self.ledger.add_netns(naming.netns_name(run_id, role))
            self.nodes.append(add_node(naming.netns_name(run_id, role), role))
        self.dev, sdev = naming.ifname(run_id, "c0"), naming.ifname(run_id, "s0")
        add_link(self.nodes[0], self.nodes[1], self.dev, sdev)
        self.client, self.server = self.nodes[0].ns, self.nodes[1].ns
        self.client.ip_batch([["addr", "add", "10.0.1.2/24", "dev", self.dev], ["link", "set", self.dev, "up"]])
        self.server.ip_batch([["addr", "add", "10.0.1.1/24", "dev", sdev], ["link", "set", sdev, "up"]])
        self.sdev = sdev
        if rate:   # the page's 0.6 MB then takes seconds: time to change the network mid-transfer
            self.shape(rate)
        www = Path(tempfile.mkdtemp(prefix="mpvlab-t51-", dir="/tmp"))
        www.chmod(0o755)
        self.www = www
        # Copied, as a run copies it (mpvlab/runner/steps.py): a link into the checkout is not
        # readable by Apache's www-data when the checkout sits below a folder only root may enter
        # (a clone in a mktemp -d folder got 403 for the page).
        if files is None:     # the whole page folder
            shutil.copytree(dashjs_setup.PAGE_DIR, www / "mpvlab-dashjs", ignore=shutil.ignore_patterns("__pycache__"))
        else:                 # only these of its files
            (www / "mpvlab-dashjs").mkdir(mode=0o755)
            for f in files:
                dst = www / "mpvlab-dashjs" / f
                dst.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                shutil.copy2(dashjs_setup.PAGE_DIR / f, dst)       # its mtime too, as a link showed it
        if content is not None:   # a DASH ladder at https://10.0.1.1/v/manifest.mpd
            shutil.copytree(content, www / "v")
        for d in [www, *(p for p in www.rglob("*") if p.is_dir())]:
            d.chmod(0o755)
        for f in (p for p in www.rglob("*") if p.is_file()):
            f.chmod(0o644)
        root = tmp / "apache"
        root.mkdir()
        material = tls.make_self_signed(root, ["10.0.1.1"])
        http = server.HttpSetup(protocol="h2", tls=material)
        self.apache = server.start_apache(self.server, root, www, cc="cubic", http=http, mptcp=False)
        self.ledger.add_proc(proc.ProcRef.of(self.apache.process.pid, "apache"))
        server.wait_serving(self.apache, "https://10.0.1.1/mpvlab-dashjs/player.html", timeout=20, http=http)
        self.spki = tls.spki_sha256_b64(material.cert)
        self.access_log = root / "access.log"
        self.data = tmp / "data"
        # Chromium's TMPDIR, short and named with the run id, in the ledger before the driver makes it:
        # a driver killed by the test leaves it to close() (player README, "Chromium's scratch folders")
        self.tmpdir = Path(tempfile.gettempdir()) / naming.scratch_name(run_id, "dashjs")
        self.ledger.add_scratch(self.tmpdir)

    def shape(self, rate: str) -> None:
        """The server's side of the link at `rate` (tbf, replacing any shaping before)."""
        self.server.run(["tc", "qdisc", "replace", "dev", self.sdev, "root", "tbf", "rate", rate,
                         "burst", "15000", "limit", "200000"])

    def start_driver(self, *extra: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "mpvlab.player.dashjs.player",
                "--url", "https://10.0.1.1/v/manifest.mpd", "--page-url", "https://10.0.1.1/mpvlab-dashjs/player.html",
                "--events", str(self.tmp / "player-events.jsonl"), "--summary", str(self.tmp / "player-summary.json"),
                "--data-dir", str(self.data), "--profile", str(self.data / "chromium-profile"), "--abr", "dynamic",
                "--tmpdir", str(self.tmpdir),
                "--spki", self.spki, "--t0-from-stdin", "--video-length-s", "4", "--timeout-s", "30",
                "--dashjs-settings", json.dumps(PlayerSpec(kind="dashjs").dashjs_settings()), *extra]
        from mpvlab.core import proc
        self.driver = self.client.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.ledger.add_proc(proc.ProcRef.of(self.driver.pid, "dashjs-driver"))
        return self.driver

    def finish_driver(self, timeout_s: float = 120) -> tuple[int, str, dict[str, Any]]:
        """Wait for page-loaded or the driver's exit; then end it (stdin closed: no t0)."""
        assert self.driver is not None and self.driver.stdin is not None
        deadline = time.monotonic() + timeout_s
        while not (self.data / "page-loaded").exists() and self.driver.poll() is None:
            assert time.monotonic() < deadline, "the driver neither loaded the page nor exited"
            time.sleep(0.1)
        try:
            self.driver.stdin.close()
        except BrokenPipeError:
            pass
        assert self.driver.stdout is not None
        out = self.driver.stdout.read().decode(errors="replace")
        self.driver.wait(timeout=60)
        return self.driver.returncode, out, json.loads((self.tmp / "player-summary.json").read_text())

    def play(self, rate: str, timeout_s: float = 120) -> tuple[int, dict[str, Any], dict[str, Any]]:
        """Once the page is loaded (at full speed), shape the server's side to `rate` (tbf) and hand
        the driver t0 (now) as a run does; wait for it to end. Its exit code, summary and the page's
        raw record."""
        assert self.driver is not None and self.driver.stdin is not None
        deadline = time.monotonic() + timeout_s
        while not (self.data / "page-loaded").exists():
            assert self.driver.poll() is None, "the driver exited before loading the page"
            assert time.monotonic() < deadline, "the driver did not load the page"
            time.sleep(0.05)
        self.shape(rate)
        self.driver.stdin.write(f"t0 {time.monotonic_ns()}\n".encode())
        self.driver.stdin.flush()
        self.driver.communicate(timeout=max(1.0, deadline - time.monotonic()))   # stdout read: never blocks it
        return (self.driver.returncode, json.loads((self.tmp / "player-summary.json").read_text()),
                json.loads((self.data / "dashjs-raw.json").read_text()))

    def close(self) -> None:
        from mpvlab.core import ledger, proc
        from mpvlab.core.netns import delete_netns
        from mpvlab.emulation.nodes import stop_node
        if self.driver is not None and self.driver.poll() is None:
            self.driver.kill()
            self.driver.wait()
        if self.apache is not None:
            self.apache.stop()
        for n in self.nodes:
            stop_node(n)
            delete_netns(n.ns.name)      # kills whatever still runs inside (Chromium's children)
        proc.run(["rm", "-rf", str(self.www)])
        ledger.cleanup_run(self.ledger)  # what the steps above left (none when they all ran), and the ledger


@pytest.fixture()
def page_bed(tmp_path: Path) -> Iterator[Any]:
    beds: list[_PageBed] = []

    def make(files: list[str] | None = None, rate: str | None = None, content: Path | None = None) -> _PageBed:
        beds.append(_PageBed(tmp_path / f"bed{len(beds)}", files, rate, content))
        return beds[-1]
    try:
        yield make
    finally:
        for b in beds:
            b.close()


def _browser_events(data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (data / "browser-events.jsonl").read_text().splitlines()]


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.cpu
def test_page_whose_dashjs_fails_is_refused_before_t0_naming_what_is_missing(page_bed: Any) -> None:
    """Issue 51's failure mode, made deterministic: the page's own script runs (mpvlabStart exists) but
    dash.js does not (here: the server answers 404 for it). The old driver took mpvlabStart as "loaded"
    and failed at t0 with `ReferenceError: dashjs is not defined`; the readiness check refuses the page
    before t0 (no page-loaded mark, so the run never reaches its pre-run check), after 3 loads, with
    an error that says dash.js did not run and what the browser said about its request."""
    bed = page_bed(["player.html", "mpvlab-dashjs.js"])      # no vendor/: dash.js answers 404
    bed.start_driver()
    code, out, ps = bed.finish_driver()
    assert not (bed.data / "page-loaded").exists()
    assert code == 2 and ps["status"] == "error"
    assert "PageNotReady" in ps["reason"] and "not ready after 3 loads" in ps["reason"]
    assert "dash.js did not run (window.dashjs is undefined)" in ps["reason"]
    assert "mpvlab-dashjs.js did not run" not in ps["reason"]          # the page's own script did run
    assert "vendor/dash.all.min.js: Failed to load resource: the server responded with a status of 404" in ps["reason"]
    assert [f["attempt"] for f in ps["page_load_failures"]] == [1, 2, 3]
    for f in ps["page_load_failures"]:
        assert f["missing"] == ["dash.js did not run (window.dashjs is undefined)"]
        assert f["readiness"]["page_functions"] == ["mpvlabStart", "mpvlabState", "mpvlabDump"]
    # Every response the browser got is in its own record, the 404 among them.
    ev = _browser_events(bed.data)
    got = [(e["url"].rsplit("/", 1)[1], e["status"]) for e in ev if e["method"] == "Network.responseReceived"]
    assert got.count(("dash.all.min.js", 404)) == 3 and got.count(("mpvlab-dashjs.js", 200)) == 3
    assert "ReferenceError" not in out


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.cpu
def test_address_change_during_page_load_fails_dashjs_and_the_driver_reloads(page_bed: Any) -> None:
    """The mechanism of issue 51, reproduced on purpose: an address appears in the browser's namespace
    while dash.all.min.js is in flight over HTTP/2 (as the veth's IPv6 link-local address did when DAD
    completed during the page load). Chromium closes the session: the browser itself reports
    net::ERR_NETWORK_CHANGED for the script, dash.js never runs, the readiness check catches it, the
    driver records the attempt (with the browser's words and the namespace's address change) and
    loads the page again, which then is ready."""
    bed = page_bed(rate="1mbit")        # 0.6 MB: ~4.8 s
    bed.start_driver()
    deadline = time.monotonic() + 90
    while not (bed.access_log.exists() and "GET /mpvlab-dashjs/player.html" in bed.access_log.read_text()):
        assert time.monotonic() < deadline and bed.driver.poll() is None, "the page was never requested"
        time.sleep(0.05)
    time.sleep(0.5)       # the scripts are requested within ms of the page; dash.js needs ~4.8 s
    bed.client.run(["ip", "addr", "add", "10.0.9.2/24", "dev", bed.dev])
    code, out, ps = bed.finish_driver()
    assert (bed.data / "page-loaded").exists(), out     # the second load was ready
    (failure,) = ps["page_load_failures"]
    assert "dash.js did not run (window.dashjs is undefined)" in failure["missing"]
    lost = [p for p in failure["browser"] if p["method"] == "Network.loadingFailed"
            and p["url"].endswith("/vendor/dash.all.min.js")]
    assert [p["errorText"] for p in lost] == ["net::ERR_NETWORK_CHANGED"]
    ev = _browser_events(bed.data)
    added = [e for e in ev if e["method"] == "netlink" and e["type"] == "RTM_NEWADDR" and e.get("address") == "10.0.9.2"]
    assert len(added) == 1 and added[0]["t_ns"] <= lost[0]["t_ns"]
    assert ps["browser_events"]["address_changes"] == 1


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path below `folder` with its size and mtime (a file rewritten in place counts as new)."""
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in folder.rglob("*")} if folder.exists() else {}


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu
def test_dashjs_run_writes_nothing_outside_its_folder(tmp_path: Path) -> None:
    """Issue 45: a dash.js run left `$HOME/.config/chromium/Crash Reports` (crashpad's database) behind,
    outside the results folder, although Chromium had its own --user-data-dir. The run gets a HOME of
    its own here (so other runs on the machine cannot touch it), holding a `.config` and `.cache` with
    a file each: after the run, that HOME is exactly as before, and the run's folder keeps no profile.
    Its TMPDIR likewise: Chromium, ended by SIGTERM at the run's end, left its singleton socket's folder
    (org.chromium.Chromium.*) in the TMPDIR it inherited, one per dash.js run (515 in this host's /tmp)."""
    # TMPDIR short: Chromium's singleton socket path (in TMPDIR) must fit a socket address's 108 bytes
    home, tmp = tmp_path / "home", Path(tempfile.mkdtemp(prefix="mpvlab-t45-", dir="/tmp"))
    for sub in (".config/chromium", ".cache"):
        (home / sub).mkdir(parents=True)
        (home / sub / "keep.txt").write_text("before the run\n")
    (tmp / "keep.txt").write_text("before the run\n")
    before, tmp_before = _tree(home), _tree(tmp)
    d = scenario(name="dashjs-home")
    d["video"]["duration"] = "4s"
    f = tmp_path / "h.yaml"
    f.write_text(yaml.safe_dump(d))
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"], env["TMPDIR"] = str(home), str(tmp)
    results = tmp_path / "r"
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                        capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    after = _tree(home)
    assert after == before, sorted(set(after.items()) ^ set(before.items()))
    tmp_after = _tree(tmp)
    shutil.rmtree(tmp)
    assert tmp_after == tmp_before, sorted(set(tmp_after.items()) ^ set(tmp_before.items()))
    runs = list(results.glob("dashjs-home/*/summary.json"))
    assert len(runs) == 1, cp.stdout[-2000:]
    assert not list(runs[0].parent.rglob("chromium-profile")), "the browser's profile is scratch, removed by the run"




# Test only (player README, "Halt after the last segment"): the race's losing side, made certain.
# Chromium fires the element's `progress` at most every 350 ms while media data arrives; whether one
# comes after dash.js's STREAM_COMPLETED (and so makes dash.js re-judge its buffer) depends on where
# that tick falls. From the moment dash.js reports buffering completed, this listener (registered
# before dash.js's, so it runs first) keeps the element's own `progress` events from everyone else on
# the page, and notes each in the page's record.
NO_LATE_PROGRESS_JS = """
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("v").addEventListener("progress", (e) => {
    const rec = window.mpvlabRecord;
    if (e.isTrusted && rec.end_of_stream !== null) {
      e.stopImmediatePropagation();
      rec.events.push([performance.now(), "test.progress_held", null]);
    }
  }, true);
});
"""


def _named(raw: dict[str, Any], name: str) -> list[tuple[float, dict[str, Any]]]:
    return [(e[0], e[2] or {}) for e in raw["events"] if e[1] == name]


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.cpu
@pytest.mark.parametrize("end_of_stream", ["stock", "recheck"])
def test_halt_after_the_last_segment(page_bed: Any, tmp_path: Path, end_of_stream: str) -> None:
    """The dash.js run that never ended (CI, 2 of ~16 dash.js study runs): dash.js halts playback on
    a real underflow (BUFFER_EMPTY, playbackRate 0); the last segment arrives; dash.js learns the
    stream is fully buffered (STREAM_COMPLETED sets isBufferingCompleted) but re-judges its buffer only
    on the element's next progress/timeupdate, and none comes. Here: one 300 kbit/s level of 4 s in
    2 s segments over 200 kbit/s, so each segment takes ~3 s (longer than it plays) and the second
    always arrives during a stall; the race's losing side is made certain by NO_LATE_PROGRESS_JS.
    stock (dash.js 3.0.3 as it is): the halt never ends. recheck (the default): the page's one
    progress event after dash.js reported buffering completed makes dash.js raise BUFFER_LOADED and
    playback ends; the stall is counted once."""
    from mpvlab.content.dash import ensure_dash
    info = ensure_dash(tmp_path / "content", 4.0, [300_000], 2.0, 320, 180, 30)
    bed = page_bed(content=info.dir)
    page = bed.www / "mpvlab-dashjs"
    (page / "no-late-progress.js").write_text(NO_LATE_PROGRESS_JS)
    (page / "no-late-progress.js").chmod(0o644)
    html = (page / "player.html").read_text()
    tag = '<script src="mpvlab-dashjs.js">'
    assert tag in html
    (page / "player.html").write_text(html.replace(tag, '<script src="no-late-progress.js"></script>' + tag))
    bed.start_driver("--abr", "dynamic", "--video-length-s", "4", "--timeout-s", "15", "--end-of-stream", end_of_stream)
    code, ps, raw = bed.play("200kbit")

    # Both: a real underflow inside the first segment, then the whole video in the element while
    # dash.js still holds it halted, then dash.js's buffering completed in that state.
    ((t_empty, empty),) = [x for x in _named(raw, "BUFFER_EMPTY") if x[1]["type"] == "video"]
    assert empty["playback_rate"] == 0 and empty["t_media"] < 2.0 and empty["buffered"] == [[0, pytest.approx(2.0, abs=0.01)]]
    ((t_done, done),) = [x for x in _named(raw, "dashjs.bufferingCompleted") if x[1]["type"] == "video"]
    assert t_done > t_empty and done["playback_rate"] == 0
    assert done["buffered"] == [[0, pytest.approx(4.0, abs=0.01)]] and done["t_media"] == pytest.approx(empty["t_media"], abs=0.01)
    assert not [t for t, _ in _named(raw, "BUFFER_LOADED") if t_empty < t < t_done]
    eos = raw["end_of_stream"]
    assert eos["mode"] == end_of_stream and eos["dashjs_state"] == "empty"
    assert eos["buffering_completed_ms"] == pytest.approx(t_done, abs=1)
    untrusted = [t for t, d in _named(raw, "video.progress") if d["trusted"] is False]

    if end_of_stream == "stock":
        assert code == 3 and ps["status"] == "timeout" and "playback did not end within 15 s" in ps["reason"]
        assert raw["ended"] is False and eos["recheck_ms"] is None
        assert not _named(raw, "BUFFER_LOADED") and not _named(raw, "mpvlab.end_of_stream_recheck") and not untrusted
        return
    assert code == 0 and raw["ended"] is True
    ((t_re, _),) = _named(raw, "mpvlab.end_of_stream_recheck")
    assert eos["recheck_ms"] == pytest.approx(t_re, abs=1) and t_re >= t_done
    ((t_loaded, loaded),) = _named(raw, "BUFFER_LOADED")
    assert untrusted and t_re <= untrusted[0] <= t_loaded and loaded["playback_rate"] == 1
    ((t_end, _),) = _named(raw, "video.ended")
    assert t_end > t_loaded
    assert ps["end_of_stream"] == eos
    assert ps["underflows"] == ps["rebuffer_events"] == 1 and ps["stalls_excluded"] == 0
    ((a, b),) = ps["underflow_episodes"]
    # the stall lasted from dash.js's halt to its BUFFER_LOADED (page clock, 1 ms resolution)
    assert b - a == pytest.approx((t_loaded - t_empty) / 1000, abs=0.01)
