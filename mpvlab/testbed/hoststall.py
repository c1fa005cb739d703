"""A host stall made on purpose: find the delay lines a running `mpvlab run` started, so a test or
bench can SIGSTOP them (what a 20-second host stall does to a line) and SIGCONT them after. Used by
tests/test_host_stall.py and bench/bench_host_stall.py."""

from __future__ import annotations

from pathlib import Path

DELAYLINE_COMM = "mpvlab-delayline"[:15]     # /proc/PID/comm holds at most 15 characters


def descendants(root: int) -> list[int]:
    """Every live process whose parent chain reaches `root` (from /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue       # the process ended while we read
    out = []
    for pid in parent:
        p = pid
        while p in parent and p != root and p > 1:
            p = parent[p]
        if p == root and pid != root:
            out.append(pid)
    return out


def delay_lines(root: int) -> list[int]:
    """The pids of the delay-line daemons below `root` (the `mpvlab run` process)."""
    pids = []
    for pid in descendants(root):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == DELAYLINE_COMM:
                pids.append(pid)
        except OSError:
            continue
    return pids
