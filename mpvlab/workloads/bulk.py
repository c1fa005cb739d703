"""The bulk workload: one MPTCP bulk transfer server → client. Its `workload:` model and console
lines; the run side is mpvlab/runner/workloads/bulk.py (and bulk_endpoint.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from mpvlab.core.quantities import Duration, Size, Strict
from mpvlab.workloads.base import WorkloadKind

PORT = 5401        # the sender's; not the fidelity probe's 5201 nor the cross traffic's 5301

# A bulk transfer's size: at least one full segment; at most what 8 paths at 10 Gbit/s move in ten
# minutes is far beyond any emulated run here, so 100 GB bounds typos, not experiments.
MAX_BULK_BYTES = 100 * 10**9


class BulkWorkloadSpec(Strict):
    """One MPTCP bulk transfer server → client: `size` bytes, or for `duration`. `timeout`: give up
    after this long (default: 10× the transfer at the slowest path's rate + 30 s, or duration + 30 s)."""

    kind: Literal["bulk"] = Field(description="One MPTCP bulk transfer server → client.")
    size: Size | None = Field(None, description="Bytes to transfer, 1448B … 100GB; give this or duration.")
    duration: Duration | None = Field(None, description="Transfer for this long, 100ms … 60min; give this or size.")
    timeout: Duration | None = Field(None, description="Give up after this long, 1s … 24h; null = 10× the transfer at the slowest path's rate + 30 s, or duration + 30 s.")

    @model_validator(mode="after")
    def _one_of_size_or_duration(self) -> BulkWorkloadSpec:
        if (self.size is None) == (self.duration is None):
            raise ValueError("give exactly one of size (e.g. 10MB) and duration (e.g. 20s)")
        if self.size is not None and not 1448 <= self.size <= MAX_BULK_BYTES:
            raise ValueError(f"size must lie between 1448B (one segment) and {MAX_BULK_BYTES // 10**9}GB")
        if self.duration is not None and not 10**8 <= self.duration <= 3600 * 10**9:
            raise ValueError("duration must lie between 100ms and 60min")
        if self.timeout is not None and not 10**9 <= self.timeout <= 24 * 3600 * 10**9:
            raise ValueError("timeout must lie between 1s and 24h")
        return self


def _console_lines(s: Mapping[str, Any], _several_clients: bool) -> list[str]:
    b = s["bulk"]
    return [f"  bulk transfer: {b['bytes_received'] / 1e6:.2f} MB in {b['transfer_s']:.3f} s "
            f"({b['goodput_bps'] / 1e6:.2f} Mbit/s), cc {b['cc_seen']}"]


def _describe(sc: Any) -> str:
    """What `mpvlab validate` says of a bulk scenario: what it transfers (it plays no video)."""
    w = sc.workload
    what = f"{w.size / 1e6:g} MB" if w.size is not None else f"for {w.duration / 1e9:g} s"
    return f"cc {sc.transport.cc}, scheduler {sc.transport.scheduler}, bulk {what}"


BULK = WorkloadKind(
    name="bulk", spec=BulkWorkloadSpec, transport="mptcp", console_lines=_console_lines,
    # its summary's media length stays the video section's (as before the split), though it plays none
    media_ns=lambda _workload, video_spec: int(video_spec.duration), describe=_describe,
    sections_unused={"video": "a bulk transfer sends no video", "player": "a bulk transfer has no player",
                     "server": "the bulk sender is its own server (no web server)"},
    port=PORT)
