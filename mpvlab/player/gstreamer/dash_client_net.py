"""The socket side of mpvlab's own DASH client (mpvlab/player/gstreamer/dash_client.py): the MPTCP socket it
opens itself, the token bucket that paces its reads (SABRE controls how fast the socket is read) and
the request record the scheduler and the HTTP exchange share. Standard library only."""

from __future__ import annotations

import array
import errno
import fcntl
import socket
import termios
import time
from dataclasses import dataclass, field
from typing import Any

IPPROTO_MPTCP = 262
APPSRC_LIMIT = 64 * 1024       # bytes the appsrc may hold before the fetch thread stops reading
READ_CHUNK = 16 * 1024         # largest single recv; also the pacer's burst
BACKPRESSURE_POLL_S = 0.005
RECV_TIMEOUT_S = 0.05          # a blocked recv wakes up this often (SABRE's checks must run)
MAX_HEADER_BYTES = 16 * 1024


class FetchError(RuntimeError):
    pass


# ---- pacing -----------------------------------------------------------------------------
class Pacer:
    """Token bucket on socket reads: at most rate x t + burst bytes by time t. rate None: unpaced."""

    def __init__(self, burst_bytes: int = READ_CHUNK) -> None:
        self.burst = burst_bytes
        self.rate_Bps: float | None = None
        self.tokens = float(burst_bytes)
        self.t_last = time.monotonic()

    def set_rate(self, bps: float | None) -> None:
        self._refill(time.monotonic())
        self.rate_Bps = None if bps is None else bps / 8

    def _refill(self, now: float) -> None:
        if self.rate_Bps is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.t_last) * self.rate_Bps)
        else:
            self.tokens = self.burst
        self.t_last = now

    def allowance(self, want: int) -> tuple[int, float]:
        """(bytes that may be read now, seconds to wait if 0)."""
        now = time.monotonic()
        self._refill(now)
        if self.rate_Bps is None:
            return want, 0.0
        n = int(min(want, self.tokens))
        if n >= min(want, 1448):         # at least a packet's worth (or the rest), not dribbles
            return n, 0.0
        need = min(want, 1448) - self.tokens
        return 0, need / self.rate_Bps

    def took(self, n: int) -> None:
        if self.rate_Bps is not None:
            self.tokens -= n


# ---- HTTP/1.1 over MPTCP --------------------------------------------------------------------
def open_mptcp(host: str, port: int, rcvbuf: int | None, mptcp: bool = True,
               timeout_s: float = 5.0) -> socket.socket:
    """A connected socket: MPTCP unless mptcp=False. SO_RCVBUF is set BEFORE connect so that
    the window scale negotiated in the SYN fits it (the kernel doubles the value for its
    bookkeeping; it also fixes the buffer: no autotuning)."""
    proto = IPPROTO_MPTCP if mptcp else 0
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    except OSError as e:
        if mptcp and e.errno in (errno.EPROTONOSUPPORT, errno.ENOPROTOOPT, errno.EINVAL):
            raise FetchError(f"this kernel refuses IPPROTO_MPTCP sockets ({e.strerror}): MPTCP is "
                             "missing or disabled (net.mptcp.enabled)") from None
        raise
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout_s)
    try:
        s.connect((host, port))
    except OSError as e:
        s.close()
        raise FetchError(f"connect to {host}:{port}: {e.strerror or e}") from None
    s.settimeout(RECV_TIMEOUT_S)
    return s


def socket_inq(s: socket.socket) -> int:
    """Bytes waiting in the socket's receive queue (SIOCINQ; supported on MPTCP sockets)."""
    buf = array.array("i", [0])
    fcntl.ioctl(s.fileno(), termios.FIONREAD, buf, True)
    return buf[0]


@dataclass
class Request:
    kind: str                  # "mpd" | "init" | "media"
    path: str
    level: int = 0
    number: int = 0
    index: int = 0
    t_request: float = 0.0     # seconds since t0 when the request was written to the socket
    decision: dict[str, Any] = field(default_factory=dict)
    buffer_s: float | None = None
    depth: int = 1             # requests outstanding when this one was sent (itself included)
    stream_id: int = 0         # HTTP/2: the request's stream
    cached: bytes | None = None  # HTTP/2: an init segment fetched at the start, handed over, not requested
