"""summary.json's network parts: per-path bytes (`PathRecord`), subflows, the host's CPU steal,
MPTCP counters, the HTTP record, cross-checks, the CC's state view, ECN marks and the fidelity table."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from mpvlab.results.metricdef import INF, MPVLAB, STUDY_WIFI_LTE, MetricDef, View
from mpvlab.results.summary_parts.base import SKEWED, OpenRecord, Record


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
        0, description="the msk's bytes_retrans: payload bytes the MPTCP retransmit timer re-sent on another "
                       "subflow (B; 0 without a trace). A lower bound of all re-sent bytes: the re-sends after a "
                       "subflow is marked stale or closes are not counted by the kernel")
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
        description="time over which achieved_rate_bps is measured (s): in each stretch of samples that all saw a "
                    "backlog, from its first dequeue to its last, summed (mpvlab/runner/precheck.py backlogged_rate)")
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


class QueueDevice(Record):
    """One shaping qdisc (tbf) on a router, from its counter samples (mpvlab/runner/steps.py queue_view)."""

    samples: int = Field(description="counter samples of the qdisc (count)")
    backlog_bytes_max: int = Field(description="the largest backlog sampled (B)")
    backlog_bytes_mean: int = Field(description="the mean backlog over the samples, rounded (B)")
    drops: int = Field(description="drops between the first and the last sample (count)")


class TbfCounters(Record):
    """The bottleneck tbf's counters (tc -s qdisc), their difference over the collectors' window."""

    bytes: int = Field(description="bytes the tbf sent (B)")
    packets: int = Field(description="packets the tbf sent (count)")
    drops: int = Field(description="packets the tbf dropped (count)")


class BottleneckRecord(Record):
    """The shared link over the collectors' window (mpvlab/runner/shared_summary.py bottleneck_view)."""

    path: str = Field(description="the scenario's one path")
    rate_bps: int | None = Field(description="the path's configured down rate (bit/s); null when unshaped")
    limit_bytes: int = Field(description="the queue's byte bound (paths.<name>.down.buffer): tbf's limit, packets as 1514 B frames (buffer_counting bytes), or N × 1514 B (wire_packets; B)")
    buffer_counting: str = Field("bytes", description="how the queue counts (paths.<name>.down.buffer_counting): bytes or wire_packets (merged_packets is refused on this topology)")
    burst_bytes: int = Field(description="the tbf's burst as applied (the configured one or its default; B)")
    window_s: float = Field(description="the collectors' window: from their start to their stop (s)")
    leaf_rx_bytes: dict[str, int] = Field(
        description="per client role: bytes its interface received over the window (B)")
    leaf_rx_bytes_total: int = Field(description="leaf_rx_bytes summed (B)")
    queue: dict[str, QueueDevice] = Field(description="per tbf device on the router: its backlog and drops")
    tbf: TbfCounters | None = Field(
        None, description="the down tbf's counters over the window; absent when the path is unshaped (no rate)")
    utilisation: float | None = Field(
        None, description="tbf bytes × 8 / (rate_bps × window_s) (fraction); absent when the path is unshaped")
    payload_bytes: int = Field(
        description="payload the bottleneck carried in the window: the workload's (players' HTTP bodies or the "
                    "viewer's UDP payload), the bulk cross flow's bytes received and the VoIP probe's UDP payload (B)")
    payload_ideal_bytes: int | None = Field(
        None, description="rate / 8 × window_s × 1448 / 1514: full TCP frames' payload at the rate (B); absent when "
                          "unshaped")


class ClientCounters(Record):
    """A client's own interface counters over the run (mpvlab/runner/shared_summary.py summarise_udp)."""

    interface: str = Field(description="the client's own interface the workload's packets arrive on")
    rx_bytes: int = Field(description="bytes the interface received (B)")
    rx_packets: int = Field(description="packets the interface received (count)")
