"""The GStreamer player's bus (mpvlab/player/gstreamer/player.py): the messages that count discards and late
renders, learn the stream's duration and frame rate, and end the run (EOS, error, timeout, signal)."""

from __future__ import annotations

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

from mpvlab.player.gstreamer.host import diagnose_connect  # noqa: E402
from mpvlab.player.gstreamer.player_playout import Playout  # noqa: E402
from mpvlab.player.gstreamer.player_state import ns_to_s  # noqa: E402
from mpvlab.player.contract import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_TIMEOUT  # noqa: E402

DISCARD_UNDERFLOW_WINDOW_S = 1.0   # discards this soon after an underflow belong to it


class BusWatch(Playout):
    """The pipeline's bus messages, and the timeout and signals that end a run."""

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
        self.ev.emit("stream_info", duration_s=ns_to_s(self.duration_ns),
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
            self.ev.emit("discard", t=now, pts_s=ns_to_s(ts), late_ms=round(jitter / 1e6, 3),
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
