"""What a scenario says about its workload (`workload:`), one model per kind, and the video
workload's own sections (`video:`, `server:`, `player:`). The registry of the
code that runs each kind is registry.py; this module holds only the models, so that the scenario
schema can compose them without importing the run."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from mpvlab.core.quantities import Duration, Rate, Size, Strict
from mpvlab.player.abr import REGISTRY as ABRS

# A bulk transfer's size: at least one full segment; at most what 8 paths at 10 Gbit/s move in ten
# minutes is far beyond any emulated run here, so 100 GB bounds typos, not experiments.
MAX_BULK_BYTES = 100 * 10**9


class VideoWorkloadSpec(Strict):
    """The video player workload; its settings are the scenario's `video:`, `player:` and `server:`."""

    kind: Literal["video"] = Field("video", description="A video player streaming from a web server; see `video`, `player`, `server`.")


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
    max_bitrate: Rate = Field(1_300_000, description="Upper bound of the controller's target bitrate.")
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
        if not self.min_bitrate <= self.initial_bitrate <= self.max_bitrate:
            raise ValueError("need min_bitrate ≤ initial_bitrate ≤ max_bitrate "
                             f"(got {self.min_bitrate}, {self.initial_bitrate}, {self.max_bitrate} bit/s)")
        if not 20 * 10**6 <= self.playout_deadline <= 10 * 10**9:
            raise ValueError("playout_deadline must lie between 20ms and 10s")
        if self.timeout is not None and not 10**9 <= self.timeout <= 24 * 3600 * 10**9:
            raise ValueError("timeout must lie between 1s and 24h")
        return self


WorkloadSpec = Annotated[VideoWorkloadSpec | BulkWorkloadSpec | RtpWorkloadSpec, Field(discriminator="kind")]


# --- the video workload's sections of the scenario ---------------------------------------------

STUDY_DASH_LADDER = [1_000_000] + [2_500_000 * i for i in range(1, 11)]  # docs/studies.md §2: 1 … 25 Mbit/s


class VideoSpec(Strict):
    """progressive: one H.264 MP4 at `bitrate`. dash: a ladder of representations at `bitrates`
    (default: the BBR-S study's 11 levels, 1 … 25 Mbit/s), `segment` long each."""

    kind: Literal["progressive", "dash"] = Field("progressive", description="progressive: one H.264 MP4; dash: a ladder of representations in segments.")
    duration: Duration = Field(30 * 10**9, description="Length of the video, 1s … 60min.")
    bitrate: Rate = Field(5_240_000, description="progressive: the MP4's video bitrate.")
    bitrates: list[Rate] | None = Field(None, min_length=1, max_length=16, description="dash: the representations' bitrates; null = 11 levels, 1 … 25 Mbit/s (BBR-S study).")
    segment: Duration = Field(5 * 10**9, description="dash: length of one segment.")
    width: int = Field(1280, ge=64, le=3840, description="Picture width in pixels.")
    height: int = Field(720, ge=64, le=2160, description="Picture height in pixels.")
    fps: int = Field(30, ge=1, le=120, description="Frames per second.")

    @field_validator("duration")
    @classmethod
    def _duration_range(cls, v: int) -> int:
        if not 1 * 10**9 <= v <= 3600 * 10**9:
            raise ValueError("video duration must lie between 1s and 60min")
        return v


class ServerSpec(Strict):
    """The video server (Apache httpd). protocol: `http/1.1`, or `h2` (HTTP/2, mod_http2, negotiated by
    TLS ALPN). tls: `auto` is TLS exactly when the protocol is h2; `true` also serves HTTP/1.1 over TLS
    (to separate TLS's cost from HTTP/2's effect); `false` is plain HTTP. With TLS the run makes a
    self-signed certificate of its own and the player trusts exactly that one."""

    protocol: Literal["http/1.1", "h2"] = Field("http/1.1", description="HTTP version Apache serves; h2 is HTTP/2 over TLS (ALPN).")
    tls: Literal["auto"] | bool = Field("auto", description="auto: TLS exactly when protocol is h2; true: TLS for HTTP/1.1 too; false: plain HTTP.")

    @model_validator(mode="after")
    def _h2_needs_tls(self) -> ServerSpec:
        if self.protocol == "h2" and self.tls is False:
            raise ValueError(
                "protocol h2 needs TLS (tls: auto or true): the player's HTTP client (GStreamer souphttpsrc "
                "with libsoup 3) negotiates HTTP/2 only through TLS ALPN and cannot speak cleartext h2c")
        return self

    @property
    def tls_enabled(self) -> bool:
        return self.protocol == "h2" if self.tls == "auto" else bool(self.tls)


MAX_LATENESS_NS = 60 * 10**9
MAX_PLAYER_TIME_NS = 3600 * 10**9   # a video lasts at most 60 min (VideoSpec)


# The ABRs of player kind dashjs: dash.js's own strategies (abrDynamic, abrBola, abrThroughput) and
# BBA and FESTIVE as custom rules (player/dashjs/mpvlab-dashjs.js).
DASHJS_ABRS = ("dynamic", "bola", "throughput", "bba", "festive")


class DashjsBbaParams(Strict):
    """BBA-0's rate map (Huang et al. 2014): lowest rate up to `reservoir_s` of buffer, highest from
    reservoir + cushion on, linear between."""

    reservoir_s: float = Field(5.0, ge=0)
    cushion_s: float = Field(15.0, gt=0)


class DashjsFestiveParams(Strict):
    """FESTIVE's selection (Jiang et al. 2012, §5.2-5.3), the same parameters as player/abr/festive.py."""

    window: int = Field(20, ge=1, le=1000)
    safety: float = Field(0.85, gt=0, le=1.0)
    alpha: float = Field(12.0, ge=0)
    switch_window_s: float = Field(20.0, gt=0)


DASHJS_PARAMS: dict[str, type[Strict]] = {"bba": DashjsBbaParams, "festive": DashjsFestiveParams}


class PlayerSpec(Strict):
    """buffer: the playout buffer (default 2 s progressive, 30 s DASH). abr (DASH only): `gst` is
    dashdemux's own rate adaptation, `bba` a buffer-based BBA-0 map (reservoir, cushion).
    kind `dashjs`: the dash.js reference player (pinned by setup.sh) in Debian's headless Chromium
    (player/dashjs_player.py); abr then one of dynamic (default), bola, throughput, bba, festive."""

    kind: Literal["gstreamer", "dashjs"] = Field(
        "gstreamer", description="gstreamer: mpvlab's GStreamer player (fetcher dashdemux or own); dashjs: the "
                                 "dash.js reference player in headless Chromium (DASH only)")
    mode: Literal["discard", "rebuffer"] = Field("discard", description="discard: never pause, late frames are dropped; rebuffer: pause on underflow until rebuffer_resume is buffered.")
    max_lateness: Duration = Field(20 * 10**6, description="The sink drops a frame later than this (a picture discard), ≤ 60s.")
    buffer: Duration | None = Field(None, description="Playout buffer: most media time held before the decoder; null = 2 s progressive, 30 s DASH.")
    abr: str = Field("gst", pattern=r"^[a-z][a-z0-9-]{0,31}$",
                     description="dashdemux: gst | bba; fetcher own: an ABR of player/abr (throughput, bba, "
                                 "bola, dynamic, festive, sabre, on-off)")
    fetcher: Literal["dashdemux", "own"] = Field(
        "dashdemux", description="DASH: GStreamer's dashdemux, or mpvlab's own client (player/dash_client.py: "
                                 "MPTCP socket, pipelining, paced reads; HTTP/1.1, with or without TLS, or "
                                 "HTTP/2 over TLS as server.protocol says)")
    abr_params: dict[str, Any] = Field(default_factory=dict, description="fetcher own: the ABR's parameters")
    rcvbuf: Size | None = Field(None, description="fetcher own: the socket's SO_RCVBUF, an explicit cap. Default: "
                                                   "none, the kernel's receive-buffer autotuning (the SABRE "
                                                   "paper's on/off baseline); sabre then sets its own "
                                                   "(abr_params.rcvbuf_bytes, 256 KiB), sizing its pipeline from it")
    bba_reservoir: Duration = Field(5 * 10**9, description="abr bba: buffer up to which the lowest bitrate is chosen.")
    bba_cushion: Duration = Field(15 * 10**9, description="abr bba: buffer span over which the choice rises linearly to the highest bitrate.")
    gst_bitrate_limit: float = Field(0.8, gt=0.0, le=1.0, description="abr gst: dashdemux bitrate-limit, the share of the measured rate it may use.")
    rebuffer_resume: Duration = Field(1 * 10**9, description="mode rebuffer: resume once this much media is buffered (capped at 95 % of buffer).")
    startup_buffer: Duration = Field(1 * 10**9, description="playback starts once this much video is buffered")
    cpu: int | None = Field(None, ge=0, le=1023, description="pin the player to this CPU (taskset); None: any")
    decode: bool = Field(True, description="False: count bytes and underflows without decoding (light; no "
                                           "picture discards then)")
    timeout_factor: float = Field(3.0, ge=1.2, le=20.0, description="give up after this × video length + 30 s")

    @model_validator(mode="after")
    def _durations_sane(self) -> PlayerSpec:
        """Absurd durations are refused, not handed to GStreamer or the ABR (issue 33)."""
        if self.max_lateness > MAX_LATENESS_NS:
            raise ValueError("max_lateness must be at most 60s (a frame later than that is lost to any viewer; "
                             "the default is 20ms)")
        for name in ("buffer", "bba_reservoir", "bba_cushion", "rebuffer_resume", "startup_buffer"):
            v = getattr(self, name)
            if v is not None and v > MAX_PLAYER_TIME_NS:
                raise ValueError(f"{name} must be at most 60min (the longest video)")
        return self

    @model_validator(mode="after")
    def _abr_known(self) -> PlayerSpec:
        if self.kind == "dashjs":
            return self._dashjs_fits()
        if self.fetcher == "dashdemux":
            if self.abr not in ("gst", "bba"):
                raise ValueError(f"abr {self.abr!r} needs fetcher: own (dashdemux knows gst and bba)")
            if self.abr_params or self.rcvbuf is not None:
                raise ValueError("abr_params and rcvbuf are for fetcher: own")
            return self
        if self.abr not in ABRS:
            raise ValueError(f"abr {self.abr!r}: with fetcher own, one of {', '.join(sorted(ABRS))}")
        model = ABRS[self.abr].Params
        try:
            model.model_validate(self.abr_params)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(all)'}: "
                                 + ("unknown key" if err["type"] == "extra_forbidden" else err["msg"])
                                 for err in e.errors())
            raise ValueError(f"abr_params for {self.abr}: {problems} (keys: "
                             f"{', '.join(model.model_fields) or 'none'})") from None
        if self.rcvbuf is not None and not 4096 <= self.rcvbuf <= 1 << 30:
            raise ValueError("rcvbuf must be 4 KiB … 1 GiB")
        return self

    def _dashjs_fits(self) -> PlayerSpec:
        # Judged by value, not by which keys were written: a resolved scenario (resolved.yaml, a
        # sweep's override) spells out every default.
        if self.abr == "gst":
            # the field's default: dash.js's own default strategy, the study's default ABR (frozen
            # model: set once, here)
            object.__setattr__(self, "abr", "dynamic")
        if self.abr not in DASHJS_ABRS:
            raise ValueError(f"abr {self.abr!r} is not a dash.js ABR; with kind dashjs, one of "
                             f"{', '.join(DASHJS_ABRS)}")
        if self.fetcher != "dashdemux":
            raise ValueError("fetcher is for kind gstreamer; kind dashjs fetches with Chromium")
        mine = {"abr", "abr_params", "buffer", "kind", "timeout_factor", "fetcher"}
        other = sorted(name for name, f in type(self).model_fields.items()
                       if name not in mine and getattr(self, name) != f.default)
        if other:
            raise ValueError(f"{', '.join(other)}: not a setting of kind dashjs (it takes abr, abr_params, buffer, "
                             "timeout_factor)")
        model = DASHJS_PARAMS.get(self.abr)
        if model is None:
            if self.abr_params:
                raise ValueError(f"abr_params: dash.js's {self.abr} takes none here (bba and festive take some)")
            return self
        try:
            object.__setattr__(self, "abr_params", model.model_validate(self.abr_params).model_dump())
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(all)'}: "
                                 + ("unknown key" if err["type"] == "extra_forbidden" else err["msg"])
                                 for err in e.errors())
            raise ValueError(f"abr_params for dashjs {self.abr}: {problems} (keys: "
                             f"{', '.join(model.model_fields)})") from None
        return self
