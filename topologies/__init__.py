"""Topology definitions, by scenario `topology.kind`.

Both kinds today are built by `dual_path.build`: one router node ("emulator box") per path between a
client with one interface per path and a server — two paths for `dual-path`, one for `dumbbell`
(server — router — client). Mininet glue (nodes, links) is in `nodes.py`. `shared-bottleneck`
(N clients behind one router) has a different shape and its own run (`shared_bottleneck.build`,
brought up by mpvlab/run_shared.py), so it is not in BUILDERS.
"""

from __future__ import annotations

from typing import Callable

from mpvlab.scenario import Scenario
from topologies import dual_path

BUILDERS: dict[str, Callable[[Scenario, str, Callable[[str], None]], dual_path.DualPath]] = {
    "dual-path": dual_path.build,
    "dumbbell": dual_path.build,
}


def build(scenario: Scenario, run_id: str, on_netns: Callable[[str], None]) -> dual_path.DualPath:
    return BUILDERS[scenario.topology.kind](scenario, run_id, on_netns)
