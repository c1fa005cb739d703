"""Which code runs each scenario `workload.kind` (the workloads and their models are in
mpvlab/workloads/, the interface in base.py)."""

from __future__ import annotations

from collections.abc import Callable

from mpvlab.runner.workloads.base import Workload
from mpvlab.runner.workloads.bulk import BulkWorkload
from mpvlab.runner.workloads.rtp import RtpWorkload
from mpvlab.runner.workloads.video import VideoWorkload
from mpvlab.workloads.registry import BULK, RTP, VIDEO

WorkloadFactory = Callable[[], Workload]

WORKLOADS: dict[str, WorkloadFactory] = {VIDEO.name: VideoWorkload, BULK.name: BulkWorkload, RTP.name: RtpWorkload}
