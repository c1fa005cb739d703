"""Subprocesses the platform starts: argument lists only (nothing reaches a shell), identified by
(pid, start time) so a later cleanup never kills a recycled pid."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


class CommandError(RuntimeError):
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


@dataclass(frozen=True)
class ProcRef:
    pid: int
    start: int
    label: str

    @classmethod
    def of(cls, pid: int, label: str) -> "ProcRef":
        return cls(pid, start_time_ticks(pid) or 0, label)

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


def stop_child(p: "subprocess.Popen[bytes]", grace: float = 5.0) -> int:
    """Stop a child we started: SIGTERM, then SIGKILL after `grace` s; reaps it. Returns its exit code."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode
