"""The typed result: what `summary.json` holds, as pydantic models.

One model per topology kind (the discriminator is `topology`), built from shared parts defined once:
the player's QoE (`PlayerQoE`, flat in single-client runs, per player in shared-bottleneck runs),
per-path bytes (`PathRecord`), subflows, the HTTP record, the host's CPU steal, MPTCP counters.
Every run validates its summary against this model before writing it, so a summary on disk always
has this shape; `docs/summary.schema.json` is the JSON Schema generated from it
(`python -m mpvlab.results.summary > docs/summary.schema.json`; a test checks that the committed file is
current). Free-form parts (cross-checks, queue views, MIB counters) stay dicts of named records.

Every metric the report aggregates is declared here, once, on the field that holds it: a `MetricDef`
in the field's annotation gives its label, unit, possible range, which direction is better, its
definition and where the convention comes from, the interval and test the report uses, and where the
report shows it (mpvlab/results/metricdef.py). mpvlab/results/metrics.py collects them from the model; a new field
with a MetricDef appears in the report's tables (and in the views it names) with nothing else to edit.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from mpvlab.player.contract import AbrRecord
from mpvlab.topologies import registry as topologies
from mpvlab.workloads import registry as workloads
from mpvlab.results.metricdef import INF, MPVLAB, STUDY_BBRS, STUDY_SABRE, STUDY_WEBRTC, STUDY_WIFI_LTE, MetricDef, View

SCHEMA_VERSION = 1


class Record(BaseModel):
    """Closed: a key the model does not name is an error (the summary and its schema cannot drift)."""

    model_config = ConfigDict(extra="forbid")


class OpenRecord(BaseModel):
    """Named fields plus whatever else the producing component records (kept, not checked)."""

    model_config = ConfigDict(extra="allow")


class CpuUse(Record):
    user_s: float = Field(description="user-mode CPU time of the process, all threads (getrusage RUSAGE_SELF, s)")
    system_s: float = Field(description="kernel-mode CPU time of the process, all threads (getrusage RUSAGE_SELF, s)")
    wall_s: float = Field(
        description="wall-clock time from the process's start to the measurement (CLOCK_MONOTONIC, s)")
    share_of_core: float | None = Field(
        None, description="(user_s + system_s) / wall_s: the process's CPU use as a share of one core (fraction; >1 = "
                          "more than one core)")


# One playout-buffer underflow: [start, end] in seconds on the run's clock.
UnderflowEpisode = tuple[float, float]


# Interval and test of a count or a ratio bounded by 0: skewed, piles up at its bound over few trials
# (mpvlab/results/metrics.py explains the choice).
SKEWED: dict[str, Any] = {"interval": "bootstrap", "test": "mannwhitney"}


class DashView(Record):
    abr: AbrRecord | None = Field(None, description="the ABR as the player ran it: name, parameters, seed (own "
                                                    "client), version of the third-party code it ran in (dash.js) "
                                                    "(mpvlab/player/contract.py)")
    representations: Any = Field(
        None, description="the MPD's representations the player could choose: level, bitrate_bps (and id, width, "
                          "height where the player records them) (mpvlab/player/dash_client.py, mpvlab/player/dashjs_qoe.py)")
    segment_s: float | None = Field(None, description="the media segment duration the MPD declares (s)")
    quality_avg: Annotated[float | None, MetricDef(
        "DASH average quality level", "level (0 = lowest)", 0, INF, "higher",
        "quality level (0 = lowest representation) averaged over downloaded segments", STUDY_BBRS,
        **SKEWED, qoe=True, rank=16,
        views={"summary": View(7, "DASH quality level", only_if_present=True)})] = None
    bitrate_avg_bps: Annotated[float | None, MetricDef(
        "DASH average bitrate", "bit/s", 0, INF, "higher",
        "nominal bitrate of the downloaded segments, averaged", STUDY_BBRS, qoe=True, rank=18)] = None
    bitrate_switches: Annotated[int | None, MetricDef(
        "DASH bitrate switches", "switches", 0, INF, "lower",
        "changes of quality level between consecutive segments", STUDY_BBRS, **SKEWED, qoe=True, rank=19,
        views={"summary": View(9, "DASH switches", only_if_present=True)})] = None
    stall_rate: Annotated[float | None, MetricDef(
        "DASH stall rate", "(playback − video) / video", 0, INF, "lower",
        "the stall ratio under the BBR-S study's name, clamped at 0", STUDY_BBRS,
        **SKEWED, qoe=True, clamp=True, rank=17,
        views={"summary": View(8, "DASH stall rate", only_if_present=True)})] = None
    rebuffer_events: Annotated[int | None, MetricDef(
        "DASH rebuffer events", "events", 0, INF, "lower",
        "playout-buffer underflow episodes (= underflows), under the DASH studies' name", STUDY_BBRS,
        **SKEWED, qoe=True, rank=19.5)] = None
    rebuffer_ratio: Annotated[float | None, MetricDef(
        "DASH rebuffer ratio", "stalled / playback", 0, 1, "lower",
        "time in underflow / total playback time (the share of the session spent stalled; the stall rate "
        "divides the same excess by the video length instead)", STUDY_BBRS, **SKEWED, qoe=True, rank=19.6)] = None
    abr_policy_mismatches: int | None = Field(
        None, description="segments whose requested level differs from the ABR rule's decision (count; 0 by "
                          "construction where the client builds the URL from the decision; mpvlab/player/mpvlab_dash.py "
                          "compares them)")
    segments: int = Field(description="media segments downloaded by the DASH client (count)")


class PlayerQoE(Record):
    """The player's quality of experience (player/README.md defines each counter)."""

    underflows: Annotated[int | None, MetricDef(
        "buffer underflows", "events", 0, INF, "lower",
        "playout-buffer underflow episodes at the client: the decoder's input queue ran empty while playing "
        "(episodes closer than the player's merge window count once)", STUDY_WIFI_LTE, **SKEWED, qoe=True, rank=1,
        views={"configs": View(1, "underflows"), "summary": View(1, "underflows"), "runs": View(1, "underflows"),
               "bars": View(1, "Buffer underflows", "underflow events per run")})] = Field(
        None, description="playout-buffer underflow episodes")
    underflow_total_s: Annotated[float | None, MetricDef(
        "time in underflow", "s", 0, INF, "lower", "sum of the underflow episodes' durations", MPVLAB,
        **SKEWED, qoe=True, rank=2,
        views={"configs": View(2, "underflow time"), "summary": View(5, "underflow time (s)")})] = Field(
        None, description="total time the buffer was empty after startup (s)")
    picture_discards: Annotated[int | None, MetricDef(
        "picture discards", "frames", 0, INF, "lower",
        "frames the sink discarded as too late (QoS), i.e. not shown", STUDY_WIFI_LTE, **SKEWED, qoe=True, rank=3,
        views={"configs": View(3, "picture discards"), "summary": View(2, "picture discards"),
               "runs": View(2, "discards")})] = Field(
        None, description="frames the decoder/sink discarded")
    # The bar figures draw the two causes apart: a discard with data buffered is the client's CPU being
    # late and is never plotted as the network's outcome.
    picture_discards_network: Annotated[int | None, MetricDef(
        "picture discards during underflow (network)", "frames", 0, INF, "lower",
        "discards while an underflow episode was open: picture_discards − picture_discards_no_underflow "
        "(the discards the network's late data explains)", STUDY_WIFI_LTE, **SKEWED, qoe=True, rank=3.5,
        views={"bars": View(2, "Picture discards during underflow (network)", "discarded frames per run")})] = Field(
        None, description="picture_discards − picture_discards_no_underflow: discards while an underflow episode was "
                          "open (frames); null when the player cannot tell them apart")
    picture_discards_no_underflow: Annotated[int | None, MetricDef(
        "picture discards with data buffered (CPU-late)", "frames", 0, INF, "lower",
        "discards while no underflow episode was open: late for the CPU, not the network "
        "(read beside host CPU steal)", MPVLAB, **SKEWED, rank=4,
        views={"runs": View(3, "of which CPU-late"),
               "bars": View(3, "Picture discards with data buffered (CPU-late, not the network)",
                            "CPU-late discarded frames per run")})] = Field(
        None, description="discards while the playout buffer had data: the CPU, not the network, was late")
    frames_rendered_late: int | None = Field(
        None, description="frames the sink rendered although late (GStreamer basesink's emergency renders; count; null"
                          " for players that cannot see it, e.g. dash.js) (mpvlab/player/mpvlab_player.py)")
    frames_accounted: bool | None = Field(None, description="rendered + discarded = expected")
    underflow_episodes: list[UnderflowEpisode] | None = Field(
        None, description="each playout-buffer underflow as [start, end] on the run's clock (s) (player)")
    frames_expected: Annotated[int | None, MetricDef(
        "frames expected", "frames", 0, INF, "none", "frames in the video (from the container)", MPVLAB,
        **SKEWED, rank=7)] = None
    frames_rendered: Annotated[int | None, MetricDef(
        "frames rendered", "frames", 0, INF, "higher", "frames the sink showed", MPVLAB, **SKEWED, rank=6,
        views={"configs": View(7, "frames rendered")})] = None
    startup_delay_s: Annotated[float | None, MetricDef(
        "startup delay", "s", 0, INF, "lower", "time from the player's start to its first rendered frame", MPVLAB,
        qoe=True, rank=8,
        views={"configs": View(5, "startup delay"), "summary": View(4, "startup delay (s)"),
               "runs": View(5, "startup (s)")})] = Field(
        None, description="from the first request to the first frame shown (s)")
    stall_ratio: Annotated[float | None, MetricDef(
        "stall ratio", "(playback − video) / video", 0, INF, "lower",
        "(total playback time − video length) / video length, clamped at 0 (a playback a few ms shorter "
        "than the video is timing noise, not negative stalling)", STUDY_BBRS, **SKEWED, qoe=True, clamp=True, rank=9,
        views={"configs": View(6, "stall ratio"), "summary": View(6, "stall ratio")})] = Field(
        None, description="underflow time / video length")
    dash: DashView | None = Field(
        None, description="the DASH client's record (ABR, representations, per-segment QoE); null when the player did "
                          "not run DASH")


class Subflow(Record):
    local: str = Field(
        description="the subflow's local address:port at the server (ss on the server, filtered on the server's port; "
                    "mpvlab/runner/sampling.py)")
    peer: str = Field(description="the subflow's peer address:port: the client's side (ss on the server)")
    cc: str | None = Field(
        description="the congestion control ss reported on the subflow's socket at the server; null when ss showed "
                    "none")


class RttPhase(Record):
    """One configured-RTT level of a path: how long it lasted and the srtt its subflows showed
    (mpvlab/results/delayphases.py DEFINITION)."""

    configured_rtt_ms: float = Field(description="down + up delay of the path's schedules at this level (ms)")
    seconds: float = Field(description="time at this level within [0, last subflow sample) (s)")
    intervals: int = Field(description="separate stretches at this level (count)")
    samples: int = Field(description="srtt samples used: those from 0.5 s after each stretch began (count)")
    srtt_min_ms: float | None = Field(description="smallest srtt sampled at this level (ms): the nearest to the bare path")
    srtt_p50_ms: float | None = Field(description="median srtt at this level (ms), bottleneck queue included")
    srtt_p90_ms: float | None = Field(description="90th percentile srtt at this level (ms), bottleneck queue included")


class PathRecord(OpenRecord):
    """Bytes a path carried to the client during the run (its client interface's counters). Its metrics
    are reported per path (summary.json paths.<name>.<field>; labels prefixed with the path's name)."""

    interface: str = Field(
        description="the client's network interface of this path (its counters give rx_bytes, rx_packets)")
    rx_bytes: Annotated[int, MetricDef(
        "bytes received", "B", 0, INF, "none", "bytes received on the path's client interface during playback",
        MPVLAB, rank=1)]
    rx_packets: int = Field(
        description="packets received on the path's client interface during playback (interface counters; count)")
    share: Annotated[float, MetricDef(
        "share of bytes", "fraction", 0, 1, "none", "the path's bytes / all paths' bytes", STUDY_WIFI_LTE,
        **SKEWED, rank=2,
        views={"configs": View(8, "{path} share"), "summary": View(10, "{path} share"),
               "runs": View(6, "{path} share")})]
    mean_throughput_bps: Annotated[int | None, MetricDef(
        "mean throughput", "bit/s", 0, INF, "none", "the path's bytes × 8 / playback time", STUDY_WIFI_LTE,
        rank=3, views={"summary": View(11, "{path} Mbit/s", per=1e6)})]
    payload_bytes_handed: Annotated[int | None, MetricDef(
        "payload handed by the scheduler", "B", 0, INF, "none",
        "bytes the MPTCP scheduler assigned to the path's subflow (BPF trace)", MPVLAB, rank=4)] = None
    quiet_intervals_s: list[list[float]] | None = Field(
        None, description="[last byte before, first byte after] (run clock, s) of every stretch ≥ 0.5 s in which "
                          "the client received nothing on this path, up to the last byte on any path")
    outages_configured_s: list[list[float]] | None = Field(None, description="the scenario's outages of this path (s)")
    rtt_by_phase: list[RttPhase] | None = Field(
        None, description="the RTT the path had per level of its delay schedules (mpvlab/results/delayphases.py): "
                          "one record per configured RTT, lowest first; null where no subflow was sampled")


class Steal(Record):
    fraction: Annotated[float, MetricDef(
        "host CPU steal during playback", "fraction of all CPUs' time", 0, 1, "lower",
        "CPU time the hypervisor took from this VM during playback / (CPUs × playback)", MPVLAB, **SKEWED, rank=5,
        views={"runs": View(7, "host steal")})]
    window_s: float = Field(description="the time the steal was measured over: playback (s)")
    per_cpu_s: list[float] = Field(
        description="steal time per CPU over the window (the 8th field of each cpuN line of /proc/stat; "
                    "mpvlab/core/hoststeal.py; s)")


class Mptcp(Record):
    reinjected_segments: int = Field(
        description="the MIB's MPTcpExtMPTCPRetrans over the run: skbs the MPTCP layer re-sent on another subflow, "
                    "each possibly many segments long (count)")
    reinjected_bytes: int = Field(
        0, description="the msk's bytes_retrans: payload bytes MPTCP re-sent (B; 0 without a trace)")
    sent_bytes: int = Field(
        0, description="the msk's bytes_sent: new payload bytes, header and body (B; 0 without a trace)")
    duplicate_data_segments_received: int = Field(
        description="the MIB's MPTcpExtDuplicateData over the run: data segments the receiver got twice at the MPTCP "
                    "level (count)")
    mib: dict[str, dict[str, int]] = Field(
        description="MPTcpExt MIB counters that moved over the run, per side: {server|client: {counter: delta}}, "
                    "non-zero only (mpvlab/runner/steps.py)")


class HttpRecord(OpenRecord):
    protocol: str = Field(
        description="the scenario's http.protocol: the HTTP version the server offered the player "
                    "(mpvlab/runner/workloads/video.py)")
    tls: bool = Field(description="whether the scenario's http section configures TLS")
    port: int = Field(description="the scenario's http.port: the server's TCP port")


class CrossCheck(OpenRecord):
    ok: bool = Field(
        description="whether the cross-check held (a failed check also adds a warning `cross-check <name> failed`)")


class BulkRecord(Record):
    size_bytes: int | None = Field(
        description="the scenario's workload.size: bytes to transfer (B); null when the bulk run is by duration")
    duration_configured_s: float | None = Field(
        description="the scenario's workload.duration (s); null when the bulk run is by size")
    bytes_sent: int = Field(
        description="bytes the sender's socket wrote (B; the run fails if it differs from bytes_received)")
    bytes_received: int = Field(description="bytes the receiver read (B)")
    connect_s: float = Field(description="the receiver's connect() on the run's clock (CLOCK_MONOTONIC, s since t0)")
    first_byte_s: float | None = Field(
        description="the receiver's first byte on the run's clock (s since t0); null if none arrived")
    last_byte_s: float = Field(
        description="the receiver's last byte on the run's clock (s since t0; connect_s if no byte arrived)")
    transfer_s: float = Field(
        description="from the receiver's connect() to its last byte (s; what simult_flows.sh times)")
    goodput_bps: int | None = Field(description="bytes_received × 8 / transfer_s (bit/s); null when transfer_s is 0")
    cc_seen: str = Field(
        description="the congestion control the sender's socket reported (must be the scenario's cc, else the run "
                    "fails)")
    definition: str = Field(description="how transfer_s is measured, in words")


class RtpDecodeRecord(Record):
    """The viewer's decoder (rtp/cmd/mpvlab-rtp/playout.go): decoded + decode_error + undecodable = on time."""

    frames_decoded: int = Field(description="on-time frames the viewer's decoder decoded (count)")
    frames_decode_error: int = Field(description="on-time frames the decoder returned an error for (count)")
    frames_undecodable: int = Field(
         description="on-time frames depending on a frame that was not played (late or lost), up to the next keyframe:"
                     " never fed to the decoder (count; rtp/cmd/mpvlab-rtp/playout.go)")
    decoder: dict[str, Any] | None = Field(description="the viewer's decoder and its parameters; null when none ran")
    decoder_failure: str = Field(description="why the decoder failed, in words; empty when it did not")
    definition: str = Field(description="how the decode counts are defined, in words")


class RtpFreezeRecord(Record):
    """Freezes at the viewer (mpvlab/runner/workloads/rtp_freezes.py): W3C webrtc-stats' rule."""

    count: int = Field(description="freezes by W3C webrtc-stats' rule (count; the rule is in `definition`)")
    total_s: float = Field(description="sum of the freezes' durations (s)")
    longest_s: float = Field(description="the longest freeze (s; 0 without freezes)")
    tail_without_render_s: float | None = Field(
        description="from the last rendered frame to the stream's end (s), not counted as a freeze; null without an "
                    "end time or rendered frames")
    definition: str = Field(description="the freeze rule, in words (rtp_freezes.py)")


class RtpFpsRecord(Record):
    """Frames rendered (on time and decoded) per whole second of capture time."""

    mean: float | None = Field(description="mean of per_second (frames/s); null without whole seconds")
    per_second: list[int] = Field(description="frames rendered in each whole second of capture time (frames)")


class RtpRecord(OpenRecord):
    """workload rtp (mpvlab/runner/workloads/rtp.py): frames captured = on time + late + lost at the viewer."""

    controller: str = Field(description="the scenario's workload.controller: the rate controller the sender ran")
    bbr_variant: dict[str, Any] | None = Field(
        None, description="webrtc-bbr: the study's variant (the scenario's workload.bbr); null = WebRTC's own")
    frames_captured: int = Field(description="frames the sender's encoder produced (count) = on_time + late + lost")
    frames_on_time: int = Field(description="frames complete at the viewer within the playout deadline (count)")
    frames_late: int = Field(description="frames complete at the viewer after the playout deadline (count)")
    frames_lost: int = Field(description="frames never complete at the viewer (count)")
    playout_deadline_ms: float = Field(
        description="the viewer's configured playout deadline after capture time (ms; rtp/cmd/mpvlab-rtp/recv.go)")
    latency_ms: dict[str, Any] = Field(
         description="from capture (encoder input, CLOCK_MONOTONIC) to the arrival of the frame's last missing packet:"
                     " p50, p95, p99, max (ms) and its definition (rtp/cmd/mpvlab-rtp/recv.go)")
    decode: RtpDecodeRecord = Field(description="the viewer's decoder counts")
    freezes: RtpFreezeRecord = Field(description="freezes at the viewer (W3C webrtc-stats' rule)")
    rendered_fps: RtpFpsRecord = Field(
        description="frames rendered (on time and decoded) per whole second of capture time")
    packets_sent: int = Field(description="video RTP packets the sender sent (count; padding apart)")
    packets_received: int = Field(
        description="video RTP packets the viewer received (count); received + lost = sent, else the run fails")
    packets_lost: int = Field(description="video RTP packets the viewer never received (count)")
    rtp_bytes_sent: int = Field(description="video RTP bytes the sender sent (B; padding apart)")
    rtp_bytes_received: int = Field(description="video RTP bytes the viewer received (B)")
    # padding-only packets (webrtc-bbr while BBR probes, rtp/README.md), not in the video's counts above;
    # padding_share = padding bytes / (padding + video RTP bytes) sent
    padding: bool = Field(
        False, description="whether the sender sent padding-only packets (webrtc-bbr while BBR probes, rtp/README.md)")
    padding_packets: int = Field(0, description="padding-only packets the sender sent (count)")
    padding_bytes: int = Field(0, description="padding-only bytes the sender sent (B)")
    padding_packets_received: int = Field(0, description="padding-only packets the viewer received (count)")
    padding_bytes_received: int = Field(0, description="padding-only bytes the viewer received (B)")
    padding_packets_lost: int = Field(0, description="padding-only packets the viewer never received (count)")
    padding_share: float | None = Field(
        None, description="padding bytes / (padding + video RTP bytes) sent (fraction); null when nothing was sent")
    feedback: dict[str, Any] = Field(
         description="the sender's ledger of transport-wide CC feedback: transport sequence numbers sent, reported, "
                     "reported received/lost, without feedback; feedback packets, RTCP datagrams and bytes "
                     "(rtp/cmd/mpvlab-rtp/feedback.go); the viewer's feedback interval (interval_ms) and the own "
                     "sending target it follows (interval_own_target_bps; rtp/cmd/mpvlab-rtp/twcc_interval.go)")
    target_bps: dict[str, Any] = Field(
        description="the controller's target bitrate: initial (scenario), final, updates, steady_mean (time-weighted "
                    "over the time the encoder ran within steady_window_s, the stream's second half, bit/s), "
                    "steady_window_s ([from, to) run seconds), steady_paused_s (encoder paused in it, s) and its "
                    "definition")
    encoder_per_second: list[dict[str, Any]] = Field(
        description="per 1 s window of capture time (sender/encoder.csv): t_s, frames, achieved_bps, "
                    "achieved_wire_bps, target_bps, encoder_set_bps")
    received_per_second: list[dict[str, Any]] = Field(
        description="per second at the viewer (receiver/rate.csv): second, received_bps, padding_bps")
    checks: dict[str, Any] | None = Field(
        None, description="the rtp cross-checks (mpvlab/runner/workloads/rtp_checks.py, rtp/README.md): per check "
                          "ok, the figure, the evidence, the tolerance and the numbers; a failed one is also a "
                          "`cross-check rtp_<name> failed` warning")


class FlowStateRecord(Record):
    """One flow of the CC's state file: identity (`flow` = server-side 4-tuple, MPTCP token when `ss`
    showed one), role (mpvlab/results/flows.py), its rows in the window and its own means."""

    flow: str = Field(description="the flow's server-side 4-tuple as the CC's state file names it")
    role: Literal["workload", "probe", "check", "cross", "other"] = Field(
        description="what the flow is in the run (mpvlab/results/flows.py)")
    mptcp_token: str | None = Field(description="the MPTCP connection token ss showed for the flow; null when none")
    rows: int = Field(description="the flow's rows in the window (count)")
    first_t_s: float = Field(description="the flow's first row in the window (run time, s)")
    last_t_s: float = Field(description="the flow's last row in the window (run time, s)")
    bw_est_bps_mean_per_sample: float | None = Field(
        description="plain mean of the flow's bandwidth estimate over its rows (bit/s)")
    bw_est_bps_mean_time_weighted: float | None = Field(
        description="the flow's bandwidth estimate averaged over time, each row held to the next (bit/s)")
    min_rtt_ms_min: float | None = Field(description="the smallest min_rtt the CC recorded for the flow (ms)")
    carried: Literal["media", "page", "idle", "data"] | None = Field(
        description="what a workload-port flow carried: media (its connection made the workload's requests, Apache's "
                    "access log), page (only the dash.js page's requests), idle (no request; without HTTP: no data "
                    "acked), data (a workload without HTTP, data acked); null for other roles")
    bytes_acked: int | None = Field(
        description="the flow's acknowledged bytes at its last ss sample (B; ss bytes_acked less the SYN); null for "
                    "other roles")
    http_requests: int | None = Field(
        description="requests its connection made (Apache's access log; an MPTCP subflow: its connection's); null "
                    "without a log entry")
    http_bytes: int | None = Field(
        description="response body bytes of those requests (Apache's %B, B); null without a log entry")
    in_shares: bool = Field(description="whether the flow's rows are in the view's headline figures (mode shares, means)")
    mode_share_active_time_weighted: dict[str, float] = Field(
        description="the flow's own share of time per mode over the view's window_s (fraction)")
    mode_share_whole_run_time_weighted: dict[str, float] = Field(
        description="the flow's own share of time per mode over all its rows, the whole run (fraction)")


class CCStateView(Record):
    """The CC's model (mpvlab/cc/registry.py `state`) over the flows that carried the workload only, rows with
    run time in `window_s` (the active window). `_per_sample`: plain mean over the loader's rows; `_time_weighted`: each row
    held until its flow's next row; `_per_update`: over the distinct records the CC wrote on ACKs."""

    source: str = Field(description="the state file, relative to the run directory")
    window_s: tuple[float, float] = Field(
        description="[start, end] on the run's clock (s) of the window `window` names: the rows the means use")
    flows_by_role: dict[str, int] = Field(description="flows in the file per role (all rows, any time)")
    workload_rows: int = Field(description="rows of the workload's flows inside window_s (count)")
    bw_est_bps_mean_per_sample: float | None = Field(description="plain mean over the workload flows' rows")
    bw_est_bps_mean_time_weighted: float | None = Field(description="mean over time (rows held to the next row)")
    bw_est_bps_mean_per_update: float | None = Field(description="mean over the CC's distinct records (per-ACK view)")
    min_rtt_ms_mean_time_weighted: float | None = Field(
        description="the CC's min_rtt averaged over time, rows held to the next row (ms)")
    min_rtt_ms_min: float | None = Field(description="the smallest min_rtt over the workload flows' rows (ms)")
    mode_share_time_weighted: dict[str, float] = Field(
        description="share of time per mode (PROBE_BW:<phase>) over the flows that carried the workload "
                    "(flows_in_shares), rows in window_s (fraction)")
    mode_share_per_sample: dict[str, float] = Field(description="share of rows per mode, same flows and window")
    window: Literal["active", "playback"] = Field(
        description="which window window_s is: active (the carrying flows' first request → last byte) or playback "
                    "(run time 0 → the playback's duration, when no flow carried data)")
    window_definition: str = Field(description="how window_s is found, in words")
    carried_evidence: str = Field(description="where each flow's `carried` comes from")
    flows_in_shares: list[str] = Field(description="the flows whose rows make the headline figures")
    mode_share_time_weighted_all_workload_flows: dict[str, float] = Field(
        description="share of time per mode over every workload-port flow (idle ones included) in playback_window_s: "
                    "the figure before flows were told apart, for comparison (fraction)")
    playback_window_s: tuple[float, float] = Field(
        description="[0, playback's duration] on the run's clock (s): the window of the all-flows figure")
    flows: list[FlowStateRecord] = Field(description="each flow in the state file, with its role and own means")
    definition: str = Field(description="how the means are computed, in words")


class EcnMarks(Record):
    """One link direction's ECN marker (mpvlab/links/ecn.py) over the workload: packets that reached its
    tbf's device from the start to the end of the workload (snapshots of the marker's map)."""

    threshold_bytes: int = Field(description="K: CE on ECT packets while the virtual queue holds more")
    rate_bit: int = Field(description="the drain rate of the virtual queue: the tbf's rate")
    limit_bytes: int = Field(description="the tbf's limit, whose tail drop the virtual queue mirrors")
    pkts: int = Field(
        description="packets that reached the tbf's device during the workload (count; ect + not_ect + ce_in + non_ip)")
    bytes: int = Field(description="bytes of those packets (B)")
    ect: int = Field(description="ECT(0)/ECT(1) packets on arrival")
    not_ect: int = Field(description="IP packets without ECN capability: never marked")
    ce_in: int = Field(description="packets already CE on arrival (not re-marked)")
    non_ip: int = Field(description="non-IP packets on the device (count; never marked)")
    marked: int = Field(description="ECT packets the link's virtual-queue marker set to CE during the workload")
    mark_failed: int = Field(description="ECT packets the kernel helper refused to mark (expected 0)")
    over_threshold: int = Field(description="arrivals that found the virtual queue above K (marked or not)")
    over_limit: int = Field(description="arrivals the tbf's limit tail-drops (left out of the virtual queue too)")
    marked_fraction_of_ect: float | None = Field(description="marked / ect (fraction); null when no ECT packet arrived")


class FidelityRow(Record):
    """Configured vs achieved for one path direction over the whole run (mpvlab/runner/fidelity.py)."""

    link: str = Field(description="the path direction: `<path>-<down|up>`")
    configured_rate_bps: int | None = Field(
        description="the scenario's rate for this direction (bit/s); null when unshaped")
    achieved_rate_bps: int | None = Field(
        description="the tbf's dequeue rate while it had a backlog (bit/s, mpvlab/runner/fidelity.py)")
    rate_ratio: float | None = Field(
        description="achieved_rate_bps / configured_rate_bps; null without a backlog to measure")
    backlogged_s: float | None = Field(
        description="time the tbf had a backlog, over which achieved_rate_bps is measured (s)")
    precheck_rate_ratio: float | None = Field(
        description="the pre-run probe's achieved / configured rate (down direction only; null otherwise or when the "
                    "probe was off)")
    precheck_rtt_error_ms_p99: float | None = Field(
        description="the pre-run probe's 99th percentile of kernel-stamped RTT − expected RTT (ms, signed; "
                    "mpvlab/runner/precheck.py; down direction only, null otherwise or when the probe was off)")
    lateness_ms_p99: float | None = Field(
        description="the delay line's 99th percentile of actual − scheduled release, over every packet, the "
                    "schedule counted from when the line read the packet (ms)")
    lateness_ms_max: float | None = Field(
        description="the delay line's largest actual − scheduled release, the schedule counted from when the line "
                    "read the packet (ms)")
    lateness_from_arrival_ms_max: float | None = Field(
        None, description="the delay line's largest actual − scheduled release with the schedule counted from the "
                          "kernel's arrival stamp of the packet (NFQA_TIMESTAMP): lateness_ms_max plus the time the "
                          "packet waited in the line's socket, so a stopped or starved line shows here (ms; null when "
                          "the packets carried no stamp)")


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
    fidelity_checks: dict[str, dict[str, Any]] | None = Field(
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


class EmulatedSummary(RunHead, PlayerQoE):
    """dual-path and dumbbell runs (mpvlab/runner/emulated.py), workload video (the player's QoE, flat) or bulk."""

    topology: Literal[_kinds("EmulatedSummary")] = Field(description="the scenario's topology.kind")  # type: ignore[valid-type]
    workload: Literal[_workloads("EmulatedSummary")] = Field(  # type: ignore[valid-type]
        description="the scenario's workload.kind: which of video, bulk, rtp ran (and so which records below are "
                    "present)")
    scheduler: str = Field(description="the scenario's transport.scheduler: the MPTCP packet scheduler the server ran")
    duration_s: DurationS
    bytes_total: BytesTotal
    paths: dict[str, PathRecord] = Field(
        description="per path name: the bytes it carried to the client during playback (its client interface's "
                    "counters)")
    subflows: list[Subflow] = Field(
        description="every (local, peer) pair ss showed on the server's port during the run, with its cc "
                    "(mpvlab/runner/sampling.py); the run fails if one ran another cc than the scenario's")
    path_switches: PathSwitches
    steering: dict[str, Any] | None = Field(
        description="a steered scheduler's conformance and steering latency (policy, conformance, steering_latency_ms,"
                    " set_flags, priority_changes, lost_events; mpvlab/runner/views.py, schedulers/README.md); null for "
                    "the kernel's own scheduler")
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
    wire_switches: dict[str, Any] | None = Field(
        None, description="per connection and in total: wire_switches, dsn_order_switches, new/retransmitted "
                          "segments, the decision count beside them, definitions, per subflow its peer, path and "
                          "seq_data_bytes (data bytes in its sequence space, each once); or {not_collected: why}")
    capture: dict[str, Any] | None = Field(
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
    # workload video (and PlayerQoE's fields)
    video_length_s: float | None = Field(
        None, description="workload video: the video's duration (the scenario's video, s)")
    player_mode: str | None = Field(None, description="workload video: the scenario's player.mode")
    player_cpu: CpuUse | None = Field(
        None, description="workload video: the player process's CPU use (mpvlab/player/mpvlab_player.py, getrusage)")
    http: HttpRecord | None = Field(None, description="workload video: the HTTP connection the player used")
    # workload bulk
    bulk: BulkRecord | None = Field(
        None, description="workload bulk: the transfer's bytes and times (mpvlab/runner/workloads/bulk.py)")
    # workload rtp
    rtp: RtpRecord | None = Field(None, description="workload rtp: the stream's record (mpvlab/runner/workloads/rtp.py)")


class PhysicalSummary(RunHead, PlayerQoE):
    """Runs on real hosts (mpvlab/runner/physical/)."""

    topology: Literal[_kinds("PhysicalSummary")] = Field(description="always physical: a run on real hosts")  # type: ignore[valid-type]
    workload: Literal[_workloads("PhysicalSummary")] = Field(workloads.VIDEO.name, description="always video on real hosts")  # type: ignore[valid-type]
    scheduler: str = Field(description="the scenario's transport.scheduler")
    video_length_s: float = Field(description="the video's duration (the scenario's video, s)")
    duration_s: DurationS
    bytes_total: BytesTotal
    paths: dict[str, PathRecord] = Field(
        description="per path name: the bytes it carried to the client during playback (its client interface's "
                    "counters)")
    subflows: list[Subflow] = Field(description="the MPTCP subflows seen during the run, with their cc")
    player_mode: str = Field(description="the scenario's player.mode")
    player_cpu: CpuUse | None = Field(None, description="the player process's CPU use (getrusage)")
    path_switches: None = Field(
        None, description="always null on real hosts: the scheduler trace is not collected there (see not_collected)")
    not_collected: dict[str, str] = Field(
        description="what a physical run does not collect, each with why (mpvlab/runner/physical/backend.py)")


class SharedPlayer(PlayerQoE):
    playback_s: float | None = Field(
        None, description="from the player's first rendered frame to its end of stream (s; mpvlab/player/mpvlab_player.py)")
    bytes_received: int | None = Field(None, description="bytes the player downloaded (B, the player's own count)")
    download_complete: bool | None = Field(
        None, description="whether the player's source reached end of stream (the whole video arrived)")
    cpu: CpuUse | None = Field(None, description="the player process's CPU use (getrusage)")
    interface_rx_bytes: int = Field(
        description="bytes received on the player's leaf interface over the run (interface counters, B)")
    mean_throughput_bps: int | None = Field(description="bytes_received × 8 / playback_s (bit/s); null without either")


def _mean_over_players(what: str, unit: str, hi: float, better: str, rank: float,
                       skewed: bool = True) -> MetricDef:
    return MetricDef(
        f"{what} (mean over players)", unit, 0, hi, better,  # type: ignore[arg-type]
        f"each player's {what} (its `dash` record), averaged over the run's players", STUDY_SABRE,
        **(SKEWED if skewed else {}), qoe=True, rank=rank)


# The field types below, named (a call inside a class annotation reads as a forward reference to
# linters and to anyone skimming).
_QualityMean = Annotated[float | None,
                         _mean_over_players("DASH average quality level", "level (0 = lowest)", INF, "higher", 16.1)]
_BitrateMean = Annotated[float | None,
                         _mean_over_players("DASH average bitrate", "bit/s", INF, "higher", 18.1, skewed=False)]
_SwitchesMean = Annotated[float | None, _mean_over_players("DASH bitrate switches", "switches", INF, "lower", 19.1)]
_StallRateMean = Annotated[float | None,
                           _mean_over_players("DASH stall rate", "(playback − video) / video", INF, "lower", 17.1)]
_RebufferMean = Annotated[float | None,
                          _mean_over_players("DASH rebuffer ratio", "stalled / playback", 1, "lower", 19.7)]


def _across_players(label: str, unit: str, hi: float, better: str, definition: str, rank: float,
                    skewed: bool = True) -> MetricDef:
    """A metric of how the players of one run differ (null with fewer than two DASH players: one
    player's fairness is trivially 1 and its min = max = mean)."""
    return MetricDef(
        label, unit, 0, hi, better, definition, STUDY_SABRE,  # type: ignore[arg-type]
        **(SKEWED if skewed else {}), qoe=True, rank=rank)


_BitrateJain = Annotated[float | None, _across_players(
    "DASH bitrate fairness between players (Jain)", "index (1 = equal)", 1, "higher",
    "Jain's fairness index of the players' DASH average bitrates, (Σx)² / (N·Σx²): 1 when every player got "
    "the same average bitrate, 1/N when one got everything (Jain, Chiu, Hawe, DEC-TR-301, 1984)", 18.2)]
_BitrateMin = Annotated[float | None, _across_players(
    "DASH average bitrate, lowest player", "bit/s", INF, "higher",
    "the smallest of the players' DASH average bitrates", 18.3, skewed=False)]
_BitrateMax = Annotated[float | None, _across_players(
    "DASH average bitrate, highest player", "bit/s", INF, "none",
    "the largest of the players' DASH average bitrates", 18.4, skewed=False)]
_StallRateMax = Annotated[float | None, _across_players(
    "DASH stall rate, worst player", "(playback − video) / video", INF, "lower",
    "the largest of the players' DASH stall rates", 17.2)]


class SharedAggregate(OpenRecord):
    """The players of a shared-bottleneck run together (mpvlab/runner/shared.py); the DASH means are the
    study's per-run QoE when every player runs DASH, null otherwise."""

    players: int = Field(description="the run's players (count)")
    quality_avg_mean: _QualityMean = None
    bitrate_avg_bps_mean: _BitrateMean = None
    bitrate_switches_mean: _SwitchesMean = None
    stall_rate_mean: _StallRateMean = None
    rebuffer_ratio_mean: _RebufferMean = None
    # between the players, when at least two ran DASH (mpvlab/runner/shared.py)
    bitrate_fairness_jain: _BitrateJain = None
    bitrate_avg_bps_min: _BitrateMin = None
    bitrate_avg_bps_max: _BitrateMax = None
    stall_rate_max: _StallRateMax = None


def _voip_delay(q: str, rank: float) -> MetricDef:
    return MetricDef(
        f"VoIP probe queuing delay, {q}", "ms", 0, INF, "lower",
        f"the {q} of the probe's one-way queuing delay (receiver's kernel rx stamp − sender's stamp, less the "
        "run's smallest difference: mpvlab/topologies/voip_probe.py)", STUDY_SABRE, qoe=True, rank=rank)


_VoipP50 = Annotated[float | None, _voip_delay("median", 20.1)]
_VoipP95 = Annotated[float | None, _voip_delay("95th percentile", 20.2)]
_VoipP99 = Annotated[float | None, _voip_delay("99th percentile", 20.3)]


class VoipQueuingDelay(OpenRecord):
    p50: _VoipP50 = None
    p95: _VoipP95 = None
    p99: _VoipP99 = None


class VoipWindow(Record):
    """The probe's queuing delay over one named window (mpvlab/results/delaywindows.py), in ms."""
    start_s: float | None = Field(None, description="window start, seconds since t0 (by packet send time)")
    end_s: float | None = Field(None, description="window end, seconds since t0 (by packet send time)")
    definition: str = Field(description="which probe packets the window holds, in words")
    packets: int = Field(description="probe packets in the window (count)")
    p50: float | None = Field(
        None, description="median of the window's queuing delays (ms, nearest rank); null without packets")
    p95: float | None = Field(
        None, description="95th percentile of the window's queuing delays (ms, nearest rank); null without packets")
    p99: float | None = Field(
        None, description="99th percentile of the window's queuing delays (ms, nearest rank); null without packets")
    max: float | None = Field(None, description="largest queuing delay in the window (ms); null without packets")
    share_above_ms: dict[Literal["50", "100", "200", "400", "500"], float | None] = Field(
        description="share of the window's packets whose delay is strictly above each threshold (ms)")


def _voip_steady(q: str, rank: float) -> MetricDef:
    return MetricDef(
        f"VoIP probe queuing delay, steady state, {q}", "ms", 0, INF, "lower",
        f"the {q} of the probe's queuing delay over the steady state: from when every player's playout buffer "
        "first held the buffer less one segment until the last media download completed (mpvlab/results/delaywindows.py)",
        STUDY_SABRE, qoe=True, rank=rank)


_SteadyP50 = Annotated[float | None, _voip_steady("median", 20.4)]
_SteadyP95 = Annotated[float | None, _voip_steady("95th percentile", 20.5)]
_SteadyP99 = Annotated[float | None, _voip_steady("99th percentile", 20.6)]
_SteadyMax = Annotated[float | None, _voip_steady("maximum", 20.7)]


class VoipSteadyWindow(VoipWindow):
    p50: _SteadyP50 = None
    p95: _SteadyP95 = None
    p99: _SteadyP99 = None
    max: _SteadyMax = None


class VoipWindows(Record):
    """The probe's delays over named windows: the whole run, the steady state, and SABRE's modes within it."""
    t0_ns: int = Field(description="run time zero (CLOCK_MONOTONIC ns): the windows' seconds count from it, and "
                                   "the probe CSV's t_send_ns is on the same clock")
    whole_run: VoipWindow = Field(description="every probe packet received")
    steady_state: VoipSteadyWindow | None = Field(
        None, description="from when every player's playout buffer first held the buffer less one segment until the "
                          "last media download completed")
    steady_state_missing: str | None = Field(None, description="why there is no steady-state window")
    sabre_initial: VoipWindow | None = Field(
        None, description="steady-state packets sent while every SABRE player was in mode initial; null without SABRE "
                          "players or such packets")
    sabre_refill: VoipWindow | None = Field(
        None, description="steady-state packets sent while every SABRE player was in mode refill; null without SABRE "
                          "players or such packets")
    sabre_backoff: VoipWindow | None = Field(
        None, description="steady-state packets sent while every SABRE player was in mode backoff; null without SABRE "
                          "players or such packets")
    sabre_mixed: VoipWindow | None = Field(
        None, description="steady-state packets sent while SABRE players were in different modes; null without SABRE "
                          "players or such packets")


class VoipRecord(OpenRecord):
    queuing_delay_ms: VoipQueuingDelay | None = Field(
        None, description="the probe's one-way queuing delay over the whole run: percentiles (ms; "
                          "mpvlab/topologies/voip_probe.py)")
    windows: VoipWindows | None = Field(
        None, description="the probe's delays over named windows (mpvlab/results/delaywindows.py)")


class CrossTraffic(OpenRecord):
    """What the cross-traffic sources recorded (bulk, voip; topologies/); the probe's delay percentiles typed."""

    voip: VoipRecord | None = Field(
        None, description="the VoIP probe's record (mpvlab/topologies/voip_probe.py); null without a voip cross source")


class Competition(OpenRecord):
    """workload rtp against a bulk cross flow (mpvlab/runner/shared.py: competition_view): both flows'
    rates over the bulk flow's interval, beside the link."""

    link_bps: int | None = Field(description="the bottleneck's configured rate (bit/s); null when unshaped")
    rtp_received_bps: Annotated[float | None, MetricDef(
        "RTP received bitrate while competing", "bit/s", 0, INF, "higher",
        "mean of the viewer's 1 s received-bit bins that lie inside the bulk flow's interval", STUDY_WEBRTC,
        qoe=True, rank=21.1)]
    bulk_goodput_bps: Annotated[float | None, MetricDef(
        "bulk cross flow goodput", "bit/s", 0, INF, "none",
        "bytes the cross host's kernel received over the bulk flow's interval", STUDY_WEBRTC, rank=21.2)]
    rtp_share: Annotated[float | None, MetricDef(
        "RTP share while competing", "fraction", 0, 1, "none",
        "RTP received bitrate / (RTP received bitrate + bulk goodput), over the bulk flow's interval",
        STUDY_WEBRTC, rank=21.3)]


class SharedSummary(RunHead):
    """Shared-bottleneck runs (mpvlab/runner/shared.py): N players and cross traffic behind one router,
    or (workload rtp) one viewer: its `rtp` record and the viewer interface's cross-check instead."""

    topology: Literal[_kinds("SharedSummary")] = Field(description="the scenario's topology.kind")  # type: ignore[valid-type]
    workload: Literal[_workloads("SharedSummary")] = Field(  # type: ignore[valid-type]
        workloads.VIDEO.name, description="the scenario's workload.kind: video (N players) or rtp (one viewer)")
    transport: str = Field(
        description="what the players' or viewer's flows ran over, in words (e.g. `mptcp, one subflow per player`)")
    bottleneck: dict[str, Any] = Field(
        description="the shared link over the collectors' window: path, rate_bps, limit_bytes, burst_bytes, window_s, "
                    "per-leaf received bytes, the tbf's counters and queue view (mpvlab/runner/shared.py bottleneck_view)")
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
    video_length_s: float | None = Field(None, description="workload video: the video's duration (s)")
    player_mode: str | None = Field(None, description="workload video: the scenario's player.mode")
    players: dict[str, SharedPlayer] | None = Field(
        None, description="workload video: per player role, its QoE and bytes")
    aggregate: SharedAggregate | None = Field(None, description="workload video: the players together")
    http: HttpRecord | None = Field(None, description="workload video: the HTTP connection the players used")
    # workload rtp: the viewer's interface counters (`clients`) and their check against its socket
    rtp: RtpRecord | None = Field(None, description="workload rtp: the stream's record (mpvlab/runner/workloads/rtp.py)")
    duration_s: float | None = Field(
        None, description="workload rtp: from the viewer's first to its last received packet (s)")
    clients: dict[str, dict[str, Any]] | None = Field(
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


Summary = Annotated[EmulatedSummary | PhysicalSummary | SharedSummary, Field(discriminator="topology")]
SUMMARY = TypeAdapter(Summary)


def validated(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as the model reads it back (raises pydantic.ValidationError naming the field).
    The dict written is the one given: validation checks its shape, it never rewrites values."""
    SUMMARY.validate_python(summary)
    return summary


def json_schema() -> dict[str, Any]:
    schema = SUMMARY.json_schema()
    schema["title"] = "mpvlab summary.json"
    schema["$comment"] = f"generated from mpvlab/results/summary.py (schema version {SCHEMA_VERSION}); do not edit"
    return schema


if __name__ == "__main__":
    json.dump(json_schema(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
