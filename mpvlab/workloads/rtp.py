"""The rtp workload: live video over RTP/UDP (mpvlab-rtp, rtp/README.md). Its `workload:` model, the
study's BBR variants, its console lines; the run side is mpvlab/runner/workloads/rtp.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mpvlab.core.quantities import Duration, Rate, Strict
from mpvlab.workloads.base import WorkloadKind

# The controller's bound with cap_estimate false: the largest rate the model accepts anywhere (below),
# far above what x264 ultrafast makes of a 1080p test picture on one core, so in effect none.
ESTIMATE_BOUND_UNCAPPED = 50_000_000

# The rate controllers mpvlab-rtp knows (rtp/cmd/mpvlab-rtp/controllers.go keeps the same registry).
RTP_CONTROLLERS = ("gcc", "webrtc-bbr")


class WebrtcBbrVariant(Strict):
    """The WebRTC study's variants of WebRTC's 2018 BBR (docs/studies.md §3), each off by default
    (rtp/bbr Config): `filter: non-replacing` keeps the three highest samples as separate entries;
    `estimate: third-best` takes the third-highest sample; `recovery: false` disables the recovery
    state; `probe_rtt: v2` is BBRv2-like RTT probing (cwnd = BDP/2 during the probe, min-RTT expiry
    5 s instead of 10 s). `padding` (on, as WebRTC): the pacer sends padding-only packets while BBR
    probes for more bandwidth (rtp/README.md); `padding: false` is mpvlab-rtp's earlier behaviour,
    kept reproducible — not WebRTC's."""

    filter: Literal["replacing", "non-replacing"] = Field("replacing", description="Bandwidth max filter; non-replacing keeps the three highest samples as separate entries.")
    estimate: Literal["best", "third-best"] = Field("best", description="Bandwidth estimate: the highest or the third-highest sample.")
    recovery: bool = Field(True, description="false: no recovery state.")
    probe_rtt: Literal["webrtc", "v2"] = Field("webrtc", description="v2: BBRv2-like RTT probing (cwnd = BDP/2 during the probe, min-RTT expiry 5 s instead of 10 s).")
    padding: bool = Field(True, description="Pacer sends padding-only packets while BBR probes for bandwidth, as WebRTC; false = mpvlab-rtp's earlier behaviour.")

    def sender_flags(self) -> list[str]:
        """mpvlab-rtp send's flags for this variant (none for WebRTC's own)."""
        return ((["--bbr-non-replacing-filter"] if self.filter == "non-replacing" else [])
                + (["--bbr-third-best"] if self.estimate == "third-best" else [])
                + ([] if self.recovery else ["--bbr-no-recovery"])
                + (["--bbr-probe-rtt-v2"] if self.probe_rtt == "v2" else [])
                + ([] if self.padding else ["--bbr-no-padding"]))


class RtpRepair(Strict):
    """Loss repair as libwebrtc 2018 configured it for video (rtp/README.md, "Losses were repaired"),
    both on by default as in a 2018 call: `nack` — the viewer NACKs missing packets as 2018's
    NackModule did and the sender resends them on an RTX stream (RFC 4588) through its pacer;
    `pli` — the viewer sends a PLI when no frame was decodable for 3 s and the encoder makes its next
    frame a key frame (at most one request per 300 ms). Both off: mpvlab-rtp before issue 48 §1."""

    nack: bool = Field(True, description="NACK + RTX retransmission (libwebrtc 2018's NackModule, RTPSender::ReSendPacket); false: no retransmission.")
    pli: bool = Field(True, description="Key-frame requests (PLI) after 3 s without a decodable frame, forcing a key frame at the encoder (≤ 1 per 300 ms); false: only the keyint's key frames.")

    def flags(self) -> list[str]:
        """mpvlab-rtp's flags (the same for send and recv)."""
        return [f"--nack={str(self.nack).lower()}", f"--pli={str(self.pli).lower()}"]


class RtpAudio(Strict):
    """The call's audio (rtp/README.md, "The call had audio"), on by default as in a 2018 call: Opus as
    libwebrtc 2018 configured it by default — `bitrate` 32 kbit/s (kOpusBitrateFbBps, mono full band),
    `frame_ms` 20 (kDefaultFrameSizeMs), payload type 111, 48 kHz RTP clock — on its own SSRC through the
    controller's pacer at high priority, without a transport-wide sequence number and not counted in
    the pacer's budget or the controller's bytes (2018's default, WebRTC-Audio-SendSideBwe off).
    `wave`: the test signal the encoder is fed (pink noise: a full-band signal standing in for a talking
    participant). `audio: false` (or `{enabled: false}`) is the video-only stream of mpvlab-rtp before
    issue 48 §1."""

    enabled: bool = Field(True, description="Send the audio stream; false = video only (mpvlab-rtp before issue 48 §1).")
    bitrate: Rate = Field(32_000, description="Opus target bitrate, 6kbit … 510kbit (libwebrtc 2018's default 32kbit: kOpusBitrateFbBps, mono full band).")
    frame_ms: Literal[10, 20, 40, 60] = Field(20, description="Opus frame length in ms, one frame per RTP packet (libwebrtc 2018's default 20: kDefaultFrameSizeMs).")
    wave: Literal["pink-noise", "sine", "silence"] = Field("pink-noise", description="The audio source's test signal (audiotestsrc); Opus is VBR, so the signal moves the bytes sent.")

    @model_validator(mode="after")
    def _ranges(self) -> RtpAudio:
        if not 6_000 <= self.bitrate <= 510_000:
            raise ValueError("audio.bitrate must lie between 6kbit and 510kbit (Opus's range, "
                             "AudioEncoderOpusConfig kMinBitrateBps … kMaxBitrateBps)")
        return self

    def encoder_args(self) -> list[str]:
        """rtp/encoder/live_audio.py's arguments."""
        return ["--bitrate", str(self.bitrate), "--frame-ms", str(self.frame_ms), "--wave", self.wave]

    def sender_flags(self, script: str) -> list[str]:
        """mpvlab-rtp send's audio flags (none when off)."""
        if not self.enabled:
            return []
        return ["--audio", "--audio-encoder", script, "--audio-bitrate", str(self.bitrate),
                "--audio-frame", f"{self.frame_ms}ms", "--audio-wave", self.wave]


class RtpWorkloadSpec(Strict):
    """Live video server → client over RTP/UDP (rtp/README.md): a test picture encoded in real time
    (`encoder`: x264 zerolatency, or vp8 — libvpx with libwebrtc's 2018 real-time rate control, the
    study's WebRTC default) whose bitrate follows the rate `controller` at every update, TWCC feedback.
    `duration` of media from the first captured frame; the controller's target stays within
    [min_bitrate, max_bitrate] and starts at initial_bitrate; a frame complete later than capture +
    `playout_deadline` counts as late. `timeout`: give up after this long (default duration + 60 s)."""

    kind: Literal["rtp"] = Field(description="Live video over RTP/UDP (mpvlab-rtp).")
    controller: Literal[RTP_CONTROLLERS] = Field("gcc", description="Sender's rate controller: gcc (send-side GCC, pion) or webrtc-bbr (WebRTC's 2018 BBR).")  # type: ignore[valid-type]
    bbr: WebrtcBbrVariant | None = Field(None, description="controller webrtc-bbr only: the study's BBR variant; null = WebRTC's own.")
    duration: Duration = Field(20 * 10**9, description="Media time sent from the first captured frame, 2s … 60min.")
    max_bitrate: Rate = Field(1_300_000, description="The cap (the study's 1.3 Mbit/s, its stream's ceiling); what it caps: cap_estimate, cap_encoder.")
    cap_estimate: bool = Field(True, description="max_bitrate caps the controller's bandwidth estimate and target (so its pacer); false: the controller's bound is 50 Mbit/s. Default true, as before issue 48.")
    cap_encoder: bool = Field(True, description="max_bitrate caps the encoder: it gets what a target of max_bitrate would give, whatever the target; false: it follows the target alone. Default true (with cap_estimate the same as before issue 48).")
    min_bitrate: Rate = Field(50_000, description="Lower bound of the controller's target bitrate.")
    initial_bitrate: Rate = Field(300_000, description="Controller's start target (libwebrtc's default start rate).")
    fps: int = Field(30, ge=1, le=60, description="Frames per second the encoder captures.")
    width: int = Field(640, ge=64, le=1920, multiple_of=2, description="Picture width in pixels.")
    height: int = Field(360, ge=64, le=1080, multiple_of=2, description="Picture height in pixels.")
    keyint: int = Field(60, ge=1, le=600, description="frames between keyframes")
    playout_deadline: Duration = Field(400 * 10**6, description="A frame complete later than capture + this counts as late, 20ms … 10s.")
    content: Literal["moving-smpte", "snow"] = Field("moving-smpte", description="Test picture: moving SMPTE bars (compresses well) or snow (noise, compresses badly).")
    encoder: Literal["x264", "vp8"] = Field("x264", description="Video encoder: x264 (constant bitrate, 100 ms rate-control buffer) or vp8 (libvpx with libwebrtc 2018's real-time rate control).")
    timeout: Duration | None = Field(None, description="Give up after this long, 1s … 24h; null = duration + 60 s.")
    repair: RtpRepair = Field(default_factory=lambda: RtpRepair(), description="Loss repair: NACK/RTX retransmission and PLI key-frame requests, both on as in a 2018 WebRTC call ({nack: false, pli: false}: none).")
    audio: RtpAudio = Field(default_factory=lambda: RtpAudio(), description="The call's audio: Opus 32 kbit/s, 20 ms frames, paced at high priority and not counted by the controller, as libwebrtc 2018 by default; on as in a call (false or {enabled: false}: video only).")

    @field_validator("audio", mode="before", json_schema_input_type=RtpAudio | bool)
    @classmethod
    def _audio_shorthand(cls, v: Any) -> Any:
        """`audio: true|false` is `audio: {enabled: true|false}`."""
        return {"enabled": v} if isinstance(v, bool) else v

    @model_validator(mode="after")
    def _ranges(self) -> RtpWorkloadSpec:
        if not 2 * 10**9 <= self.duration <= 3600 * 10**9:
            raise ValueError("duration must lie between 2s and 60min")
        if self.bbr is not None and self.controller != "webrtc-bbr":
            raise ValueError(f"bbr (the study's BBR variants) applies to controller webrtc-bbr, not {self.controller}")
        # 16 kbit/s is the encoder's floor; 50 Mbit/s bounds typos far above what x264 ultrafast
        # makes of a 1080p test picture on one core.
        for name in ("min_bitrate", "initial_bitrate", "max_bitrate"):
            if not 16_000 <= getattr(self, name) <= 50_000_000:
                raise ValueError(f"{name} must lie between 16kbit and 50mbit")
        if not self.min_bitrate <= self.initial_bitrate <= self.max_bitrate:  # the encoder starts within its cap
            raise ValueError("need min_bitrate ≤ initial_bitrate ≤ max_bitrate "
                             f"(got {self.min_bitrate}, {self.initial_bitrate}, {self.max_bitrate} bit/s)")
        if not 20 * 10**6 <= self.playout_deadline <= 10 * 10**9:
            raise ValueError("playout_deadline must lie between 20ms and 10s")
        if self.timeout is not None and not 10**9 <= self.timeout <= 24 * 3600 * 10**9:
            raise ValueError("timeout must lie between 1s and 24h")
        return self

    def sender_cap_flags(self) -> list[str]:
        """mpvlab-rtp send's caps (rtp/README.md, "Which cap?"): the controller's and the encoder's."""
        return ["--max-bitrate", str(self.max_bitrate if self.cap_estimate else ESTIMATE_BOUND_UNCAPPED),
                "--encoder-max-bitrate", str(self.max_bitrate if self.cap_encoder else 0)]

    def caps(self) -> dict[str, int | None]:
        """The caps in force (bit/s, the target's unit; null = none), for provenance and the summary."""
        return {"estimate_max_bps": self.max_bitrate if self.cap_estimate else ESTIMATE_BOUND_UNCAPPED,
                "encoder_max_bps": self.max_bitrate if self.cap_encoder else None}


def _console_lines(s: Mapping[str, Any], several_clients: bool) -> list[str]:
    r = s["rtp"]
    head = (f"  rtp {r['controller']}: {r['frames_captured']} frames captured, {r['frames_on_time']} on time, "
            f"{r['frames_late']} late, {r['frames_lost']} lost; ")
    if several_clients:
        rx = [x["received_bps"] for x in r["received_per_second"]]
        return [head + f"received {sum(rx) / max(1, len(rx)) / 1e6:.3f} Mbit/s mean; packet loss {r['packet_loss']}"]
    p50, steady, loss = r["latency_ms"].get("p50"), r["target_bps"]["steady_mean"], r["packet_loss"]
    return [head + f"latency p50 {'n/a' if p50 is None else f'{p50:.1f} ms'}; steady target "
            f"{'n/a' if steady is None else f'{steady / 1e3:.0f} kbit/s'}; packet loss "
            f"{'n/a' if loss is None else f'{loss:.2%}'}"]


def _describe(sc: Any) -> str:
    w = sc.workload
    return f"{w.kind} {w.controller} {w.duration / 1e9:g} s"      # UDP: no cc, no scheduler


RTP = WorkloadKind(
    name="rtp", spec=RtpWorkloadSpec, transport="udp", console_lines=_console_lines,
    media_ns=lambda workload, _video: int(workload.duration), describe=_describe,
    sections_unused={"video": "it encodes its own test picture: set workload.duration, fps, width, height",
                     "player": "its receiver is mpvlab-rtp, with workload.playout_deadline",
                     "server": "it sends RTP over UDP, no web server"},
    # the runner's rtp workload runs one broadcaster → viewer stream (mpvlab/runner/workloads/rtp.py);
    # several viewers would need one stream per client, which it does not run (yet)
    default_clients=1, max_clients=1, max_clients_why="one viewer",
    topology_note="one path: RTP over UDP is not multipath",
    several_clients_keys=("rtp", "duration_s", "clients", "cross_checks"))
