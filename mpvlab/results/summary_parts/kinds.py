"""The whole summary.json per kind of run: the run head every summary starts with (`RunHead`) and one
model per topology kind (the discriminator is `topology`), made of the parts in this package."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from mpvlab.topologies import registry as topologies
from mpvlab.workloads import registry as workloads
from mpvlab.results.metricdef import INF, MPVLAB, STUDY_WIFI_LTE, MetricDef, View
from mpvlab.results.summary_parts.base import SKEWED, Record
from mpvlab.results.summary_parts.cross import CrossTraffic
from mpvlab.results.summary_parts.network import (
    BottleneckRecord, CCStateView, ClientCounters, CrossCheck, EcnMarks, FidelityRow, HttpRecord, Mptcp, PathRecord,
    Steal, Subflow)
from mpvlab.results.summary_parts.observe import (
    BbrDiagRecord, CaptureRecord, SteeringRecord, WireNotCollected, WireSwitchesRecord)
from mpvlab.results.summary_parts.runchecks import FidelityChecks
from mpvlab.results.summary_parts.player import CpuUse, PlayerQoE, SharedAggregate, SharedPlayer
from mpvlab.results.summary_parts.workload import BulkRecord, Competition, RtpRecord


class RunHead(Record):
    run_id: str = Field(
        description="the run's 6-character id (mpvlab/core/naming.py): its directory `<results>/<scenario>/<run_id>` and "
                    "the tag on every kernel object it created")
    scenario: str = Field(description="the scenario's name (its `name` field)")
    cc: str = Field(description="the scenario's transport.cc (the CC registry's name, mpvlab/cc/registry.py)")
    seed: int = Field(description="the run's random seed")
    warnings: list[str] = Field(
        description="everything the run found questionable, in words (failed cross-checks, fidelity, collectors)")
    fidelity_ok: Annotated[bool | None, MetricDef(
        "fidelity check passed", "fraction of runs", 0, 1, "higher",
        "1 when the fidelity checks that ran found nothing: the pre-run probe of delay and rate (unless the "
        "scenario turned it off, reason in provenance) and the whole run's delay-line and shaper checks", MPVLAB, **SKEWED, rank=14)]
    fidelity_warnings: list[str] = Field(
        description="the fidelity checks' findings, in words (mpvlab/runner/fidelity.py); empty = fidelity_ok")
    sampler_errors: list[str] = Field(description="errors the run's periodic samplers (collectors/) met, in words")
    run_wall_s: Annotated[float, MetricDef(
        "run wall time", "s", 0, INF, "none", "wall-clock time of the whole run", MPVLAB, rank=15)]
    host_steal_during_playback: Steal = Field(
        description="CPU time the hypervisor took from this VM during playback (/proc/stat steal; mpvlab/core/hoststeal.py)")
    fidelity_table: list[FidelityRow] | None = Field(
        None, description="configured vs achieved per path direction over the whole run (mpvlab/runner/fidelity.py); null "
                          "without shaped links")
    fidelity_checks: FidelityChecks | None = Field(
        None, description="the named whole-run plausibility checks (mpvlab/runner/runchecks.py: "
                          "probe_delay_within_queue_bound, playback_within_media_and_stalls, no_simultaneous_silence; "
                          "their rows in docs/reference/cross-checks.md), each with `ok` and the "
                          "measured value beside its bound; a failed one is also a fidelity warning starting with its "
                          "name; null when none applied")


# Fields that several kinds of run share, declared (with their metric) once.
DurationS = Annotated[float, MetricDef(
    "playback duration", "s", 0, INF, "lower", "time from the first frame to the end of the stream", MPVLAB, rank=12)]
BytesTotal = Annotated[int, MetricDef(
    "bytes received (all paths)", "B", 0, INF, "none", "bytes received at the client's interfaces during playback",
    MPVLAB, rank=13)]
PathSwitches = Annotated[int | None, MetricDef(
    "path switches", "switches", 0, INF, "none",
    "data-carrying MPTCP scheduling decisions that picked another subflow than the previous one "
    "(BPF trace of the kernel scheduler, collectors/README.md)", STUDY_WIFI_LTE, **SKEWED, qoe=True, rank=10,
    views={"configs": View(4, "path switches"), "summary": View(3, "path switches"), "runs": View(4, "switches"),
           "bars": View(3, "Path switches per scheduler decision", "path switches per run (scheduler decisions)")})]


def _kinds(model: str) -> tuple[str, ...]:
    """The topology kinds a summary model describes (the registry's `summary`): its `topology` Literal."""
    return topologies.summarised_by(model)


def _workloads(model: str) -> tuple[str, ...]:
    """The workloads those kinds run, in the workload registry's order: its `workload` Literal."""
    runs = {w for name in _kinds(model) for w in topologies.get(name).workloads}
    return tuple(w.name for w in workloads.ENTRIES if w.name in runs)


class KindFields(Record):
    """The plain fields a kind of run declares itself (values, not records of their own): the kind's summary
    model is made of them, the run head and its parts. The life cycle builds them as the part `run fields`
    where it assembles the summary (mpvlab/runner/lifecycle.py), so a wrong type fails there, naming the field."""


def kind_fields(model: type[BaseModel]) -> type[KindFields]:
    """The KindFields a summary model (EmulatedSummary …) is made of."""
    return next(b for b in model.__mro__ if issubclass(b, KindFields) and KindFields in b.__bases__)


class EmulatedFields(KindFields):
    """EmulatedSummary's plain fields."""

    topology: Literal[_kinds("EmulatedSummary")] = Field(description="the scenario's topology.kind")  # type: ignore[valid-type]
    workload: Literal[_workloads("EmulatedSummary")] = Field(  # type: ignore[valid-type]
        description="the scenario's workload.kind: which of video, bulk, rtp ran (and so which records below are "
                    "present)")
    scheduler: str = Field(description="the scenario's transport.scheduler: the MPTCP packet scheduler the server ran")
    duration_s: DurationS
    bytes_total: BytesTotal
    path_switches: PathSwitches
    scheduler_decisions: Annotated[int | None, MetricDef(
        "scheduler decisions", "decisions", 0, INF, "none", "MPTCP scheduling decisions seen by the trace", MPVLAB,
        **SKEWED, rank=11)]
    path_switch_definition: str | None = Field(
        description="how path_switches is counted, in words (the scheduler trace's view, collectors/README.md)")
    path_switches_wire: Annotated[int | None, MetricDef(
        "path switches on the wire", "switches", 0, INF, "none",
        "consecutive new-data segments of one connection, in the order they left the server, on different "
        "subflows (capture at the server, mpvlab/collectors/wire_switches.py); only runs with observe.pcap at server",
        MPVLAB, **SKEWED, rank=10.5,
        # Only runs captured at the server have it (observe.pcap); bar_figure skips it otherwise.
        views={"bars": View(4, "Path switches per wire segment", "path switches per run (wire segments)")})] = Field(
        None, description="wire-order path switches (mpvlab/collectors/wire_switches.py): consecutive new-data segments of "
                          "one connection, in the order they left the server, on different subflows; retransmitted "
                          "segments counted apart (wire_switches). `path_switches` counts per scheduler decision. "
                          "Needs observe.pcap at `server`; null otherwise")
    # workload video
    video_length_s: float | None = Field(
        None, description="workload video: the video's duration (the scenario's video, s)")
    player_mode: str | None = Field(None, description="workload video: the scenario's player.mode")


class EmulatedSummary(EmulatedFields, RunHead, PlayerQoE):
    """dual-path and dumbbell runs (mpvlab/runner/emulated.py), workload video (the player's QoE, flat) or bulk."""

    paths: dict[str, PathRecord] = Field(
        description="per path name: the bytes it carried to the client during playback (its client interface's "
                    "counters)")
    subflows: list[Subflow] = Field(
        description="every (local, peer) pair ss showed on the server's port during the run, with its cc "
                    "(mpvlab/runner/sampling.py); the run fails if one ran another cc than the scenario's")
    steering: SteeringRecord | None = Field(
        description="a steered scheduler's conformance and steering latency (mpvlab/runner/views.py, "
                    "schedulers/README.md); null for the kernel's own scheduler")
    wire_switches: WireSwitchesRecord | WireNotCollected | None = Field(
        None, description="per connection and in total: wire_switches, dsn_order_switches, new/retransmitted "
                          "segments, the decision count beside them, definitions, per subflow its peer, path and "
                          "seq_data_bytes (data bytes in its sequence space, each once); or {not_collected: why}")
    capture: CaptureRecord | None = Field(
        None, description="observe.pcap: per file packets, bytes, tcpdump's drop counters, truncation and the byte "
                          "cross-check against the interface counters (mpvlab/collectors/pcap.py); null without capture")
    cross_checks: dict[str, CrossCheck] = Field(
        description="named cross-checks between independent collectors (e.g. collector_saw_every_connection, "
                    "collector_lost_events, subflow_addresses), each with its figures and `ok` (mpvlab/runner/views.py)")
    mptcp: Mptcp = Field(
        description="MPTCP-level counters over the run: MIB deltas at server and client and the msk's byte counters "
                    "from the scheduler trace (mpvlab/runner/steps.py)")
    cc_state: CCStateView | None = Field(None, description="a CC whose state the registry names: its model "
                                                            "over the workload's flows")
    ecn_marks: dict[str, EcnMarks] | None = Field(
        None, description="per link direction with ecn_mark (`<path>-<down|up>`): its marker's counts over the "
                          "workload; null without ecn_mark")
    bbr_diag: BbrDiagRecord | None = Field(
        None, description="observe.bbr_modes_hz: kernel BBR's state per server connection over INET_DIAG "
                          "(mpvlab/cc/bbr_diag.py, cc/README.md): samples, rate_hz reached, gap_ms_max, the reader's "
                          "CPU, connections_with_data, per connection (4-tuple) its mode sequence, time-weighted "
                          "shares and STARTUP episodes (start_s on the run's clock, duration_s, bytes_acked); over "
                          "the whole run, every connection on the server's port; null when not asked for")
    # workload video (and PlayerQoE's fields)
    player_cpu: CpuUse | None = Field(
        None, description="workload video: the player process's CPU use (mpvlab/player/gstreamer/player.py, getrusage)")
    http: HttpRecord | None = Field(None, description="workload video: the HTTP connection the player used")
    # workload bulk
    bulk: BulkRecord | None = Field(
        None, description="workload bulk: the transfer's bytes and times (mpvlab/runner/workloads/bulk.py)")
    # workload rtp
    rtp: RtpRecord | None = Field(None, description="workload rtp: the stream's record (mpvlab/runner/workloads/rtp.py)")


class PhysicalFields(KindFields):
    """PhysicalSummary's plain fields."""

    topology: Literal[_kinds("PhysicalSummary")] = Field(description="always physical: a run on real hosts")  # type: ignore[valid-type]
    workload: Literal[_workloads("PhysicalSummary")] = Field(workloads.VIDEO.name, description="always video on real hosts")  # type: ignore[valid-type]
    scheduler: str = Field(description="the scenario's transport.scheduler")
    video_length_s: float = Field(description="the video's duration (the scenario's video, s)")
    duration_s: DurationS
    bytes_total: BytesTotal
    player_mode: str = Field(description="the scenario's player.mode")
    path_switches: None = Field(
        None, description="always null on real hosts: the scheduler trace is not collected there (see not_collected)")
    not_collected: dict[str, str] = Field(
        description="what a physical run does not collect, each with why (mpvlab/runner/physical/backend.py)")


class PhysicalSummary(PhysicalFields, RunHead, PlayerQoE):
    """Runs on real hosts (mpvlab/runner/physical/)."""

    paths: dict[str, PathRecord] = Field(
        description="per path name: the bytes it carried to the client during playback (its client interface's "
                    "counters)")
    subflows: list[Subflow] = Field(description="the MPTCP subflows seen during the run, with their cc")
    player_cpu: CpuUse | None = Field(None, description="the player process's CPU use (getrusage)")


class SharedFields(KindFields):
    """SharedSummary's plain fields."""

    topology: Literal[_kinds("SharedSummary")] = Field(description="the scenario's topology.kind")  # type: ignore[valid-type]
    workload: Literal[_workloads("SharedSummary")] = Field(  # type: ignore[valid-type]
        workloads.VIDEO.name, description="the scenario's workload.kind: video (N players) or rtp (one viewer)")
    transport: str = Field(
        description="what the players' or viewer's flows ran over, in words (e.g. `mptcp, one subflow per player`)")
    # workload video
    video_length_s: float | None = Field(None, description="workload video: the video's duration (s)")
    player_mode: str | None = Field(None, description="workload video: the scenario's player.mode")
    # workload rtp
    duration_s: float | None = Field(
        None, description="workload rtp: from the viewer's first to its last received packet (s)")


class SharedSummary(SharedFields, RunHead):
    """Shared-bottleneck runs (mpvlab/runner/shared.py): N players and cross traffic behind one router,
    or (workload rtp) one viewer: its `rtp` record and the viewer interface's cross-check instead."""

    bottleneck: BottleneckRecord = Field(
        description="the shared link over the collectors' window: path, rate_bps, limit_bytes, burst_bytes, window_s, "
                    "per-leaf received bytes, the tbf's counters and queue view (mpvlab/runner/shared_summary.py bottleneck_view)")
    cross_traffic: CrossTraffic = Field(description="what the cross-traffic sources recorded (mpvlab/runner/cross.py)")
    subflows: list[Subflow] = Field(
        description="every (local, peer) pair ss showed on the server's port, with its cc; the run fails if one ran "
                    "another cc than the scenario's")
    cc_state: CCStateView | None = Field(
        None, description="a CC whose state the registry names: its model over the workload's flows")
    ecn_marks: dict[str, EcnMarks] | None = Field(
        None, description="per link direction with ecn_mark: its marker's counts over the workload; null without "
                          "ecn_mark")
    # workload video
    players: dict[str, SharedPlayer] | None = Field(
        None, description="workload video: per player role, its QoE and bytes")
    aggregate: SharedAggregate | None = Field(None, description="workload video: the players together")
    http: HttpRecord | None = Field(None, description="workload video: the HTTP connection the players used")
    # workload rtp: the viewer's interface counters (`clients`) and their check against its socket
    rtp: RtpRecord | None = Field(None, description="workload rtp: the stream's record (mpvlab/runner/workloads/rtp.py)")
    clients: dict[str, ClientCounters] | None = Field(
        None, description="workload rtp: per viewer role, its interface's counters over the run (interface, rx_bytes, "
                          "rx_packets)")
    cross_checks: dict[str, CrossCheck] | None = Field(
        None, description="workload rtp: the viewer's interface counters checked against the datagrams its receiver "
                          "read (mpvlab/runner/views.py udp_wire_check)")
    competition: Competition | None = Field(
        None, description="workload rtp beside a bulk cross flow: both flows' rates over the bulk flow's interval "
                          "(null otherwise)")

    @model_validator(mode="after")
    def _workload_parts(self) -> SharedSummary:
        """Each workload's own parts present: a summary is read without knowing which code wrote it."""
        need = workloads.get(self.workload).several_clients_keys
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"workload {self.workload}: missing {', '.join(missing)}")
        return self
