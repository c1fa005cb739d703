"""What runs over the network once it is up, by scenario `workload.kind`: the run-side code of each
workload (its model, summary part and console lines are in mpvlab/workloads/): the interface
(base.py), the registry (registry.py) and one module per workload: `video` (Apache + the GStreamer
player, video.py), `bulk` (one MPTCP bulk transfer, bulk.py) and `rtp` (live video over RTP/UDP, rtp.py)."""
