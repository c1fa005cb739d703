"""The shape of a player kind's registry entry (mpvlab/player/kinds.py holds the registry): what the
runner hands a player's command line (Launch) and what each kind says of itself (PlayerKind). Each
player's folder (mpvlab/player/gstreamer/, mpvlab/player/dashjs/) defines its entries in its kind.py.

Standard library only: the GStreamer player reads its ABR names from its entry, on a physical host's
system Python too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

HTTP_VERSIONS = ("http/1.1", "h2")


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
    # kinds with PlayerKind.tmp_dir: a short path in the temporary directory for the player to make as
    # its programs' TMPDIR (mpvlab-<run id>-<tag>, not yet there); its caller removes it with the
    # player's scratch (PlayerKind.scratch) however the player ends, a SIGKILL included
    tmp_dir: Path | None = None

    def head(self, program: str) -> list[str]:
        """`python -m PROGRAM` and the command line every player takes (contract.add_common_args)."""
        return [sys.executable, "-m", program, "--url", self.url, "--events", str(self.events),
                "--summary", str(self.summary)]

    def clock(self) -> list[str]:
        return [*(["--t0-from-stdin"] if self.t0_ns is None else ["--t0-ns", str(self.t0_ns)]),
                "--timeout-s", f"{self.timeout_s:g}", "--frames-expected", str(self.frames)]


def _no_check(_: Any) -> None:
    return None


def _no_scratch(_: Launch) -> tuple[Path, ...]:
    return ()


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
    page_folder: str | None = None  # ... under this name there
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
    # The folders of scratch state the player makes (a browser's profile, Launch.tmp_dir): it removes
    # them when it ends, and its caller after it (the runner lists them in the run's ledger before
    # the player starts), so that a SIGKILLed player leaves none. Each inside Launch.data_dir or Launch.tmp_dir.
    scratch: Callable[[Launch], tuple[Path, ...]] = _no_scratch
    tmp_dir: bool = False           # takes Launch.tmp_dir (its caller gives one)

    def abr_names(self) -> tuple[str, ...]:
        return tuple(self.abrs())
