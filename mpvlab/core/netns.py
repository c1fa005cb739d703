"""Named network namespaces (`ip netns`): how every component runs a command "on a node".

All run namespaces are named `mpv-<runid>-<role>` (Mininet's anonymous node namespaces are attached
under such a name too), so any component — and any later cleanup — can reach them by name.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, TypeVar

from mpvlab.core import proc

NETNS_DIR = Path("/run/netns")
# How a program enters a run's namespace, one table (issue 36); a program not in it goes through
# `ip netns exec`. iproute2's own programs take an option (`ip -n`, `tc -n`, `ss -N`: the same setns
# and /sys remount as `ip netns exec`), which saves an exec of `ip` — ~1.4 ms of CPU per call, and a
# run makes ~120 such calls, most of them `ss` polls. A program that needs only the network namespace
# (ioctls, netlink, /proc/sys/net: all resolved by the calling task's netns), not `ip netns exec`'s
# private mount namespace with /sys remounted, is started from a thread that joined the namespace.
_SETNS_THREAD = "setns-thread"
_ENTERS_BY = {"ip": "-n", "tc": "-n", "ss": "-N", "ethtool": _SETNS_THREAD}
_BATCH_ARG = re.compile(r"[A-Za-z0-9_.:/@+-]{1,64}")
_SYSCTL_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){1,8}")
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


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
        """argv to start in this namespace from the host's (`_ENTERS_BY`; a program entered from a
        thread is started through `ip netns exec` here, since a long-lived process is not started
        from a short-lived thread)."""
        option = _ENTERS_BY.get(argv[0]) if argv else None
        if option is not None and option != _SETNS_THREAD:
            return [argv[0], option, self.name, *argv[1:]]
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: list[str], *, check: bool = True, timeout: float = 60.0,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        if argv and _ENTERS_BY.get(argv[0]) == _SETNS_THREAD:
            return self.call(lambda: proc.run(argv, check=check, timeout=timeout, input_text=input_text))
        return proc.run(self.argv(argv), check=check, timeout=timeout, input_text=input_text)

    def call(self, fn: Callable[[], T]) -> T:
        """fn's result, computed on a short-lived thread that joined this namespace (setns(2) acts on
        the calling thread only; every other thread of the process stays where it was, and the thread
        ends with fn). Sockets it opens, /proc/sys/net it reads or writes and programs it starts are
        this namespace's. It refuses to run fn unless the thread's namespace is verifiably this one:
        a write meant for a run's namespace must never reach the host's."""
        box: dict[str, Any] = {}

        def joined() -> None:
            try:
                try:
                    fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError as e:
                    raise proc.CommandError(f"network namespace {self.name}: {e.strerror}") from None
                try:
                    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                        err = ctypes.get_errno()
                        raise proc.CommandError(f"{self.name}: setns failed: {os.strerror(err)}")
                    here = os.stat("/proc/thread-self/ns/net").st_ino
                    if here != os.fstat(fd).st_ino:
                        raise proc.CommandError(f"{self.name}: setns left the thread in netns {here}")
                finally:
                    os.close(fd)
                box["value"] = fn()
            except BaseException as e:     # handed to the caller's thread, raised there
                box["error"] = e

        t = threading.Thread(target=joined, name=f"netns-{self.name}")
        t.start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["value"]

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
        """Several at once: written to /proc/sys/net from a thread inside the namespace, then read back
        (what `sysctl -w` and `sysctl -n` do, without two processes each behind `ip netns exec`)."""
        if not settings:
            return

        def write() -> None:
            for key, value in settings.items():
                try:
                    _sysctl_path(key).write_text(value)
                except OSError as e:
                    raise proc.CommandError(f"{self.name}: sysctl {key}={value} failed: {e.strerror}") from None
        self.call(write)
        for key, got in self.read_sysctls(list(settings)).items():
            if got.split() != settings[key].split():
                raise proc.CommandError(f"{self.name}: sysctl {key} reads back {got!r}, wanted {settings[key]!r}")

    def read_sysctl(self, key: str) -> str:
        return self.read_sysctls([key])[key]

    def read_sysctls(self, keys: list[str]) -> dict[str, str]:
        """Each key's /proc/sys file as `sysctl -n` prints it (multi-value ones tab-separated)."""
        def read() -> dict[str, str]:
            out = {}
            for key in keys:
                try:
                    out[key] = _sysctl_path(key).read_text().strip()
                except OSError as e:
                    raise proc.CommandError(f"{self.name}: sysctl {key}: {e.strerror}") from None
            return out
        return self.call(read)

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


def _sysctl_path(key: str) -> Path:
    """/proc/sys/net/... for a dotted network key; anything else is refused (only /proc/sys/net is
    per network namespace: any other sysctl would be the host's)."""
    if not _SYSCTL_KEY.fullmatch(key) or not key.startswith("net."):
        raise ValueError(f"not a network-namespace sysctl: {key!r}")
    return Path("/proc/sys", *key.split("."))


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
