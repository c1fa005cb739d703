"""Render a report in a real headless browser (Debian's chromium) and say whether it painted.

Used by `mpvlab report --screenshot` and by the tests: a report that opens blank, or whose figures
do not decode, shows up here and not only in a reader's browser."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from mpvlab.core.errors import MpvlabError

CHROMIUM = "chromium"


class BrowserError(MpvlabError, RuntimeError):
    pass


def available() -> bool:
    return shutil.which(CHROMIUM) is not None


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 3000, timeout_s: float = 120.0) -> Path:
    """A width × height PNG of the page's top. Its own throw-away profile: a user's chromium state is
    never read or written. --no-sandbox because the platform runs as root (chromium refuses otherwise);
    the page is our own self-contained file with no script."""
    if not available():
        raise BrowserError(f"{CHROMIUM} is not installed (setup.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="mpvlab-chromium-") as profile:
        cp = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             f"--user-data-dir={profile}", f"--window-size={width},{height}",
                             f"--screenshot={png}", html.resolve().as_uri()],
                            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": profile})   # its singleton socket's folder too
    if not png.exists():
        raise BrowserError(f"{CHROMIUM} wrote no screenshot (exit {cp.returncode}): {cp.stderr[-1500:]}")
    return png


def ink_fraction(png: Path) -> float:
    """Share of pixels that are not near-white: a page of tables and figures has a few %, a blank one ~0."""
    import matplotlib.image as mpimg
    rgb = mpimg.imread(png)[..., :3]
    return float((rgb.min(axis=2) < 0.9).mean())


def colour_fraction(png: Path, hex_colour: str, tolerance: float = 0.08) -> float:
    """Share of pixels within `tolerance` (per channel, 0–1) of a colour such as '#1f77b4'."""
    import matplotlib.image as mpimg
    rgb = mpimg.imread(png)[..., :3]
    target = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    return float((abs(rgb - target).max(axis=2) < tolerance).mean())
