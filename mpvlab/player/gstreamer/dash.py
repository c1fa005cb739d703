"""DASH support for the mpvlab player: pipeline glue, per-segment records, ABR.

Pipeline (DASH mode):

    souphttpsrc(MPD) -> dashdemux -> qtdemux -> queue "playout" -> avdec_h264 -> fakesink
                         |  internal per-stream bin: souphttpsrc -> queue (20 MB)
                         |  (probe: per-request bytes, first byte, EOS)
                         '- bus: adaptive-streaming-statistics, one per media segment

Why the legacy ``dashdemux`` (gst-plugins-bad, GstAdaptiveDemux) and not
``dashdemux2`` (gst-plugins-good 1.22, also installed): dashdemux2 only works
inside playbin3/urisourcebin (it has no sink-pad driven mode usable in a hand-built
pipeline) and posts no per-segment statistics.  The legacy element
(gstadaptivedemux.c, 1.22) works like this, and every record below depends on it:

* one download task per stream; a segment is fetched by an internal
  souphttpsrc into a 20 MB queue (so the network transfer is not slowed by the
  player), then pushed downstream; the NEXT request is issued only after the
  whole segment has been pushed into our playout queue.  So the playout queue
  (bounded in media time, ``--buffer-ms``) is the player's buffer, and the
  download pauses while it is full (on/off pattern of real DASH players).
* after each media segment it posts ``adaptive-streaming-statistics``
  (uri, fragment-start-time [MICROseconds of CLOCK_MONOTONIC, although typed as
  a clock time], fragment-stop-time [ns, CLOCK_MONOTONIC, the segment is fully
  pushed], fragment-download-time [ns, request to EOS at the souphttpsrc],
  fragment-size [cumulative bytes of the stream, not per segment]) and then, in
  the same thread, selects the next representation:
  ``bitrate = connection-speed if set, else min(mean of the last 3 segment
  download rates, the last one) * bitrate-limit (0.8)``, capped by ``max-bitrate``; the chosen
  representation is the one with the highest @bandwidth <= bitrate (the lowest
  if none).  The first segment uses the lowest representation.

ABR policies:

* ``gst``: dashdemux's own rule above, untouched.  The player recomputes it
  from its own records (download rates per segment) to say what the rule
  should have chosen; ``abr_policy_mismatches`` counts disagreements.
* ``bba``: BBA-0 (Huang et al., SIGCOMM 2014): a rate map from buffer level B
  to rate, R_min up to the reservoir r, R_max above r + cushion c, linear in
  between, with the paper's hysteresis (move up only if f(B) reaches the next
  higher rate, down only if it falls to the next lower one).  It steers
  dashdemux: ``connection-speed`` is fixed at its maximum (so the demuxer's
  own estimate is never used) and ``max-bitrate`` is set to the chosen
  representation's @bandwidth from the statistics message's *synchronous* bus
  handler, i.e. in the download thread, before dashdemux selects the next
  segment's representation.  Every segment's actual representation (from its
  URL) is compared with the decision: ``abr_policy_mismatches`` must be 0.

Buffer level B at a decision = the playout queue's ``current-level-time``
(media time between the newest frame in and the frame the decoder takes next);
at that moment the segment just finished is entirely inside the queue and the
next one is not yet requested, so B is "downloaded but not played" minus the
few frames inside the decoder.

The MPD's parsing is in dash_mpd.py and the per-segment playback record, the same for our own client
(dash_client.py), in dash_playback.py.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, TYPE_CHECKING

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

from mpvlab.player.contract import AbrRecord  # noqa: E402
from mpvlab.player.gstreamer.dash_mpd import Representation, media_regex, parse_mpd  # noqa: E402
from mpvlab.player.gstreamer.dash_playback import SegmentPlayback  # noqa: E402

if TYPE_CHECKING:
    from mpvlab.player.gstreamer.abr.bba import BbaPolicy

STATS_MESSAGE = "adaptive-streaming-statistics"
GST_LOOKBACK = 3                 # NUM_LOOKBACK_FRAGMENTS in gstadaptivedemux.c
CONNECTION_SPEED_MAX_KBPS = 4294967   # dashdemux's property maximum (kbit/s)


# ---- ABR policies ----------------------------------------------------------------------
# BBA-0 lives in the ABR registry (mpvlab/player/gstreamer/abr/bba.py); re-exported here for this player.


def gst_rule_level(rates: list[int], recent_bps: list[float], limit: float,
                   max_bitrate: int = 0) -> tuple[int, float]:
    """dashdemux's choice: min(mean of the last 3 download rates, the last one) x
    bitrate-limit ("conservative approach, make sure we don't upgrade too fast"),
    capped by max-bitrate; highest representation with @bandwidth <= that, else the lowest."""
    last = recent_bps[-GST_LOOKBACK:]
    target = min(sum(last) / len(last), last[-1]) * limit if last else 0.0
    if max_bitrate:
        target = min(target, max_bitrate)
    ok = [i for i, b in enumerate(rates) if b <= target]
    return (ok[-1] if ok else 0), target


# ---- records ---------------------------------------------------------------------------
@dataclass
class Download:
    """One HTTP request made by dashdemux's internal souphttpsrc (seen by our probe)."""
    uri: str
    t_request: float | None = None     # the demuxer's download start (from the stats message)
    t_segment_event: float = 0.0       # souphttpsrc started (new request)
    t_first_byte: float | None = None
    t_eos: float | None = None
    bytes: int = 0


@dataclass
class SegmentRecord:
    index: int                          # 0-based position in the presentation
    number: int                         # $Number$ in the URL
    level: int
    rep_id: str
    bitrate_bps: int                    # representation @bandwidth
    uri: str
    bytes: int
    t_request: float                    # request issued (demuxer's download start)
    t_first_byte: float | None
    t_downloaded: float                 # last byte received (request + download time)
    t_pushed: float                     # whole segment inside the playout queue
    download_s: float
    throughput_bps: float
    init_bytes: int                     # init segment fetched right before (switch / start)
    buffer_s_at_decision: float | None  # playout buffer when this segment's level was chosen
    policy_level: int                   # what the ABR rule says this segment should be
    t_play: float | None = None         # first frame of this segment rendered
    frames_rendered: int = 0
    frames_discarded: int = 0

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 6)
        return d




@dataclass
class DashSession(SegmentPlayback):
    """Everything DASH-specific the player needs; created by the Player in DASH mode."""

    abr: str                                        # "gst" | "bba"
    t_of_ns: Callable[[int], float]                 # CLOCK_MONOTONIC ns -> seconds since t0
    emit: Callable[..., float]                      # EventLog.emit
    add_bytes: Callable[[int], None]
    queue_level_s: Callable[[], float]
    bba_reservoir_s: float = 5.0
    bba_cushion_s: float = 15.0
    gst_bitrate_limit: float = 0.8
    reps: list[Representation] = field(default_factory=list)
    mpd_duration_s: float | None = None
    segment_s: float = 0.0
    segments: list[SegmentRecord] = field(default_factory=list)
    downloads: list[Download] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    policy: BbaPolicy | None = None
    demux: Gst.Element | None = None
    next_policy_level: int = 0                      # decision for the next segment
    next_buffer_s: float | None = None
    _mpd_bytes: bytearray = field(default_factory=bytearray)
    _rx: list[tuple[re.Pattern[str], Representation]] = field(default_factory=list)
    _init_paths: dict[str, Representation] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _play: dict[int, list[Any]] = field(default_factory=dict)   # index -> [t_play, rendered, discarded]
    _pending_init_bytes: int = 0
    _probed: set[int] = field(default_factory=set)
    _top_src: Gst.Element | None = None
    error: str | None = None

    # ---- construction ----------------------------------------------------------------
    def build(self, pipeline: Gst.Pipeline, src: Gst.Element,
              make: Callable[..., Gst.Element]) -> None:
        """souphttpsrc(MPD) -> dashdemux -> qtdemux; qtdemux's video pad is linked to the
        playout queue by the Player's own pad-added handler."""
        self._top_src = src
        self.demux = make("dashdemux", "dashdemux")
        if self.abr == "bba":
            # The demuxer's estimate is replaced by "infinitely fast"; only max-bitrate
            # (set per decision) limits the choice.  Start at the lowest level.
            self.demux.set_property("connection-speed", CONNECTION_SPEED_MAX_KBPS)
            self.demux.set_property("max-bitrate", 1)
        else:
            self.demux.set_property("bitrate-limit", self.gst_bitrate_limit)
        self.qtdemux = make("qtdemux", "demux")
        for el in (self.demux, self.qtdemux):
            pipeline.add(el)
        if not src.link(self.demux):
            raise RuntimeError("cannot link souphttpsrc to dashdemux")
        src.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, self._on_mpd_buffer)
        self.demux.connect("pad-added", self._on_demux_pad)
        pipeline.connect("deep-element-added", self._on_deep_element)
        bus = pipeline.get_bus()
        bus.enable_sync_message_emission()
        bus.connect("sync-message::element", self._on_sync_element)

    def _on_mpd_buffer(self, _pad: Gst.Pad, info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        buf = info.get_buffer()
        if buf is not None:
            ok, m = buf.map(Gst.MapFlags.READ)
            if ok:
                self._mpd_bytes.extend(m.data)
                buf.unmap(m)
        return Gst.PadProbeReturn.OK

    def _ensure_mpd(self) -> None:
        if self.reps or not self._mpd_bytes:
            return
        self.reps, self.mpd_duration_s = parse_mpd(bytes(self._mpd_bytes))
        if not self.reps:
            raise ValueError("the MPD has no video representation")
        self.segment_s = self.reps[0].segment_s
        self._rx = [(media_regex(r.media), r) for r in self.reps]
        self._init_paths = {r.init: r for r in self.reps}
        if self.abr == "bba":
            # Imported here, not at import time: the ABR package needs pydantic, which a physical
            # host's system Python may lack (progressive and gst runs there need only GStreamer).
            from mpvlab.player.gstreamer.abr.bba import BbaPolicy
            self.policy = BbaPolicy(tuple(r.bandwidth for r in self.reps),
                                    self.bba_reservoir_s, self.bba_cushion_s)

    def _on_demux_pad(self, _demux: Gst.Element, pad: Gst.Pad) -> None:
        sinkpad = self.qtdemux.get_static_pad("sink")
        if pad.get_name().startswith("video") and not sinkpad.is_linked():
            if pad.link(sinkpad) != Gst.PadLinkReturn.OK:
                self.emit("error", reason=f"cannot link dashdemux pad {pad.get_name()}")
            return
        extra = Gst.ElementFactory.make("fakesink", None)
        extra.set_property("sync", False)
        extra.set_property("async", False)
        assert self.demux is not None       # its own pad-added signal brought us here
        parent = self.demux.get_parent()
        parent.add(extra)
        extra.sync_state_with_parent()
        pad.link(extra.get_static_pad("sink"))
        self.emit("ignored_stream", pad=pad.get_name(), caps="dash")

    def _on_deep_element(self, _bin: Gst.Bin, _sub: Gst.Bin, el: Gst.Element) -> None:
        # dashdemux's internal segment source (one per stream, reused for every request).
        fac = el.get_factory()
        if fac is None or fac.get_name() != "souphttpsrc" or hash(el) in self._probed:
            return
        if el is self._top_src:
            return
        self._probed.add(hash(el))
        el.get_static_pad("src").add_probe(
            Gst.PadProbeType.BUFFER | Gst.PadProbeType.EVENT_DOWNSTREAM,
            self._on_segment_src, el)

    def _on_segment_src(self, _pad: Gst.Pad, info: Gst.PadProbeInfo,
                        el: Gst.Element) -> Gst.PadProbeReturn:
        if info.type & Gst.PadProbeType.BUFFER:
            buf = info.get_buffer()
            n = buf.get_size() if buf is not None else 0
            now = self.t_of_ns(_mono_ns())
            with self._lock:
                if self.downloads:
                    d = self.downloads[-1]
                    if d.t_first_byte is None:
                        d.t_first_byte = now
                    d.bytes += n
            self.add_bytes(n)
            return Gst.PadProbeReturn.OK
        ev = info.get_event()
        if ev is None:
            return Gst.PadProbeReturn.OK
        if ev.type == Gst.EventType.SEGMENT:
            # The demuxer's own probe resets its byte count here too: a new request.
            # The MPD is complete before the first segment request: parse it now.
            try:
                self._ensure_mpd()
            except Exception as e:
                self.error = f"MPD: {type(e).__name__}: {e}"
            uri = el.get_property("location") or ""
            with self._lock:
                self.downloads.append(Download(uri=uri, t_segment_event=self.t_of_ns(_mono_ns())))
        elif ev.type == Gst.EventType.EOS:
            now = self.t_of_ns(_mono_ns())
            with self._lock:
                if self.downloads and self.downloads[-1].t_eos is None:
                    self.downloads[-1].t_eos = now
                    d = self.downloads[-1]
                    if urllib.parse.urlsplit(d.uri).path.rsplit("/", 1)[-1] in self._init_names():
                        self._pending_init_bytes += d.bytes
        return Gst.PadProbeReturn.OK

    def _init_names(self) -> set[str]:
        return {p.rsplit("/", 1)[-1] for p in self._init_paths}

    # ---- the per-segment statistics message (download thread, synchronous) -----------
    def _on_sync_element(self, _bus: Gst.Bus, msg: Gst.Message) -> None:
        st = msg.get_structure()
        if st is None or st.get_name() != STATS_MESSAGE or not st.has_field("fragment-start-time"):
            return
        try:
            self._ensure_mpd()
            self._on_segment_done(st)
        except Exception as e:          # never let an exception escape into the demuxer thread
            self.error = f"{type(e).__name__}: {e}"
            self.emit("warning", element="mpvlab_dash", reason=self.error)

    def _on_segment_done(self, st: Gst.Structure) -> None:
        uri = st.get_string("uri") or ""
        ok_s, start_us = st.get_uint64("fragment-start-time")
        ok_e, stop_ns = st.get_uint64("fragment-stop-time")
        ok_d, dl_ns = st.get_uint64("fragment-download-time")
        t_req = self.t_of_ns(start_us * 1000)          # microseconds: see module doc
        t_pushed = self.t_of_ns(stop_ns)
        download_s = dl_ns / 1e9
        path = urllib.parse.urlsplit(uri).path.rsplit("/", 1)[-1]
        rep, number = self._identify(path)
        with self._lock:
            d = next((x for x in reversed(self.downloads) if x.uri == uri), None)
            nbytes = d.bytes if d else 0
            t_fb = d.t_first_byte if d else None
            if d is not None:
                d.t_request = t_req
            init_b = self._pending_init_bytes
            self._pending_init_bytes = 0
        idx = number - rep.start_number
        if self.segments:
            policy_level, buf_at = self.next_policy_level, self.next_buffer_s
        else:
            policy_level, buf_at = 0, None      # dashdemux starts at the lowest representation
        rec = SegmentRecord(
            index=idx, number=number, level=rep.level, rep_id=rep.id, bitrate_bps=rep.bandwidth,
            uri=uri, bytes=nbytes, t_request=t_req, t_first_byte=t_fb,
            t_downloaded=t_req + download_s, t_pushed=t_pushed, download_s=download_s,
            throughput_bps=(nbytes * 8 / download_s) if download_s > 0 else 0.0,
            init_bytes=init_b, buffer_s_at_decision=buf_at, policy_level=policy_level)
        with self._lock:
            self.segments.append(rec)
        self.emit("segment", index=idx, level=rep.level, bitrate_bps=rep.bandwidth,
                  bytes=nbytes, t_request=round(t_req, 6), t_downloaded=round(t_req + download_s, 6),
                  t_pushed=round(t_pushed, 6), download_s=round(download_s, 6),
                  policy_level=policy_level, buffer_s_at_decision=buf_at)
        self._decide_next()

    def _identify(self, path: str) -> tuple[Representation, int]:
        for rx, rep in self._rx:
            m = rx.search(path)
            if m:
                return rep, int(m.group(1))
        raise ValueError(f"segment URL {path!r} matches no representation of the MPD")

    def _decide_next(self) -> None:
        """Runs in the download thread right before dashdemux picks the next representation."""
        buf_s = self.queue_level_s()
        prev = self.segments[-1].level
        dec: dict[str, Any] = {"t": round(self.t_of_ns(_mono_ns()), 6),
                               "after_index": self.segments[-1].index, "buffer_s": round(buf_s, 6),
                               "prev_level": prev}
        if self.policy is not None:
            lvl = self.policy.decide(prev, buf_s)
            # connection-speed is at its maximum, so max-bitrate alone decides:
            # the highest representation with @bandwidth <= max-bitrate is exactly `lvl`.
            assert self.demux is not None
            self.demux.set_property("max-bitrate", self.reps[lvl].bandwidth)
            dec.update(level=lvl, f_bps=round(self.policy.f(buf_s), 1))
        else:
            rates = [r.bandwidth for r in self.reps]
            recent = [s.throughput_bps for s in self.segments]
            lvl, target = gst_rule_level(rates, recent, self.gst_bitrate_limit)
            dec.update(level=lvl, target_bps=round(target, 1))
        self.next_policy_level, self.next_buffer_s = lvl, round(buf_s, 6)
        self.decisions.append(dec)
        self.emit("abr_decision", **{k: v for k, v in dec.items() if k != "t"}, t=dec["t"])

    # ---- summary ---------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        for rec in self.segments:
            p = self._play.get(rec.index)
            if p is not None:
                rec.t_play, rec.frames_rendered, rec.frames_discarded = p[0], p[1], p[2]
        segs = [s.to_json() for s in self.segments]
        levels = [s.level for s in self.segments]
        switches = sum(1 for a, b in zip(levels, levels[1:]) if a != b)
        mism = [s.index for s in self.segments if s.level != s.policy_level]
        params: dict[str, Any]
        if self.abr == "bba":
            params = {"reservoir_s": self.bba_reservoir_s, "cushion_s": self.bba_cushion_s,
                      "connection_speed_kbps": CONNECTION_SPEED_MAX_KBPS}
        else:
            params = {"bitrate_limit": self.gst_bitrate_limit, "lookback_segments": GST_LOOKBACK}
        inits = [{"uri": d.uri, "bytes": d.bytes, "t_first_byte": d.t_first_byte, "t_eos": d.t_eos}
                 for d in self.downloads
                 if urllib.parse.urlsplit(d.uri).path.rsplit("/", 1)[-1] in self._init_names()]
        return {
            "dash": True,
            "abr": AbrRecord(self.abr, params),
            "representations": [{"level": r.level, "id": r.id, "bitrate_bps": r.bandwidth,
                                 "width": r.width, "height": r.height} for r in self.reps],
            "segment_s": self.segment_s,
            "mpd_duration_s": self.mpd_duration_s,
            "segments": segs,
            "segments_downloaded": len(segs),
            "quality_avg": (sum(levels) / len(levels)) if levels else None,
            "bitrate_avg_bps": (sum(s.bitrate_bps for s in self.segments) / len(segs)) if segs else None,
            "bitrate_switches": switches,
            "abr_decisions": self.decisions,
            "abr_policy_mismatches": len(mism),
            "abr_policy_mismatch_segments": mism,
            "init_downloads": inits,
            "dash_error": self.error,
        }


def _mono_ns() -> int:
    return time.monotonic_ns()
