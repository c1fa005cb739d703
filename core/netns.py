"""Named network namespaces (`ip netns`): how every component runs a command "on a node".

All run namespaces are named `mpv-<runid>-<role>` (Mininet's anonymous node namespaces are attached
under such a name too), so any component — and any later cleanup — can reach them by name.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mpvlab.core import proc

NETNS_DIR = Path("/run/netns")
_BATCH_ARG = re.compile(r"[A-Za-z0-9_.:/@+-]{1,64}")


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
              env: dict[str, str] | None = None, cwd: Path | None = None,
              stdin: IO[Any] | int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        # start_new_session: a Ctrl-C at the terminal reaches only the runner, which then stops
        # each component in order instead of all of them dying at once.
        return subprocess.Popen(self.argv(argv), stdout=stdout, stderr=stderr, stdin=stdin,
                                env=env, cwd=cwd, start_new_session=True)

    def sysctl(self, key: str, value: str) -> None:
        """Set and read back: a sysctl that silently did not take is a wrong experiment."""
        self.sysctls({key: value})

    def sysctls(self, settings: dict[str, str]) -> None:
        """Several at once (one process to set, one to read back; each `ip netns exec` costs ~8 ms)."""
        if not settings:
            return
        self.run(["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings.items())])
        for key, got in self.read_sysctls(list(settings)).items():
            if got.split() != settings[key].split():
                raise proc.CommandError(f"{self.name}: sysctl {key} reads back {got!r}, wanted {settings[key]!r}")

    def read_sysctl(self, key: str) -> str:
        return self.run(["sysctl", "-n", key]).stdout.strip()

    def read_sysctls(self, keys: list[str]) -> dict[str, str]:
        """`sysctl -n` prints one line per key, in order (multi-value ones tab-separated on theirs)."""
        lines = self.run(["sysctl", "-n", *keys]).stdout.splitlines()
        if len(lines) != len(keys):
            raise proc.CommandError(f"{self.name}: sysctl -n gave {len(lines)} lines for {len(keys)} keys")
        return {k: line.strip() for k, line in zip(keys, lines)}

    def ip_batch(self, commands: list[list[str]]) -> None:
        """Several `ip` commands (without the leading `ip`) in one process, `ip -batch -`, stopping at
        the first that fails (its line number in the error). Arguments are names, numbers and
        addresses: anything the batch reader would split, quote or take as a comment is refused."""
        for argv in commands:
            bad = [a for a in argv if not _BATCH_ARG.fullmatch(a)]
            if bad or not argv:
                raise ValueError(f"ip batch argument not allowed: {bad[:1] or argv!r}")
        cp = self.run(["ip", "-batch", "-"], input_text="".join(" ".join(c) + "\n" for c in commands), check=False)
        if cp.returncode != 0:
            m = re.search(r"Command failed -:(\d+)", cp.stderr)
            line = int(m.group(1)) if m else 0
            what = f"ip {' '.join(commands[line - 1])}" if 0 < line <= len(commands) else "ip -batch"
            reason = cp.stderr.replace(m.group(0), "").strip() if m else cp.stderr.strip()
            raise proc.CommandError(f"{self.name}: {what} failed: {reason}")


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
