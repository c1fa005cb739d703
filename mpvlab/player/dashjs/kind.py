"""dash.js's registry entry (mpvlab/player/kinds.py): the dash.js reference player in headless
Chromium, driven by mpvlab/player/dashjs/player.py; its page (dash.js and mpvlab's recording page) is
player/dashjs/ at the top of the checkout, served by the run's own Apache.

Standard library only at import (dash.js's parameter models load when asked).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from mpvlab.core.paths import checkout_root
from mpvlab.player.entry import Launch, PlayerKind

PROGRAM = "mpvlab.player.dashjs.player"    # `python -m PROGRAM`
# dash.js's own strategies (abrDynamic, abrBola, abrThroughput) and BBA and FESTIVE as custom rules
# (player/dashjs/mpvlab-dashjs.js).
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


# --- command line, ABRs, checks ----------------------------------------------------------------

def _dashjs_argv(x: Launch) -> list[str]:
    """Its profile and raw dash.js record live in the run's data/ folder (per player when there are several)."""
    p = x.player
    argv = [*x.head(PROGRAM), "--page-url", str(x.page_url), "--data-dir", str(x.data_dir),
            "--profile", str(_dashjs_scratch(x)[0]), "--abr", p.abr, "--abr-params", json.dumps(p.abr_params),
            "--dashjs-settings", json.dumps(p.dashjs_settings()), "--video-length-s", f"{x.video.duration / 1e9:g}",
            "--start", p.dashjs_start, "--end-of-stream", p.dashjs_end_of_stream, *x.clock()]
    if x.spki is not None:
        argv += ["--spki", x.spki]
    return [*argv, "--tmpdir", str(_tmp_dir(x))]


def _tmp_dir(x: Launch) -> Path:
    if x.tmp_dir is None:
        raise ValueError("player kind dashjs needs Launch.tmp_dir: Chromium's TMPDIR, for its singleton socket")
    return x.tmp_dir


def _dashjs_scratch(x: Launch) -> tuple[Path, ...]:
    """Chromium's profile (in data/) and its TMPDIR: the driver removes both when it ends, its caller
    after a SIGKILL (mpvlab/player/dashjs/browser.py)."""
    return (x.data_dir / "chromium-profile", _tmp_dir(x))


def _dashjs_abrs() -> Mapping[str, Any]:
    from mpvlab.player.dashjs.params import PARAMS
    return {n: PARAMS.get(n) for n in DASHJS_ABRS}


def _dashjs_check(sc: Any) -> None:
    if sc.video.kind != "dash":
        raise ValueError("player.kind: dashjs plays DASH only; video.kind must be dash (a progressive video "
                         "needs player.kind: gstreamer)")
    if not sc.workload_kind.plays_video_section:
        raise ValueError(f"player.kind: dashjs is the video workload's player; workload.kind {sc.workload.kind} "
                         "plays no video: section")
    if sc.topology_kind.real_hosts:
        raise ValueError(f"player.kind: dashjs runs on the emulated topologies only (not on {sc.topology_kind.name} hosts)")
    from mpvlab.player.dashjs import parts
    missing = parts.missing()
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
    from mpvlab.player.dashjs import parts
    return {"dashjs_version": parts.dashjs_version(), "chromium_version": parts.chromium_version(),
            "abr": player.abr, "abr_params": player.abr_params,
            # dash.js's buffer settings given to the page (s; each player's summary has them read back
            # from dash.js: dashjs_settings)
            "settings": player.dashjs_settings()}


# --- the entry ----------------------------------------------------------------------------------

DASHJS = PlayerKind(
    name="dashjs", program=PROGRAM, player_kind="dashjs", fetcher=None, video="dash",
    summary_part="dash", argv=_dashjs_argv, abrs=_dashjs_abrs, default_abr="dynamic", real_hosts=False,
    settings=("abr", "abr_params", "kind", "timeout_factor", "fetcher", "dashjs_start", "dashjs_end_of_stream", *DASHJS_BUFFER_SETTINGS),
    check_scenario=_dashjs_check, web_page=checkout_root() / "player" / "dashjs", page_folder=DASHJS_PAGE,
    page_ready_file="page-loaded",
    checks_element=True, browser=True, provenance=_dashjs_provenance, playout_buffer=_dashjs_playout_buffer,
    checks="dash.js", scratch=_dashjs_scratch, tmp_dir=True)
