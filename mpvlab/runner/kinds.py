"""Which backend runs a scenario of each topology kind. The session (session.py) is the same for every
kind; every kind runs the one life cycle (lifecycle.py) on its backend's network. A new kind is
one backend module (a `bring_up` returning a network.Network) plus a line here."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from mpvlab.runner import emulated, lifecycle, shared
from mpvlab.runner.context import RunContext
from mpvlab.runner.network import BringUp
from mpvlab.runner.physical import backend as physical
from mpvlab.runner.physical.video import RemoteVideoWorkload
from mpvlab.runner.workloads.registry import WORKLOADS, WorkloadFactory


def _on(bring_up: BringUp, workloads: Mapping[str, WorkloadFactory] = WORKLOADS) -> Callable[[RunContext], dict[str, Any]]:
    return lambda ctx: lifecycle.execute(ctx, bring_up, workloads)


KINDS: dict[str, Callable[[RunContext], dict[str, Any]]] = {
    "dual-path": _on(emulated.bring_up_network),
    "dumbbell": _on(emulated.bring_up_network),
    "shared-bottleneck": _on(shared.bring_up),
    # Physical hosts run the workload's programs over SSH: the kind brings its own video workload.
    "physical": _on(physical.bring_up, {"video": RemoteVideoWorkload}),
}
