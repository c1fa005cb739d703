"""The cross-checks (mpvlab/results/checks.py): every row of the table names a function and a test
that exist, and each check, given a planted disagreement, fails with its named warning (and passes
on agreeing figures, so the test can fail)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpvlab.collectors.pcap import Capture, TapResult
from mpvlab.results import checks
from mpvlab.runner import capture, crosschecks, views
from mpvlab.runner.workloads.base import Outcome
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


def _run(name: str, result: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = {}
    warnings: list[str] = []
    checks.record(out, warnings, name, result)
    return out, warnings


def test_every_check_names_a_function_and_a_test_that_exist() -> None:
    names = [c.name for c in checks.CHECKS]
    assert len(names) == len(set(names))
    for c in checks.CHECKS:
        mod, _, fn = c.function.partition(":")
        assert callable(getattr(importlib.import_module(mod), fn)), c.function
        path, _, test = c.test.partition("::")
        assert re.search(rf"^def {re.escape(test)}\(", (REPO / path).read_text(), re.M), c.test


def test_record_names_the_warning_and_needs_ok() -> None:
    out, warnings = _run("x", {"a": 1, "ok": False})
    assert out == {"x": {"a": 1, "ok": False}}
    assert warnings == ["cross-check x failed: {'a': 1, 'ok': False}"]
    assert checks.failed(warnings + ["fidelity: something"]) == ["x"]
    assert _run("y", {"ok": True})[1] == []
    with pytest.raises(ValueError, match="no `ok`"):
        _run("z", {"a": 1})


def test_interface_vs_collector_warns() -> None:
    # 1000 packets of 1514 B on the wire carry 1000 × 1424 B of payload (90 B of headers and options)
    assert views.interface_vs_collector(1000 * 1514, 1000, 1000 * 1424, 0)["ok"]
    # the interface saw 5 % more payload than the scheduler handed, with no retransmission to explain it
    r = views.interface_vs_collector(1000 * 1514, 1000, int(1000 * 1424 / 1.05), 0)
    _, w = _run("bytes_wifi_interface_vs_collector", r)
    assert not r["ok"] and w[0].startswith("cross-check bytes_wifi_interface_vs_collector failed:")
    # ... unless 60 retransmitted segments crossed it twice
    assert views.interface_vs_collector(1000 * 1514, 1000, int(1000 * 1424 / 1.05), 60)["ok"]


def test_collector_connections_warns() -> None:
    assert views.connections_check("apache_connections", 2, 3)["ok"]
    r = views.connections_check("apache_connections", 3, 2)
    _, w = _run("collector_saw_every_connection", r)
    assert w == ["cross-check collector_saw_every_connection failed: "
                 "{'apache_connections': 3, 'traced': 2, 'ok': False}"]


def test_subflow_addresses_fail() -> None:
    paths = [SimpleNamespace(name="wifi", client_addr="10.0.1.2", server_addr="10.0.1.1"),
             SimpleNamespace(name="lte", client_addr="10.0.2.2", server_addr="10.0.2.1")]
    topo: Any = SimpleNamespace(paths=paths, addressing="per-path")
    good = [{"local": "10.0.1.1:80", "peer": "10.0.1.2:4000"}, {"local": "10.0.2.1:80", "peer": "10.0.2.2:4001"}]
    assert views.subflow_address_check(topo, good)["ok"]
    crossed = good + [{"local": "10.0.2.1:80", "peer": "10.0.1.2:4002"}]     # wifi's client on lte's server
    r = views.subflow_address_check(topo, crossed)
    assert not r["ok"] and r["stray"] == [["10.0.1.2", "10.0.2.1"]]


def test_udp_wire_warns() -> None:
    per_path = {"wan": {"rx_bytes": 100 * (1200 + 42), "rx_packets": 100}}
    wire = {"udp_datagrams": 100, "udp_payload_bytes": 100 * 1200}
    assert views.udp_wire_check(per_path, wire, 10.0)["bytes_wan_interface_vs_udp_socket"]["ok"]
    # the interface saw 100 packets fewer than the receiver read: a miscount somewhere
    short = {"wan": {"rx_bytes": 50 * (1200 + 42), "rx_packets": 50}}
    (name, r), = views.udp_wire_check(short, wire, 10.0).items()
    _, w = _run(name, r)
    assert not r["ok"] and w[0].startswith("cross-check bytes_wan_interface_vs_udp_socket failed:")


def _tap(ok: bool) -> TapResult:
    counted = 1_000_000
    return TapResult("client", "mvabc0", "client-mvabc0.pcap", 900, counted if ok else counted // 2, 900, 900, 0,
                     False, counted, 900, 1.0 if ok else 0.5, ok)


def test_pcap_bytes_warns(tmp_path: Path) -> None:
    """Through the checks' one entry point (crosschecks.py), as a run's end makes them."""
    topo: Any = SimpleNamespace(paths=[])
    for ok in (True, False):
        cap = Capture([], tmp_path, 128, 200_000_000, [_tap(ok)])     # its summary() is the capture part
        assert "checks" not in capture.view(topo, cap, {"connections": []})     # the view makes no record
        ctx: Any = SimpleNamespace(scenario=None, data=tmp_path, logs=tmp_path)
        got = crosschecks.run({}, crosschecks.CheckState(ctx, Outcome({}, 0.0, "", 0), cap=cap), "progressive")
        assert got.records["cross_checks"]["pcap_bytes_client_mvabc0"]["ok"] is ok
        assert checks.failed(got.warnings) == ([] if ok else ["pcap_bytes_client_mvabc0"])


def test_the_table_has_every_check_and_a_section_per_workload() -> None:
    page = checks.table_page()
    for c in checks.CHECKS:
        assert f"| `{c.name}` |" in page, c.name
        assert c.applies and set(c.applies) <= set(checks.WORKLOADS), c.name
        assert c.stored in {"cross_checks", "rtp.checks", "fidelity_checks"}, c.name
        # a fidelity check's failure sets fidelity_ok false; a cross-check's is a warning or ends the run
        assert (c.stored == "fidelity_checks") == (c.on_failure == "fidelity_ok false"), c.name
    for key, title in checks.WORKLOADS.items():
        n = sum(key in c.applies for c in checks.CHECKS)
        assert f"### {title}\n\n{n} checks." in page, key
    # the rtp workloads carry their eleven checks (the repair check and the audio check since issue 48 §1),
    # the probe's two and the interface check
    assert sum("rtp-gcc" in c.applies for c in checks.CHECKS) == 14
    assert sum("own-dash" in c.applies for c in checks.CHECKS) == 11
    assert sum("dash.js" in c.applies for c in checks.CHECKS) == 12


_LOG = """127.0.0.1 34100 [29/Nov/2026:01:32:23 +0000] "HEAD /v/manifest.mpd HTTP/1.1" 200 0 237 0 "-" HTTP/1.1 - -
10.0.1.2 52624 [29/Nov/2026:01:32:24 +0000] "HEAD /v/manifest.mpd?mpvlab-preflight=1 HTTP/1.1" 200 0 235 0 "-" HTTP/1.1 - -
10.0.2.2 41396 [29/Nov/2026:01:32:26 +0000] "GET /v/manifest.mpd HTTP/1.1" 200 2170 291 0 "-" HTTP/1.1 - -
10.0.2.2 41396 [29/Nov/2026:01:32:27 +0000] "GET /v/seg-1.m4s HTTP/1.1" 200 500000 291 0 "-" HTTP/1.1 - -
10.0.1.2 52630 [29/Nov/2026:01:32:27 +0000] "GET /v/manifest.mpd HTTP/1.1" 200 2170 291 0 "-" HTTP/1.1 - -
10.0.1.2 52630 [29/Nov/2026:01:32:28 +0000] "GET /v/seg-1.m4s HTTP/1.1" 200 250000 291 0 "-" HTTP/1.1 - -
10.0.1.2 52631 [29/Nov/2026:01:32:20 +0000] "GET /dashjs/index.html HTTP/1.1" 200 9000 291 0 "-" HTTP/1.1 - -
"""


def test_player_bytes_against_the_access_log_warn(tmp_path: Path) -> None:
    """Measured on sabre-own-short (two own-DASH players): Apache's body bytes per client address
    equal each player's bytes_received (2 533 859 and 4 328 849 B). The check plants a player that
    read one byte more than Apache sent, and an own-DASH player that read less."""
    from mpvlab.player.dashjs.kind import DASHJS
    from mpvlab.runner.workloads import video
    log = tmp_path / "access.log"
    log.write_text(_LOG.replace("/dashjs/", f"/{DASHJS.page_folder}/"))
    logged = video.body_bytes_by_client(log)
    # loopback, the preflight and the dash.js page left out
    assert logged == {"10.0.2.2": 502_170, "10.0.1.2": 252_170}
    addrs = {"client0": "10.0.1.2", "client1": "10.0.2.2"}
    assert video.player_bytes_check({"client0": 252_170, "client1": 502_170}, addrs, logged, True)["ok"]
    r = video.player_bytes_check({"client0": 252_171, "client1": 502_170}, addrs, logged, False)
    _, w = _run("player_bytes_vs_access_log", r)
    assert not r["ok"] and r["players"]["client0"] == {"player_bytes": 252_171, "apache_body_bytes": 252_170, "ok": False}
    assert w[0].startswith("cross-check player_bytes_vs_access_log failed: ")
    # a player that abandoned part of a fragment: fine for dash.js / GStreamer, not for the own client
    assert video.player_bytes_check({"client0": 2_170, "client1": 502_170}, addrs, logged, False)["ok"]
    assert not video.player_bytes_check({"client0": 2_170, "client1": 502_170}, addrs, logged, True)["ok"]
    # one player: every address is its own (MPTCP subflows from each path)
    assert video.player_bytes_check({"player": 754_340}, {"player": "10.0.1.2"}, logged, True)["ok"]
    # a player that reported no count fails
    assert not video.player_bytes_check({"player": None}, {}, logged, False)["ok"]


def _dashjs_record(ready: int, ahead_s: float) -> dict[str, Any]:
    """A dash.js page record (dashjs-raw.json's shape) with one stall opening at 11 443 page ms whose
    `waiting` snapshot shows `ready` and `ahead_s` of video beyond the playhead."""
    snap = lambda t, rng, rs=4: {"t_media": t, "ready_state": rs, "buffered": rng}   # noqa: E731
    return {"started_ms": 1000.0,
            "events": [[1948.3, "video.playing", snap(0.0025, [[0, 5.0]])],
                       [11443.0, "video.waiting", snap(4.75, [[0, 4.75 + ahead_s]], ready)],
                       [11900.0, "video.playing", snap(4.751, [[0, 9.999999]])],
                       [17900.0, "video.ended", snap(9.999999, [[0, 9.999999]])]],
            "buffer": [[11500.0, 0.25, 4.75]]}


def test_stalls_against_the_element_buffered_ranges_warn() -> None:
    """stalls_vs_element_buffered: a counted stall whose opening `waiting` found the element empty
    (readyState 2, 0.02 s ahead) agrees; planted: the element holding 0.8 s (readyState 4) — more than
    dash.js's 0.5 s threshold + a frame, yet under the 1 s exclusion rule, so the stall figures count
    it — and a counted stall with no `waiting` in the page's record at its start."""
    from mpvlab.player.dashjs import qoe as dashjs_qoe
    from mpvlab.runner.workloads import video
    t0, offset = 5_000_000_000, 3_000_000_123.0       # page ms → run s through the page's clock offset

    def summary(raw: dict[str, Any]) -> dict[str, Any]:
        s = dashjs_qoe.summarize(raw, t0_ns=t0, page_offset_ns=offset, video_length_s=10.0, frames_expected=None)
        return {**s, "t0_ns": t0, "page_offset_ns": offset}        # as player/dashjs_player.py writes them
    frame = 1 / 30
    good = _dashjs_record(2, 0.02)
    ps = summary(good)
    assert ps["underflows"] == 1
    r = video.stalls_vs_element_check(ps, good, frame)
    assert r["ok"] and r["counted_stalls"] == 1 and r["stalls"][0]["element_ahead_s"] == 0.02
    # readyState ≥ HAVE_FUTURE_DATA but under dash.js's threshold + a frame: its own halt, a real stall
    assert video.stalls_vs_element_check(summary(_dashjs_record(4, 0.45)), _dashjs_record(4, 0.45), frame)["ok"]
    planted = _dashjs_record(4, 0.8)
    ps = summary(planted)
    assert ps["underflows"] == 1                  # the counting rule (≥ 1 s to exclude) counts it
    r = video.stalls_vs_element_check(ps, planted, frame)
    st = r["stalls"][0]
    assert not r["ok"] and (st["element_ahead_s"], st["ready_state"], st["ok"]) == (0.8, 4, False)
    _, w = _run("stalls_vs_element_buffered", {"players": {"player": r}, "ok": r["ok"]})
    assert w and w[0].startswith("cross-check stalls_vs_element_buffered failed: ")
    # a counted stall the page never signalled: its start 1 ms off any `waiting`
    moved = {**summary(good), "underflow_episodes": [[ps["underflow_episodes"][0][0] + 0.001,
                                                      ps["underflow_episodes"][0][1]]]}
    r = video.stalls_vs_element_check(moved, good, frame)
    assert not r["ok"] and r["stalls"][0]["waiting_in_page_record"] is False
    # no snapshot at the `waiting` (an old record): unverified, not failed
    bare = _dashjs_record(2, 0.02)
    bare["events"][1][2] = None
    r = video.stalls_vs_element_check(summary(bare), bare, frame)
    assert r["ok"] and r["unverified"] == 1


def test_expected_records_expand_per_path_and_follow_conditions() -> None:
    """The record names a run must hold, from the registry: a dash.js run with a server capture and
    a BBR-S state model, and an rtp run with the probe; unknown conditions are refused."""
    got = checks.expected_records("dash.js", {"mptcp-trace", "pcap", "pcap-server", "cc-state"}, ["wifi", "lte"],
                                  (("server", "eth0"),))
    assert got["cross_checks"] == {
        "bytes_wifi_interface_vs_collector", "bytes_lte_interface_vs_collector", "collector_saw_every_connection",
        "collector_lost_events", "subflow_addresses", "pcap_bytes_server_eth0", "pcap_path_bytes_vs_subflow_counters",
        "mode_shares_over_workload_flows", "player_bytes_vs_access_log", "stalls_vs_element_buffered"}
    assert got["fidelity_checks"] == {"playback_within_media_and_stalls"}
    assert "stalls_vs_element_buffered" not in checks.expected_records("own-dash", {"mptcp-trace"}, ["a"])["cross_checks"]
    # a SABRE run on the shared bottleneck: no scheduler trace, so only the player's bytes and the probe's
    # and playback's fidelity checks (the records of a real sabre-own-short run; main's registry also
    # listed the four trace and subflow checks there)
    sabre = checks.expected_records("sabre", {"voip", "voip-one-path"}, ["shared"])
    assert sabre == {"cross_checks": {"player_bytes_vs_access_log"}, "fidelity_checks": {
        "probe_delay_within_queue_bound", "playback_within_media_and_stalls", "no_simultaneous_silence"}}
    rtp = checks.expected_records("rtp-gcc", {"voip", "voip-one-path"}, ["a"])
    assert rtp["cross_checks"] == {"bytes_a_interface_vs_udp_socket"} and len(rtp["rtp.checks"]) == 11
    assert {"repair_vs_logs", "audio_vs_logs"} <= rtp["rtp.checks"]
    assert rtp["fidelity_checks"] == {"probe_delay_within_queue_bound", "no_simultaneous_silence"}
    with pytest.raises(ValueError, match="unknown conditions"):
        checks.expected_records("bulk", {"pcap-client"}, ["a"])
