"""Which backend runs a scenario of each topology kind. The kinds themselves (and which backend each
asks for) are in mpvlab/topologies/registry.py; this module maps a backend's name to its code, so that the
registry sits below the runner and never imports it. The session (session.py) is the same for every
kind; every kind runs the one life cycle (lifecycle.py) on its backend's network. A new kind is an
entry in the registry plus, when no backend here fits, one backend module (a `bring_up` returning a
network.Network) and a line in BACKENDS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpvlab.runner import lifecycle
from mpvlab.runner.context import RunContext
from mpvlab.runner.workloads.registry import WORKLOADS
from mpvlab.topologies import registry as topologies
from mpvlab.workloads.registry import VIDEO

Backend = Callable[[RunContext], dict[str, Any]]


# Each backend's module is imported when a run of its kind starts, not when the session is: a run
# loads one backend, and the others' imports (the shared and physical backends, SSH and remote-host
# code) were ~15 ms of every run's CPU (issue 36).
def _emulated(ctx: RunContext) -> dict[str, Any]:
    from mpvlab.runner import emulated
    return lifecycle.execute(ctx, emulated.bring_up_network, WORKLOADS)


def _shared(ctx: RunContext) -> dict[str, Any]:
    from mpvlab.runner import shared
    return lifecycle.execute(ctx, shared.bring_up, WORKLOADS)


def _real_hosts(ctx: RunContext) -> dict[str, Any]:
    # Physical hosts run the workload's programs over SSH: the kind brings its own video workload.
    from mpvlab.runner.physical import backend as physical
    from mpvlab.runner.physical.video import RemoteVideoWorkload
    return lifecycle.execute(ctx, physical.bring_up, {VIDEO.name: RemoteVideoWorkload})


BACKENDS: dict[str, Backend] = {"emulated": _emulated, "shared": _shared, "real-hosts": _real_hosts}

KINDS: dict[str, Backend] = {k.name: BACKENDS[k.backend] for k in topologies.ENTRIES}
