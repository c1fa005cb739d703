"""Where the checkout is: the one function that knows it.

The package's file path is its import path (`mpvlab/core/paths.py` is `mpvlab.core.paths`), and the
checkout holds `mpvlab/` at its top beside the folders of what is not Python (cc/, schedulers/,
collectors/, links/: C and BPF sources with their builds; player/dashjs/: the dash.js page; rtp/:
Go; scenarios/, results/). Every module that needs one of those finds it from here, never from its
own depth in the tree."""

from __future__ import annotations

from pathlib import Path


def checkout_root() -> Path:
    """The checkout's top folder (the one holding mpvlab/, setup.sh, cc/, scenarios/), resolved.

    This file is mpvlab/core/paths.py, so the checkout is two folders above its own."""
    return Path(__file__).resolve().parents[2]
