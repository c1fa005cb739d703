"""Which backend runs a scenario of each topology kind. The kinds themselves (and which backend each
asks for) are in topologies/registry.py; this module maps a backend's name to its code, so that the
registry sits below the runner and never imports it. The session (session.py) is the same for every
kind; every kind runs the one life cycle (lifecycle.py) on its backend's network. A new kind is an
entry in the registry plus, when no backend here fits, one backend module (a `bring_up` returning a
network.Network) and a line in BACKENDS."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mpvlab.runner import emulated, lifecycle, shared
from mpvlab.runner.context import RunContext
from mpvlab.runner.network import BringUp
from mpvlab.runner.physical import backend as physical
from mpvlab.runner.physical.video import RemoteVideoWorkload
from mpvlab.runner.workloads.registry import WORKLOADS, WorkloadFactory
from mpvlab.topologies import registry as topologies
from mpvlab.workloads.registry import VIDEO

Backend = Callable[[RunContext], dict[str, Any]]


def _on(bring_up: BringUp, workloads: Mapping[str, WorkloadFactory] = WORKLOADS) -> Backend:
    return lambda ctx: lifecycle.execute(ctx, bring_up, workloads)


BACKENDS: dict[str, Backend] = {
    "emulated": _on(emulated.bring_up_network),
    "shared": _on(shared.bring_up),
    # Physical hosts run the workload's programs over SSH: the kind brings its own video workload.
    "real-hosts": _on(physical.bring_up, {VIDEO.name: RemoteVideoWorkload}),
}

KINDS: dict[str, Backend] = {k.name: BACKENDS[k.backend] for k in topologies.ENTRIES}
