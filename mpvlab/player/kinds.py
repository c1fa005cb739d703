"""The player kinds, one registry entry each (Pantheon's wrappers are the model): the program the
runner starts (`python -m PROGRAM`), the ABRs and HTTP versions it supports, the `player:` settings it
takes, its checks of a scenario, its command line and the part of summary.json its summary fills.

Every player program keeps the contract of mpvlab/player/contract.py (exit codes, the shared
command line, player-summary.json with one `abr` shape), so the runner treats every kind alike and
asks the entry only for what differs. The scenario's `player.kind`, `player.fetcher` and
`video.kind` choose the entry (`select`). Adding a player kind: its program in mpvlab/player/ and
one entry here (docs/extending.md).

Standard library only at import (the ABR registry and dash.js's parameter models load when asked):
the GStreamer player reads its ABR names here, on a physical host's system Python too.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from mpvlab.core.paths import checkout_root

HTTP_VERSIONS = ("http/1.1", "h2")
# The ABRs of kind gstreamer-dash: GStreamer dashdemux's own rate adaptation and a BBA-0 map (its
# parameters are the player's bba_* fields); of kind dashjs: dash.js's own strategies (abrDynamic,
# abrBola, abrThroughput) and BBA and FESTIVE as custom rules (player/dashjs/mpvlab-dashjs.js).
DASHDEMUX_ABRS = ("gst", "bba")
DASHJS_ABRS = ("dynamic", "bola", "throughput", "bba", "festive")
# Kind dashjs's buffer settings: scenario field -> dash.js 3.0.3 `streaming` setting. The defaults are
# dash.js 3.0.3's own (its Settings: stableBufferTime 12, bufferTimeAtTopQuality 30,
# bufferTimeAtTopQualityLongForm 60, longFormContentDurationThreshold 600, all seconds), so a scenario
# that sets none runs dash.js as the BBR-S study did, with default settings. player/README.md has the
# mapping and what dash.js does with each.
DASHJS_BUFFER_SETTINGS: dict[str, str] = {
    "dashjs_stable_buffer_time": "stableBufferTime",
    "dashjs_buffer_time_at_top_quality": "bufferTimeAtTopQuality",
    "dashjs_buffer_time_at_top_quality_long_form": "bufferTimeAtTopQualityLongForm",
    "dashjs_long_form_content_duration_threshold": "longFormContentDurationThreshold",
}
DASHJS_PAGE = "mpvlab-dashjs"       # the dash.js page's folder in the run's web root


@dataclass(frozen=True)
class Launch:
    """What the runner hands a player kind's command line: its files, its clock and the scenario's
    `player:`, `video:` and `server:` sections (models of mpvlab/workloads/video.py)."""

    url: str
    events: Path
    summary: Path
    data_dir: Path                  # the run's data/ folder for this player (raw records of its own)
    t0_ns: int | None               # None: staged, it reads `t0 NS` from stdin
    timeout_s: float
    frames: int
    buffer_ns: int                  # the playout buffer (the scenario's, defaults resolved)
    seed: int
    player: Any
    video: Any
    server: Any
    ca_file: Path | None = None     # TLS: the run's certificate (the GStreamer players trust exactly it)
    spki: str | None = None         # TLS: its SPKI hash (Chromium trusts exactly it)
    page_url: str | None = None     # kinds with a web page: the page on the run's server

    def head(self, program: str) -> list[str]:
        """`python -m PROGRAM` and the command line every player takes (contract.add_common_args)."""
        return [sys.executable, "-m", program, "--url", self.url, "--events", str(self.events),
                "--summary", str(self.summary)]

    def clock(self) -> list[str]:
        return [*(["--t0-from-stdin"] if self.t0_ns is None else ["--t0-ns", str(self.t0_ns)]),
                "--timeout-s", f"{self.timeout_s:g}", "--frames-expected", str(self.frames)]


def _no_check(_: Any) -> None:
    return None


@dataclass(frozen=True)
class PlayerKind:
    name: str                       # registry key; also what a summary's text calls it
    program: str                    # the module the runner starts with `python -m`
    player_kind: str                # the scenario's player.kind that selects it
    fetcher: str | None             # ... and player.fetcher (kind gstreamer, DASH); None: any
    video: str                      # the video.kind it plays
    summary_part: str | None        # the part of summary.json its player-summary.json fills (`dash`) beyond the QoE
    argv: Callable[[Launch], list[str]]
    abrs: Callable[[], Mapping[str, Any]] = dict    # ABR name -> its abr_params model (None: takes none)
    default_abr: str | None = None  # what the player's abr field's default (gst) means here; None: abr required
    protocols: tuple[str, ...] = HTTP_VERSIONS
    real_hosts: bool = True         # runs on the physical topology's hosts too
    settings: tuple[str, ...] | None = None     # the player: settings it takes; None: every one
    check_scenario: Callable[[Any], None] = _no_check   # raises ValueError: what the scenario asks it cannot do
    web_page: Path | None = None    # a folder copied into the run's web root (its page), loaded before t0
    page_ready_file: str | None = None          # written into data_dir once that page is loaded
    checks_element: bool = False    # its stalls are checked against the media element's own record
    browser: bool = False           # decodes in a browser: dropped frames are the decoder's, not the network's
    reads_whole_responses: bool = False     # reads each response it asks for to the end: its bytes_received
    #                                         equals the body bytes Apache logged (player_bytes_vs_access_log)
    provenance: Callable[[Any], dict[str, Any]] | None = None
    # the most media it holds, from its own settings and the video's length (ns), for a kind that
    # takes no player.buffer; None: player.buffer (or the scenario's default) says it
    playout_buffer: Callable[[Any, int], int] | None = None
    checks: str = "progressive"     # its row key in the cross-check registry (mpvlab/results/checks.py WORKLOADS)
    checks_by_abr: Mapping[str, str] = field(default_factory=dict)   # ... where an ABR has checks of its own

    def abr_names(self) -> tuple[str, ...]:
        return tuple(self.abrs())


# --- command lines ------------------------------------------------------------------------------

def _gst_argv(x: Launch, program: str) -> list[str]:
    p = x.player
    argv = [*x.head(program), "--mode", p.mode, "--max-lateness-ms", f"{p.max_lateness / 1e6:g}",
            "--buffer-ms", f"{x.buffer_ns / 1e6:g}", "--rebuffer-resume-ms", f"{p.rebuffer_resume / 1e6:g}",
            "--startup-buffer-ms", f"{p.startup_buffer / 1e6:g}", *x.clock()]
    if x.ca_file is not None:
        argv += ["--ca-file", str(x.ca_file)]
    if not p.decode:
        argv.append("--no-decode")
    return argv


GST_PROGRAM = "mpvlab.player.mpvlab_player"
DASHJS_PROGRAM = "mpvlab.player.dashjs_player"


def _progressive_argv(x: Launch) -> list[str]:
    return _gst_argv(x, GST_PROGRAM)


def _dashdemux_argv(x: Launch) -> list[str]:
    p = x.player
    return [*_gst_argv(x, GST_PROGRAM), "--dash", "--abr", p.abr, "--bba-reservoir-s", f"{p.bba_reservoir / 1e9:g}",
            "--bba-cushion-s", f"{p.bba_cushion / 1e9:g}", "--gst-bitrate-limit", f"{p.gst_bitrate_limit:g}"]


def _own_argv(x: Launch) -> list[str]:
    p = x.player
    argv = [*_gst_argv(x, GST_PROGRAM), "--dash", "--fetcher", "own", "--abr", p.abr,
            "--abr-params", json.dumps(p.abr_params), "--seed", str(x.seed), "--http-version", x.server.protocol]
    if p.rcvbuf is not None:
        argv += ["--rcvbuf-bytes", str(p.rcvbuf)]
    return argv


def _dashjs_argv(x: Launch) -> list[str]:
    """Its profile and raw dash.js record live in the run's data/ folder (per player when there are several)."""
    p = x.player
    argv = [*x.head(DASHJS_PROGRAM), "--page-url", str(x.page_url), "--data-dir", str(x.data_dir),
            "--profile", str(x.data_dir / "chromium-profile"), "--abr", p.abr, "--abr-params", json.dumps(p.abr_params),
            "--dashjs-settings", json.dumps(p.dashjs_settings()), "--video-length-s", f"{x.video.duration / 1e9:g}",
            "--start", p.dashjs_start, "--end-of-stream", p.dashjs_end_of_stream, *x.clock()]
    if x.spki is not None:
        argv += ["--spki", x.spki]
    return argv


# --- ABRs and their parameter models ------------------------------------------------------------

def _dashdemux_abrs() -> Mapping[str, Any]:
    return dict.fromkeys(DASHDEMUX_ABRS)     # bba's parameters are the player's bba_* fields


def _own_abrs() -> Mapping[str, Any]:
    from mpvlab.player.abr import REGISTRY
    return {n: e.Params for n, e in sorted(REGISTRY.items())}


def _dashjs_abrs() -> Mapping[str, Any]:
    from mpvlab.player.dashjs_params import PARAMS
    return {n: PARAMS.get(n) for n in DASHJS_ABRS}


# --- checks of a scenario (mpvlab/input/scenario.py runs them; ValueError says what and why) ----

def _dashdemux_check(sc: Any) -> None:
    p = sc.player
    if p.abr == "bba" and p.bba_reservoir + p.bba_cushion >= sc.playout_buffer_ns:
        raise ValueError("player.bba_reservoir + player.bba_cushion must be smaller than player.buffer "
                         f"({sc.playout_buffer_ns / 1e9:g} s)")


def _own_check(sc: Any) -> None:
    if sc.video.kind != "dash":
        raise ValueError("player.fetcher: own is a DASH client; video.kind must be dash")
    # The ABR's checks that need the ladder, segment and buffer (BBA's reservoir + cushion below the
    # buffer, FESTIVE's target within it, SABRE's thresholds) run here, before any run, and not only
    # in the player after the network was built.
    from mpvlab.player.abr import Ladder, make
    try:
        make(sc.player.abr, Ladder(tuple(sorted(set(sc.dash_ladder))), sc.video.segment / 1e9,
                                   sc.playout_buffer_ns / 1e9), sc.player.abr_params, sc.seed)
    except ValueError as e:
        raise ValueError(f"player.abr {sc.player.abr} with this ladder, {sc.video.segment / 1e9:g} s "
                         f"segments and a {sc.playout_buffer_ns / 1e9:g} s buffer: {e}") from None


def _dashjs_check(sc: Any) -> None:
    if sc.video.kind != "dash":
        raise ValueError("player.kind: dashjs plays DASH only; video.kind must be dash (a progressive video "
                         "needs player.kind: gstreamer)")
    if not sc.workload_kind.plays_video_section:
        raise ValueError(f"player.kind: dashjs is the video workload's player; workload.kind {sc.workload.kind} "
                         "plays no video: section")
    if sc.topology_kind.real_hosts:
        raise ValueError(f"player.kind: dashjs runs on the emulated topologies only (not on {sc.topology_kind.name} hosts)")
    from mpvlab.player import dashjs_setup
    missing = dashjs_setup.missing()
    if missing:
        raise ValueError(f"player.kind: dashjs needs {missing} (./setup.sh installs it)")
    p = sc.player
    if p.abr == "bba" and p.abr_params["reservoir_s"] + p.abr_params["cushion_s"] >= sc.playout_buffer_ns / 1e9:
        # the most dash.js ever holds for this video (below the top quality it stops at
        # stableBufferTime: player/README.md says what that means for BBA's map)
        raise ValueError("player.abr_params: reservoir_s + cushion_s must be smaller than the most dash.js "
                         f"buffers for this video ({sc.playout_buffer_ns / 1e9:g} s, the largest of "
                         "player.dashjs_stable_buffer_time and the top-quality target that applies)")


def _dashjs_playout_buffer(player: Any, video_ns: int) -> int:
    """dash.js takes no player.buffer: the largest of its buffer targets that applies to this video."""
    return int(player.dashjs_max_buffer_ns(video_ns))


def _dashjs_provenance(player: Any) -> dict[str, Any]:
    from mpvlab.player import dashjs_setup
    return {"dashjs_version": dashjs_setup.dashjs_version(), "chromium_version": dashjs_setup.chromium_version(),
            "abr": player.abr, "abr_params": player.abr_params,
            # dash.js's buffer settings given to the page (s; each player's summary has them read back
            # from dash.js: dashjs_settings)
            "settings": player.dashjs_settings()}


# --- the registry -------------------------------------------------------------------------------

GST_PROGRESSIVE = PlayerKind(
    # fetcher: the field's default (a progressive MP4 is fetched by souphttpsrc; fetcher own refuses it)
    name="gstreamer-progressive", program=GST_PROGRAM, player_kind="gstreamer", fetcher="dashdemux", video="progressive",
    summary_part=None, argv=_progressive_argv)
GST_DASH = PlayerKind(
    name="gstreamer-dash", program=GST_PROGRAM, player_kind="gstreamer", fetcher="dashdemux", video="dash",
    summary_part="dash", argv=_dashdemux_argv, abrs=_dashdemux_abrs, default_abr="gst",
    check_scenario=_dashdemux_check)
OWN_DASH = PlayerKind(
    name="own-dash", program=GST_PROGRAM, player_kind="gstreamer", fetcher="own", video="dash",
    summary_part="dash", argv=_own_argv, abrs=_own_abrs, check_scenario=_own_check, reads_whole_responses=True,
    checks="own-dash", checks_by_abr={"sabre": "sabre"})
DASHJS = PlayerKind(
    name="dashjs", program=DASHJS_PROGRAM, player_kind="dashjs", fetcher=None, video="dash",
    summary_part="dash", argv=_dashjs_argv, abrs=_dashjs_abrs, default_abr="dynamic", real_hosts=False,
    settings=("abr", "abr_params", "kind", "timeout_factor", "fetcher", "dashjs_start", "dashjs_end_of_stream", *DASHJS_BUFFER_SETTINGS),
    check_scenario=_dashjs_check, web_page=checkout_root() / "player" / "dashjs", page_ready_file="page-loaded",
    checks_element=True, browser=True, provenance=_dashjs_provenance, playout_buffer=_dashjs_playout_buffer,
    checks="dash.js")

REGISTRY: dict[str, PlayerKind] = {k.name: k for k in (GST_PROGRESSIVE, GST_DASH, OWN_DASH, DASHJS)}
PLAYER_KINDS = tuple(dict.fromkeys(k.player_kind for k in REGISTRY.values()))   # the scenario's player.kind values
FETCHERS = tuple(dict.fromkeys(k.fetcher for k in REGISTRY.values() if k.fetcher))   # ... and player.fetcher values


def select(player_kind: str, fetcher: str, video_kind: str) -> PlayerKind:
    """The entry a scenario's `player.kind`, `player.fetcher` and `video.kind` name; when none plays
    that video, the entry of that fetcher (whose check_scenario says why not)."""
    same = [k for k in REGISTRY.values() if k.player_kind == player_kind]
    if not same:
        raise KeyError(f"player kind {player_kind!r}: one of {', '.join(PLAYER_KINDS)}")
    for k in same:
        if k.fetcher in (fetcher, None) and k.video == video_kind:
            return k
    return next((k for k in same if k.fetcher == fetcher), same[0])


def spec_kind(player: Any) -> PlayerKind:
    """The DASH player a `player:` section names, judged before the video is known (its ABR checks)."""
    return select(player.kind, player.fetcher, "dash")
