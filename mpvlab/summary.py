"""The typed result: what `summary.json` holds, as pydantic models.

One model per topology kind (the discriminator is `topology`), built from shared parts defined once:
the player's QoE (`PlayerQoE`, flat in single-client runs, per player in shared-bottleneck runs),
per-path bytes (`PathRecord`), subflows, the HTTP record, the host's CPU steal, MPTCP counters.
Every run validates its summary against this model before writing it, so a summary on disk always
has this shape; `docs/summary.schema.json` is the JSON Schema generated from it
(`python -m mpvlab.summary > docs/summary.schema.json`; a test checks that the committed file is
current). Free-form parts (cross-checks, queue views, MIB counters) stay dicts of named records.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SCHEMA_VERSION = 1


class Record(BaseModel):
    """Closed: a key the model does not name is an error (the summary and its schema cannot drift)."""

    model_config = ConfigDict(extra="forbid")


class OpenRecord(BaseModel):
    """Named fields plus whatever else the producing component records (kept, not checked)."""

    model_config = ConfigDict(extra="allow")


class CpuUse(Record):
    user_s: float
    system_s: float
    wall_s: float
    share_of_core: float | None = None


# One playout-buffer underflow: [start, end] in seconds on the run's clock.
UnderflowEpisode = tuple[float, float]


class DashView(Record):
    abr: dict[str, Any] | str | None = Field(None, description="the ABR's name and parameters as the player ran it")
    representations: Any = None
    segment_s: float | None = None
    quality_avg: float | None = None
    bitrate_avg_bps: float | None = None
    bitrate_switches: int | None = None
    stall_rate: float | None = None
    abr_policy_mismatches: int | None = None
    segments: int


class PlayerQoE(Record):
    """The player's quality of experience (player/README.md defines each counter)."""

    underflows: int | None = Field(None, description="playout-buffer underflow episodes")
    underflow_total_s: float | None = Field(None, description="total time the buffer was empty after startup (s)")
    picture_discards: int | None = Field(None, description="frames the decoder/sink discarded")
    picture_discards_no_underflow: int | None = Field(
        None, description="discards while the playout buffer had data: the CPU, not the network, was late")
    frames_rendered_late: int | None = None
    frames_accounted: bool | None = Field(None, description="rendered + discarded = expected")
    underflow_episodes: list[UnderflowEpisode] | None = None
    frames_expected: int | None = None
    frames_rendered: int | None = None
    startup_delay_s: float | None = Field(None, description="from the first request to the first frame shown (s)")
    stall_ratio: float | None = Field(None, description="underflow time / video length")
    dash: DashView | None = None


class Subflow(Record):
    local: str
    peer: str
    cc: str | None


class PathRecord(OpenRecord):
    """Bytes a path carried to the client during the run (its client interface's counters)."""

    interface: str
    rx_bytes: int
    rx_packets: int
    share: float
    mean_throughput_bps: int | None


class Steal(Record):
    fraction: float
    window_s: float
    per_cpu_s: list[float]


class Mptcp(Record):
    reinjected_segments: int
    duplicate_data_segments_received: int
    mib: dict[str, dict[str, int]]


class HttpRecord(OpenRecord):
    protocol: str
    tls: bool
    port: int


class CrossCheck(OpenRecord):
    ok: bool


class BulkRecord(Record):
    size_bytes: int | None
    duration_configured_s: float | None
    bytes_sent: int
    bytes_received: int
    connect_s: float
    first_byte_s: float | None
    last_byte_s: float
    transfer_s: float
    goodput_bps: int | None
    cc_seen: str
    definition: str


class FidelityRow(Record):
    """Configured vs achieved for one path direction over the whole run (mpvlab/fidelity.py)."""

    link: str
    configured_rate_bps: int | None
    achieved_rate_bps: int | None        # tbf dequeue rate while it had a backlog
    rate_ratio: float | None
    backlogged_s: float | None
    precheck_rate_ratio: float | None
    precheck_rtt_error_ms_p99: float | None
    lateness_ms_p99: float | None         # delay line: actual − scheduled release, every packet
    lateness_ms_max: float | None


class RunHead(Record):
    run_id: str
    scenario: str
    cc: str
    seed: int
    warnings: list[str]
    fidelity_ok: bool | None
    fidelity_warnings: list[str]
    sampler_errors: list[str]
    run_wall_s: float
    fidelity_table: list[FidelityRow] | None = None   # configured vs achieved (mpvlab/fidelity.py)


class EmulatedSummary(RunHead):
    """dual-path and dumbbell runs (mpvlab/run/emulated.py), workload video or bulk."""

    topology: Literal["dual-path", "dumbbell"]
    workload: Literal["video", "bulk"]
    scheduler: str
    duration_s: float
    bytes_total: int
    paths: dict[str, PathRecord]
    subflows: list[Subflow]
    path_switches: int | None
    steering: dict[str, Any] | None
    scheduler_decisions: int | None
    path_switch_definition: str | None
    cross_checks: dict[str, CrossCheck]
    mptcp: Mptcp
    host_steal_during_playback: Steal
    # workload video
    video_length_s: float | None = None
    underflows: int | None = None
    underflow_total_s: float | None = None
    picture_discards: int | None = None
    picture_discards_no_underflow: int | None = None
    frames_rendered_late: int | None = None
    frames_accounted: bool | None = None
    underflow_episodes: list[UnderflowEpisode] | None = None
    frames_expected: int | None = None
    frames_rendered: int | None = None
    startup_delay_s: float | None = None
    stall_ratio: float | None = None
    dash: DashView | None = None
    player_mode: str | None = None
    player_cpu: CpuUse | None = None
    http: HttpRecord | None = None
    # workload bulk
    bulk: BulkRecord | None = None


class PhysicalSummary(RunHead, PlayerQoE):
    """Runs on real hosts (mpvlab/run/physical/)."""

    topology: Literal["physical"]
    workload: Literal["video"] = "video"
    scheduler: str
    video_length_s: float
    duration_s: float
    bytes_total: int
    paths: dict[str, PathRecord]
    subflows: list[Subflow]
    player_mode: str
    player_cpu: CpuUse | None = None
    path_switches: None = None
    not_collected: dict[str, str]


class SharedPlayer(PlayerQoE):
    playback_s: float | None = None
    bytes_received: int | None = None
    download_complete: bool | None = None
    cpu: CpuUse | None = None
    interface_rx_bytes: int
    mean_throughput_bps: int | None


class SharedSummary(RunHead):
    """Shared-bottleneck runs (mpvlab/run/shared.py): N players and cross traffic behind one router."""

    topology: Literal["shared-bottleneck"]
    workload: Literal["video"] = "video"
    transport: str
    video_length_s: float
    player_mode: str
    players: dict[str, SharedPlayer]
    aggregate: dict[str, Any]
    bottleneck: dict[str, Any]
    cross_traffic: dict[str, Any]
    subflows: list[Subflow]
    host_steal_during_playback: Steal
    http: HttpRecord


Summary = Annotated[Union[EmulatedSummary, PhysicalSummary, SharedSummary], Field(discriminator="topology")]
SUMMARY = TypeAdapter(Summary)


def validated(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as the model reads it back (raises pydantic.ValidationError naming the field).
    The dict written is the one given: validation checks its shape, it never rewrites values."""
    SUMMARY.validate_python(summary)
    return summary


def json_schema() -> dict[str, Any]:
    schema = SUMMARY.json_schema()
    schema["title"] = "mpvlab summary.json"
    schema["$comment"] = f"generated from mpvlab/summary.py (schema version {SCHEMA_VERSION}); do not edit"
    return schema


if __name__ == "__main__":
    json.dump(json_schema(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
