"""What a scenario says about its workload (`workload:`), one model per kind. The registry of the
code that runs each kind is registry.py; this module holds only the models, so that the scenario
schema can compose them without importing the run."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from core.quantities import Duration, Size, Strict

# A bulk transfer's size: at least one full segment; at most what 8 paths at 10 Gbit/s move in ten
# minutes is far beyond any emulated run here, so 100 GB bounds typos, not experiments.
MAX_BULK_BYTES = 100 * 10**9


class VideoWorkloadSpec(Strict):
    """The video player workload; its settings are the scenario's `video:`, `player:` and `server:`."""

    kind: Literal["video"] = "video"


class BulkWorkloadSpec(Strict):
    """One MPTCP bulk transfer server → client: `size` bytes, or for `duration`. `timeout`: give up
    after this long (default: 10× the transfer at the slowest path's rate + 30 s, or duration + 30 s)."""

    kind: Literal["bulk"]
    size: Size | None = None
    duration: Duration | None = None
    timeout: Duration | None = None

    @model_validator(mode="after")
    def _one_of_size_or_duration(self) -> "BulkWorkloadSpec":
        if (self.size is None) == (self.duration is None):
            raise ValueError("give exactly one of size (e.g. 10MB) and duration (e.g. 20s)")
        if self.size is not None and not 1448 <= self.size <= MAX_BULK_BYTES:
            raise ValueError(f"size must lie between 1448B (one segment) and {MAX_BULK_BYTES // 10**9}GB")
        if self.duration is not None and not 10**8 <= self.duration <= 3600 * 10**9:
            raise ValueError("duration must lie between 100ms and 60min")
        if self.timeout is not None and not 10**9 <= self.timeout <= 24 * 3600 * 10**9:
            raise ValueError("timeout must lie between 1s and 24h")
        return self


WorkloadSpec = Annotated[Union[VideoWorkloadSpec, BulkWorkloadSpec], Field(discriminator="kind")]
