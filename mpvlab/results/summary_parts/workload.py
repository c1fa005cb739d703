"""summary.json's workload parts that are not a player's: the bulk transfer, the rtp stream and
the rtp-against-bulk competition view."""

from __future__ import annotations

from typing import Annotated, Any

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
