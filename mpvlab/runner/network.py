"""What the run life cycle (lifecycle.py) needs of a topology kind: a `BringUp` function that builds
the network (topology, host settings, congestion control, links — each undone by the run's ExitStack)
and returns a `Network`. A new topology kind is one module implementing these two plus a line in
kinds.py."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Protocol, Sequence

from mpvlab.runner.context import RunContext
from mpvlab.runner.crosschecks import CheckState
from mpvlab.runner.workloads.base import Ends, Outcome


class Network(Protocol):
    ends: Ends                      # where the workload's server and client(s) run

    @property
    def nodes(self) -> Sequence[Any]:
        """The emulated nodes whose shells must live (liveness.NodeLike); () if none."""

    def check(self) -> None:
        """Raise RunFailed naming the component when a part of the emulator died (a delay line …)."""

    def precheck(self, ctx: RunContext) -> dict[str, Any]:
        """The pre-run fidelity check of the links; returns its record (fidelity.py)."""

    def before_t0(self, ctx: RunContext, stack: contextlib.ExitStack) -> None:
        """After the pre-run check, before the wait for time zero: collectors that take time to come
        up and must see the workload's first packet (packet capture)."""

    def ready(self, ctx: RunContext) -> None:
        """Preparation is done: fix run time zero (ctx.t0_ns) — soon, not after a fixed lead."""

    def start_collectors(self, ctx: RunContext, stack: contextlib.ExitStack, port: int, max_run_s: float) -> None:
        """At run time zero, before the workload's client: samplers, counters, traces, cross traffic.
        `port` is the workload's server port (the subflow sampler watches it); `max_run_s` the longest
        the workload may run (Workload.max_run_s)."""

    def poll(self, ctx: RunContext) -> None:
        """Once per poll interval while the workload runs (e.g. start cross traffic that is due)."""

    def stop_collectors(self, ctx: RunContext) -> None:
        """After the workload ended: stop everything start_collectors started, files written."""

    def summarise(self, ctx: RunContext, outcome: Outcome, fid: dict[str, Any]) -> dict[str, Any]:
        """The network's part of summary.json around `outcome.fields` (the run head is added by the
        life cycle). May raise RunFailed when a cross-check shows the run measured something else."""

    def judge(self, ctx: RunContext, fid: dict[str, Any], summary: dict[str, Any]) -> None:
        """After teardown (the delay lines have written their statistics): the whole-run fidelity
        verdict into `fid` (provenance) and the summary's fidelity fields."""

    def check_state(self, ctx: RunContext, outcome: Outcome, summary: dict[str, Any]) -> CheckState | None:
        """The evidence the run's checks read besides the summary and the run's files (crosschecks.py);
        None: the kind runs none of them."""


BringUp = Callable[[RunContext, contextlib.ExitStack], Network]


def run_head(ctx: RunContext, fid: dict[str, Any]) -> dict[str, Any]:
    """The part of every summary that says which run this was (summary.py: RunHead)."""
    sc = ctx.scenario
    return {"run_id": ctx.run_id, "scenario": sc.name, "topology": sc.topology.kind, "workload": sc.workload.kind,
            "cc": sc.transport.cc, "seed": sc.seed,
            "fidelity_ok": fid.get("ok"), "fidelity_warnings": fid.get("warnings", [])}
