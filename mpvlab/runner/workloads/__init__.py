"""What runs over the network once it is up, by scenario `workload.kind`: the interface (base.py),
the scenario's models (spec.py), the registry (registry.py) and one module per kind: `video`
(Apache + the GStreamer player, video.py) and `bulk` (one MPTCP bulk transfer, bulk.py)."""
