"""The state of the GStreamer player (mpvlab/player/gstreamer/player.py): its counters, its trust store, its
DASH session, and the few helpers every part of it uses.

The Player is one object built in layers, one module each, every layer on the one below: this
state, the playout callbacks and buffering (player_playout.py), the bus messages and how a run ends
(player_bus.py), then beside each other the pipeline's construction (player_pipeline.py) and the
summary (player_report.py), and the run itself (player.py). One object, not parts that call each
other, because GStreamer's streaming threads, the main loop and the DASH fetch thread all reach the
same counters under one lock.

Standard library and GStreamer only: a physical host runs the player under its system Python; the
own DASH client (it needs pydantic) is imported only when --fetcher own asks for it."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gio, GLib, Gst  # noqa: E402

from mpvlab.player.gstreamer import dash  # noqa: E402
from mpvlab.player.gstreamer.counters import EventLog, Underflows  # noqa: E402
from mpvlab.player.contract import EXIT_ERROR, EXIT_OK  # noqa: E402
# Our own DASH client and the ABR registry (mpvlab/player/gstreamer/abr) are imported when --fetcher own asks for
# them: they need pydantic, which the system Python of a physical host need not have (a progressive
# or dashdemux run there needs only GStreamer's Python bindings).
if TYPE_CHECKING:
    from mpvlab.player.gstreamer import dash_client


class PlayerState:
    """The counters and settings of one playback, and its DASH session (dashdemux's or our own)."""

    # The pipeline's elements, made by PipelineBuilder._build (player_pipeline.py) as __init__ ends.
    pipeline: Gst.Pipeline
    src: Gst.Element
    demux: Gst.Element
    queue: Gst.Element
    dec: Gst.Element
    sink: Gst.Element

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

    def _add_bytes(self, n: int) -> None:
        with self.lock:
            self.bytes += n

    def _queue_ms(self) -> float:
        return self.queue.get_property("current-level-time") / 1e6

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

    def _finish(self, status: str, reason: str, code: int) -> None:
        if self.finished:
            return
        self.finished = True
        self.status, self.reason, self.exit_code = status, reason, code
        self.loop.quit()


def ns_to_s(ns: int | None) -> float | None:
    if ns is None or ns == Gst.CLOCK_TIME_NONE or ns < 0:
        return None
    return ns / 1e9
