"""The player contract (mpvlab/player/contract.py), one test for every player kind of
mpvlab/player/kinds.py: each is started with the command line its registry entry builds (as the
runner builds it) in a client namespace, against Apache in a server namespace, and driven through
the same motions:

  * start at run time zero: started staged, it asks the server for nothing until it is given t0,
    and its first event is at t >= 0;
  * SIGTERM mid-playback: exit code EXIT_INTERRUPTED and a player-summary.json with status
    `interrupted`, the contract's keys and types, and the one `abr` shape;
  * SIGKILL mid-playback: nothing of it stays in the namespace (dash.js's Chromium included).

Its scratch folders (PlayerKind.scratch: dash.js's profile and Chromium's TMPDIR, Launch.tmp_dir)
are the player's to remove when it ends, and its caller's after a SIGKILL: here the test is the caller
(a run's are in its ledger). Chromium's singleton socket is in that TMPDIR, never in the shared one.

A new player kind is in this test by its registry entry alone (the KINDS below must name it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from mpvlab.content import ensure_dash, ensure_progressive
from mpvlab.input.scenario import Scenario
from mpvlab.player import contract, kinds
from mpvlab.player.dashjs.kind import DASHJS, DASHJS_PAGE
from mpvlab.player.entry import Launch, PlayerKind
from mpvlab.testbed.player import Apache, Net

pytestmark = pytest.mark.netns
# Per test (issue 44): `cpu` on the dash.js kind (Chromium takes both cores); the GStreamer kinds
# decode a 640x360 picture for a few seconds and assert states and shapes, no timing a busy host moves.

CACHE = Path(os.environ.get("MPVLAB_TEST_CONTENT_DIR", "/tmp/hpl-content-cache"))
W, H, FPS, LEN_S = 640, 360, 30, 20.0
LADDER = [500_000, 1_000_000]
BASE: dict[str, Any] = {
    "name": "contract-t", "seed": 3, "topology": {"kind": "dumbbell"},
    "paths": {"wired": {"down": {"rate": "20mbit", "buffer": "100KB", "delay": "10ms"}}},
    "transport": {"cc": "cubic"}, "server": {"protocol": "http/1.1", "tls": False},
}
PROGRESSIVE = {"kind": "progressive", "duration": f"{LEN_S:g}s", "bitrate": "1mbit", "width": W, "height": H}
DASH = {"kind": "dash", "duration": f"{LEN_S:g}s", "bitrates": ["500kbit", "1mbit"], "segment": "2s",
        "width": W, "height": H}
# Every kind of the registry, with the scenario sections that select it; the ABR is not the kind's
# default where it has one, so the summary's `abr.name` shows the choice reached the player.
KINDS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "gstreamer-progressive": (PROGRESSIVE, {"buffer": "2s"}),
    "gstreamer-dash": (DASH, {"buffer": "8s", "abr": "bba", "bba_reservoir": "2s", "bba_cushion": "4s"}),
    "own-dash": (DASH, {"buffer": "8s", "fetcher": "own", "abr": "bola"}),
    "dashjs": (DASH, {"kind": "dashjs", "dashjs_stable_buffer_time": "8s", "abr": "throughput"}),
}
MARKS = {"dashjs": [pytest.mark.dashjs, pytest.mark.cpu]}
TYPES: dict[str, tuple[type, ...]] = {
    "url": (str,), "status": (str,), "reason": (str, type(None)), "exit_code": (int,), "t0_ns": (int,),
    "bytes_received": (int,), "underflows": (int,), "underflow_total_s": (int, float),
    "picture_discards": (int, type(None)), "frames_expected": (int, type(None)),
    "startup_delay_s": (int, float, type(None)), "playback_s": (int, float, type(None)),
    "stall_ratio": (int, float, type(None)), "cpu": (dict, type(None)),
}


def test_every_registered_kind_is_driven_here() -> None:
    assert set(KINDS) == set(kinds.REGISTRY) and set(TYPES) == set(contract.SUMMARY_KEYS)
    # the scenario's player.kind values are the registry's (one list, kinds.PLAYER_KINDS)
    from mpvlab.workloads.video import PlayerSpec
    assert set(PlayerSpec.model_fields["kind"].annotation.__args__) == set(kinds.PLAYER_KINDS)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Net, Apache, Path]]:
    """Apache serving a web root with the progressive MP4, the DASH ladder and the dash.js page."""
    CACHE.mkdir(parents=True, exist_ok=True)
    os.chmod(CACHE, 0o755)
    mp4 = ensure_progressive(CACHE, LEN_S, 1_000_000, W, H, FPS)
    dash = ensure_dash(CACHE, LEN_S, LADDER, 2.0, W, H, FPS)
    # outside pytest's 0700 folders: Apache serves as www-data
    www = Path(tempfile.mkdtemp(prefix="mpvlab-contract-", dir="/tmp"))
    www.chmod(0o755)
    (www / "video.mp4").symlink_to(mp4.path)
    (www / dash.dir.name).symlink_to(dash.dir)
    page = DASHJS.web_page
    assert page is not None
    # copied as the runner copies it (www-data cannot traverse a checkout made with mode 0700)
    shutil.copytree(page, www / DASHJS_PAGE, ignore=shutil.ignore_patterns("__pycache__"))
    n = os.getpid() % 100000
    net = Net(srv=f"hpc{n}s", cli=f"hpc{n}c", srv_if=f"hpc{n}s", cli_if=f"hpc{n}c", srv_ip="10.78.0.1",
              cli_ip="10.78.0.2", rmem=(4096, 131072, 1 << 20))
    try:
        net.up()
        net.set_rate(4_000_000)       # 4x the top rate: playback runs, and lasts the video's length
        apache = Apache(net, www, Path(tmp_path_factory.mktemp("contract_apache")))
    except BaseException:
        net.down()
        shutil.rmtree(www)
        raise
    try:
        yield net, apache, www / dash.dir.name / dash.mpd.name
    finally:
        apache.stop()
        net.down()
        shutil.rmtree(www)


def _launch(name: str, net: Net, apache: Apache, mpd: Path, out: Path) -> tuple[PlayerKind, Launch]:
    video, player = KINDS[name]
    sc = Scenario.model_validate({**BASE, "video": video, "player": player})
    kind = sc.player_kind
    assert kind.name == name
    url = apache.url("video.mp4" if video["kind"] == "progressive" else f"{mpd.parent.name}/{mpd.name}")
    launch = Launch(
        url=url, events=out / "player-events.jsonl", summary=out / "player-summary.json", data_dir=out / "data",
        t0_ns=None, timeout_s=LEN_S * 3, frames=int(LEN_S * FPS), buffer_ns=sc.playout_buffer_ns, seed=sc.seed,
        player=sc.player, video=sc.video, server=sc.server,
        page_url=apache.url(f"{DASHJS_PAGE}/player.html") if kind.web_page is not None else None,
        # short (Chromium's socket path in it must fit 108 bytes) and this test's alone
        tmp_dir=Path(tempfile.gettempdir()) / f"hpc{os.getpid() % 100000}-{out.name}" if kind.tmp_dir else None)
    return kind, launch


def _start(kind: PlayerKind, argv: list[str], net: Net, out: Path) -> subprocess.Popen[bytes]:
    """Started staged, as the runner starts it; ready when its page (if any) is loaded."""
    p = net.bed.popen(net.cli, argv, kind.name, stdin=subprocess.PIPE, stdout=(out / "player.log").open("wb"),
                      stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    if kind.page_ready_file is not None:
        while not (out / "data" / kind.page_ready_file).exists():
            assert p.poll() is None, (out / "player.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the page was not loaded within 90 s"
            time.sleep(0.05)
    else:
        time.sleep(1.0)       # its pipeline built; it must wait for t0 all the same
    return p


def _video_requests(apache: Apache, *, media_only: bool = False) -> int:
    """The server's answers to the player's requests for video (not the page): with media_only, for
    the media itself (the MP4, a segment), not the MPD."""
    return sum(1 for path, *_ in apache.log() if not path.startswith(f"/{DASHJS_PAGE}/")
               and path != "/favicon.ico" and not (media_only and path.endswith(".mpd")))


def _release(p: subprocess.Popen[bytes], t0_ns: int) -> None:
    assert p.stdin is not None
    p.stdin.write(f"t0 {t0_ns}\n".encode())
    p.stdin.close()


def _wait_bytes(out: Path, p: subprocess.Popen[bytes], apache: Apache, before: int, timeout_s: float = 30) -> None:
    """Until the server has answered a request of the player for media (the MP4, a segment; the MPD
    alone left a loaded dash.js run with 0 bytes received), and two seconds more: it is playing (the
    video lasts 20 s). `before` counts the media requests answered before this player started."""
    deadline = time.monotonic() + timeout_s
    while _video_requests(apache, media_only=True) < before + 1:
        assert p.poll() is None, (out / "player.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "no video requests within 30 s of t0"
        time.sleep(0.1)
    time.sleep(2.0)


def _singleton_in_tmp_dir(kind: PlayerKind, launch: Launch) -> None:
    """A browser kind's singleton socket (linked from its profile, the first scratch folder) is in its
    Launch.tmp_dir, so that removing the scratch folders removes it."""
    if launch.tmp_dir is not None:
        link = Path(os.readlink(kind.scratch(launch)[0] / "SingletonSocket"))
        assert link.parent.parent == launch.tmp_dir and link.parent.name.startswith("org.chromium.Chromium."), link


def _ns_pids(net: Net) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", net.cli], capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


# dash.js's case first: the module's test bed is made by the first case that uses it, in the strongest
# slot of all its users (tests/policy.py, slot_of: `cpu`, dash.js's). Made by the dash.js case, the
# GStreamer cases (0.03 cores measured) run as plain tests; made by the first of them, that case held
# the CPU lock for its 33 s (S5, S6).
@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in sorted(KINDS, key=lambda n: n != "dashjs")])
def test_player_kind_keeps_the_contract(bed: tuple[Net, Apache, Path], tmp_path: Path, name: str) -> None:
    net, apache, mpd = bed
    assert _ns_pids(net) == []
    scratch: list[Path] = []
    try:
        _term(name, net, apache, mpd, tmp_path / "term", scratch)
        _kill(name, net, apache, mpd, tmp_path / "kill", scratch)
    finally:
        # This test is the players' caller: a SIGKILLed player's scratch folders are its to remove
        # (a failed assertion's too); a run's are in its ledger.
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)


def _term(name: str, net: Net, apache: Apache, mpd: Path, out: Path, scratch: list[Path]) -> None:
    """Start at time zero, stop on SIGTERM: the contract's summary, and the player removed its scratch."""
    out.mkdir()
    kind, launch = _launch(name, net, apache, mpd, out)
    scratch += kind.scratch(launch)
    p = _start(kind, kind.argv(launch), net, out)
    _singleton_in_tmp_dir(kind, launch)
    before = _video_requests(apache)
    time.sleep(1.0)
    assert _video_requests(apache) == before, "the player asked for video before it was given t0"
    t0 = time.monotonic_ns() + 500_000_000
    _release(p, t0)
    _wait_bytes(out, p, apache, _video_requests(apache, media_only=True))
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == contract.EXIT_INTERRUPTED, (out / "player.log").read_text()[-3000:]
    events = [json.loads(line) for line in (out / "player-events.jsonl").read_text().splitlines() if line]
    assert events and events[0]["t"] >= 0 and all(e["t"] >= 0 for e in events), events[:3]
    s = json.loads((out / "player-summary.json").read_text())
    assert s["status"] == "interrupted" and s["exit_code"] == contract.EXIT_INTERRUPTED and s["t0_ns"] == t0
    bad = {k: type(s.get(k)).__name__ for k, types in TYPES.items() if k not in s or not isinstance(s[k], types)}
    assert not bad, bad
    assert s["bytes_received"] > 0
    if kind.summary_part == "dash":
        assert s["dash"] is True
        assert set(s["abr"]) == {"name", "params", "seed", "version"}, s["abr"]
        assert s["abr"]["name"] == KINDS[name][1]["abr"] and isinstance(s["abr"]["params"], dict)
        assert contract.AbrRecord(**s["abr"]).to_json() == s["abr"]
    else:
        assert not s.get("dash") and "abr" not in s
    assert not list(out.glob("*.tmp"))
    deadline = time.monotonic() + 15
    while _ns_pids(net) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ns_pids(net) == []
    left = [f for f in kind.scratch(launch) if f.exists()]
    assert left == [], f"the player ended on SIGTERM and left its scratch folders {left}"


def _kill(name: str, net: Net, apache: Apache, mpd: Path, out: Path, scratch: list[Path]) -> None:
    """SIGKILL mid-playback: nothing of it stays in the namespace (its scratch folders are its caller's)."""
    out.mkdir()
    kind, launch = _launch(name, net, apache, mpd, out)
    scratch += kind.scratch(launch)
    p = _start(kind, kind.argv(launch), net, out)
    _singleton_in_tmp_dir(kind, launch)
    before = _video_requests(apache, media_only=True)
    _release(p, time.monotonic_ns())
    _wait_bytes(out, p, apache, before)
    assert len(_ns_pids(net)) >= 1
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    deadline = time.monotonic() + 15
    while (left := _ns_pids(net)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], [Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in left if Path(f"/proc/{pid}").exists()]
