"""Which code runs each scenario `workload.kind` (the models are in spec.py, the interface in base.py)."""

from __future__ import annotations

from typing import Callable

from mpvlab.run.workloads.base import Workload
from mpvlab.run.workloads.bulk import BulkWorkload
from mpvlab.run.workloads.rtp import RtpWorkload
from mpvlab.run.workloads.video import VideoWorkload

WorkloadFactory = Callable[[], Workload]

WORKLOADS: dict[str, WorkloadFactory] = {"video": VideoWorkload, "bulk": BulkWorkload, "rtp": RtpWorkload}
