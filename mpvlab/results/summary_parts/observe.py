"""summary.json's records of the run's observers (issue 46): a steered scheduler's conformance and steering
latency (`steering`, from the controller's steer_summary.json), the packet capture (`capture`), the
wire-order path switches counted from the server's capture (`wire_switches`) and kernel BBR's modes over
INET_DIAG (`bbr_diag`). Each closed: its producer writes a fixed set of keys."""

from __future__ import annotations

from pydantic import Field

from mpvlab.results.summary_parts.base import Record

# --- steering (mpvlab/runner/views.py _steering_view over schedulers/steer.c's steer_summary.json) ---


class SteeringConformance(Record):
    """Data assignments of the kernel checked against the policy's allowed set in force at the decision
    that made them, summed over every subflow (schedulers/README.md, conformance)."""

    bytes_conformant: int = Field(description="bytes the kernel assigned to subflows the policy allowed (B)")
    bytes_nonconformant: int = Field(description="bytes the kernel assigned to subflows the policy excluded (B)")
    bytes_unmanaged: int = Field(
        description="bytes assigned before the controller's first decision on their connection (B)")
    by_bytes: float | None = Field(
        description="bytes_conformant / (bytes_conformant + bytes_nonconformant) (fraction); null when both are 0")
    by_decisions: float | None = Field(
        description="share of data-carrying decisions on allowed subflows (fraction); null without such decisions")
    wire_bytes_allowed: int = Field(
        description="data payload bytes that left the sender's interfaces on subflows the policy allowed at that "
                    "instant, retransmissions included (B)")
    wire_bytes_excluded: int = Field(
        description="data payload bytes that left the sender's interfaces on subflows the policy excluded at that "
                    "instant (B)")
    wire_bytes_unmanaged: int = Field(
        description="data payload bytes on the wire before the controller's first decision on their connection (B)")
    on_wire: float | None = Field(
        description="wire_bytes_allowed / (wire_bytes_allowed + wire_bytes_excluded) (fraction); null when both are 0")


class LatencyStats(Record):
    """One steering-latency leg over every subflow newly allowed (steering.csv); the order statistics are
    absent when n is 0."""

    n: int = Field(description="newly allowed subflows the leg was measured for (count)")
    min: float | None = Field(None, description="smallest (ms)")
    p50: float | None = Field(None, description="median, the sorted value at n / 2 (ms)")
    p95: float | None = Field(None, description="95th percentile, the sorted value at round(0.95 (n − 1)) (ms)")
    max: float | None = Field(None, description="largest (ms)")


class SteeringLatency(Record):
    """Decision (the controller's clock) → assignment (start of the first kernel decision after it that
    handed the subflow data) → wire (first segment of that subflow carrying the new data leaving the
    sender's interface); one CLOCK_MONOTONIC throughout (schedulers/README.md, steering latency)."""

    decision_to_assignment: LatencyStats = Field(description="the controller's decision → the kernel's assignment")
    assignment_to_wire: LatencyStats = Field(description="the kernel's assignment → the first segment on the wire")
    decision_to_wire: LatencyStats = Field(description="the controller's decision → the first segment on the wire")


class SetFlagsCalls(Record):
    """The controller's mptcp_pm SET_FLAGS calls (the backup flag it sets per subflow)."""

    calls: int = Field(description="SET_FLAGS calls made (count)")
    errors: int = Field(description="calls the kernel refused, those counted in at_close left out (count)")
    at_close: int = Field(
        description="calls that failed because the kernel was tearing the subflow down: the connection's CLOSED or "
                    "SUB_CLOSED event came within 200 ms of the failure (count; not in errors)")
    mean_us: float = Field(description="mean time a call took (µs); 0 without calls")
    max_us: float = Field(description="longest time a call took (µs)")


class LostEvents(Record):
    """Events the controller's BPF side could not hand to it (must all be 0)."""

    ringbuf: int = Field(description="events dropped because the BPF ring buffer was full (count)")
    map_full: int = Field(description="events dropped because a BPF map was full (count)")
    userspace: int = Field(description="events the controller's userspace side lost (count)")


class SteeringRecord(Record):
    """How far to trust a steered scheduler (mpvlab/runner/views.py _steering_view): what the steering
    controller (schedulers/steer.c) wrote in steer_summary.json at the run's end."""

    policy: str = Field(
        description="the controller's policy: the scenario's steering scheduler, or `observe` for the kernel's "
                    "default scheduler observed (scheduler_params observe)")
    conformance: SteeringConformance = Field(description="the kernel's data assignments against the policy")
    steering_latency_ms: SteeringLatency = Field(description="how long a newly allowed subflow took to carry data")
    set_flags: SetFlagsCalls = Field(description="the controller's SET_FLAGS calls")
    priority_changes: int = Field(
        description="SET_FLAGS calls that changed a subflow's backup flag (the kernel accepted them), summed over "
                    "the connections (count)")
    lost_events: LostEvents = Field(description="events lost between the BPF side and the controller")


# --- capture (mpvlab/collectors/pcap.py Capture.summary) ---


class CaptureFile(Record):
    """One tcpdump: a (point, interface) of observe.pcap.points (mpvlab/collectors/pcap.py TapResult)."""

    point: str = Field(description="the capture point: client, server or router-<path>")
    interface: str = Field(description="the captured interface")
    file: str = Field(description="the pcap file, in the run's data/pcap/ (`<point>-<interface>.pcap`)")
    packets: int = Field(description="packets in the file (count)")
    bytes: int = Field(description="the captured frames' original lengths, summed (B)")
    captured: int | None = Field(description="tcpdump's `packets captured` (count); null when it printed none")
    received_by_filter: int | None = Field(
        description="tcpdump's `packets received by filter` (count); null when it printed none")
    dropped_by_kernel: int | None = Field(
        description="tcpdump's `packets dropped by kernel` (count); null when it printed none")
    truncated: bool = Field(description="whether the capture reached observe.pcap.max_mb and was stopped early")
    counter_bytes: int | None = Field(
        description="the interface's rx_bytes + tx_bytes over the capture's window (B); null without counters")
    counter_packets: int | None = Field(
        description="the interface's rx + tx packets over the capture's window (count); null without counters")
    ratio: float | None = Field(description="bytes / counter_bytes; null without counters")
    ok: bool | None = Field(
        description="the byte cross-check: |bytes − counter_bytes| within allowance_bytes; null without counters")


class CaptureCrossCheckDefinition(Record):
    definition: str = Field(description="what bytes and counter_bytes count, in words")
    allowance_bytes: str = Field(description="the allowance of the byte cross-check, as a formula")


class CaptureRecord(Record):
    """observe.pcap: one file per captured interface, with its byte cross-check (mpvlab/collectors/pcap.py)."""

    snaplen: int = Field(description="the scenario's observe.pcap.snaplen: bytes kept of each packet (B)")
    max_bytes: int = Field(description="observe.pcap.max_mb × 1,000,000: the size a capture is stopped at (B)")
    files: list[CaptureFile] = Field(description="every capture, one per (point, interface)")
    dropped_by_kernel: int = Field(description="the captures' dropped_by_kernel, summed (count; null ones as 0)")
    truncated: list[str] = Field(description="the files stopped early at max_bytes")
    cross_check: CaptureCrossCheckDefinition = Field(description="how each file's byte cross-check is judged")


# --- wire_switches (mpvlab/collectors/wire_switches.py analyse, joined by mpvlab/runner/capture.py) ---


class WireCounts(Record):
    """Counts over data segments (wire_switches.py DEFINITIONS, also in the record's `definitions`)."""

    data_segments: int = Field(description="data segments the server sent (count)")
    new_data_segments: int = Field(description="data segments carrying at least one data-sequence byte not sent before")
    retransmitted_segments: int = Field(
        description="data segments whose whole data-sequence range was already sent (TCP retransmission or MPTCP "
                    "reinjection; count)")
    partial_overlap_segments: int = Field(description="new-data segments that also repeat some sent bytes (count)")
    new_bytes: int = Field(description="payload of the new-data segments, partial overlaps counted whole (B)")
    retransmitted_bytes: int = Field(description="payload of the retransmitted segments (B)")
    wire_switches: int = Field(
        description="consecutive new-data segments of one connection, in capture order, on different subflows (count)")
    dsn_order_switches: int = Field(
        description="new-data segments adjacent in data-sequence order on different subflows (count)")
    decision_path_switches: int | None = Field(
        description="the BPF scheduler trace's path switches (per decision) of the same connection(s); null when the "
                    "trace did not see the connection")
    wire_per_decision_switch: float | None = Field(
        description="wire_switches / decision_path_switches (rounded to 3 places); null when there are none")


class WireTotals(WireCounts):
    connections: int = Field(description="MPTCP connections whose data segments the capture held (count)")


class WireConnection(WireCounts):
    """One MPTCP connection, named by its token in the record."""

    subflows: int = Field(description="subflows that carried its data segments (count)")
    new_segments_by_subflow: dict[str, int] = Field(
        description="new-data segments per subflow id (1 = the initial subflow; count)")


class WireParse(Record):
    """What the capture's reader saw besides the counted segments (all 0 but other_packets)."""

    packets: int = Field(description="packets in the capture (count)")
    other_packets: int = Field(
        description="packets that are not TCP or not from a known MPTCP subflow's server side, or carry no payload")
    data_segments: int = Field(description="segments with payload from a known subflow's server side (count)")
    unmapped_segments: int = Field(description="of those, segments without a DSS mapping in the captured options")
    mapping_mismatch: int = Field(description="segments outside their own mapping's range (count)")
    options_truncated: int = Field(description="segments whose TCP options the snaplen cut (count)")


class WireSubflow(Record):
    """One subflow the server's capture saw, named `addr:port-addr:port` (server side first) in the record."""

    conn: str = Field(description="its connection's MPTCP token (8 hex digits)")
    subflow_id: int = Field(description="its id within the connection, in the order the handshakes were seen")
    peer: str = Field(description="the client's address of the subflow")
    seq_data_bytes: int = Field(
        description="data bytes in its own sequence space: the highest relative sequence number its payload "
                    "reached less the SYN's, each byte once however often re-sent (B)")
    path: str | None = Field(description="the path whose client address is the peer; null when none is")


class WireSwitchesRecord(Record):
    """Wire-order path switches per connection and in total, from the server's capture."""

    file: str = Field(description="the server's pcap file the record was counted from")
    totals: WireTotals = Field(description="every connection together")
    connections: dict[str, WireConnection] = Field(description="per MPTCP connection (its token)")
    parse: WireParse = Field(description="what the reader saw besides the counted segments")
    subflows: dict[str, WireSubflow] = Field(description="per subflow (`addr:port-addr:port`, server side first)")
    definitions: dict[str, str] = Field(description="what each count counts, in words (wire_switches.py DEFINITIONS)")
    truncated: bool = Field(description="whether the server's capture was stopped early at max_mb (counts then short)")


class WireNotCollected(Record):
    not_collected: str = Field(description="why there is no wire-order count (no capture at `server`)")


# --- bbr_diag (mpvlab/cc/bbr_diag.py summarize) ---


class StartupEpisode(Record):
    start_s: float = Field(description="when the STARTUP episode began, on the run's clock (s); one right after "
                                       "INIT begins at INIT's start")
    duration_s: float = Field(description="to the first sample that saw another mode, or the last sample (s)")
    bytes_acked: int | None = Field(
        description="bytes acked during the episode (tcpi_bytes_acked at its end − at its start; B); null when a "
                    "sample had none")


class BbrConnection(Record):
    """One TCP connection on the server's port, in INET_DIAG's samples."""

    conn: str = Field(description="its 4-tuple, `src:sport-dst:dport` as the server sees it")
    cong: str | None = Field(description="the congestion control INET_DIAG reported in its last sample")
    samples: int = Field(description="samples that held the connection (count)")
    bytes_acked: int = Field(description="the largest tcpi_bytes_acked sampled (B)")
    http_requests: int | None = Field(
        None, description="the video's HTTP requests the server's access log shows on this connection (its client "
                          "address and port; not the pre-run protocol check, not the dash.js page's own files; "
                          "count); null when the run has no access log (a bulk or rtp workload)")
    modes: list[str | None] = Field(
        description="its BBR modes in time order, one entry per episode of one mode; null where no mode was read")
    shares: dict[str, float] = Field(
        description="share of time per mode (INIT, STARTUP, DRAIN, PROBE_BW, PROBE_RTT, NO_BBR_INFO, unknown), each "
                    "sample's mode held until the next sample (fraction)")
    startup_episodes: list[StartupEpisode] = Field(description="its STARTUP episodes")


class BbrDiagRecord(Record):
    """observe.bbr_modes_hz: kernel BBR's state per server connection over INET_DIAG (mpvlab/cc/bbr_diag.py).
    A BPF congestion control's connections read NO_BBR_INFO (INET_DIAG has no BBR record for them)."""

    samples: int = Field(description="INET_DIAG dumps taken (count)")
    rate_hz: float | None = Field(
        description="dumps per second reached: (samples − 1) / (last − first dump's time) (Hz); null with one dump")
    gap_ms_max: float | None = Field(description="the longest time between two dumps (ms); null with one dump")
    reader_cpu_share_of_core: float | None = Field(
        description="the reader's CPU time / its wall time (fraction of one core); null without its end line")
    connections_with_data: int = Field(description="connections with bytes acked > 0 (count); a connection the "
                                                   "browser opened and never used counts (its TLS handshake)")
    connections_with_requests: int | None = Field(
        None, description="connections that carried at least one of the video's HTTP requests (http_requests > 0): "
                          "the connections the player used for media (count); null without an access log")
    connections: list[BbrConnection] = Field(description="every connection on the server's port over the whole run")
