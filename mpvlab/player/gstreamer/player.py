"""mpvlab headless video player with QoE counters (progressive HTTP MP4, H.264).

Pipeline (built by hand so every element's QoS/sync setting is explicit):

    souphttpsrc -> qtdemux -> queue "playout" -> avdec_h264 -> fakesink
                  (probe: bytes)  (underrun/running)  (qos=false)  (sync, qos, max-lateness,
                                                                    handoffs)

Why each choice (see player/README.md for the counter definitions):
  * souphttpsrc only: the player runs under ``mptcpize run`` in the client
    namespace, which makes libsoup's plain TCP socket an MPTCP socket.
  * https:// with ``--ca-file``: every souphttpsrc (also dashdemux's internal
    ones) gets a ``tls-database`` holding exactly that certificate.  The
    ``ssl-ca-file`` property is not used: souphttpsrc 1.22 applies it only
    with libsoup 2, and GStreamer loads libsoup 3 here (which is also what
    negotiates HTTP/2, via TLS ALPN).  Verification stays on (ssl-strict).
  * the playout buffer is a plain ``queue`` before the decoder holding
    compressed frames, bounded in time only (``--buffer-ms``); its
    ``underrun``/``running`` signals are the buffer-underflow source.
  * decoder QoS off: avdec_h264's own QoS drops frames on tiny CPU jitter and
    over-drops after long stalls, which would be counted as false discards.
  * sink QoS on with an explicit ``max-lateness``: the sink drops a frame that
    is later than that and posts one QOS message per dropped frame: those are
    the picture discards.  Rendered frames are counted by ``handoff`` signals,
    never by the sink's ``stats`` (they reset on pause).
  * discard mode never pauses (the clock runs on, late frames are dropped);
    rebuffer mode pauses on underflow and resumes at ``--rebuffer-resume-ms``.

Runs under .venv/bin/python (needs Debian's PyGObject ``gi``).
Exit codes: 0 played to EOS, 2 error (HTTP, network, decode, ...), 3 timeout,
4 interrupted (SIGINT/SIGTERM), 1 bad arguments/internal failure.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gio, GLib, Gst  # noqa: E402

from mpvlab.player.gstreamer import dash  # noqa: E402
from mpvlab.player.gstreamer.args import parse_args  # noqa: E402
from mpvlab.player.gstreamer.counters import EventLog, Underflows  # noqa: E402
from mpvlab.player.gstreamer.host import cpu_use, diagnose_connect, libsoup_loaded  # noqa: E402
from mpvlab.player.contract import (EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK,  # noqa: E402
                                    EXIT_TIMEOUT, finish)
from mpvlab.player.start_signal import wait_for_t0  # noqa: E402
# Our own DASH client and the ABR registry (mpvlab/player/gstreamer/abr) are imported when --fetcher own asks for
# them: they need pydantic, which the system Python of a physical host need not have (a progressive
# or dashdemux run there needs only GStreamer's Python bindings).
if TYPE_CHECKING:
    from mpvlab.player.gstreamer import dash_client

SAMPLE_PERIOD_MS = 100      # bytes/queue-level samples in the events file
REBUFFER_POLL_MS = 10       # how often a paused (rebuffering) player checks the buffer level
DISCARD_UNDERFLOW_WINDOW_S = 1.0   # discards this soon after an underflow belong to it


class Player:
    def __init__(self, args: argparse.Namespace, events: EventLog, t0_ns: int) -> None:
        self.a = args
        self.ev = events
        self.t0_ns = t0_ns
        self.loop = GLib.MainLoop()
        self.lock = threading.Lock()           # counters touched by streaming threads

        self.rendered = 0
        self.discards = 0
        self.late_rendered = 0                 # basesink "emergency" renders of late frames
        self.discards_no_underflow = 0         # discards away from any underflow episode
        self.bytes = 0
        self.t_start: float | None = None
        self.t_first_frame: float | None = None
        self.t_eos: float | None = None
        self.upstream_eos = False              # EOS reached the playout queue: no more data
        self.duration_ns: int | None = None
        self.fps: tuple[int, int] | None = None
        self.under = Underflows(merge_s=args.underflow_merge_ms / 1000.0)
        self.rebuffering = False               # rebuffer mode: paused, waiting for data
        self.rebuffer_poll_id = 0
        self.playing = False                   # startup buffering done, clock started
        self.t_playing: float | None = None
        self.status = "running"
        self.reason = ""
        self.exit_code = EXIT_OK
        self.finished = False
        # One trust store for every HTTP source: exactly the server's certificate.
        self.tls_db: Gio.TlsDatabase | None = None
        if args.ca_file is not None:
            try:
                self.tls_db = Gio.TlsFileDatabase.new(str(args.ca_file))
            except GLib.Error as e:
                raise RuntimeError(f"--ca-file {args.ca_file}: {e.message}") from None
        self.http_sources = 0                  # souphttpsrc elements given the trust store
        self.dash: dash.DashSession | dash_client.ClientSession | None = None
        # the same object as self.dash when our own client fetches, typed as such (None otherwise)
        self.client: dash_client.ClientSession | None = None
        self.own_client = args.dash and args.fetcher == "own"
        if self.own_client:
            # Our own DASH client fetches (mpvlab/player/gstreamer/dash_client.py) and feeds an appsrc.
            from mpvlab.player.gstreamer import dash_client
            self.dash = self.client = dash_client.ClientSession(
                url=args.url, abr_name=args.abr, abr_params=args.abr_params, seed=args.seed,
                rcvbuf=args.rcvbuf_bytes, mptcp=not args.no_mptcp, buffer_s=args.buffer_ms / 1000.0,
                t_of_ns=events.t, emit=events.emit, add_bytes=self._add_bytes,
                position_s=self._position_s, on_fatal=self._on_fetch_fatal,
                http_version=args.http_version, ca_file=None if args.ca_file is None else str(args.ca_file))
        elif args.dash:
            self.dash = dash.DashSession(
                abr=args.abr, t_of_ns=events.t, emit=events.emit, add_bytes=self._add_bytes,
                queue_level_s=lambda: self._queue_ms() / 1000.0,
                bba_reservoir_s=args.bba_reservoir_s, bba_cushion_s=args.bba_cushion_s,
                gst_bitrate_limit=args.gst_bitrate_limit)
        self.pipeline = self._build()

    # ---- construction -------------------------------------------------------------
    @staticmethod
    def _make(factory: str, name: str, **props: Any) -> Gst.Element:
        el = Gst.ElementFactory.make(factory, name)
        if el is None:
            raise RuntimeError(f"GStreamer element '{factory}' is not available "
                               "(packages gstreamer1.0-plugins-good/-libav)")
        for k, v in props.items():
            el.set_property(k, v)
        return el

    def _build(self) -> Gst.Pipeline:
        a = self.a
        p = Gst.Pipeline.new("mpvlab-player")
        if self.own_client:
            from mpvlab.player.gstreamer import dash_client
            assert isinstance(self.dash, dash_client.ClientSession)
            self.src = self.dash.build(p, self._make)
        else:
            self.src = self._make("souphttpsrc", "src", location=a.url, retries=a.http_retries)
            self._trust(self.src)
        # dashdemux creates its segment sources itself: give each the same trust store
        # when it joins the pipeline (before it starts, so before its session opens).
        p.connect("deep-element-added", self._on_deep_element)
        if self.dash is None:
            self.demux = self._make("qtdemux", "demux")
        self.queue = self._make("queue", "playout",
                                max_size_time=int(a.buffer_ms * Gst.MSECOND),
                                max_size_bytes=0, max_size_buffers=0)
        self.sink = self._make("fakesink", "sink", sync=True, qos=True,
                               max_lateness=int(a.max_lateness_ms * Gst.MSECOND),
                               signal_handoffs=True, enable_last_sample=False, **{"async": True})
        chain: list[Gst.Element] = [self.queue]
        if not a.no_decode:
            # QoS off: see module doc (false discards from the decoder's own QoS).
            self.dec = self._make("avdec_h264", "dec", qos=False)
            chain.append(self.dec)
        chain.append(self.sink)
        if self.client is not None:
            # appsrc -> qtdemux, both added by ClientSession.build
            for el in chain:
                p.add(el)
            self.demux = self.client.qtdemux
        elif isinstance(self.dash, dash.DashSession):
            # souphttpsrc(MPD) -> dashdemux -> qtdemux (see dash.py)
            for el in [self.src, *chain]:
                p.add(el)
            self.dash.build(p, self.src, self._make)
            self.demux = self.dash.qtdemux
        else:
            for el in [self.src, self.demux, *chain]:
                p.add(el)
            if not self.src.link(self.demux):
                raise RuntimeError("cannot link souphttpsrc to qtdemux")
        for up, down in zip(chain, chain[1:]):
            if not up.link(down):
                raise RuntimeError(f"cannot link {up.get_name()} to {down.get_name()}")
        self.demux.connect("pad-added", self._on_pad_added)
        self.queue.connect("underrun", self._on_underrun)
        self.queue.connect("running", self._on_running)
        self.sink.connect("handoff", self._on_handoff)
        self.src.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, self._on_src_buffer)
        self.queue.get_static_pad("sink").add_probe(Gst.PadProbeType.EVENT_DOWNSTREAM,
                                                    self._on_queue_event)
        bus = p.get_bus()
        bus.add_signal_watch()
        bus.connect("message", self._on_message)
        return p

    def _trust(self, el: Gst.Element) -> None:
        if self.tls_db is not None:
            el.set_property("tls-database", self.tls_db)
            with self.lock:
                self.http_sources += 1

    def _on_deep_element(self, _bin: Gst.Bin, _sub: Gst.Bin, el: Gst.Element) -> None:
        fac = el.get_factory()
        if fac is not None and fac.get_name() == "souphttpsrc" and el is not self.src:
            self._trust(el)

    # ---- streaming-thread callbacks (keep them short) -----------------------------
    def _on_pad_added(self, _demux: Gst.Element, pad: Gst.Pad) -> None:
        caps = pad.get_current_caps() or pad.query_caps(None)
        name = caps.get_structure(0).get_name() if caps and caps.get_size() else ""
        qpad = self.queue.get_static_pad("sink")
        if name.startswith("video/") and not qpad.is_linked():
            if pad.link(qpad) != Gst.PadLinkReturn.OK:
                self.ev.emit("error", reason=f"cannot link demuxer pad {pad.get_name()} ({name})")
            return
        # Any other stream (audio, second video) is not part of the QoE counters:
        # terminate it in an unsynchronised fakesink so qtdemux never sees not-linked.
        extra = Gst.ElementFactory.make("fakesink", None)
        extra.set_property("sync", False)
        extra.set_property("async", False)
        self.pipeline.add(extra)
        extra.sync_state_with_parent()
        pad.link(extra.get_static_pad("sink"))
        self.ev.emit("ignored_stream", pad=pad.get_name(), caps=name)

    def _add_bytes(self, n: int) -> None:
        with self.lock:
            self.bytes += n

    def _on_src_buffer(self, _pad: Gst.Pad, info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        buf = info.get_buffer()
        if buf is not None:
            with self.lock:
                self.bytes += buf.get_size()
        return Gst.PadProbeReturn.OK

    def _on_queue_event(self, _pad: Gst.Pad, info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        e = info.get_event()
        if e is not None and e.type == Gst.EventType.EOS:
            with self.lock:
                self.upstream_eos = True
            self.ev.emit("download_complete", bytes=self.bytes)
        return Gst.PadProbeReturn.OK

    def _on_handoff(self, _sink: Gst.Element, buf: Gst.Buffer, _pad: Gst.Pad) -> None:
        first = False
        with self.lock:
            self.rendered += 1
            if self.t_first_frame is None:
                self.t_first_frame = self.ev.t()
                first = True
        if first:
            self.ev.emit("first_frame", t=self.t_first_frame, pts_s=_ns_to_s(buf.pts))
        if self.dash is not None:
            self.dash.on_render(buf.pts, self.t_first_frame if first else self.ev.t())

    def _counting_underflows(self) -> bool:
        # Underruns before playback started are startup (startup_delay_s), after
        # upstream EOS they are the natural end of the file: neither is an underflow.
        return (self.playing and self.t_first_frame is not None and not self.upstream_eos
                and not self.finished)

    def _on_underrun(self, _q: Gst.Element) -> None:
        t = self.ev.t()
        with self.lock:
            if not self._counting_underflows():
                return
            if self.a.mode == "rebuffer":
                if self.rebuffering:
                    return
                self.rebuffering = True
                self.under.on_underrun(t)
                started = True
            else:
                started = self.under.on_underrun(t)
        if started:
            self.ev.emit("underflow_start", t=t, queue_ms=self._queue_ms())
        if self.a.mode == "rebuffer":
            # State changes belong to the main loop, not the streaming thread.
            GLib.idle_add(self._pause_for_rebuffer)

    def _on_running(self, _q: Gst.Element) -> None:
        if self.a.mode == "rebuffer":
            return      # a rebuffering episode ends at resume, not at the first buffer
        t = self.ev.t()
        with self.lock:
            self.under.on_running(t)

    # ---- own DASH client hooks (fetch thread) --------------------------------------
    def _position_s(self) -> float:
        """Playback position (stream time of the sink); 0 before playing."""
        ok, pos = self.pipeline.query_position(Gst.Format.TIME)
        return pos / 1e9 if ok and pos >= 0 else 0.0

    def _on_fetch_fatal(self, reason: str) -> None:
        def fail() -> bool:
            self.ev.emit("error", element="dash_client", reason=reason, debug="")
            self._finish("error", f"dash_client: {reason}", EXIT_ERROR)
            return False
        GLib.idle_add(fail)

    # ---- main-loop side ---------------------------------------------------------
    def _queue_ms(self) -> float:
        return self.queue.get_property("current-level-time") / 1e6

    def _pause_for_rebuffer(self) -> bool:
        if self.finished:
            return False
        self.pipeline.set_state(Gst.State.PAUSED)
        self.ev.emit("rebuffer_pause", queue_ms=self._queue_ms())
        if not self.rebuffer_poll_id:
            self.rebuffer_poll_id = GLib.timeout_add(REBUFFER_POLL_MS, self._rebuffer_poll)
        return False

    def _buffered_enough(self, threshold_ms: float) -> tuple[bool, float]:
        level = self._queue_ms()
        # A threshold cannot exceed what the queue can hold; a finished download
        # also counts (the tail of the file may be shorter than the threshold).
        need = min(threshold_ms, 0.95 * self.a.buffer_ms)
        return (level >= need or self.upstream_eos), level

    def _startup_poll(self) -> bool:
        if self.finished:
            return False
        ok, level = self._buffered_enough(self.a.startup_buffer_ms)
        if not ok:
            return True
        self.playing = True
        self.t_playing = self.ev.emit("playing", queue_ms=round(level, 1))
        self.pipeline.set_state(Gst.State.PLAYING)
        return False

    def _rebuffer_poll(self) -> bool:
        if self.finished:
            self.rebuffer_poll_id = 0
            return False
        ok, level = self._buffered_enough(self.a.rebuffer_resume_ms)
        if not ok:
            return True
        t = self.ev.t()
        with self.lock:
            self.rebuffering = False
            self.under.on_running(t)
            end = self.under.force_close(t)
        self.pipeline.set_state(Gst.State.PLAYING)
        if end is not None:
            self.ev.emit("underflow_end", t=end, queue_ms=level,
                         duration_s=round(self.under.episodes[-1][1] - self.under.episodes[-1][0], 6))
        self.rebuffer_poll_id = 0
        return False

    def _sample(self) -> bool:
        if self.finished:
            return False
        now = self.ev.t()
        with self.lock:
            b = self.bytes
            end = self.under.due_close(now) if self.a.mode == "discard" else None
        if end is not None:
            self._emit_underflow_end(end)
        self.ev.emit("bytes", t=now, bytes=b, queue_ms=round(self._queue_ms(), 1),
                     rendered=self.rendered, discards=self.discards)
        return True

    def _emit_underflow_end(self, end: float) -> None:
        s, e = self.under.episodes[-1]
        self.ev.emit("underflow_end", t=e, duration_s=round(e - s, 6))

    def _learn_stream(self) -> None:
        ok, dur = self.pipeline.query_duration(Gst.Format.TIME)
        if self.own_client and self.dash is not None and self.dash.mpd_duration_s:
            # The presentation's length is the MPD's: qtdemux, fed fragment by fragment through
            # the appsrc, reports only what the init segment says (measured: 2 s for a 12 s
            # presentation in 2 s segments).
            self.duration_ns = int(round(self.dash.mpd_duration_s * 1e9))
        elif ok and dur > 0:
            self.duration_ns = dur
        pad = self.queue.get_static_pad("src")
        caps = pad.get_current_caps() if pad else None
        if caps and caps.get_size():
            ok, n, d = caps.get_structure(0).get_fraction("framerate")
            if ok and n > 0 and d > 0:
                self.fps = (n, d)
        self.ev.emit("stream_info", duration_s=_ns_to_s(self.duration_ns),
                     fps=None if self.fps is None else self.fps[0] / self.fps[1],
                     frames_expected=self._frames_expected()[0])

    def _frames_expected(self) -> tuple[int | None, str]:
        if self.a.frames_expected is not None:
            return self.a.frames_expected, "argument"
        if self.duration_ns and self.fps:
            n, d = self.fps
            return int(round(self.duration_ns * n / (d * 1e9))), "duration*framerate"
        return None, "unknown"

    def _on_message(self, _bus: Gst.Bus, msg: Gst.Message) -> None:
        t = msg.type
        if t == Gst.MessageType.QOS and msg.src == self.sink:
            # basesink posts exactly one QOS message per buffer it drops for lateness.
            _live, running, _stream, ts, _dur = msg.parse_qos()
            jitter, _prop, _q = msg.parse_qos_values()
            now = self.ev.t()
            with self.lock:
                self.discards += 1
                # A discard with no underflow open and none ended within the last
                # second had its data in time: the frame was late because this
                # process did not get the CPU (shared cores, real-time daemons).
                u = self.under
                near = u.open_start is not None or (
                    bool(u.episodes) and now - u.episodes[-1][1] < DISCARD_UNDERFLOW_WINDOW_S)
                if not near:
                    self.discards_no_underflow += 1
            if self.dash is not None:
                self.dash.on_discard(ts)
            self.ev.emit("discard", t=now, pts_s=_ns_to_s(ts), late_ms=round(jitter / 1e6, 3),
                         queue_ms=round(self._queue_ms(), 1), underflow=near)
        elif t == Gst.MessageType.EOS:
            self.t_eos = self.ev.t()
            with self.lock:
                end = self.under.force_close(self.t_eos)
            if end is not None and self.a.mode == "discard":
                self._emit_underflow_end(end)
            self.ev.emit("eos", t=self.t_eos)
            self._finish("eos", "played to end of stream", EXIT_OK)
        elif t == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            src = msg.src.get_name() if msg.src else "?"
            reason = f"{src}: {err.message}"
            if msg.src == self.src and self.bytes == 0:
                # souphttpsrc 1.22 reports a refused/unreachable connection only as a
                # generic "Internal data stream error": name the real cause.
                reason += f" [{diagnose_connect(self.a.url, self.a.ca_file)}]"
            self.ev.emit("error", element=src, reason=err.message, debug=dbg or "")
            self._finish("error", reason, EXIT_ERROR)
        elif t == Gst.MessageType.WARNING:
            w, dbg = msg.parse_warning()
            if msg.src == self.sink and w.matches(Gst.CoreError.quark(), Gst.CoreError.CLOCK):
                # basesink renders a too-late frame anyway when nothing was rendered for
                # more than 1 s of stream time, and posts this warning each time.  The
                # frame is counted in frames_rendered (handoff); this says how many of
                # those were late.
                with self.lock:
                    self.late_rendered += 1
                self.ev.emit("late_render", reason=w.message)
            else:
                self.ev.emit("warning", element=msg.src.get_name() if msg.src else "?",
                             reason=w.message)
        elif t == Gst.MessageType.ASYNC_DONE and self.duration_ns is None:
            self._learn_stream()

    def _on_timeout(self) -> bool:
        self.ev.emit("timeout", limit_s=self.a.timeout_s)
        self._finish("timeout", f"no EOS within --timeout-s {self.a.timeout_s}", EXIT_TIMEOUT)
        return False

    def _on_signal(self, signame: str) -> bool:
        self.ev.emit("interrupted", signal=signame)
        self._finish("interrupted", f"received {signame}", EXIT_INTERRUPTED)
        return False

    def _finish(self, status: str, reason: str, code: int) -> None:
        if self.finished:
            return
        self.finished = True
        self.status, self.reason, self.exit_code = status, reason, code
        self.loop.quit()

    # ---- run + summary ------------------------------------------------------------
    def run(self) -> int:
        GLib.timeout_add(SAMPLE_PERIOD_MS, self._sample)
        if self.a.timeout_s:
            GLib.timeout_add(int(self.a.timeout_s * 1000), self._on_timeout)
        for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
            GLib.unix_signal_add(GLib.PRIORITY_HIGH, sig, self._on_signal, name)
        self.t_start = self.ev.emit("start", url=self.a.url, mode=self.a.mode,
                                    buffer_ms=self.a.buffer_ms,
                                    max_lateness_ms=self.a.max_lateness_ms,
                                    rebuffer_resume_ms=self.a.rebuffer_resume_ms,
                                    startup_buffer_ms=self.a.startup_buffer_ms,
                                    decode=not self.a.no_decode, dash=self.a.dash,
                                    abr=self.a.abr if self.a.dash else None)
        # Start PAUSED: the request goes out and the queue fills; the clock starts
        # (PLAYING) once --startup-buffer-ms is buffered (see _startup_poll).
        ret = self.pipeline.set_state(Gst.State.PAUSED)
        if self.client is not None:
            self.client.start()
        GLib.timeout_add(REBUFFER_POLL_MS, self._startup_poll)
        if ret == Gst.StateChangeReturn.FAILURE:
            # The bus usually carries the real reason; give it a moment to arrive.
            def fail_to_start() -> bool:
                self._finish("error", "pipeline failed to start", EXIT_ERROR)
                return False        # once: GLib repeats a timeout whose callback returns True
            GLib.timeout_add(200, fail_to_start)
        self.loop.run()
        if self.client is not None:
            self.client.stop()
        t_stop = self.ev.t()
        with self.lock:
            if self.under.open_start is not None:
                self.under.force_close(t_stop)
        if self.duration_ns is None:
            self._learn_stream()
        self.pipeline.set_state(Gst.State.NULL)
        return self.exit_code

    def summary(self) -> dict[str, Any]:
        fe, fe_src = self._frames_expected()
        video_len = _ns_to_s(self.duration_ns)
        if video_len is None and fe is not None and self.fps:
            video_len = fe * self.fps[1] / self.fps[0]
        playback = None
        if self.t_first_frame is not None and self.t_eos is not None:
            playback = self.t_eos - self.t_first_frame
        stall = None
        if playback is not None and video_len:
            # Clamped at 0 as defined in mpvlab/results/metrics.py (stall_ratio): playback ending a few ms
            # before the container's duration is timing noise, not a negative stall.
            stall = max(0.0, (playback - video_len) / video_len)
        eps = [[round(s, 6), round(e, 6)] for s, e in self.under.episodes]
        out = {
            "url": self.a.url,
            "mode": self.a.mode,
            "decode": not self.a.no_decode,
            "buffer_ms": self.a.buffer_ms,
            "max_lateness_ms": self.a.max_lateness_ms,
            "rebuffer_resume_ms": self.a.rebuffer_resume_ms,
            "startup_buffer_ms": self.a.startup_buffer_ms,
            "underflow_merge_ms": self.a.underflow_merge_ms,
            "t0_ns": self.t0_ns,
            "status": self.status,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "frames_expected": fe,
            "frames_expected_source": fe_src,
            "frames_rendered": self.rendered,
            "picture_discards": self.discards,
            "picture_discards_no_underflow": self.discards_no_underflow,
            "frames_rendered_late": self.late_rendered,
            "frames_accounted": (fe is not None and self.rendered + self.discards == fe),
            "fps": None if self.fps is None else self.fps[0] / self.fps[1],
            "underflows": len(eps),
            "underflow_total_s": round(self.under.total_s, 6),
            "underflow_empty_s": round(self.under.empty_s, 6),
            "underflow_episodes": eps,
            "t_start": self.t_start,
            "t_playing": self.t_playing,
            "t_first_frame": self.t_first_frame,
            "t_eos": self.t_eos,
            "startup_delay_s": (None if self.t_first_frame is None or self.t_start is None
                                else round(self.t_first_frame - self.t_start, 6)),
            "playback_s": None if playback is None else round(playback, 6),
            "video_length_s": video_len,
            "stall_ratio": None if stall is None else round(stall, 6),
            "bytes_received": self.bytes,
            "download_complete": self.upstream_eos,
            "libsoup": libsoup_loaded(),
            "tls_ca_file": None if self.a.ca_file is None else str(self.a.ca_file),
            "tls_sources": self.http_sources,
            "dash": False,
        }
        if self.dash is not None:
            out.update(self.dash.summary())
            # Vargas et al.'s stall rate: (total playback time - video length) / video length,
            # never below 0 (discard mode ends on schedule; a few ms early is not "negative stall").
            out["stall_rate"] = None if stall is None else round(max(0.0, stall), 6)
            out["rebuffer_events"] = len(eps)
            out["rebuffer_ratio"] = (None if not playback else round(self.under.total_s / playback, 6))
        return out


def _ns_to_s(ns: int | None) -> float | None:
    if ns is None or ns == Gst.CLOCK_TIME_NONE or ns < 0:
        return None
    return ns / 1e9


def main(argv: list[str] | None = None) -> int:
    t_proc = time.monotonic_ns()
    a = parse_args(argv)
    t0 = a.t0_ns if a.t0_ns is not None else t_proc
    Gst.init(None)
    a.events.parent.mkdir(parents=True, exist_ok=True)
    a.summary.parent.mkdir(parents=True, exist_ok=True)
    with open(a.events, "w", buffering=1) as fh:   # line-buffered: readable live
        ev = EventLog(fh, t0)
        try:
            player = Player(a, ev, t0)
        except RuntimeError as e:
            ev.emit("error", reason=str(e))
            summ = {"url": a.url, "mode": a.mode, "status": "error", "reason": str(e),
                    "exit_code": EXIT_INTERNAL}
            return finish(a.summary, summ, EXIT_INTERNAL)
        if a.t0_from_stdin:
            t0 = wait_for_t0()
            if t0 is None:
                print("error: stdin closed before a 't0 NS' line (the runner went away)", file=sys.stderr)
                return EXIT_INTERNAL
            ev.set_t0(t0)
            player.t0_ns = t0
        code = player.run()
        ev.flush()
    summ = player.summary()
    summ["cpu"] = cpu_use(t_proc)
    return finish(a.summary, summ, code)


if __name__ == "__main__":
    sys.exit(main())
