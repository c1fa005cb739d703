"""The parts of a run that no Python package declares: Debian's Python modules (Mininet, PyGObject
with GStreamer) and the native programs ./setup.sh builds inside the checkout. `pip install .`
installs only mpvlab's Python dependencies (pyproject.toml); without these a run used to stop on a
bare `ModuleNotFoundError: No module named 'mininet'` deep in its start-up. `mpvlab run`, `sweep`
and `shell` check them first and say, in one line, what is missing and that ./setup.sh provides it.

Checked without importing anything heavy: importlib's find_spec for the modules, a file test for the
programs (the run would start them by these paths: mpvlab/links/emulator.py, mpvlab/runner/kping.py)."""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

from mpvlab.core.paths import checkout_root

REPO = checkout_root()

# (module, what it is and where it comes from)
MODULES: tuple[tuple[str, str], ...] = (
    ("mininet", "Mininet's Python package (Debian package mininet)"),
    ("gi", "PyGObject for the GStreamer player (Debian packages python3-gi, gir1.2-gstreamer-1.0)"),
)
# (path inside the checkout, what builds it)
PROGRAMS: tuple[tuple[str, str], ...] = (
    ("links/delayline/build/mpvlab-delayline", "the delay line (make -C links/delayline)"),
    ("collectors/build/mpvlab-kping", "the pre-run check's probe (make -C collectors)"),
)


def _importable(module: str, repo: Path) -> bool:
    """Found on sys.path outside the checkout: the checkout's own mininet/ folder (Mininet custom
    topologies, no __init__.py: PathFinder reports it as a namespace package) would otherwise pass for
    Debian's `mininet` when the current directory is the checkout."""
    here = [p for p in sys.path if p and Path(p).resolve() != repo.resolve()]
    return importlib.machinery.PathFinder.find_spec(module, here) is not None


def missing(repo: Path = REPO) -> list[str]:
    """What a run needs and this installation lacks, each in words (empty: nothing missing)."""
    out = [what for module, what in MODULES if not _importable(module, repo)]
    out += [f"{what}, {rel}" for rel, what in PROGRAMS if not (repo / rel).is_file()]
    return out


def problem(command: str, repo: Path = REPO) -> str | None:
    """One line for the console, or None when every part is there."""
    parts = missing(repo)
    if not parts:
        return None
    return (f"mpvlab {command} needs parts that `pip install` cannot provide, missing here: {'; '.join(parts)}. "
            f"Run ./setup.sh as root in a clone of the repository (it installs the Debian packages, makes .venv "
            f"with system site-packages and builds the native parts), then use .venv/bin/mpvlab")
