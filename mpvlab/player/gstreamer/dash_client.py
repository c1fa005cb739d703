"""mpvlab's own DASH client: it owns the fetching (HTTP/1.1 over an MPTCP socket it opens itself),
asks an ABR algorithm from the registry (mpvlab/player/gstreamer/abr) for each segment's level, and hands the bytes
to the player's GStreamer pipeline through an appsrc:

    [fetch thread] socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP) --HTTP/1.1, pipelined, paced reads-->
        appsrc -> qtdemux -> queue "playout" -> avdec_h264 -> fakesink      (player.Player)

so startup, underflows, discards and rebuffering are counted by exactly the same code as for the
dashdemux player (`--fetcher dashdemux`). Why a client of our own: SABRE needs to control how many
requests are outstanding and how fast the socket is read, which no GStreamer demuxer exposes.

Back-pressure: the fetch thread reads the socket only while the appsrc holds less than
APPSRC_LIMIT bytes. qtdemux moves data from the appsrc into the playout queue, which is bounded in
media time (--buffer-ms): when it is full, the appsrc fills, the thread stops reading, the socket
receive buffer fills and TCP flow control holds the server. The client holds at most the playout
buffer + APPSRC_LIMIT + the socket receive buffer.

Buffer level B (what every ABR sees) = media time of the segments fully handed over − the
pipeline's playback position (GstPipeline position query; 0 before playing): "downloaded, not yet
played".

Request scheduling: one request at a time, sent once B <= abr.request_threshold_s() (room for a
segment; FESTIVE randomises it) — except `sabre`, which keeps 1 + ceil(rcvbuf·8/(r·s)) requests
outstanding and paces its reads (see abr/sabre.py). An init segment is requested before the first
media segment and before every segment whose level differs from the previous one; qtdemux takes
the new moov in stream (as with dashdemux).

HTTP/2 (`--http-version h2`, an https:// URL): TLS with ALPN "h2" over the same MPTCP socket, the
protocol from the `h2` package (mpvlab/player/gstreamer/h2_conn.py); each request is a stream, SABRE's pipeline is
concurrent streams, the init segments are fetched once up front (_prefetch_inits says why), and the
reads stay paced and back-pressured exactly as over HTTP/1.1. An
https:// URL with `--http-version http/1.1` is HTTP/1.1 over TLS (ALPN "http/1.1").

The session is one object in layers, one module each (dash_client_state.py says why):
dash_client_net.py (socket, pacing, requests), dash_client_state.py (settings, records, buffer level),
dash_client_checks.py (SABRE's periodic read checks), dash_client_http.py (the HTTP exchange),
dash_client_schedule.py (request scheduling and its records), dash_client_summary.py (the summary),
and here the thread and the pipeline ends.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from typing import Callable

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

from mpvlab.player.gstreamer.abr import Ladder, Sabre, make  # noqa: E402
from mpvlab.player.gstreamer.dash_client_net import FetchError, Request, open_mptcp  # noqa: E402
from mpvlab.player.gstreamer.dash_client_schedule import Scheduler  # noqa: E402
from mpvlab.player.gstreamer.dash_client_summary import ClientSummary  # noqa: E402
from mpvlab.player.gstreamer.dash_mpd import parse_mpd  # noqa: E402
from mpvlab.player.gstreamer.dash_playback import SegmentPlayback  # noqa: E402


class ClientSession(Scheduler, ClientSummary, SegmentPlayback):
    """The Player's DASH session when --fetcher own (same role as dash.DashSession)."""

    # ---- pipeline ----------------------------------------------------------------------
    def build(self, pipeline: Gst.Pipeline, make_el: Callable[..., Gst.Element]) -> Gst.Element:
        """appsrc -> qtdemux; returns the appsrc (the Player's `src`)."""
        self.appsrc = make_el("appsrc", "src", is_live=False, block=False, format=Gst.Format.BYTES,
                              stream_type=0, max_bytes=0,
                              caps=Gst.Caps.from_string("video/quicktime"))
        self.qtdemux = make_el("qtdemux", "demux")
        pipeline.add(self.appsrc)
        pipeline.add(self.qtdemux)
        if not self.appsrc.link(self.qtdemux):
            raise RuntimeError("cannot link appsrc to qtdemux")
        return self.appsrc

    # ---- thread ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="dash-fetch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _main(self) -> None:
        try:
            self._run()
        except Exception as e:     # the main loop must hear about it; never die silently
            if self._stop.is_set():
                return
            self.error = f"{type(e).__name__}: {e}"
            self.on_fatal(self.error)
        finally:
            if self.sock is not None:
                self.sock.close()

    def _run(self) -> None:
        self.sock = open_mptcp(self.host, self.port, self.rcvbuf, self.mptcp)
        self.rcvbuf_effective = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        self.so_protocol = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL)
        if self.tls:
            self.sock = self._tls(self.sock)
        mpd = Request("mpd", self.mpd_path, t_request=self._now())
        self._send([mpd])
        body, _, _ = self._read_response(mpd, push=False)
        self.add_bytes(len(body))
        self.reps, self.mpd_duration_s = parse_mpd(body)
        if not self.reps:
            raise FetchError("the MPD has no video representation")
        if self.mpd_duration_s is None:
            raise FetchError("the MPD has no mediaPresentationDuration")
        self.segment_s = self.reps[0].segment_s
        self.n_segments = max(1, math.ceil(self.mpd_duration_s / self.segment_s - 1e-6))
        ladder = Ladder(tuple(r.bandwidth for r in self.reps), self.segment_s, self.buffer_s)
        self.abr = make(self.abr_name, ladder, self.abr_params, self.seed)
        if isinstance(self.abr, Sabre):
            self.abr.rcvbuf_requested = self.rcvbuf     # what its occupancy is measured against (occupancy_of)
        self.emit("dash_client", mptcp=self.mptcp, rcvbuf=self.rcvbuf,
                  rcvbuf_effective=self.rcvbuf_effective, segments=self.n_segments,
                  abr=self.abr_name)
        if isinstance(self.abr, Sabre):
            self.pacer.set_rate(self.abr.read_rate_bps())
        if self.h2 is not None:
            self._prefetch_inits()
        self._t_tick = time.monotonic()
        self._next_tick = self._t_tick + self._check_period()
        self._stream()
        if not self._stop.is_set():
            assert self.appsrc is not None
            self.appsrc.emit("end-of-stream")
