"""What every player program shares, written once: its exit codes, the command line every player
takes, the `abr` record of player-summary.json and the writer of that file.

The runner treats every player kind alike through this contract (mpvlab/player/kinds.py names the
kinds): started before run time zero in the client's namespace, it waits for `t0 NS` on stdin
(--t0-from-stdin) or sleeps until --t0-ns, plays, and writes player-events.jsonl and
player-summary.json; SIGTERM/SIGINT end it with EXIT_INTERRUPTED and a summary saying so.

Standard library only: the GStreamer player runs under a physical host's system Python, which need
not have pydantic (docs/physical.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

EXIT_OK = 0            # played to the end of the stream
EXIT_INTERNAL = 1      # bad arguments, a missing program or library, the runner went away before t0
EXIT_ERROR = 2         # a playback error (HTTP, demuxer, decoder, the browser)
EXIT_TIMEOUT = 3       # no end of stream within --timeout-s
EXIT_INTERRUPTED = 4   # SIGTERM or SIGINT

EXIT_MEANINGS = {EXIT_OK: "played to the end", EXIT_INTERNAL: "bad arguments or set-up",
                 EXIT_ERROR: "playback error", EXIT_TIMEOUT: "timeout", EXIT_INTERRUPTED: "SIGTERM/SIGINT"}

# The keys every player-summary.json has, whatever the player (tests/test_player_contract.py).
SUMMARY_KEYS = ("url", "status", "reason", "exit_code", "t0_ns", "bytes_received", "underflows",
                "underflow_total_s", "picture_discards", "frames_expected", "startup_delay_s", "playback_s",
                "stall_ratio", "cpu")
STATUSES = ("eos", "error", "timeout", "interrupted")


@dataclass(frozen=True)
class AbrRecord:
    """player-summary.json's `abr` (DASH players): the rate adaptation as the player ran it. One shape
    for every player kind; a field that does not apply to a kind is null."""

    name: str
    """the ABR's name in its player kind (mpvlab/player/kinds.py)"""
    params: dict[str, Any] = field(default_factory=dict)
    """its parameters as it ran, defaults filled in"""
    seed: int | None = None
    """the seed of its randomness (mpvlab's own client: FESTIVE draws); null where the player has none"""
    version: str | None = None
    """the version of the third-party code it ran in (dash.js); null for mpvlab's own and GStreamer's"""

    # Read by pydantic where summary.json's model types it (mpvlab/results/summary.py): closed as that
    # model is, and the attribute docstrings above are the fields' descriptions.
    __pydantic_config__ = {"extra": "forbid", "use_attribute_docstrings": True}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def add_common_args(ap: argparse.ArgumentParser, timeout_default: float | None) -> None:
    """The command line every player takes (the runner's argv starts with these)."""
    ap.add_argument("--url", required=True, help="http(s):// URL of the video (a progressive MP4 or a DASH MPD)")
    ap.add_argument("--events", required=True, type=Path, help="events output (JSON lines)")
    ap.add_argument("--summary", required=True, type=Path, help="summary output (JSON)")
    ap.add_argument("--t0-ns", type=int, default=None,
                    help="CLOCK_MONOTONIC ns that is t=0 for events (default: process start)")
    ap.add_argument("--t0-from-stdin", action="store_true",
                    help="get ready, then wait for one line 't0 NS' on stdin and start at that CLOCK_MONOTONIC "
                         "time (the runner starts players before t0, so their start-up cost is not part of the "
                         f"run; end of input before it: exit {EXIT_INTERNAL})")
    ap.add_argument("--timeout-s", type=float, default=timeout_default,
                    help=f"give up after this (exit {EXIT_TIMEOUT})")
    ap.add_argument("--frames-expected", type=int, default=None,
                    help="override the frame count derived from duration x framerate")


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """player-summary.json, whole or not at all: written beside it and renamed over it, so a reader
    (the runner, a watcher) never sees half a file."""
    abr = summary.get("abr")
    if abr is not None and not isinstance(abr, AbrRecord):
        raise TypeError(f"player-summary.json abr must be an AbrRecord, not {type(abr).__name__}")
    out = {**summary, "abr": abr.to_json()} if isinstance(abr, AbrRecord) else summary
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    tmp.replace(path)


def finish(path: Path, summary: dict[str, Any], code: int) -> int:
    """How every player program ends: its summary written whole, a run that did not play to the end
    said on stderr (the runner keeps the player's stderr), and the exit code returned for sys.exit."""
    write_summary(path, summary)
    if code != EXIT_OK:
        print(f"{summary.get('status')}: {summary.get('reason')}", file=sys.stderr)
    return code
