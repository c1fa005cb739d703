"""What a congestion control set up for one run hands back (mpvlab/cc/registry.py's setups return it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CCRun:
    """A congestion control set up for one run: the name the kernel knows it by, the process that
    keeps it registered (None for a kernel CC) and where its state series goes (None: no export)."""

    kernel_name: str
    pid: int | None = None
    state_csv: Path | None = None
