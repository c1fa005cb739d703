"""summary.json's workload parts that are not a player's: the bulk transfer, the rtp stream and
the rtp-against-bulk competition view."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from mpvlab.results.metricdef import INF, STUDY_WEBRTC, MetricDef
from mpvlab.results.summary_parts.base import OpenRecord, Record


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


class RtpDecoderEnd(Record):
    """The viewer's decoder's own account, the `end <JSON>` line it writes after draining
    (rtp/decoder/live_decoder.py main, passed through by rtp/cmd/mpvlab-rtp/decode.go)."""

    decoder: str = Field(description="the GStreamer decoder element and its plugin's version, e.g. `avdec_h264 1.22.0`")
    fed: int = Field(description="frames the decoder's pipeline accepted (count)")
    refused: int = Field(description="frames the pipeline refused (push-buffer not OK): not decoded (count)")
    pictures: int = Field(description="pictures the decoder put out (count)")
    warnings: int = Field(description="warning messages the pipeline posted up to end of stream (count)")
    warning_texts: list[str] = Field(description="the first 5 of those warnings, GStreamer's words")
    error: str | None = Field(
        description="the pipeline's error message, or `no EOS within 10 s` when draining timed out; null when it "
                    "drained to end of stream")
    cpu_s: float = Field(
        description="the decoder process's user + system CPU time, start-up included (getrusage RUSAGE_SELF, s)")


class RtpBbrVariant(Record):
    """The scenario's workload.bbr as the run used it (mpvlab/workloads/rtp.py WebrtcBbrVariant, every field
    written out)."""

    filter: Literal["replacing", "non-replacing"] = Field(
        description="BBR's bandwidth max filter: replacing (WebRTC's) or non-replacing (the three highest samples "
                    "kept as separate entries)")
    estimate: Literal["best", "third-best"] = Field(
        description="the bandwidth estimate: the highest sample (best, WebRTC's) or the third-highest")
    recovery: bool = Field(description="whether BBR's recovery state is on (true: WebRTC's)")
    probe_rtt: Literal["webrtc", "v2"] = Field(
        description="RTT probing: WebRTC's, or v2 (BBRv2-like: cwnd = BDP/2 during the probe, min-RTT expiry 5 s "
                    "instead of 10 s)")
    padding: bool = Field(
        description="whether the pacer sends padding-only packets while BBR probes for bandwidth (true: WebRTC's)")


class RtpLatency(Record):
    """Per-frame latency at the viewer (receiver.json latency_ms, rtp/cmd/mpvlab-rtp/recv.go): over every
    frame that became complete, on time or late; nearest-rank percentiles."""

    p50: float | None = Field(description="median latency (ms); null when no frame became complete")
    p95: float | None = Field(description="95th percentile latency (ms); null when no frame became complete")
    p99: float | None = Field(description="99th percentile latency (ms); null when no frame became complete")
    max: float | None = Field(description="largest latency (ms); null when no frame became complete")
    definition: str = Field(description="what the latency spans, in words")


class RtpFeedback(Record):
    """The sender's ledger of transport-wide CC (TWCC) feedback (sender.json feedback,
    rtp/cmd/mpvlab-rtp/feedback.go feedbackSummary) and the viewer's feedback interval (receiver.json)."""

    transport_seqs_sent: int = Field(
        description="transport-wide sequence numbers the sender put on packets, video and padding (count)")
    transport_seqs_reported: int = Field(description="of those, numbers some feedback reported (count)")
    transport_seqs_reported_received: int = Field(
        description="reported numbers some feedback reported received (count)")
    transport_seqs_reported_lost: int = Field(
        description="reported numbers no feedback reported received (count)")
    transport_seqs_without_feedback: int = Field(description="numbers sent that no feedback mentioned (count)")
    transport_seqs_without_feedback_first: list[int] | None = Field(
        description="the 20 lowest of those numbers (unwrapped sequence numbers); null when there are none")
    missing_feedback_at_tail: int = Field(
        description="of the numbers without feedback, those at the stream's end: the run of unreported numbers "
                    "ending with the last one sent (count)")
    twcc_feedback_packets: int = Field(description="TWCC feedback (TransportLayerCC) RTCP packets the sender read (count)")
    rtcp_datagrams: int = Field(description="RTCP datagrams the sender read (count)")
    rtcp_bytes: int = Field(description="bytes of those datagrams (B, UDP payload)")
    interval_ms: int | None = Field(
        description="the viewer's feedback interval, as libwebrtc 2018 derives it from interval_own_target_bps "
                    "(ms; rtp/cmd/mpvlab-rtp/twcc_interval.go); null when receiver.json did not record it")
    interval_own_target_bps: int | None = Field(
        description="the viewer's own send-side target the interval is derived from (bit/s; its --own-target-bps, "
                    "by default libwebrtc's start rate: the viewer sends no media); null when receiver.json did "
                    "not record it")


class RtpTarget(Record):
    """The controller's target bitrate (sender.json, sender/targets.csv; the steady figures:
    mpvlab/runner/workloads/rtp_checks.py steady_target)."""

    initial: int = Field(description="the scenario's workload.initial_bitrate: the controller's start target (bit/s)")
    final: int | None = Field(description="the last target the controller set (bit/s); null when it set none")
    updates: int = Field(description="targets the controller set over the stream (count; rows of targets.csv)")
    steady_mean: int | None = Field(
        description="time-weighted mean of the target over the time the encoder ran (target > 0) within "
                    "steady_window_s (bit/s, rounded); null when steady_window_s is null or the encoder never ran in it")
    steady_window_s: list[float] | None = Field(
        description="[from, to) run seconds: the 1 s windows of capture time holding frames, of the stream's second "
                    "half, the last one left out; null with fewer than three such windows or without targets")
    steady_paused_s: float | None = Field(
        description="time in steady_window_s with the target at 0: the encoder paused (webrtc-bbr) (s); null when "
                    "steady_window_s is null")
    steady_definition: str = Field(description="the steady figures' definition, in words")


class RtpEncoderSecond(Record):
    """One 1 s window of capture time from the first captured frame (sender/encoder.csv,
    rtp/cmd/mpvlab-rtp/results.go)."""

    t_s: float = Field(description="the window's start on the run's clock (s since t0)")
    frames: int = Field(description="frames captured in the window (count)")
    achieved_bps: int = Field(description="the encoder's output in the window: the frames' encoded bytes × 8 (bit/s)")
    achieved_wire_bps: int = Field(
        description="the same frames' packets as they left the socket (RTP packet + 28 B of UDP and IPv4 header "
                    "each) × 8 (bit/s; packets the pacer still held at the end left out)")
    target_bps: float = Field(description="time-weighted mean of the controller's target over the window (bit/s)")
    encoder_set_bps: float = Field(
        description="time-weighted mean of the bitrate the encoder was set to over the window (bit/s)")


class RtpReceivedSecond(Record):
    """One second of the run's clock at the viewer, by arrival (receiver/rate.csv,
    rtp/cmd/mpvlab-rtp/recv.go): every second from the first arrival's to the last's, video or padding."""

    second: int = Field(description="the second [second, second + 1) on the run's clock (s since t0)")
    received_bps: int = Field(description="video RTP bytes (UDP payload) that arrived in it × 8 (bit/s; the video "
                                          "stream alone: padding, retransmissions and audio apart)")
    padding_bps: int = Field(description="padding-only bytes (UDP payload) that arrived in it × 8 (bit/s)")
    audio_bps: int = Field(0, description="audio RTP bytes (UDP payload) that arrived in it × 8 (bit/s; 0 with audio "
                                          "off and in runs before issue 48 §1's audio)")


class RtpCheck(OpenRecord):
    """One rtp cross-check (mpvlab/runner/workloads/rtp_checks.py Check.record). Open: besides the four
    fields every check has, each check records its own numbers under its own keys (a ratio, counts, the
    frames that differ: the check_* function that makes it names them)."""

    ok: bool = Field(description="whether the figure agreed with its evidence within the tolerance")
    figure: str = Field(description="the summary figure checked, by its path in the rtp part")
    evidence: str = Field(description="what it was recomputed from (the logs it was not made from)")
    tolerance: str = Field(description="how far they may differ, in words")


class RtpDecodeRecord(Record):
    """The viewer's decoder (rtp/cmd/mpvlab-rtp/playout.go): decoded + decode_error + undecodable = on time."""

    frames_decoded: int = Field(description="on-time frames the viewer's decoder decoded (count)")
    frames_decode_error: int = Field(description="on-time frames the decoder returned an error for (count)")
    frames_undecodable: int = Field(
         description="on-time frames depending on a frame that was not played (late or lost), up to the next keyframe:"
                     " never fed to the decoder (count; rtp/cmd/mpvlab-rtp/playout.go)")
    decoder: RtpDecoderEnd | None = Field(
        description="the viewer's decoder's own account after draining; null when it wrote none (it failed to start "
                    "or died)")
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


class RtpVideoBitrateRecord(Record):
    """What arrives against what is rendered on time (issue 48), over one window of capture time."""

    window_s: list[float] | None = Field(
        description="[from, to) run seconds: first captured frame to first + the stream's whole seconds of capture "
                    "time; null without frames")
    on_time_mean: int | None = Field(
        description="bits of the frames rendered (complete by capture + playout deadline and decoded; video RTP "
                    "bytes, UDP payload) captured in window_s ÷ its seconds (bit/s)")
    received_mean: int | None = Field(
        description="mean of received_per_second[].received_bps over the run seconds wholly inside window_s "
                    "(bit/s; video RTP bytes, UDP payload, by arrival, on time or not); null when none")
    received_seconds: int = Field(description="the rate.csv seconds received_mean is taken over (count)")
    definition: str = Field(description="both bitrates and the window, in words")


class RtpFeedbackRttRecord(Record):
    """The RTT pion's GCC derives from each TWCC feedback (rtp/cmd/mpvlab-rtp/feedback.go feedbackRTT)."""

    samples: int = Field(description="feedback reports with a received packet: one RTT sample each (count)")
    p50: float | None = Field(description="median sample, nearest rank (ms); null without samples")
    p90: float | None = Field(description="90th percentile sample, nearest rank (ms); null without samples")
    min: float | None = Field(description="smallest sample (ms); null without samples")
    max: float | None = Field(description="largest sample (ms); null without samples")
    definition: str = Field(description="how a sample is derived, in words")


class RtpRepairRecord(OpenRecord):
    """workload rtp: loss repair (rtp/README.md "Losses were repaired"): the viewer's NACKs and PLIs, the
    sender's retransmissions on the RTX stream and the key frames they forced."""

    nack: bool = Field(description="the scenario's workload.repair.nack: NACK + RTX retransmission on")
    pli: bool = Field(description="the scenario's workload.repair.pli: key-frame requests (PLI) on")
    nack_messages_sent: int = Field(description="RTCP generic NACKs the viewer sent (count)")
    nacked_packets: int = Field(description="sequence numbers those NACKs named, each time named (count)")
    resend_refused_too_soon: int = Field(0, description="NACKed packets not resent: resent less than an RTT (+5 ms) before (count)")
    resend_rate_limited: int = Field(0, description="NACKed packets not resent: the retransmission rate limiter refused one of the NACK (count)")
    retransmissions_sent: int = Field(description="packets the sender resent on the RTX stream (count; sender/packets.csv rtx rows)")
    retransmission_bytes_sent: int = Field(description="their UDP payload (B)")
    retransmissions_received: int = Field(description="RTX packets the viewer received (count) = in time + too late + duplicate")
    retransmissions_in_time: int = Field(description="retransmissions that filled a missing packet by its frame's capture + playout deadline (count)")
    retransmissions_too_late: int = Field(description="retransmissions that filled a missing packet after that deadline (count)")
    retransmissions_duplicate: int = Field(description="retransmissions of a packet the viewer already had (count)")
    packets_repaired: int = Field(description="media packets lost on the way that a retransmission replaced (count)")
    packets_lost_unrepaired: int = Field(description="media packets lost and never replaced (count); + packets_repaired = packets_lost")
    frames_repaired: int = Field(description="frames complete with at least one retransmitted packet (count)")
    frames_repaired_on_time: int = Field(description="of those, complete by capture + the playout deadline (count)")
    pli_sent: int = Field(description="PLIs the viewer sent (count)")
    pli_received: int = Field(description="PLIs the sender read (count)")
    keyframe_requests_to_encoder: int = Field(description="PLIs passed to the encoder (≤ 1 per 300 ms) (count)")
    keyframes: int = Field(description="key frames the encoder made (count; sender/frames.csv)")
    keyframes_forced: int = Field(description="key frames made while a request was pending: the first after each request passed (count)")


class RtpAudioRecord(OpenRecord):
    """workload rtp: the call's audio (rtp/README.md "The call had audio"; mpvlab/runner/workloads/rtp_audio.py),
    apart from every video figure: sent = received + lost, else the run fails."""

    enabled: bool = Field(description="the scenario's workload.audio.enabled: the audio stream was sent")
    bitrate_bps: int | None = Field(description="the Opus encoder's configured target (bit/s); null with audio off")
    frame_ms: int | None = Field(description="the Opus frame length, one frame per RTP packet (ms); null with audio off")
    packets_sent: int = Field(description="audio RTP packets the sender sent (count; sender/packets.csv audio rows)")
    packets_received: int = Field(description="audio RTP packets the viewer received, each sequence number once (count)")
    packets_lost: int = Field(description="audio RTP packets the viewer never received (count) = sent - received")
    bytes_sent: int = Field(description="their UDP payload as sent: RTP header + Opus frame (B)")
    bytes_received: int = Field(description="the same as received (B)")
    packets_on_time: int = Field(description="audio packets that arrived by capture + playout_deadline_ms (count)")
    packets_late: int = Field(description="audio packets that arrived after it (count); + on time = received")
    on_time_share: float | None = Field(description="packets_on_time / packets_received (fraction); null when none arrived")
    playout_deadline_ms: float | None = Field(description="the deadline the audio packets are classified against (ms): "
                                                          "the workload's playout_deadline")
    window_s: list[float] | None = Field(description="[from, to) run seconds received_mean_bps is taken over: the video's "
                                                     "window (video_bitrate_bps.window_s); null with audio off")
    received_mean_bps: int | None = Field(description="mean of received_per_second[].audio_bps over the run seconds "
                                                       "wholly inside window_s (bit/s; audio RTP bytes, UDP payload, by "
                                                       "arrival); null with audio off")
    received_seconds: int = Field(description="the rate.csv seconds received_mean_bps is taken over (count)")
    definition: str = Field(description="what is counted, the window and the flow, in words")


class RtpRecord(OpenRecord):
    """workload rtp (mpvlab/runner/workloads/rtp.py): frames captured = on time + late + lost at the viewer."""

    controller: str = Field(description="the scenario's workload.controller: the rate controller the sender ran")
    bbr_variant: RtpBbrVariant | None = Field(
        None, description="webrtc-bbr: the study's variant (the scenario's workload.bbr); null = WebRTC's own")
    frames_captured: int = Field(description="frames the sender's encoder produced (count) = on_time + late + lost")
    frames_on_time: int = Field(description="frames complete at the viewer within the playout deadline (count)")
    frames_late: int = Field(description="frames complete at the viewer after the playout deadline (count)")
    frames_lost: int = Field(description="frames never complete at the viewer (count)")
    playout_deadline_ms: float = Field(
        description="the viewer's configured playout deadline after capture time (ms; rtp/cmd/mpvlab-rtp/recv.go)")
    latency_ms: RtpLatency = Field(
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
    feedback: RtpFeedback = Field(
         description="the sender's ledger of transport-wide CC feedback: transport sequence numbers sent, reported, "
                     "reported received/lost, without feedback; feedback packets, RTCP datagrams and bytes "
                     "(rtp/cmd/mpvlab-rtp/feedback.go); the viewer's feedback interval (interval_ms) and the own "
                     "sending target it follows (interval_own_target_bps; rtp/cmd/mpvlab-rtp/twcc_interval.go)")
    target_bps: RtpTarget = Field(
        description="the controller's target bitrate: initial (scenario), final, updates, steady_mean (time-weighted "
                    "over the time the encoder ran within steady_window_s, the stream's second half, bit/s), "
                    "steady_window_s ([from, to) run seconds), steady_paused_s (encoder paused in it, s) and its "
                    "definition")
    encoder_per_second: list[RtpEncoderSecond] = Field(
        description="per 1 s window of capture time (sender/encoder.csv): t_s, frames, achieved_bps, "
                    "achieved_wire_bps, target_bps, encoder_set_bps")
    received_per_second: list[RtpReceivedSecond] = Field(
        description="per second at the viewer (receiver/rate.csv): second, received_bps, padding_bps")
    on_time_per_second: list[int] = Field(
        default_factory=list,
        description="bits of the video RTP bytes (UDP payload) of the frames rendered — complete by capture + the "
                    "playout deadline and decoded — per whole second of capture time from the first captured frame "
                    "(bit/s; receiver/frames.csv rtp_bytes; the grid of rendered_fps.per_second)")
    video_bitrate_bps: RtpVideoBitrateRecord | None = Field(
        None, description="the received and the on-time video bitrate, means over one stated window "
                          "(mpvlab/runner/workloads/rtp_bitrate.py, rtp/README.md \"Which bitrate?\")")
    feedback_rtt_ms: RtpFeedbackRttRecord | None = Field(
        None, description="the RTT GCC derives from TWCC feedback, one sample per feedback, for either controller "
                          "(sender/feedback_rtt.csv; rtp/README.md \"GCC's RTT\")")
    repair: RtpRepairRecord | None = Field(
        None, description="loss repair: NACK/RTX retransmissions and PLI key-frame requests, both ends' counts "
                          "(rtp/README.md \"Losses were repaired\"); null in runs before issue 48 §1")
    audio: RtpAudioRecord | None = Field(
        None, description="the call's audio stream (Opus, libwebrtc 2018's defaults), apart from every video figure "
                          "(rtp/README.md \"The call had audio\"); null in runs before issue 48 §1's audio")
    checks: dict[str, RtpCheck] | None = Field(
        None, description="the rtp cross-checks (mpvlab/runner/workloads/rtp_checks.py, rtp/README.md): per check "
                          "ok, the figure, the evidence, the tolerance and the numbers; a failed one is also a "
                          "`cross-check rtp_<name> failed` warning")


class Competition(OpenRecord):
    """workload rtp against a bulk cross flow (mpvlab/runner/shared_summary.py: competition_view): both flows'
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
