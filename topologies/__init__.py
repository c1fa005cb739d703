"""Topology definitions, by scenario `topology.kind` (the schema: spec.py).

The emulated kinds are built by `dual_path.build`: one router node ("emulator box") per path between a
client with one interface per path and a server — two paths for `dual-path`, one for `dumbbell`
(server — router — client). Mininet glue (nodes, links) is in `nodes.py`. `shared-bottleneck`
(N clients behind one router) has a different shape (`shared_bottleneck.build`). `physical` builds
nothing: it names real hosts and interfaces (`physical.py`); core/hosts.py is how commands reach them.
"""
