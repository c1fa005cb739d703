"""The GStreamer player's registry entries (mpvlab/player/kinds.py): one program,
mpvlab/player/gstreamer/player.py, three kinds — a progressive MP4 (souphttpsrc), DASH through
GStreamer's dashdemux, and DASH through mpvlab's own client (dash_client.py: its own MPTCP sockets,
the ABR registry in abr/, HTTP/1.1 or HTTP/2).

Standard library only at import (the ABR registry loads when asked): the player reads its ABR names
here, on a physical host's system Python too.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from mpvlab.player.entry import Launch, PlayerKind

PROGRAM = "mpvlab.player.gstreamer.player"    # `python -m PROGRAM`
# The ABRs of kind gstreamer-dash: GStreamer dashdemux's own rate adaptation and a BBA-0 map (its
# parameters are the player's bba_* fields).
DASHDEMUX_ABRS = ("gst", "bba")


# --- command lines ------------------------------------------------------------------------------

def _gst_argv(x: Launch) -> list[str]:
    p = x.player
    argv = [*x.head(PROGRAM), "--mode", p.mode, "--max-lateness-ms", f"{p.max_lateness / 1e6:g}",
            "--buffer-ms", f"{x.buffer_ns / 1e6:g}", "--rebuffer-resume-ms", f"{p.rebuffer_resume / 1e6:g}",
            "--startup-buffer-ms", f"{p.startup_buffer / 1e6:g}", *x.clock()]
    if x.ca_file is not None:
        argv += ["--ca-file", str(x.ca_file)]
    if not p.decode:
        argv.append("--no-decode")
    return argv


def _dashdemux_argv(x: Launch) -> list[str]:
    p = x.player
    return [*_gst_argv(x), "--dash", "--abr", p.abr, "--bba-reservoir-s", f"{p.bba_reservoir / 1e9:g}",
            "--bba-cushion-s", f"{p.bba_cushion / 1e9:g}", "--gst-bitrate-limit", f"{p.gst_bitrate_limit:g}"]


def _own_argv(x: Launch) -> list[str]:
    p = x.player
    argv = [*_gst_argv(x), "--dash", "--fetcher", "own", "--abr", p.abr,
            "--abr-params", json.dumps(p.abr_params), "--seed", str(x.seed), "--http-version", x.server.protocol]
    if p.rcvbuf is not None:
        argv += ["--rcvbuf-bytes", str(p.rcvbuf)]
    return argv


# --- ABRs and their parameter models ------------------------------------------------------------

def _dashdemux_abrs() -> Mapping[str, Any]:
    return dict.fromkeys(DASHDEMUX_ABRS)     # bba's parameters are the player's bba_* fields


def _own_abrs() -> Mapping[str, Any]:
    from mpvlab.player.gstreamer.abr import REGISTRY
    return {n: e.Params for n, e in sorted(REGISTRY.items())}


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
    from mpvlab.player.gstreamer.abr import Ladder, make
    try:
        make(sc.player.abr, Ladder(tuple(sorted(set(sc.dash_ladder))), sc.video.segment / 1e9,
                                   sc.playout_buffer_ns / 1e9), sc.player.abr_params, sc.seed)
    except ValueError as e:
        raise ValueError(f"player.abr {sc.player.abr} with this ladder, {sc.video.segment / 1e9:g} s "
                         f"segments and a {sc.playout_buffer_ns / 1e9:g} s buffer: {e}") from None


# --- the entries --------------------------------------------------------------------------------

GST_PROGRESSIVE = PlayerKind(
    # fetcher: the field's default (a progressive MP4 is fetched by souphttpsrc; fetcher own refuses it)
    name="gstreamer-progressive", program=PROGRAM, player_kind="gstreamer", fetcher="dashdemux", video="progressive",
    summary_part=None, argv=_gst_argv)
GST_DASH = PlayerKind(
    name="gstreamer-dash", program=PROGRAM, player_kind="gstreamer", fetcher="dashdemux", video="dash",
    summary_part="dash", argv=_dashdemux_argv, abrs=_dashdemux_abrs, default_abr="gst",
    check_scenario=_dashdemux_check)
OWN_DASH = PlayerKind(
    name="own-dash", program=PROGRAM, player_kind="gstreamer", fetcher="own", video="dash",
    summary_part="dash", argv=_own_argv, abrs=_own_abrs, check_scenario=_own_check, reads_whole_responses=True,
    checks="own-dash", checks_by_abr={"sabre": "sabre"})
