"""Named network namespaces (`ip netns`): how every component runs a command "on a node".

All run namespaces are named `mpv-<runid>-<role>` (Mininet's anonymous node namespaces are attached
under such a name too), so any component — and any later cleanup — can reach them by name.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from core import proc

NETNS_DIR = Path("/run/netns")


@dataclass(frozen=True)
class Netns:
    name: str

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def exists(self) -> bool:
        return self.path.exists()

    def inode(self) -> int:
        return os.stat(self.path).st_ino

    def argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: list[str], *, check: bool = True, timeout: float = 60.0,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        return proc.run(self.argv(argv), check=check, timeout=timeout, input_text=input_text)

    def popen(self, argv: list[str], *, stdout: IO[Any] | int | None = None, stderr: IO[Any] | int | None = None,
              env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        # start_new_session: a Ctrl-C at the terminal reaches only the runner, which then stops
        # each component in order instead of all of them dying at once.
        return subprocess.Popen(self.argv(argv), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)

    def sysctl(self, key: str, value: str) -> None:
        """Set and read back: a sysctl that silently did not take is a wrong experiment."""
        self.run(["sysctl", "-q", "-w", f"{key}={value}"])
        got = self.run(["sysctl", "-n", key]).stdout.split()
        if got != value.split():
            raise proc.CommandError(f"{self.name}: sysctl {key} reads back {' '.join(got)!r}, wanted {value!r}")

    def read_sysctl(self, key: str) -> str:
        return self.run(["sysctl", "-n", key]).stdout.strip()


def list_netns() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def pids_in_netns(inode: int) -> list[int]:
    """Every process whose network namespace is `inode` (how cleanup finds a run's processes
    without pattern-matching command lines)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino == inode:
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def delete_netns(name: str) -> None:
    """Kill every process still inside, then remove the name; the kernel frees the namespace (and its
    veths, qdiscs, iptables rules, NFQUEUE bindings) when the last reference goes."""
    path = NETNS_DIR / name
    if not path.exists():
        return
    try:
        inode = os.stat(path).st_ino
    except OSError:
        inode = None
    if inode is not None:
        for pid in pids_in_netns(inode):
            ref = proc.ProcRef.of(pid, "netns member")
            proc.terminate(ref, grace=1.0)
    proc.run(["ip", "netns", "delete", name], check=False)
