"""The video workload: a player streaming from a web server. Its `workload:` model and the scenario's
`video:`, `server:` and `player:` sections, its console lines; the run side (Apache, the players)
is mpvlab/runner/workloads/video.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from mpvlab.core.quantities import Duration, Rate, Size, Strict
from mpvlab.player import kinds
from mpvlab.player.dashjs.kind import DASHJS_BUFFER_SETTINGS
from mpvlab.player.entry import PlayerKind
from mpvlab.workloads.base import WorkloadKind, secs


class VideoWorkloadSpec(Strict):
    """The video player workload; its settings are the scenario's `video:`, `player:` and `server:`."""

    kind: Literal["video"] = Field("video", description="A video player streaming from a web server; see `video`, `player`, `server`.")


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
    mpd_min_buffer_time: Duration | None = Field(None, description="dash: the MPD's minBufferTime (dash.js reports its buffer loaded from it); null = what ffmpeg's dash muxer writes, 2 × segment; GPAC MP4Box, the BBR-S study's packager, writes 1.5s unless told. Recorded in provenance (content.mpd_attributes).")
    width: int = Field(1280, ge=64, le=3840, description="Picture width in pixels.")
    height: int = Field(720, ge=64, le=2160, description="Picture height in pixels.")
    fps: int = Field(30, ge=1, le=120, description="Frames per second.")

    @field_validator("duration")
    @classmethod
    def _duration_range(cls, v: int) -> int:
        if not 1 * 10**9 <= v <= 3600 * 10**9:
            raise ValueError("video duration must lie between 1s and 60min")
        return v

    @model_validator(mode="after")
    def _min_buffer_fits(self) -> VideoSpec:
        t = self.mpd_min_buffer_time
        if t is not None and self.kind != "dash":
            raise ValueError("video.mpd_min_buffer_time is for kind: dash (a progressive video has no MPD)")
        if t is not None and not 0 < t <= self.duration:
            raise ValueError("video.mpd_min_buffer_time must lie above 0 s and within video.duration")
        return self


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


class PlayerSpec(Strict):
    """buffer: the playout buffer (default 2 s progressive, 30 s DASH). abr (DASH only): `gst` is
    dashdemux's own rate adaptation, `bba` a buffer-based BBA-0 map (reservoir, cushion).
    kind `dashjs`: the dash.js reference player (pinned by setup.sh) in Debian's headless Chromium
    (mpvlab/player/dashjs/player.py); abr then one of dynamic (default), bola, throughput, bba, festive."""

    kind: Literal["gstreamer", "dashjs"] = Field(   # kinds.PLAYER_KINDS (tests/test_player_contract.py)
        "gstreamer", description="gstreamer: mpvlab's GStreamer player (fetcher dashdemux or own); dashjs: the "
                                 "dash.js reference player in headless Chromium (DASH only)")
    mode: Literal["discard", "rebuffer"] = Field("discard", description="discard: never pause, late frames are dropped; rebuffer: pause on underflow until rebuffer_resume is buffered.")
    max_lateness: Duration = Field(20 * 10**6, description="The sink drops a frame later than this (a picture discard), ≤ 60s.")
    buffer: Duration | None = Field(None, description="Playout buffer: most media time held before the decoder; null = 2 s progressive, 30 s DASH.")
    abr: str = Field("gst", pattern=r"^[a-z][a-z0-9-]{0,31}$",
                     description="dashdemux: gst | bba; fetcher own: an ABR of mpvlab/player/gstreamer/abr (throughput, bba, "
                                 "bola, dynamic, festive, sabre, on-off)")
    fetcher: Literal["dashdemux", "own"] = Field(
        "dashdemux", description="DASH: GStreamer's dashdemux, or mpvlab's own client (mpvlab/player/gstreamer/dash_client.py: "
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
    dashjs_start: Literal["gated", "autoplay"] = Field(
        "gated", description="kind dashjs: gated = the page starts the element once dash.js's own buffer level "
                             "is current (≥ 0.5 s, its stall threshold), so dash.js cannot halt a start that has "
                             "data (player/README.md, 'Start-up stall'); autoplay = dash.js's own autoplay")
    dashjs_end_of_stream: Literal["recheck", "stock"] = Field(
        "recheck", description="kind dashjs: recheck = when dash.js reports the stream fully buffered while it "
                               "holds playback halted, the page makes it re-judge its buffer (one progress "
                               "event) and it resumes at once (player/README.md, 'Halt after the last "
                               "segment'); stock = dash.js 3.0.3 as it is: such a halt ends at the element's "
                               "next progress event (~0.3 s later) or, when Chromium fired its last one just "
                               "before, never")

    # kind dashjs: dash.js's buffer targets, each its own field (mpvlab/player/dashjs/kind.py), dash.js's defaults
    dashjs_stable_buffer_time: Duration = Field(
        12 * 10**9, description="kind dashjs: dash.js streaming.stableBufferTime, the buffer dash.js fills to "
                                "below the top quality (and DYNAMIC's BOLA/throughput switch point); dash.js "
                                "3.0.3's default 12 s")
    dashjs_buffer_time_at_top_quality: Duration = Field(
        30 * 10**9, description="kind dashjs: dash.js streaming.bufferTimeAtTopQuality, the buffer target while "
                                "playing the top quality; dash.js 3.0.3's default 30 s")
    dashjs_buffer_time_at_top_quality_long_form: Duration = Field(
        60 * 10**9, description="kind dashjs: dash.js streaming.bufferTimeAtTopQualityLongForm, the target at "
                                "the top quality when the MPD's duration ≥ the long-form threshold; dash.js "
                                "3.0.3's default 60 s")
    dashjs_long_form_content_duration_threshold: Duration = Field(
        600 * 10**9, description="kind dashjs: dash.js streaming.longFormContentDurationThreshold, the MPD "
                                 "duration from which the long-form target applies (≥, so a 10 min video is "
                                 "long form); dash.js 3.0.3's default 600 s")

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
        for name in DASHJS_BUFFER_SETTINGS:
            v = getattr(self, name)
            if not 0 < v <= MAX_PLAYER_TIME_NS:
                # dash.js reads stableBufferTime -1 as "its own choice" (12 s or 20 s): that is not a
                # stated value, so only a positive duration is taken
                raise ValueError(f"{name} must be more than 0s and at most 60min (got {v / 1e9:g} s)")
        return self

    @model_validator(mode="after")
    def _abr_known(self) -> PlayerSpec:
        """The ABR and settings the player kind takes (mpvlab/player/kinds.py); the video is judged
        with the scenario (kinds' check_scenario)."""
        kind = kinds.spec_kind(self)
        if kind.settings is not None:
            return self._fits_settings(kind)
        if self.dashjs_start != "gated":
            raise ValueError("dashjs_start is for kind dashjs")
        if self.dashjs_end_of_stream != "recheck":
            raise ValueError("dashjs_end_of_stream is for kind dashjs")
        set_ = [n for n in DASHJS_BUFFER_SETTINGS if getattr(self, n) != type(self).model_fields[n].default]
        if set_:
            raise ValueError(f"{', '.join(set_)}: for kind dashjs only (kind {self.kind} takes buffer)")
        abrs = kind.abrs()
        if kind.default_abr is not None:        # GStreamer's dashdemux
            if self.abr not in abrs:
                raise ValueError(f"abr {self.abr!r} needs fetcher: own (dashdemux knows {' and '.join(abrs)})")
            if self.abr_params or self.rcvbuf is not None:
                raise ValueError("abr_params and rcvbuf are for fetcher: own")
            return self
        if self.abr not in abrs:
            raise ValueError(f"abr {self.abr!r}: with fetcher own, one of {', '.join(sorted(abrs))}")
        model = abrs[self.abr]
        try:
            model.model_validate(self.abr_params)
        except ValidationError as e:
            problems = _params_problems(e)
            raise ValueError(f"abr_params for {self.abr}: {problems} (keys: "
                             f"{', '.join(model.model_fields) or 'none'})") from None
        if self.rcvbuf is not None and not 4096 <= self.rcvbuf <= 1 << 30:
            raise ValueError("rcvbuf must be 4 KiB … 1 GiB")
        return self

    def _fits_settings(self, kind: PlayerKind) -> PlayerSpec:
        """A kind with settings of its own (dashjs): those only, and its ABRs, if it has any."""
        # Judged by value, not by which keys were written: a resolved scenario (resolved.yaml, a
        # sweep's override) spells out every default.
        abrs = kind.abrs()
        fields = type(self).model_fields
        if self.abr == fields["abr"].default and kind.default_abr is not None:
            # the field's default: the kind's own default ABR (frozen model: set once, here)
            object.__setattr__(self, "abr", kind.default_abr)
        if not abrs:
            if self.abr != fields["abr"].default or self.abr_params:
                raise ValueError(f"abr, abr_params: kind {kind.name} has no rate adaptation")
        elif self.abr not in abrs:
            raise ValueError(f"abr {self.abr!r} is not an ABR of kind {kind.name}; one of {', '.join(abrs)}")
        if self.fetcher != fields["fetcher"].default:
            raise ValueError(f"fetcher is for kind gstreamer; kind {kind.name} fetches for itself")
        if self.buffer is not None and "buffer" not in (kind.settings or ()):
            # dash.js has no one playout buffer: it fills to one of several targets (no cap besides
            # them). One value for all of them was the old undocumented double meaning (issue 47).
            targets = [n for n in DASHJS_BUFFER_SETTINGS if n in (kind.settings or ())]
            raise ValueError(f"buffer: not a setting of kind {kind.name}" + (
                f"; its buffer targets are {', '.join(targets)} (dash.js's defaults 12s, 30s, 60s, 600s; "
                "player/README.md)" if targets else ""))
        mine = set(kind.settings or ())
        other = sorted(name for name, f in type(self).model_fields.items()
                       if name not in mine and getattr(self, name) != f.get_default(call_default_factory=True))
        if other:
            takes = ", ".join(n for n in kind.settings or () if n not in ("kind", "fetcher"))
            raise ValueError(f"{', '.join(other)}: not a setting of kind {kind.name} (it takes {takes})")
        model = abrs.get(self.abr)
        if model is None:
            if self.abr_params:
                with_params = " and ".join(n for n, m in abrs.items() if m is not None)
                raise ValueError(f"abr_params: dash.js's {self.abr} takes none here ({with_params} take some)")
            return self
        try:
            object.__setattr__(self, "abr_params", model.model_validate(self.abr_params).model_dump())
        except ValidationError as e:
            problems = _params_problems(e)
            raise ValueError(f"abr_params for {kind.name} {self.abr}: {problems} (keys: "
                             f"{', '.join(model.model_fields)})") from None
        return self


    def dashjs_settings(self) -> dict[str, float]:
        """dash.js's `streaming` settings this player gives the page, in seconds, by dash.js's names."""
        return {js: getattr(self, name) / 1e9 for name, js in DASHJS_BUFFER_SETTINGS.items()}

    def dashjs_max_buffer_ns(self, video_ns: int) -> int:
        """The most video dash.js buffers for a video this long: the largest target that can apply
        (the long-form one only when the duration reaches the threshold, as dash.js compares)."""
        top = (self.dashjs_buffer_time_at_top_quality_long_form
               if video_ns >= self.dashjs_long_form_content_duration_threshold
               else self.dashjs_buffer_time_at_top_quality)
        return max(self.dashjs_stable_buffer_time, top)


def _params_problems(e: ValidationError) -> str:
    """An ABR parameter model's complaints in one line: each key with what is wrong with it."""
    return "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(all)'}: "
                     + ("unknown key" if err["type"] == "extra_forbidden" else err["msg"])
                     for err in e.errors())


def _console_lines(s: Mapping[str, Any], several_clients: bool) -> list[str]:
    if several_clients:
        return [f"  {role}: {p['bytes_received'] / 1e6:.2f} MB, underflows {p['underflows']} "
                f"({secs(p['underflow_total_s'])}), picture discards {p['picture_discards']}, "
                f"startup {secs(p['startup_delay_s'])}, playback {secs(p['playback_s'])}"
                for role, p in (s.get("players") or {}).items()]
    return [f"  underflows {s['underflows']} ({secs(s['underflow_total_s'])}), picture discards "
            f"{s['picture_discards']}, startup {secs(s['startup_delay_s'])}, playback {secs(s['duration_s'])}"]


def describe(sc: Any) -> str:
    """What `mpvlab validate` says of a scenario whose workload plays the `video:` section."""
    return (f"cc {sc.transport.cc}, scheduler {sc.transport.scheduler}, "
            f"video {sc.video.duration / 1e9:g} s")


VIDEO = WorkloadKind(
    name="video", spec=VideoWorkloadSpec, transport="mptcp", console_lines=_console_lines,
    media_ns=lambda _workload, video: int(video.duration), describe=describe,
    several_clients_keys=("video_length_s", "player_mode", "players", "aggregate", "http"))
