"""Topology definitions, by scenario `topology.kind`.

The emulated kinds are built by `dual_path.build`: one router node ("emulator box") per path between a
client with one interface per path and a server — two paths for `dual-path`, one for `dumbbell`
(server — router — client). Mininet glue (nodes, links) is in `nodes.py`. `shared-bottleneck`
(N clients behind one router) has a different shape and its own run (`shared_bottleneck.build`,
brought up by mpvlab/run_shared.py), so it is not in BUILDERS. `physical` builds nothing: it names
real hosts and interfaces (`physical.py`, run by mpvlab/physical/); `hosts.py` is how commands
reach them.

Imports are inside build(): mpvlab.scenario uses the validators of topologies.hosts, so this package
must not import the scenario module at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from mpvlab.scenario import Scenario
    from topologies.dual_path import DualPath


def build(scenario: "Scenario", run_id: str, on_netns: Callable[[str], None]) -> "DualPath":
    from topologies import dual_path

    builders = {"dual-path": dual_path.build, "dumbbell": dual_path.build}
    if scenario.topology.kind not in builders:
        raise ValueError(f"topology.kind {scenario.topology.kind!r} is not an emulated topology")
    return builders[scenario.topology.kind](scenario, run_id, on_netns)
