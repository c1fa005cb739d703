"""Where player kind dashjs finds its parts, and what is missing. setup.sh pins and unpacks dash.js
from the npm registry into player/dashjs/vendor/ (not committed); the browser is Debian's chromium."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from mpvlab.core.paths import checkout_root

PAGE_DIR = checkout_root() / "player" / "dashjs"
VENDOR = PAGE_DIR / "vendor"
DASHJS_JS = VENDOR / "dash.all.min.js"
DASHJS_META = VENDOR / "package.json"       # dash.js's own package.json, kept for its version
CHROMIUM = Path("/usr/lib/chromium/chromium")


def missing() -> str | None:
    """What is not installed, in words, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"Debian's chromium ({CHROMIUM} is missing)"
    if not DASHJS_JS.is_file():
        return f"dash.js ({DASHJS_JS} is missing)"
    return None


def dashjs_version() -> str | None:
    try:
        return str(json.loads(DASHJS_META.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def chromium_version() -> str | None:
    try:
        out = subprocess.run([str(CHROMIUM), "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.strip() or None
