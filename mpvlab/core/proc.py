"""Subprocesses the platform starts: argument lists only (nothing reaches a shell), identified by
(pid, start time) so a later cleanup never kills a recycled pid."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from mpvlab.core.errors import MpvlabError


class CommandError(MpvlabError, RuntimeError):
    """A command the platform ran failed; the message carries the command and its stderr."""


def run(argv: list[str], *, check: bool = True, timeout: float = 60.0,
        input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input_text)
    except subprocess.TimeoutExpired:
        raise CommandError(f"timed out after {timeout:g} s: {' '.join(argv)}") from None
    except FileNotFoundError:
        raise CommandError(f"program not found: {argv[0]} (did ./setup.sh run?)") from None
    if check and cp.returncode != 0:
        raise CommandError(f"command failed (exit {cp.returncode}): {' '.join(argv)}\n{cp.stderr.strip()}")
    return cp


def start_time_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: the process start time, which with the pid identifies it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process (all its threads), in clock ticks (fields 14 and 15 of proc(5))."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()    # after "pid (comm)": comm may hold spaces
    return int(fields[11]) + int(fields[12])


@dataclass(frozen=True)
class ProcRef:
    pid: int
    start: int
    label: str

    @classmethod
    def of(cls, pid: int, label: str) -> ProcRef:
        return cls(pid, start_time_ticks(pid) or 0, label)

    @classmethod
    def from_record(cls, rec: object) -> ProcRef:
        """One process as a ledger read from disk holds it (JSON a crash or a person may have left):
        KeyError for a missing field, TypeError for one that is not a number."""
        if not isinstance(rec, dict):
            raise TypeError(f"a process record is a {type(rec).__name__}, not an object")
        pid, start = rec["pid"], rec["start"]
        if not isinstance(pid, (int, float, str)) or not isinstance(start, (int, float, str)):
            raise TypeError(f"a process record's pid and start are not numbers: {rec!r}")
        return cls(int(pid), int(start), str(rec["label"]))

    def alive(self) -> bool:
        """Same pid, same start time, and not a zombie waiting to be reaped."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        fields = stat.rsplit(")", 1)[1].split()
        return fields[0] != "Z" and int(fields[19]) == self.start


def terminate(ref: ProcRef, grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; only if it is still the same process."""
    if not ref.alive():
        return
    try:
        os.kill(ref.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not ref.alive():
            return
        time.sleep(0.02)
    if ref.alive():
        try:
            os.kill(ref.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_child(p: subprocess.Popen[bytes], grace: float = 5.0) -> int:
    """Stop a child we started: SIGTERM, then SIGKILL after `grace` s; reaps it. Returns its exit code."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def _tail(path: Path | None, limit: int = 2000) -> str:
    if path is None:
        return ""
    try:
        return path.read_text(errors="replace").strip()[-limit:]
    except OSError:
        return ""


def wait_ready(p: subprocess.Popen[bytes], ready: Path, label: str, timeout_s: float, *,
               log: Path | None = None, error: type[Exception] = CommandError, poll_s: float = 0.005) -> None:
    """Wait until a daemon we started creates its ready file (the platform's native daemons — delay
    line, BPF loaders and collectors, steering controller — write one once they are attached and
    working). If it exits first, or `timeout_s` passes, it is killed and reaped and `error` is raised
    with the tail of its log: a daemon that is not working never goes unnoticed."""
    deadline = time.monotonic() + timeout_s
    try:
        while not ready.exists():
            rc = p.poll()
            if rc is not None or time.monotonic() > deadline:
                why = f"exited with {rc} before it was ready" if rc is not None else f"not ready after {timeout_s:g} s"
                tail = _tail(log)
                raise error(f"{label} {why}" + (f": {tail}" if tail else (f" (see {log})" if log else "")))
            time.sleep(poll_s)
    except BaseException:   # also Ctrl-C while waiting: never leave a half-started daemon behind
        if p.poll() is None:
            p.kill()
        p.wait()
        raise
