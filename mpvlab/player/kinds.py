"""The player kinds, one registry entry each (Pantheon's wrappers are the model): the program the
runner starts (`python -m PROGRAM`), the ABRs and HTTP versions it supports, the `player:` settings it
takes, its checks of a scenario, its command line and the part of summary.json its summary fills
(the entry's shape: mpvlab/player/entry.py).

Every player program keeps the contract of mpvlab/player/contract.py (exit codes, the shared
command line, player-summary.json with one `abr` shape), so the runner treats every kind alike and
asks the entry only for what differs. The scenario's `player.kind`, `player.fetcher` and
`video.kind` choose the entry (`select`). Adding a player kind: one folder in mpvlab/player/ with its
program and its entry in kind.py, and one name in REGISTRY below (docs/extending.md).

Standard library only at import (the ABR registry and dash.js's parameter models load when asked).
"""

from __future__ import annotations

from typing import Any

from mpvlab.player.dashjs.kind import DASHJS
from mpvlab.player.entry import PlayerKind
from mpvlab.player.gstreamer.kind import GST_DASH, GST_PROGRESSIVE, OWN_DASH

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
