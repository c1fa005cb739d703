"""Which code runs each scenario `workload.kind` (the models are in spec.py, the interface in base.py)."""

from __future__ import annotations

from typing import Callable

from mpvlab.runner.workloads.base import Workload
from mpvlab.runner.workloads.bulk import BulkWorkload
from mpvlab.runner.workloads.rtp import RtpWorkload
from mpvlab.runner.workloads.video import VideoWorkload

WorkloadFactory = Callable[[], Workload]

WORKLOADS: dict[str, WorkloadFactory] = {"video": VideoWorkload, "bulk": BulkWorkload, "rtp": RtpWorkload}
