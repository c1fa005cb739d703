"""Component liveness during a run (issues 15 and 23): every process the run registered in its
ledger that must live until the workload ends, and every node of the emulated network (its Mininet
shell and its named namespace), checked on each tick of the run's loop. A component that is gone
fails the run with a reason that names it (label, pid, or node role and namespace), roughly when it
went (seconds after run time zero, between the last check that saw it and the one that did not) and
how it ended (exit status or signal) — instead of a collector's summary silently missing, or an
unrelated error later (`FileNotFoundError: /proc/<pid>/net/dev` once the client's shell is gone).

A process that was not ours to reap (or already reaped) has no status left to read; a zombie
still carries it (/proc/PID/stat field 52, exit_code), read without reaping, so the Popen that owns
it sees the same status afterwards.
"""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Protocol

from mpvlab.core import proc
from mpvlab.core.errors import RunFailed

# Ledger labels of processes that end on their own while the run goes on (the workload's client and
# endpoints, which the workload itself reports on — rtp: an encoder that dies ends its sender with an
# error; helpers of cleanup), so they are not watched.
# Every other registered process (Apache, schedtrace, qdiscstat, the scheduler's controller, a CC's
# loader, delay lines) must live until the workload has ended.
UNWATCHED_PREFIXES = ("player", "bulk ", "rtp ", "netns member", "iperf3 ", "voip ", "ssh master")
# Delay lines have their own check with their stderr in the message (mpvlab/links/emulator.py
# describe_death); the run calls it first, so theirs is the message a user sees.
SEPARATELY_WATCHED_PREFIXES = ("delayline ",)


class NodeLike(Protocol):
    """What a node of the emulated network offers (mpvlab/emulation/nodes.py EmuNode)."""

    @property
    def pid(self) -> int: ...

    mn: Any
    ns: Any


def describe_status(returncode: int | None) -> str:
    """A Popen return code in words: `killed by SIGKILL`, `exited with status 3`."""
    if returncode is None:
        return "status unknown"
    if returncode < 0:
        return f"killed by {_signal_name(-returncode)}"
    return f"exited with status {returncode}"


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def zombie_status(pid: int) -> str | None:
    """How a dead, not yet reaped process ended, from /proc/PID/stat (exit_code, field 52, in
    waitpid(2)'s encoding); None if the process is not a zombie or the field is unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] != "Z" or len(fields) < 50:
        return None
    code = int(fields[49])
    if code & 0x7F:
        return f"killed by {_signal_name(code & 0x7F)}"
    return f"exited with status {(code >> 8) & 0xFF}"


def _rel(s: float) -> str:
    """`2.1 s after` / `0.4 s before` (a watch made before run time zero reports either)."""
    return f"{s:.1f} s after" if s >= 0 else f"{-s:.1f} s before"


def when_found(t0_ns: int, last_ok_ns: int | None) -> str:
    """When a component died, as far as checks every POLL_S can tell: between the last check that found
    it alive and now, relative to run time zero (`between 2.1 s and 2.3 s after run time zero`)."""
    hi = (time.monotonic_ns() - t0_ns) / 1e9
    if last_ok_ns is None:          # dead at the first look: it may have died any time before
        return f"by {_rel(hi)} run time zero (found at the first check)"
    lo = (last_ok_ns - t0_ns) / 1e9
    if lo >= 0 or hi < 0:           # both on one side: `between 2.1 s and 2.3 s after run time zero`
        return f"between {abs(lo):.1f} s and {_rel(hi) if hi >= 0 else f'{-hi:.1f} s before'} run time zero"
    return f"between {_rel(lo)} and {_rel(hi)} run time zero"


def watched(label: str) -> bool:
    return not label.startswith(UNWATCHED_PREFIXES + SEPARATELY_WATCHED_PREFIXES)


@dataclass
class Watch:
    """Call check() on every tick of the run's loop (and once after it): it raises RunFailed for the
    first component found gone. `procs` is read from the ledger at each check, so a process
    registered after the watch was made is watched too."""

    t0_ns: int
    ledger_procs: list[dict[str, object]]
    nodes: dict[str, NodeLike] = field(default_factory=dict)
    last_ok_ns: int | None = None      # the last check that found everything alive (None: none yet)

    @classmethod
    def for_run(cls, ctx: Any, nodes: Iterable[NodeLike] = ()) -> Watch:
        """The run's ledger processes and the given nodes, keyed by role (the Mininet node's name)."""
        return cls(ctx.t0_ns, ctx.ledger.procs, {str(n.mn.name): n for n in nodes})

    def _when(self) -> str:
        return when_found(self.t0_ns, self.last_ok_ns)

    def problems(self) -> list[str]:
        out: list[str] = []
        for role, node in self.nodes.items():
            shell: subprocess.Popen[bytes] | None = getattr(node.mn, "shell", None)
            rc = shell.poll() if shell is not None else None
            if shell is not None and rc is not None:
                out.append(f"the {role} node's shell (pid {node.pid}, namespace {node.ns.name}) {describe_status(rc)} "
                           f"{self._when()}; the {role} node is gone")
            elif not node.ns.exists():
                out.append(f"the {role} node's namespace {node.ns.name} was deleted {self._when()} (its shell, "
                           f"pid {node.pid}, still ran); nothing can reach the {role} node by name any more")
        for p in list(self.ledger_procs):
            label = str(p["label"])
            if not watched(label):
                continue
            ref = proc.ProcRef.from_record(p)
            if not ref.alive():
                how = zombie_status(ref.pid) or "ended (its exit status was already collected)"
                out.append(f"{label} (pid {ref.pid}) {how} {self._when()}; the run cannot trust what it measured "
                           "from then on")
        return out

    def check(self) -> None:
        found = self.problems()
        if found:
            raise RunFailed("component gone: " + "; ".join(found))
        self.last_ok_ns = time.monotonic_ns()
