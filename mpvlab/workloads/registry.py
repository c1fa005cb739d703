"""Every workload a scenario may name (`workload.kind`), listed once, in the schema's order. The
scenario schema composes their models from here; the runner maps each to the code that runs it
(mpvlab/runner/workloads/registry.py). Adding a workload: docs/extending.md."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mpvlab.workloads.base import WorkloadKind
from mpvlab.workloads.bulk import BULK, BulkWorkloadSpec
from mpvlab.workloads.rtp import RTP, RtpWorkloadSpec
from mpvlab.workloads.video import VIDEO, VideoWorkloadSpec

ENTRIES: tuple[WorkloadKind, ...] = (VIDEO, BULK, RTP)
REGISTRY: dict[str, WorkloadKind] = {w.name: w for w in ENTRIES}

# The scenario's `workload:`: one model per entry, told apart by `kind`. Written out (not built from
# ENTRIES) so that type checkers see the union; tests/test_registries.py checks it lists every entry.
WorkloadSpec = Annotated[VideoWorkloadSpec | BulkWorkloadSpec | RtpWorkloadSpec, Field(discriminator="kind")]


def get(name: str) -> WorkloadKind:
    """The entry of `name`; ValueError lists the workloads there are."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a workload here; available: {', '.join(REGISTRY)}") from None
