"""The workload plug: what runs over the network once it is up — the video player, a bulk transfer,
live RTP video. The run lifecycle (mpvlab/runner/lifecycle.py) calls, in this order:

    prepare(ctx)                 before any network exists (content, checks of the workload's own inputs)
    serve(ctx, stack, ends)      the server side up and answering, before run time zero
    start(ctx, stack, ends)      the client side, at run time zero
    max_run_s(ctx)               the longest it may run from start before check gives up
    running(wait_s) / check(ctx) polled during the run: running waits up to wait_s for the workload's
                                 programs to end (back at once when they do); check raises RunFailed
                                 naming a dead component
    progress(ctx)                one line for the status display
    finish(ctx) -> Outcome       the workload's part of the summary, after its processes ended

A new workload is one module here plus an entry in WORKLOADS (mpvlab/runner/workloads/registry.py), and
its home in mpvlab/workloads/ (spec, checks, summary part) with an entry in mpvlab/workloads/registry.py
(docs/extending.md walks through one).
"""

from __future__ import annotations

import contextlib
import subprocess
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, TypeVar

from mpvlab.core.hosts import Host
from mpvlab.runner.context import RunContext


SpecT = TypeVar("SpecT")


def workload_spec(ctx: RunContext, spec_type: type[SpecT]) -> SpecT:
    """The scenario's workload spec as the type the calling workload runs. The registry hands a workload
    only scenarios of its own kind, so a mismatch is a bug in the registry: named, not a wrong run."""
    spec = ctx.scenario.workload
    if not isinstance(spec, spec_type):
        raise TypeError(f"a workload that runs {spec_type.__name__} was handed a {spec.kind} workload spec")
    return spec

@dataclass(frozen=True)
class Client:
    """One client host of the topology: its role names its logs (`client0`, …) when there are several."""

    role: str
    ns: Host                            # a namespace here, or a real host (physical topology)
    addr: str
    # The client's own interface the workload's packets arrive on: a UDP workload's receiver counts
    # are checked against it (on the shared bottleneck the router's interfaces also carry cross traffic).
    iface: str | None = None


@dataclass(frozen=True)
class Ends:
    """What a workload needs of the network: where its ends run and how they find each other. Most
    topologies have one client; the shared bottleneck has N, each running the workload's client."""

    server: Host
    clients: tuple[Client, ...]
    server_addr: str
    cc_kernel_name: str                 # the congestion control the run set up (mpvlab/cc/registry.py)
    server_env: dict[str, str] = field(default_factory=dict)   # from the scheduler (e.g. a send-buffer bound)

    @property
    def client(self) -> Host:
        """The first (for most topologies the only) client."""
        return self.clients[0].ns


@dataclass
class Outcome:
    fields: dict[str, Any]              # the workload's part of summary.json
    duration_s: float                   # the span the per-path mean throughputs are taken over
    connections_key: str                # how the cross-check names the workload's connection count
    connections: int                    # connections it made over the emulated paths
    warnings: list[str] = field(default_factory=list)
    per_client: dict[str, dict[str, Any]] = field(default_factory=dict)   # role → that client's own record
    # A workload whose registry entry says transport "udp" (mpvlab/workloads/) is checked by `wire`
    # (datagrams and UDP payload bytes the client read) instead of the MPTCP subflows and the
    # scheduler trace against the interface bytes.
    wire: dict[str, int] | None = None
    # What the workload's own checks read besides its summary fields and the run's files, by kind
    # (player_bytes, dashjs_raw, rtp_logs): mpvlab/runner/crosschecks.py runs the checks over it.
    evidence: dict[str, Any] = field(default_factory=dict)


class Workload(Protocol):
    name: str

    @property
    def port(self) -> int:
        """The server's port: the subflow sampler watches it."""

    def prepare(self, ctx: RunContext) -> None: ...

    def serve(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None: ...

    def stage(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        """Start what the client side needs before t0 (programs that then wait for `start`), so
        their start-up is not part of the run; it must send nothing before `start`."""

    def start(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None: ...

    def max_run_s(self, ctx: RunContext) -> float:
        """The longest it may run from `start` before `check` gives up: what the network sizes
        things that run alongside it by (a bulk cross flow without its own duration)."""

    def running(self, wait_s: float = 0.0) -> bool:
        """Whether it still runs, after waiting up to wait_s for it to end (`still_running`)."""

    def check(self, ctx: RunContext) -> None: ...

    def progress(self, ctx: RunContext) -> str: ...

    def finish(self, ctx: RunContext) -> Outcome: ...


def still_running(procs: Sequence[subprocess.Popen[bytes]], wait_s: float = 0.0) -> bool:
    """Whether any of `procs` runs, after waiting up to wait_s on the last one still running: the
    run ends when its programs exit, not at the next poll (up to a poll interval of idle wall time
    per run otherwise, issue 16)."""
    live = [p for p in procs if p.poll() is None]
    if live and wait_s > 0:
        try:
            live[-1].wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
    return any(p.poll() is None for p in procs)
