"""The GStreamer player's playout side (mpvlab/player/gstreamer/player.py): the streaming-thread callbacks that
count bytes, rendered frames and the playout queue's underruns (kept short: they run on GStreamer's
threads), and the main-loop polls that start the clock after start-up buffering, pause and resume
in rebuffer mode, and sample the counters into the event log."""

from __future__ import annotations

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

from mpvlab.player.gstreamer.player_state import PlayerState, ns_to_s  # noqa: E402

REBUFFER_POLL_MS = 10       # how often a paused (rebuffering) player checks the buffer level


class Playout(PlayerState):
    """Callbacks on the pipeline's pads and queue, and the start-up, rebuffer and sample polls."""

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
            self.ev.emit("first_frame", t=self.t_first_frame, pts_s=ns_to_s(buf.pts))
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

    # ---- main-loop side ---------------------------------------------------------
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
