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

The Player is one object in layers, one module each (player_state.py says why): player_state.py
(counters, settings, the DASH session), player_playout.py (streaming-thread callbacks, start-up and
rebuffer polls), player_bus.py (bus messages, how a run ends), player_pipeline.py (the pipeline),
player_report.py (the summary), and here the run and the program's main.

Runs under .venv/bin/python (needs Debian's PyGObject ``gi``).
Exit codes: 0 played to EOS, 2 error (HTTP, network, decode, ...), 3 timeout,
4 interrupted (SIGINT/SIGTERM), 1 bad arguments/internal failure.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

from mpvlab.player.gstreamer.args import parse_args  # noqa: E402
from mpvlab.player.gstreamer.counters import EventLog  # noqa: E402
from mpvlab.player.gstreamer.host import cpu_use  # noqa: E402
from mpvlab.player.gstreamer.player_pipeline import PipelineBuilder  # noqa: E402
from mpvlab.player.gstreamer.player_playout import REBUFFER_POLL_MS  # noqa: E402
from mpvlab.player.gstreamer.player_report import PlayerReport  # noqa: E402
from mpvlab.player.contract import EXIT_ERROR, EXIT_INTERNAL, finish  # noqa: E402
from mpvlab.player.start_signal import wait_for_t0  # noqa: E402

SAMPLE_PERIOD_MS = 100      # bytes/queue-level samples in the events file


class Player(PipelineBuilder, PlayerReport):
    """One playback: the layers above, its pipeline made as it is created, and its run."""

    def __init__(self, args: argparse.Namespace, events: EventLog, t0_ns: int) -> None:
        super().__init__(args, events, t0_ns)
        self.pipeline = self._build()

    # ---- run ------------------------------------------------------------------
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
