"""The state of mpvlab's own DASH client's session (mpvlab/player/gstreamer/dash_client.py): its settings,
what the MPD said, the records its summary reports, and the buffer level every ABR sees.

The session is one object built in layers, one module each, every layer on the one below:
this state, SABRE's periodic read checks (dash_client_checks.py), the HTTP exchange
(dash_client_http.py), the request scheduling and its records (dash_client_schedule.py), the summary
(dash_client_summary.py) and the thread and pipeline ends (dash_client.py). One object, not parts
that call each other, because the fetch thread, the main loop and GStreamer's streaming threads all
reach the same fields under one lock."""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

from mpvlab.player.gstreamer.abr import Download, Sabre  # noqa: E402
from mpvlab.player.gstreamer.abr.sabre import SabreParams  # noqa: E402
from mpvlab.player.gstreamer.dash_client_net import Pacer  # noqa: E402
from mpvlab.player.gstreamer.dash_mpd import Representation  # noqa: E402


@dataclass
class SegmentRecord:
    index: int
    number: int
    level: int
    rep_id: str
    bitrate_bps: int
    uri: str
    bytes: int
    init_bytes: int
    t_request: float
    t_first_byte: float
    t_last_byte: float
    download_s: float          # the time this response had the connection (see throughput)
    throughput_bps: float
    buffer_s_at_decision: float | None
    buffer_s_at_done: float
    outstanding: int
    abr_info: dict[str, Any]
    t_play: float | None = None
    frames_rendered: int = 0
    frames_discarded: int = 0

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


class ClientState:
    """Fields of the Player's DASH session when --fetcher own, and the buffer level."""

    def __init__(self, url: str, abr_name: str, abr_params: dict[str, Any], seed: int,
                 rcvbuf: int | None, mptcp: bool, buffer_s: float,
                 t_of_ns: Callable[[int], float], emit: Callable[..., float],
                 add_bytes: Callable[[int], None], position_s: Callable[[], float],
                 on_fatal: Callable[[str], None], http_version: str = "http/1.1",
                 ca_file: str | None = None) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise ValueError("--fetcher own speaks http:// or https://")
        if http_version not in ("http/1.1", "h2"):
            raise ValueError(f"http version {http_version!r}: http/1.1 or h2")
        if http_version == "h2" and u.scheme != "https":
            raise ValueError("h2 needs an https:// URL (HTTP/2 is negotiated by TLS ALPN)")
        self.tls = u.scheme == "https"
        self.http_version, self.ca_file = http_version, ca_file
        self.host, self.port = u.hostname or "", u.port or (443 if self.tls else 80)
        self.mpd_path = u.path or "/"
        self.base = self.mpd_path.rsplit("/", 1)[0] + "/"
        self.abr_name, self.abr_params, self.seed = abr_name, dict(abr_params), seed
        # The receive buffer: an explicit cap (--rcvbuf-bytes), else SABRE's own (it sets SO_RCVBUF as part
        # of its design), else none: the kernel's autotuning grows it (the paper's on/off baseline).
        if rcvbuf is not None:
            self.rcvbuf_source = "player.rcvbuf"
        elif abr_name == Sabre.name:
            rcvbuf = SabreParams.model_validate(abr_params).rcvbuf_bytes
            self.rcvbuf_source = "sabre rcvbuf_bytes"
        else:
            self.rcvbuf_source = "kernel autotuning"
        self.rcvbuf, self.mptcp, self.buffer_s = rcvbuf, mptcp, buffer_s
        self.t_of_ns, self.emit, self.add_bytes = t_of_ns, emit, add_bytes
        self.position_s, self.on_fatal = position_s, on_fatal
        self.reps: list[Representation] = []
        self.mpd_duration_s: float | None = None
        self.segment_s = 0.0
        self.n_segments = 0
        self.abr: Any = None
        self.segments: list[SegmentRecord] = []
        self.history: list[Download] = []
        self.decisions: list[dict[str, Any]] = []
        self.ticks: list[dict[str, Any]] = []          # SABRE's periodic checks
        self.sabre_events: list[dict[str, Any]] = []   # SABRE §4.2's rule events (also in the event log)
        self.init_downloads: list[dict[str, Any]] = []
        self.appsrc: Gst.Element | None = None
        self.qtdemux: Gst.Element | None = None
        self.error: str | None = None
        self.sock: socket.socket | None = None
        self.rcvbuf_effective: int | None = None
        self.so_protocol: int | None = None
        self.alpn: str | None = None
        self.tls_version: str | None = None
        self.h2: Any = None                     # h2_conn.H2Conn when http_version == "h2"
        self._init_cache: dict[int, bytes] = {}  # HTTP/2: level → init segment (_prefetch_inits)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._play: dict[int, list[Any]] = {}
        self._pushed_media_s = 0.0
        self._rx = bytearray()
        self.pacer = Pacer()
        self._bytes_since_tick = 0
        self._next_tick = 0.0
        self._t_tick = 0.0
        self.read_log: list[tuple[float, int]] = []     # (t, cumulative bytes read) every check

    def _now(self) -> float:
        return self.t_of_ns(time.monotonic_ns())

    def buffer_level_s(self) -> float:
        with self._lock:
            pushed = self._pushed_media_s
        return max(0.0, pushed - self.position_s())
