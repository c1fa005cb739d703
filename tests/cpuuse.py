"""The CPU each test used, every process it started included (issue 44: which `cpu` tests could share
the machine without moving each other's figures). Under xdist each worker moves itself at start into a
cpuacct cgroup of its own (cgroup v1, this kernel's accounting hierarchy), so whatever a test starts
(runs, browsers, Apache, delay lines: all descendants of the worker) is counted there, and
`cpuacct.usage` is read at the test's start and end. Accounting only: cpuacct limits nothing. The
group is named after the worker's pid and start time (a pid reused after a crashed session names a
new group) and removed at the worker's end (the worker moved back first);
a process a test leaked keeps it, which is then a leak to fix, not to hide."""

from __future__ import annotations

import os
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _start_ticks() -> str:
    """This process's start time (clock ticks since boot, /proc/self/stat field 22): with the pid, a
    name no other process on this boot has had."""
    stat = Path("/proc/self/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[19]


class WorkerCpu:
    """The worker's own cpuacct group."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def join(cls, root: Path = CPUACCT) -> WorkerCpu | None:
        """The calling process (and so everything it starts from now on) into a new group; None where
        this host has no cpuacct hierarchy."""
        if not (root / "cpuacct.usage").exists():
            return None
        path = root / f"mpvlab-tests-{os.getpid()}-{_start_ticks()}"
        path.mkdir()
        (path / "cgroup.procs").write_text(f"{os.getpid()}\n")
        return cls(path)

    def used_s(self) -> float:
        """CPU seconds (user + system, every CPU) the group's processes have used so far."""
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def leave(self) -> bool:
        """Back to the hierarchy's root; the group removed. False when a process is still in it."""
        (self.path.parent / "cgroup.procs").write_text(f"{os.getpid()}\n")
        deadline = time.monotonic() + 5.0        # a test's last process may still be exiting
        while True:
            try:
                self.path.rmdir()
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)
