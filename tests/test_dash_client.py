"""mpvlab's own DASH client (mpvlab/player/gstreamer/dash_client.py, `--fetcher own`) against Apache over a
namespace pair (mpvlab/testbed/player.py), compared with GStreamer's dashdemux player on the same runs.

Namespaces/interfaces carry the helper prefix ``hab``. Content: a SINGLE-level ladder (1 Mbit/s,
2 s segments, 12 s, 360p), so both players download exactly the same bytes whatever their ABR,
and startup, underflows and discards must agree:
  * ample bandwidth: no underflow in either; discards only CPU-late ones within the host's
    steal (tests/hostnoise.py); startup delays within 0.5 s of each other (both buffer
    --startup-buffer-ms = 1 s of media before the clock starts; the difference is request
    handling, not the network) plus the longest host stall;
  * a tbf at 80 % of the video rate: both stall, and the total underflow time of each is bounded
    from first principles: the download of the whole stream takes
    bytes * 8 / goodput, playback of the media takes its length, so the stall time is at least
    (download time - startup - video length)-ish; we assert the two players' totals agree
    within 1.5 s (+ steal), and each is within the first-principles band.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from hostnoise import assert_played_through, longest_stall_s
from mpvlab.core.hoststeal import StealMeter
from mpvlab.core.paths import checkout_root

pytestmark = pytest.mark.cpu_light   # cpu_light: measured 0.05 cores (docs/testing.md); was cpu: asserts timing bounds (tests/hostnoise.py)

REPO = checkout_root()
from mpvlab.content import ensure_dash  # noqa: E402
from mpvlab.testbed.player import Apache, Net, finish_player, start_player  # noqa: E402

CACHE = Path(os.environ.get("MPVLAB_TEST_CONTENT_DIR", "/tmp/hab-content-cache"))
W, H, FPS = 640, 360, 30
RATE = 1_000_000
SEG_S = 2.0
LEN_S = 12.0
GOODPUT = 1448 / 1514
RMEM = (4096, 65536, 131072)
WMEM = (4096, 16384, 65536)



@pytest.fixture(scope="module")
def content() -> Any:
    CACHE.mkdir(parents=True, exist_ok=True)
    os.chmod(CACHE, 0o755)
    return ensure_dash(CACHE, LEN_S, [RATE], SEG_S, W, H, FPS)


@pytest.fixture(scope="module")
def content3() -> Any:
    CACHE.mkdir(parents=True, exist_ok=True)
    return ensure_dash(CACHE, LEN_S, [500_000, 1_000_000, 2_000_000], SEG_S, W, H, FPS)


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory, content: Any) -> Iterator[tuple[Net, Apache]]:
    n = os.getpid() % 100000
    net = Net(srv=f"hab{n}s", cli=f"hab{n}c", srv_if=f"hab{n}s", cli_if=f"hab{n}c", srv_ip="10.77.0.1",
              cli_ip="10.77.0.2", rmem=RMEM, wmem=WMEM)
    try:
        net.up()
        apache = Apache(net, CACHE, tmp_path_factory.mktemp("hab_apache"))
    except BaseException:
        net.down()
        raise
    try:
        yield net, apache
    finally:
        apache.stop()
        net.down()


def url(apache: Apache, c: Any) -> str:
    return apache.url(f"{c.dir.name}/{c.mpd.name}")


def play(net: Net, u: str, out: Path, *extra: str) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    r = finish_player(start_player(net, u, out, time.monotonic_ns(), "--buffer-ms", "8000", *extra), out)
    assert r.code == 0, (r.summary.get("reason"), r.summary.get("dash_error"))
    return r.summary


def check_own(s: dict[str, Any], c: Any) -> None:
    """Bytes and records of the own client add up against the content's sidecar."""
    assert s["fetcher"] == "own" and s["dash_error"] is None
    assert s["transport"]["so_protocol"] == 262          # the kernel says: an MPTCP socket
    assert [g["index"] for g in s["segments"]] == list(range(c.n_segments))
    for g in s["segments"]:
        assert g["bytes"] == c.representations[g["level"]]["segments"][g["index"]]["size_bytes"], g
        assert g["t_request"] <= g["t_first_byte"] <= g["t_last_byte"]
        assert g["frames_rendered"] + g["frames_discarded"] == int(SEG_S * FPS)
    total = c.mpd.stat().st_size + sum(g["bytes"] for g in s["segments"]) + \
        sum(d["bytes"] for d in s["init_downloads"])
    assert s["bytes_received"] == total
    assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == int(LEN_S * FPS)


@pytest.mark.netns
def test_single_level_agrees_with_dashdemux(testbed: tuple[Net, Apache], content: Any,
                                            tmp_path: Path) -> None:
    net, apache = testbed
    net.set_rate(None)
    with StealMeter() as m1:
        gst = play(net, url(apache, content), tmp_path / "gst")
    with StealMeter() as m2:
        own = play(net, url(apache, content), tmp_path / "own", "--fetcher", "own", "--abr", "on-off")
    check_own(own, content)
    assert_played_through(gst, m1.window, FPS)
    assert_played_through(own, m2.window, FPS)
    slack = 0.5 + longest_stall_s(m1.window) + longest_stall_s(m2.window)
    assert abs(own["startup_delay_s"] - gst["startup_delay_s"]) <= slack, \
        (own["startup_delay_s"], gst["startup_delay_s"])
    assert own["stall_rate"] == 0.0 or own["stall_rate"] < 0.01
    assert own["rebuffer_events"] == 0 and own["rebuffer_ratio"] == 0.0


@pytest.mark.netns
def test_single_level_throttled_agrees_with_dashdemux(testbed: tuple[Net, Apache], content: Any,
                                                      tmp_path: Path) -> None:
    """tbf at 80 % of the video's rate, rebuffer mode: both players stall; each one's stall time
    is bounded by the download time of the whole stream, and the two agree."""
    net, apache = testbed
    link = int(RATE * 0.8)
    net.set_rate(link)
    try:
        with StealMeter() as m1:
            gst = play(net, url(apache, content), tmp_path / "gst", "--mode", "rebuffer")
        with StealMeter() as m2:
            own = play(net, url(apache, content), tmp_path / "own", "--mode", "rebuffer",
                       "--fetcher", "own", "--abr", "on-off")
    finally:
        net.set_rate(None)
    check_own(own, content)
    media = sum(s["size_bytes"] for s in content.representations[0]["segments"]) + \
        content.representations[0]["init"]["size_bytes"] + content.mpd.stat().st_size
    t_dl = media * 8 / (link * GOODPUT)          # the whole stream at the goodput (no burst)
    for s in (gst, own):
        assert s["underflows"] >= 1
        # Playback cannot end before the last byte arrives (+ its last segment's 2 s of media)
        # -> the stall time is at least t_dl + 0 - startup - LEN... precisely: EOS >= download
        # end, so playback_s >= t_dl - startup_delay - 10 KB burst; stall = playback - LEN.
        burst_s = 10_000 * 8 / link
        assert s["playback_s"] >= t_dl - s["startup_delay_s"] - burst_s - 0.2, (s["playback_s"], t_dl)
        assert s["stall_rate"] == pytest.approx(max(0, (s["playback_s"] - LEN_S) / LEN_S), abs=2e-6)
    slack = 1.5 + longest_stall_s(m1.window) + longest_stall_s(m2.window)
    assert abs(own["underflow_total_s"] - gst["underflow_total_s"]) <= slack, \
        (own["underflow_total_s"], gst["underflow_total_s"])
    assert abs(own["startup_delay_s"] - gst["startup_delay_s"]) <= slack


@pytest.mark.netns
def test_sabre_pipelining_on_the_wire(testbed: tuple[Net, Apache], content3: Any, tmp_path: Path) -> None:
    """SABRE §4.1 (variant unconstrained) over the real socket: outstanding media requests = 1 + ceil(rcvbuf*8/(r*s)) for the
    level current when each was sent (fewer only at the end of the stream), every check's mode
    change follows the 75 % rule from the occupancy it recorded, and the bytes add up."""
    net, apache = testbed
    net.set_rate(3_000_000)
    rcv = 262144
    try:
        s = play(net, url(apache, content3), tmp_path / "sabre", "--fetcher", "own", "--abr", "sabre",
                 "--rcvbuf-bytes", str(rcv), "--abr-params", '{"variant": "unconstrained"}')
    finally:
        net.set_rate(None)
    assert s["dash_error"] is None and s["status"] == "eos"
    assert s["transport"]["so_protocol"] == 262
    rates = [r["bitrate_bps"] for r in s["representations"]]
    n = s["segments_expected"]
    assert [g["index"] for g in s["segments"]] == list(range(n))

    def formula(level: int) -> int:
        # 1 + ceil(rcvbuf*8/(r*s)): 0.5 Mbit/s -> 1 + ceil(2.10) = 4; 1 M -> 1 + ceil(1.05) = 3; 2 M -> 2
        return 1 + math.ceil(rcv * 8 / (rates[level] * SEG_S))
    assert [formula(i) for i in range(3)] == [4, 3, 2]
    decs = s["abr_decisions"]
    for d in decs:
        assert d["outstanding"] <= formula(d["level_before"]), d
    # Requests go out in batches (same instant) until the pipeline is full: the last of each
    # batch fills it to the formula (or to every segment sent so far), except when the stream
    # ran out of segments to request.
    batches: dict[float, list[dict[str, Any]]] = {}
    for d in decs:
        batches.setdefault(d["t"], []).append(d)
    checked = 0
    for b in batches.values():
        last = b[-1]
        if last["index"] == n - 1:
            continue
        assert last["outstanding"] == min(formula(last["level_before"]), last["index"] + 1), b
        checked += 1
    assert checked >= 2
    # Every check's mode from the 75 % rule and the buffer (8 s buffer, 2 s segments: backoff
    # from refill at >= 6 s with the socket >= 75 % full; refill from backoff below 4 s or < 75 %).
    checks = s["sabre_checks"]
    assert len(checks) >= 10
    mode = "refill"
    for c in checks:
        fullsock = c["occupancy"] >= 0.75
        if mode == "refill":
            expect = "backoff" if fullsock and c["buffer_s"] >= 6.0 else "refill"
        else:
            expect = "refill" if (not fullsock or c["buffer_s"] < 4.0) else "backoff"
        assert c["mode"] == expect, c
        mode = c["mode"]
    assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == int(LEN_S * FPS)


@pytest.mark.netns
def test_sabre_modes_change_on_the_wire(testbed: tuple[Net, Apache], content3: Any, tmp_path: Path) -> None:
    """SABRE §4.1's (variant unconstrained) mode changes on a real socket, not just its rule on scripted samples (tests/test_abr.py):
    a 4 s playout buffer (backoff from refill at B >= 4 - 2 = 2 s with the socket >= 75 % full, refill
    again below 75 % or B < 4 / 2 = 2 s) on a 3 Mbit/s link. Once the playout buffer is full the appsrc
    holds the reader back, the socket fills past 75 % and SABRE must back off; reading at delta x R < R
    (delta = 0.5 here, so that the buffer drains by 0.5 s per s, well within the 12 s video) then drains
    the buffer below 2 s and it must refill. Every check's mode follows the rule from the
    occupancy and buffer it recorded, and both transitions occur."""
    net, apache = testbed
    net.set_rate(3_000_000)
    try:
        s = play(net, url(apache, content3), tmp_path / "sabre-modes", "--fetcher", "own", "--abr", "sabre",
                 "--rcvbuf-bytes", "131072", "--buffer-ms", "4000", "--abr-params", '{"delta": 0.5, "variant": "unconstrained"}')
    finally:
        net.set_rate(None)
    assert s["dash_error"] is None and s["status"] == "eos"
    p = s["abr"]["params"]
    assert (p["occupancy_threshold"], p["lambda"], p["delta"]) == (0.75, 1.2, 0.5)
    rates = [r["bitrate_bps"] for r in s["representations"]]
    checks = s["sabre_checks"]
    mode, seen = "refill", []
    for c in checks:
        fullsock = c["occupancy"] >= 0.75
        if mode == "refill":
            expect = "backoff" if fullsock and c["buffer_s"] >= 2.0 else "refill"
        else:
            expect = "refill" if (not fullsock or c["buffer_s"] < 2.0) else "backoff"
        assert c["mode"] == expect, c
        # the read target of the mode it is in: refill lambda x R_highest, backoff delta x R_level
        want = 1.2 * rates[-1] if c["mode"] == "refill" else 0.5 * rates[c["level"]]
        assert c["target_bps"] == pytest.approx(want, rel=1e-6), c
        if c["changed"]:
            seen.append(c["mode"])
        mode = c["mode"]
    print("\nsabre mode changes: " + ", ".join(f"{c['t']:.1f}s->{c['mode']} (occ {c['occupancy']:.2f}, "
                                               f"buf {c['buffer_s']:.1f}s)" for c in checks if c["changed"]))
    assert "backoff" in seen and "refill" in seen, seen
    assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == int(LEN_S * FPS)


@pytest.mark.netns
def test_sabre_general_rules_on_the_wire(testbed: tuple[Net, Apache], content3: Any, tmp_path: Path) -> None:
    """SABRE's general case (§4.2, the default variant) on a real socket and kernel. The link gives 1.5
    Mbit/s while SABRE buffers unpaced (so its k-rule, 1.1 x R_{i+1} < BW, stops at level 1 = 1 Mbit/s),
    then, once the steady state begins (sabre_phase in the event log; initial_buffer_s 4 s here so it
    starts within the 12 s video), 0.9 Mbit/s: below R = 1 Mbit/s. backoff_above_s 7.5 keeps SABRE in
    refill (the buffer cannot grow past it on a link slower than R), lambda 1.5 and alpha 0.5 let one or
    two segments show the congestion, theta 0.3 (0.3 Mbit/s at level 1) lets throttled reads refill the
    socket. Checked from what the player recorded, rule by rule:
      * throttling: after every steady-state check the reads are throttled exactly when the FIONREAD
        occupancy it recorded (over the SO_RCVBUF value set, occupancy_of rcvbuf) was below 75 %, the read pace is then
        theta x R of the current level, else the target, and the sabre_throttle events alternate on/off
        with occupancies on the right side of 75 %, at least one each way. On the wire: while throttled,
        the bytes read in a check period are at most theta x R x dt + the pacer's burst (16 KiB) — a
        bound CPU steal cannot break (a starved reader reads less, never more);
      * congestion: the network's ~0.86 Mbit/s of goodput is below gamma x the refill target (0.85 x
        1.5 x 1 Mbit/s = 1.275), so at least one congestion event, each lowering the target from above BW;
      * significant drops: each one names a segment whose D(i) (its recorded throughput) is below its
        level's R, and there is at least one (a 1 Mbit/s segment over a 0.9 Mbit/s link)."""
    net, apache = testbed
    net.set_rate(1_500_000)
    out = tmp_path / "sabre-general"
    out.mkdir()
    try:
        proc = start_player(net, url(apache, content3), out, time.monotonic_ns(), "--buffer-ms", "8000",
                            "--fetcher", "own", "--abr", "sabre", "--rcvbuf-bytes", "131072",
                            "--abr-params", '{"initial_buffer_s": 4, "backoff_above_s": 7.5, "theta": 0.3, '
                            '"lambda": 1.5, "alpha": 0.5}')
        deadline = time.monotonic() + 30
        ev_file = out / "events.jsonl"
        while time.monotonic() < deadline and proc.poll() is None:
            if ev_file.exists() and '"sabre_phase"' in ev_file.read_text():
                break
            time.sleep(0.05)
        net.set_rate(900_000)
        r = finish_player(proc, out)
    finally:
        net.set_rate(None)
    assert r.code == 0, (r.summary.get("reason"), r.summary.get("dash_error"))
    s = r.summary
    assert s["dash_error"] is None and s["abr"]["params"]["variant"] == "general"
    p = s["abr"]["params"]
    theta, thr, gamma = p["theta"], p["occupancy_threshold"], p["gamma"]
    assert (theta, thr, gamma) == (0.3, 0.75, 0.85)
    rates = [x["bitrate_bps"] for x in s["representations"]]
    steady = [c for c in s["sabre_checks"] if c["phase"] == "steady"]
    assert len(steady) >= 10, len(steady)
    for c in steady:
        assert c["occupancy_base_bytes"] == 131072, c     # the SO_RCVBUF set, not the doubled 262144 (issue 43)
        assert c["occupancy"] == pytest.approx(c["occupancy_bytes"] / 131072, abs=5e-5), c
        assert c["throttled"] == (c["occupancy"] < thr), c
        want = theta * rates[c["level"]] if c["throttled"] else c["target_bps"]
        assert c["read_bps"] == pytest.approx(want, rel=1e-5), c
    for prev, c in zip(steady, steady[1:]):
        if prev["throttled"] and c["level"] == prev["level"]:
            bound = theta * rates[c["level"]] / 8 * c["dt_s"] + 16 * 1024 + 1448
            assert c["bytes_read"] <= bound, (prev, c, bound)
    events = r.events
    thr_ev = [e for e in events if e["type"] == "sabre_throttle"]
    assert len(thr_ev) >= 2 and [e["on"] for e in thr_ev] == [i % 2 == 0 for i in range(len(thr_ev))], thr_ev
    assert all((e["occupancy"] < thr) == e["on"] for e in thr_ev), thr_ev
    assert [e for e in s["sabre_events"] if e["type"].startswith("sabre_")] == \
        [e for e in events if e["type"] in {x["type"] for x in s["sabre_events"]}]   # log == summary
    assert len(thr_ev) == sum(1 for prev, c in zip([{"throttled": False}] + steady, steady)
                              if c["throttled"] != prev["throttled"])
    cong = [e for e in events if e["type"] == "sabre_congestion"]
    assert cong, "no congestion event although the link fell below the refill target"
    for e in cong:
        assert e["bw_bps"] < gamma * e["target_before_bps"] and e["target_bps"] < e["target_before_bps"], e
    drops = [e for e in events if e["type"] == "sabre_significant_drop"]
    assert drops, "no significant drop although a 1 Mbit/s level met a 0.9 Mbit/s link"
    seg_d = [(g["throughput_bps"], g["bitrate_bps"]) for g in s["segments"]]
    for e in drops:
        assert e["d_bps"] < e["r_bps"], e
        assert any(abs(d - e["d_bps"]) <= 1 and r_ == e["r_bps"] for d, r_ in seg_d), (e, seg_d)
    print(f"\nsabre general: {len(steady)} steady checks, {len(thr_ev)} throttle events, "
          f"{len(cong)} congestion, {len(drops)} significant drops, levels {[g['level'] for g in s['segments']]}")
    assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == int(LEN_S * FPS)
