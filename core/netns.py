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
_SWITCHES_ITSELF = {"ip": "-n", "tc": "-n", "ss": "-N"}     # program → its "in this named netns" option
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
        # iproute2's own programs switch namespace themselves (`ip -n`, `tc -n`, `ss -N`: the same
        # setns and /sys remount as `ip netns exec`), which saves an exec of `ip` — ~1.4 ms of CPU
        # per call, and a run makes ~120 such calls, most of them `ss` polls (issue 36).
        if argv and argv[0] in _SWITCHES_ITSELF:
            return [argv[0], _SWITCHES_ITSELF[argv[0]], self.name, *argv[1:]]
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
    return pids_in_netns_of({inode}).get(inode, [])


def pids_in_netns_of(inodes: set[int]) -> dict[int, list[int]]:
    """pids_in_netns for several namespaces in one pass over /proc (a pass costs ~10 ms of CPU)."""
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ino = os.stat(entry / "ns" / "net").st_ino
        except OSError:
            continue
        if ino in inodes:
            out.setdefault(ino, []).append(int(entry.name))
    return out


def delete_netns(name: str) -> None:
    """Kill every process still inside, then remove the name; the kernel frees the namespace (and its
    veths, qdiscs, iptables rules, NFQUEUE bindings) when the last reference goes."""
    delete_netns_all([name])


def delete_netns_all(names: list[str]) -> None:
    """delete_netns for each name, with one pass over /proc and one `ip` process for them all (a run
    has five namespaces: four passes and four processes fewer at every teardown, issue 36)."""
    inodes: dict[int, str] = {}
    present = []
    for name in names:
        path = NETNS_DIR / name
        if not path.exists():
            continue
        present.append(name)
        try:
            inodes[os.stat(path).st_ino] = name
        except OSError:
            pass
    if not present:
        return
    for pids in pids_in_netns_of(set(inodes)).values():
        for pid in pids:
            proc.terminate(proc.ProcRef.of(pid, "netns member"), grace=1.0)
    if all(_BATCH_ARG.fullmatch(n) for n in present):
        # -force: a name that went meanwhile does not stop the others' deletion
        proc.run(["ip", "-force", "-batch", "-"], input_text="".join(f"netns delete {n}\n" for n in present),
                 check=False)
    else:
        for name in present:
            proc.run(["ip", "netns", "delete", name], check=False)
