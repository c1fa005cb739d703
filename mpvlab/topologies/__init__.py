"""Topology definitions, by scenario `topology.kind`: every kind is an entry of registry.py (the
schema: spec.py).

The emulated kinds are built by `dual_path.build`: one router node ("emulator box") per path between a
client with one interface per path and a server — two to eight paths for `dual-path`, one for
`dumbbell` (server — router — client). Mininet glue (nodes, links) is in mpvlab/mininet. The shared
bottleneck (N clients behind one router) has a different shape (`shared_bottleneck.build`). Real
hosts build nothing: `physical.py` names real hosts and interfaces; mpvlab/core/hosts.py is how commands
reach them.
"""
