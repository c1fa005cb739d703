"""DASH: content generation (mpvlab.content.ensure_dash) and DASH playback in the player
(mpvlab/player/gstreamer/dash.py), served by Apache over an emulated path.

Topology (names carry the helper prefix ``hda``): namespaces ``hda<N>s`` (Apache,
own ServerRoot, ``AcceptFilter http none``, MIME types for .mpd/.m4s as
mpvlab/runner/server.py) and ``hda<N>c`` (player), one veth pair with offloads off;
the server side's egress gets a tbf when a test shapes the path.

Numbers asserted come from first principles:
  * tbf goodput = rate * 1448/1514 (TCP payload per full Ethernet frame with
    timestamps); a download can beat it only by the tbf burst;
  * dashdemux's own rule (gstadaptivedemux.c 1.22): next level = highest
    @bandwidth <= 0.8 * min(mean of the last 3 segment download rates, the last);
  * BBA-0's map (mpvlab/player/gstreamer/abr/bba.py BbaPolicy) recomputed from the recorded
    buffer levels;
  * buffer accounting: between two decisions the playout buffer gains one
    segment (S seconds) and loses the wall time that passed while playing;
  * the client's segment download time can exceed Apache's %D only by what was
    still between Apache and the client when Apache logged: data set aside for
    write completion (FlushMaxThreshold) + the socket send buffer (tcp_wmem max,
    set here) + the tbf queue + burst, drained at the goodput, plus the
    request's trip.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from hostnoise import assert_played_through
from mpvlab.core.hoststeal import StealMeter
from mpvlab.core.paths import checkout_root

# Per test (issue 44): `cpu` on the players over the testbed (rates, stalls and discards a busy
# host can move; tests/hostnoise.py). The content tests encode with one x264 thread and assert bytes.

REPO = checkout_root()
from mpvlab.content import ensure_dash, sha256_file  # noqa: E402
from mpvlab.testbed.player import (  # noqa: E402
    PY, Apache, Net, finish_player, run_cmd as _run, start_player, t_now, wait_event,
)

CACHE = Path(os.environ.get("MPVLAB_TEST_CONTENT_DIR", "/tmp/hda-content-cache"))
W, H, FPS = 640, 360, 30
LADDER = [500_000, 1_000_000, 2_000_000]
SEG_S = 2.0
LEN_S = 20.0
GOODPUT = 1448 / 1514
TBF_BURST = 10_000       # bytes
TBF_LIMIT = 32_000       # bytes queued in tbf at most
RMEM = (4096, 65536, 131072)   # client: bounds what TCP holds ahead of the player
WMEM = (4096, 16384, 65536)    # server: bounds what Apache has handed to TCP but not sent
FLUSH_MAX = 65536        # Apache FlushMaxThreshold (set explicitly; 2.4 default): mpm_event may
                         # log a request while up to this much still waits in user space
FRAME_S = 1 / FPS




# ---------------------------------------------------------------------------------------
# Content
def _all_files(info: Any) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(info.dir.iterdir())}


def test_content_deterministic_and_cached(tmp_path: Path) -> None:
    args = (6.0, [400_000, 800_000], 2.0, 320, 180, 30)
    a = ensure_dash(tmp_path / "a", *args)
    b = ensure_dash(tmp_path / "b", *args)
    assert not a.cached and not b.cached
    # Bit-identical ladders from two independent encodes (one x264 thread).
    assert _all_files(a) == _all_files(b)
    assert a.mpd_sha256 == b.mpd_sha256 == sha256_file(a.mpd)
    assert a.n_segments == 3 and len(a.representations) == 2
    # The sidecar is the truth about every file.
    for r in a.representations:
        for s in [r["init"], *r["segments"]]:
            f = a.dir / s["file"]
            assert f.stat().st_size == s["size_bytes"] and sha256_file(f) == s["sha256"]
            assert f.stat().st_mode & 0o777 == 0o644
    assert a.dir.stat().st_mode & 0o777 == 0o755
    # Cache hit, then a tampered segment is detected and re-encoded.
    c = ensure_dash(tmp_path / "a", *args)
    assert c.cached and _all_files(c) == _all_files(a)
    seg = a.dir / a.representations[1]["segments"][1]["file"]
    good = sha256_file(seg)
    data = bytearray(seg.read_bytes())
    data[-100] ^= 0xFF
    seg.write_bytes(bytes(data))
    d = ensure_dash(tmp_path / "a", *args)
    assert not d.cached and sha256_file(seg) == good
    # Different parameters -> different name, nothing shared.
    e = ensure_dash(tmp_path / "a", 6.0, [400_000, 900_000], 2.0, 320, 180, 30)
    assert e.dir != a.dir
    with pytest.raises(ValueError):
        ensure_dash(tmp_path / "a", 6.0, [800_000, 400_000], 2.0, 320, 180, 30)
    with pytest.raises(ValueError):
        ensure_dash(tmp_path / "a", 6.0, [400_000, 800_000], 2.0, [320, 426], [180, 240], 30)


def test_mpd_min_buffer_time_is_the_one_change_and_is_recorded(tmp_path: Path) -> None:
    """video.mpd_min_buffer_time (issue 47: dash.js reads minBufferTime; ffmpeg writes 2 x segment,
    MP4Box 1.5 s): the MPD differs from ffmpeg's in that attribute only, every segment is the same
    file, the ladder has its own cache name, the default keeps ffmpeg's value and its cache name."""
    from mpvlab.content import mpd_attributes
    args = (4.0, [300_000, 600_000], 2.0, 320, 180, 30)
    plain = ensure_dash(tmp_path, *args)
    set_ = ensure_dash(tmp_path, *args, mpd_min_buffer_s=1.5)
    assert plain.dir != set_.dir and "mpd_min_buffer_s" not in plain.params
    assert mpd_attributes(plain.mpd)["minBufferTime"] == "PT4.0S"       # ffmpeg: 2 x the 2 s segment
    got = mpd_attributes(set_.mpd)
    assert got["minBufferTime"] == "PT1.5S" and got["maxSegmentDuration"] == "PT2.0S" and got["type"] == "static"
    a, b = plain.mpd.read_text(), set_.mpd.read_text()
    assert a.replace('minBufferTime="PT4.0S"', 'minBufferTime="PT1.5S"') == b
    assert {k: v for k, v in _all_files(plain).items() if k != "manifest.mpd"} == \
        {k: v for k, v in _all_files(set_).items() if k != "manifest.mpd"}
    assert ensure_dash(tmp_path, *args, mpd_min_buffer_s=1.5).cached


def test_content_concurrent_callers(tmp_path: Path) -> None:
    """Two processes asking for the same ladder at once: the flock serialises them, one
    encodes, the other finds the finished ladder valid (cached), nothing half-written."""
    code = ("import sys, json; from mpvlab.content import ensure_dash; "
            f"i = ensure_dash({str(tmp_path)!r}, 4.0, [300000, 600000], 2.0, 320, 180, 30); "
            "print(json.dumps([i.cached, i.mpd_sha256]))")
    procs = [subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert sorted(o[0] for o in outs) == [False, True]
    assert outs[0][1] == outs[1][1]
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def _ffprobe_frames(parts: list[Path], scratch: Path) -> list[dict[str, Any]]:
    with open(scratch, "wb") as out:
        for p in parts:
            out.write(p.read_bytes())
    res = _run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                "packet=pts_time,flags", "-of", "json", str(scratch)])
    return json.loads(res.stdout)["packets"]


def test_content_segments_idr_and_bitrate(tmp_path: Path) -> None:
    dur, seg = 10.0, 2.0
    info = ensure_dash(tmp_path, dur, [500_000, 1_000_000], seg, [320, 640], [180, 360], 30)
    for r in info.representations:
        init = info.dir / r["init"]["file"]
        for s in r["segments"]:
            # Each segment decodes alone after the init segment: GOP == segment, so it
            # holds exactly seg*fps frames and the first is a keyframe (IDR).
            pk = _ffprobe_frames([init, info.dir / s["file"]], tmp_path / "probe.mp4")
            assert len(pk) == int(s["duration_s"] * 30)
            assert pk[0]["flags"].startswith("K")
            assert sum(p["flags"].startswith("K") for p in pk) == 1
            # The media timeline is the MPD's: the segment's first frame (its tfdt) is at the
            # segment's start, frames 1/30 s apart, the last ending where the next segment starts
            # (no gap, no overlap: a gap would make a browser's player stall or jump).
            pts = [float(p["pts_time"]) for p in pk]
            assert pts[0] == pytest.approx(s["start_s"], abs=1e-3)
            assert all(b - a == pytest.approx(1 / 30, abs=1e-3) for a, b in zip(pts, pts[1:]))
            assert pts[-1] + 1 / 30 == pytest.approx(s["start_s"] + s["duration_s"], abs=1e-3)
        # CBR with a 1 s VBV (bufsize = bitrate) and nal-hrd filler: over D seconds the
        # stream carries between rate*(D-1) and rate*(D+1) bits; fMP4 adds a moof per
        # segment and ~16 B per sample (< 1 % here).
        b = r["bitrate_bps"]
        mean = r["mean_bitrate_bps"]
        assert b * (dur - 1) / dur <= mean <= b * (dur + 1) / dur * 1.01, (b, mean)
        for s in r["segments"]:
            assert b * (seg - 1) / seg <= s["bitrate_bps"] <= b * (seg + 1) / seg * 1.01, (b, s)


def test_bba_policy_map() -> None:
    from mpvlab.player.gstreamer.abr.bba import BbaPolicy
    p = BbaPolicy((500_000, 1_000_000, 2_000_000), reservoir_s=2.0, cushion_s=4.0)
    assert p.f(0) == p.f(2.0) == 500_000
    assert p.f(6.0) == p.f(9.0) == 2_000_000
    assert p.f(4.0) == 500_000 + 1_500_000 * 0.5
    assert p.decide(2, 1.9) == 0 and p.decide(0, 6.1) == 2
    # f(3.9) = 1.2125 Mbit/s >= R+ (1 M) from level 0 -> highest rate strictly below f: 1 M
    assert p.decide(0, 3.9) == 1
    # from level 1 at f(5.9) = 1.9625 M: below R+ (2 M) and above R- (0.5 M): stay
    assert p.decide(1, 5.9) == 1
    # from level 2 at f(3) = 0.875 M <= R- (1 M): lowest rate strictly above f: 1 M
    assert p.decide(2, 3.0) == 1
    # from level 2 at f(4) = 1.25 M: between R- (1 M) and R+ (2 M): stay at 2
    assert p.decide(2, 4.0) == 2


# ---------------------------------------------------------------------------------------
# Testbed
@pytest.fixture(scope="module")
def content() -> Any:
    CACHE.mkdir(parents=True, exist_ok=True)
    os.chmod(CACHE, 0o755)
    return ensure_dash(CACHE, LEN_S, LADDER, SEG_S, W, H, FPS)


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory, content: Any) -> Iterator[tuple[Net, Apache]]:
    n = os.getpid() % 100000
    net = Net(srv=f"hda{n}s", cli=f"hda{n}c", srv_if=f"hda{n}s", cli_if=f"hda{n}c", srv_ip="10.78.0.1",
              cli_ip="10.78.0.2", rmem=RMEM, wmem=WMEM, tbf_burst=TBF_BURST, tbf_limit=TBF_LIMIT)
    try:
        net.up()
        apache = Apache(net, CACHE, tmp_path_factory.mktemp("hda_apache"), flush_max=FLUSH_MAX)
    except BaseException:
        net.down()
        raise
    try:
        yield net, apache
    finally:
        apache.stop()
        net.down()


def mpd_url(apache: Apache, content: Any) -> str:
    return apache.url(f"{content.dir.name}/{content.mpd.name}")


def check_common(s: dict[str, Any], content: Any) -> None:
    """What every completed DASH run must satisfy."""
    assert s["status"] == "eos", s["reason"]
    assert s["dash"] is True and s["dash_error"] is None
    n = content.n_segments
    assert [g["index"] for g in s["segments"]] == list(range(n))
    assert s["frames_expected"] == int(LEN_S * FPS)
    assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"]
    # Each segment record's bytes are exactly the file of the representation it names.
    for g in s["segments"]:
        rep = content.representations[g["level"]]
        assert g["bitrate_bps"] == rep["bitrate_bps"]
        assert g["bytes"] == rep["segments"][g["index"]]["size_bytes"], g
        assert g["t_request"] <= g["t_downloaded"] <= g["t_pushed"] + 1e-3
        assert g["frames_rendered"] + g["frames_discarded"] == int(SEG_S * FPS)
    # The MPD + every media segment + every init segment fetched.
    total = (content.mpd.stat().st_size + sum(g["bytes"] for g in s["segments"])
             + sum(d["bytes"] for d in s["init_downloads"]))
    assert s["bytes_received"] == total
    levels = [g["level"] for g in s["segments"]]
    assert s["quality_avg"] == pytest.approx(sum(levels) / n)
    assert s["bitrate_switches"] == sum(a != b for a, b in zip(levels, levels[1:]))
    # The ABR's decision for every segment is what was downloaded.
    assert s["abr_policy_mismatches"] == 0, s["abr_policy_mismatch_segments"]
    assert levels[0] == 0      # dashdemux starts at the lowest representation


def check_buffer_accounting(s: dict[str, Any]) -> None:
    """Decision k is taken when segment k is entirely in the playout queue, before segment
    k+1 is requested, with the queue holding B[k].  Until decision k+1 the queue gains
    segment k+1 (S s of media) and, while playing, loses the wall time elapsed:
    B[k+1] = min(B[k] + S - (t[k+1] - t[k]), capacity) -- the push of segment k+1 waits
    for room when the queue is full.  Only pairs with playback running throughout and no
    underflow in between.  Tolerance: one frame of level granularity each side + 20 ms
    of thread scheduling."""
    dec = s["abr_decisions"]
    cap = s["buffer_ms"] / 1000
    t_play = s["t_first_frame"]
    checked = 0
    for a, b in zip(dec, dec[1:]):
        if a["t"] < t_play or b["after_index"] != a["after_index"] + 1:
            continue
        if any(x < b["t"] and y > a["t"] for x, y in s["underflow_episodes"]):
            continue
        expect = min(a["buffer_s"] + SEG_S - (b["t"] - a["t"]), cap)
        assert abs(b["buffer_s"] - expect) <= 2 * FRAME_S + 0.02, (a, b, expect)
        checked += 1
    assert checked >= 3


def apache_vs_player(apache: Apache, s: dict[str, Any], since: int) -> list[tuple[float, float]]:
    """(player download_s, Apache %D s) per media segment, matched by path in order."""
    log = apache.log()[since:]
    pairs = []
    used: set[int] = set()
    for g in s["segments"]:
        path = "/" + g["uri"].split("/", 3)[3]
        i = next(i for i, e in enumerate(log) if e[0] == path and i not in used)
        used.add(i)
        assert log[i][1] == 200 and log[i][2] == g["bytes"], (log[i], g)
        pairs.append((g["download_s"], log[i][3] / 1e6))
    return pairs


# ---------------------------------------------------------------------------------------
@pytest.mark.netns
@pytest.mark.parametrize("abr", ["gst", "bba"])
@pytest.mark.cpu_light   # cpu_light: measured 0.04 cores (docs/testing.md)
def test_ample_bandwidth(testbed: tuple[Net, Apache], content: Any, tmp_path: Path, abr: str) -> None:
    """Veth at memory speed: after start-up every segment is at the top level (gst: from
    the second segment, its first estimate is already far above 2 Mbit/s; BBA: from the
    first decision with the buffer above reservoir + cushion), no stall, no discard."""
    net, apache = testbed
    net.set_rate(None)
    reservoir, cushion, buf_ms = 2.0, 4.0, 8000
    extra = ["--buffer-ms", str(buf_ms)]
    if abr == "bba":
        extra += ["--abr", "bba", "--bba-reservoir-s", str(reservoir), "--bba-cushion-s", str(cushion)]
    with StealMeter() as run_steal:   # CPU-late discards only as the host's steal explains (hostnoise.py)
        r = finish_player(start_player(net, mpd_url(apache, content), tmp_path, time.monotonic_ns(),
                                       *extra), tmp_path)
    s = r.summary
    assert r.code == 0, s
    check_common(s, content)
    top = len(LADDER) - 1
    levels = [g["level"] for g in s["segments"]]
    if abr == "gst":
        assert levels[1:] == [top] * (len(levels) - 1), levels
    else:
        from mpvlab.player.gstreamer.abr.bba import BbaPolicy
        pol = BbaPolicy(tuple(LADDER), reservoir, cushion)
        for prev, g in zip(s["segments"], s["segments"][1:]):
            assert g["level"] == pol.decide(prev["level"], g["buffer_s_at_decision"]), g
        first_full = next(i for i, g in enumerate(s["segments"])
                          if g["buffer_s_at_decision"] is not None
                          and g["buffer_s_at_decision"] >= reservoir + cushion)
        assert levels[first_full:] == [top] * (len(levels) - first_full), levels
        assert levels != [top] * len(levels)      # it did start low
        assert s["abr"] == {"name": "bba", "params": {"reservoir_s": reservoir, "cushion_s": cushion,
                                                      "connection_speed_kbps": 4294967}, "seed": None, "version": None}
    assert_played_through(s, run_steal.window, FPS)
    assert abs(s["stall_rate"]) <= 0.5 / LEN_S
    assert s["startup_delay_s"] < 1.0
    # Segment k is first shown k*S after the first frame (real-time playback).
    for g in s["segments"]:
        assert abs(g["t_play"] - s["t_first_frame"] - g["index"] * SEG_S) <= 0.1, g
    check_buffer_accounting(s)


@pytest.mark.netns
@pytest.mark.cpu_light   # cpu_light: measured 0.04 cores (docs/testing.md)
def test_tbf_below_top_gst_settles(testbed: tuple[Net, Apache], content: Any, tmp_path: Path) -> None:
    """tbf 1.6 Mbit/s: goodput 1.53 Mbit/s, below the top level's 2 Mbit/s.  A download
    cannot beat the goodput by more than the tbf burst, so dashdemux's estimate is at most
    0.8 * 1.53 * (1 + burst/segment) < 2 Mbit/s: once its 3-segment window holds only
    shaped downloads, it never picks the top level, and each settled segment's real
    bitrate is below the goodput.  Also: the player's download times agree with Apache's
    %D within the derived bound."""
    net, apache = testbed
    rate = 1_600_000
    goodput = rate * GOODPUT
    net.set_rate(rate)
    since = len(apache.log())
    try:
        r = finish_player(start_player(net, mpd_url(apache, content), tmp_path, time.monotonic_ns(),
                                       "--buffer-ms", "8000"), tmp_path)
    finally:
        net.set_rate(None)
    s = r.summary
    assert r.code == 0, s
    check_common(s, content)
    for g in s["segments"]:
        # first principles: nothing arrives faster than the goodput plus the bucket
        assert g["throughput_bps"] <= goodput * (1 + TBF_BURST / g["bytes"]) * 1.01, g
    settled = s["segments"][3:]
    for g in settled:
        actual = content.representations[g["level"]]["segments"][g["index"]]["bitrate_bps"]
        assert g["level"] < len(LADDER) - 1 and actual < goodput, (g, actual, goodput)
    # It does use the link: the level right below the goodput once the estimate is in.
    assert all(g["level"] == 1 for g in settled), [g["level"] for g in s["segments"]]

    # Apache's %D runs from reading the request to logging it, which mpm_event does once
    # the response is written or set aside for write completion; the client's time runs
    # from issuing the request to its last byte.  So client - server >= -(request trip +
    # scheduling) and <= what can still be between Apache and the client at the end
    # (set-aside data <= FlushMaxThreshold + send buffer <= tcp_wmem max + tbf queue +
    # burst) at the goodput, + the request trip and scheduling (50 ms).
    lag_max = (FLUSH_MAX + WMEM[2] + TBF_LIMIT + TBF_BURST) * 8 / goodput + 0.05
    for cli, srv in apache_vs_player(apache, s, since):
        assert -0.02 <= cli - srv <= lag_max, (cli, srv, lag_max)


@pytest.mark.netns
@pytest.mark.cpu_light   # cpu_light: measured 0.04 cores (docs/testing.md)
def test_throttle_bba_steps_down(testbed: tuple[Net, Apache], content: Any, tmp_path: Path) -> None:
    """BBA at the top level with a full buffer (8 s); the path drops to 0.6 Mbit/s
    (goodput 0.574 Mbit/s, between the 0.5 and 1 Mbit/s levels) for 14 s.  The top-level
    segment in flight (~500 KB) then takes ~6.9 s, so the buffer falls to ~8 - 6.9 + 2
    = 3.1 s (inside the cushion: f = 0.91 Mbit/s <= R- -> 1 Mbit/s); the 1 Mbit/s segment
    (~250 KB) takes ~3.6 s, the buffer falls below the 2 s reservoir -> 0.5 Mbit/s.
    Checked: every decision is BBA-0's map of the recorded buffer level; during the
    throttle the level only steps down, reaching the lowest, while the buffer falls;
    the throttled download times match the shaped rate; no stall (the buffer never
    empties: 0.5 Mbit/s segments arrive faster than real time)."""
    net, apache = testbed
    reservoir, cushion = 2.0, 4.0
    low = 600_000
    net.set_rate(20_000_000)
    t0 = time.monotonic_ns()
    run_steal = StealMeter().start()
    proc = start_player(net, mpd_url(apache, content), tmp_path, t0, "--buffer-ms", "8000",
                        "--abr", "bba", "--bba-reservoir-s", str(reservoir),
                        "--bba-cushion-s", str(cushion))
    try:
        ff = wait_event(tmp_path, "first_frame", 10)
        time.sleep(max(0.0, ff["t"] + 3.0 - t_now(t0)))
        ta1 = t_now(t0)
        net.set_rate(low)
        time.sleep(14.0)
        tb0 = t_now(t0)
        net.set_rate(20_000_000)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    r = finish_player(proc, tmp_path)
    steal = run_steal.stop()
    net.set_rate(None)
    s = r.summary
    assert r.code == 0, s
    check_common(s, content)
    from mpvlab.player.gstreamer.abr.bba import BbaPolicy
    pol = BbaPolicy(tuple(LADDER), reservoir, cushion)
    segs = s["segments"]
    for prev, g in zip(segs, segs[1:]):
        assert g["level"] == pol.decide(prev["level"], g["buffer_s_at_decision"]), g
    top = len(LADDER) - 1
    # The first segment the throttle caught was requested at the top level with a full buffer.
    caught = [g for g in segs if g["t_request"] < tb0 and g["t_downloaded"] > ta1]
    assert caught and caught[0]["level"] == top, [(g["index"], g["level"]) for g in segs]
    # Downloads entirely inside the throttle run at the shaped goodput (the bucket's burst
    # may come for free; 0.3 s for the request trip and TCP's restart after idle).
    inside = [g for g in segs if g["t_request"] > ta1 and g["t_downloaded"] < tb0]
    assert inside
    for g in inside:
        ideal = g["bytes"] * 8 / (low * GOODPUT)
        assert ideal - TBF_BURST * 8 / (low * GOODPUT) - 0.02 <= g["download_s"] <= ideal + 0.3, g
    # Decisions taken during the throttle only step down, to the lowest level, while the
    # buffer falls (until the lowest level is reached: 0.5 Mbit/s roughly keeps pace).
    during = [g for g in segs if ta1 < g["t_request"] <= tb0]
    lv = [g["level"] for g in during]
    bufs = [g["buffer_s_at_decision"] for g in during]
    assert lv == sorted(lv, reverse=True) and lv[0] == top and lv[-1] == 0, (lv, bufs)
    k = lv.index(0)
    assert bufs[:k + 1] == sorted(bufs[:k + 1], reverse=True), bufs
    assert bufs[k] <= reservoir or pol.f(bufs[k]) <= LADDER[1]
    assert_played_through(s, steal, FPS)
    assert abs(s["stall_rate"]) <= 0.5 / LEN_S
    check_buffer_accounting(s)


@pytest.mark.netns
@pytest.mark.cpu_light   # cpu_light: measured 0.03 cores (docs/testing.md)
def test_throttle_rebuffer_stall(testbed: tuple[Net, Apache], content: Any, tmp_path: Path) -> None:
    """Rebuffer mode with dashdemux's ABR: the path drops to 0.1 Mbit/s (below the lowest
    level) for 10 s.  Media ahead of the renderer at the drop is at most the playout
    buffer (2 s) + one segment in dashdemux's internal queue (2 s) + the client's TCP
    receive buffer and the tbf queue (at >= the lowest level's rate); during the drop at
    most goodput*10 s of bits arrive, i.e. that many seconds of the lowest level.  The
    rest must be a stall; it ends at most 1.5 s (TCP recovery) + the resume level's
    download after the restore."""
    net, apache = testbed
    low, hi, dur = 100_000, 20_000_000, 10.0
    buf_ms, resume_ms = 2000, 1000
    net.set_rate(hi)
    t0 = time.monotonic_ns()
    proc = start_player(net, mpd_url(apache, content), tmp_path, t0, "--mode", "rebuffer",
                        "--buffer-ms", str(buf_ms), "--rebuffer-resume-ms", str(resume_ms),
                        "--startup-buffer-ms", str(resume_ms))
    try:
        ff = wait_event(tmp_path, "first_frame", 10)
        time.sleep(max(0.0, ff["t"] + 3.0 - t_now(t0)))
        ta0 = t_now(t0)
        net.set_rate(low)
        ta1 = t_now(t0)
        time.sleep(dur)
        tb0 = t_now(t0)
        net.set_rate(hi)
        tb1 = t_now(t0)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    r = finish_player(proc, tmp_path)
    net.set_rate(None)
    s = r.summary
    assert r.code == 0, s
    check_common(s, content)
    lowest = min(seg["bitrate_bps"] for seg in content.representations[0]["segments"])
    ahead = buf_ms / 1000 + SEG_S + (RMEM[2] + TBF_LIMIT + TBF_BURST) * 8 / lowest
    received = (tb1 - ta0) * low * GOODPUT / lowest
    lower = (tb0 - ta1) - ahead - received
    assert lower > 0.5, "test parameters must force a stall"
    upper = (tb1 - ta0) + 1.5 + resume_ms / 1000 * LADDER[-1] * 1.1 / (hi * GOODPUT)
    assert s["underflows"] >= 1
    assert lower <= s["underflow_total_s"] <= upper, (lower, s["underflow_total_s"], upper)
    extra = s["playback_s"] - s["video_length_s"]
    assert abs(extra - s["underflow_total_s"]) <= 0.3, (extra, s["underflow_total_s"])
    assert s["stall_rate"] == pytest.approx(extra / s["video_length_s"], abs=1e-5)
    for a, b in s["underflow_episodes"]:
        assert ta0 <= a < b <= ta0 + upper
    assert s["picture_discards"] <= 3 * s["underflows"]


def test_underflow_running_after_overrun() -> None:
    """GstQueue emits `running` after an overrun too (once per buffer that frees room
    in a full queue); those must not keep an underflow episode open."""
    from mpvlab.player.gstreamer.counters import Underflows
    u = Underflows(merge_s=0.2)
    assert u.on_underrun(1.0) is True
    u.on_running(1.5)                 # data again after the empty spell
    for k in range(60):               # the queue is full now: running per frame
        u.on_running(1.6 + k / 30)
    assert u.due_close(1.75) == 1.5
    assert u.episodes == [[1.0, 1.5]] and abs(u.empty_s - 0.5) < 1e-9
