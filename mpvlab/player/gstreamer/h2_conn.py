"""HTTP/2 for mpvlab's own DASH client (mpvlab/player/gstreamer/dash_client.py), on top of the `h2` package (hyper-h2:
the protocol state machine only, no I/O). The client keeps owning the socket: it reads decrypted
bytes from the TLS-wrapped MPTCP socket at its own pace (SABRE's paced reads) and hands them to
`feed`; this module turns them into per-stream response state and says what must be written back
(SETTINGS acks, WINDOW_UPDATEs).

Why the flow-control windows are opened wide: HTTP/2 has its own per-stream and per-connection
windows (65,535 bytes by default). Left at that, the *HTTP/2* window, not TCP's receive window,
would hold the server back and SABRE's pacing of socket reads would stop governing the sender. With
16 MiB windows (replenished as data is consumed) only the socket's receive buffer limits the
server, as over HTTP/1.1.

Several requests may be outstanding (SABRE pipelines them). Each new stream is made to depend
exclusively on the previous one still open (RFC 7540 §5.3 priorities), asking the server to send the
responses one after the other in request order, as HTTP/1.1 pipelining does. A server may still
interleave or reorder (Apache's mod_http2 sent an 805 B init segment after the 15.6 MB media segment
requested behind it, with and without the dependency; the client therefore fetches the init
segments up front over HTTP/2: dash_client_schedule._prefetch_inits): the data of a later stream that arrives
first is kept here until its turn, and each stream keeps the times its own frames were read.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

WINDOW = 16 * 1024 * 1024          # per stream and (added) per connection; see the module docstring


class H2Error(RuntimeError):
    pass


@dataclass
class StreamState:
    stream_id: int
    path: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunks: deque[bytes] = field(default_factory=deque)
    t_headers: float | None = None     # the response's HEADERS frame read
    t_first: float | None = None       # its first DATA frame read (the first body byte)
    t_end: float | None = None         # its END_STREAM read (the last body byte)
    ended: bool = False
    reset: int | None = None           # RST_STREAM error code


class H2Conn:
    """One HTTP/2 client connection's protocol state: requests out, response events in."""

    def __init__(self, authority: str, now: Callable[[], float]) -> None:
        self.authority = authority
        self.now = now
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.streams: dict[int, StreamState] = {}
        self.terminated: str | None = None

    def start(self) -> bytes:
        """The connection preface and our SETTINGS (wide windows), and the connection window raised."""
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: WINDOW})
        self.conn.increment_flow_control_window(WINDOW)
        return self.conn.data_to_send()

    def request(self, path: str) -> tuple[int, bytes]:
        """A GET as a new stream, after the previous open one (module docstring): (stream id, bytes to write)."""
        sid = self.conn.get_next_available_stream_id()
        open_ = [k for k, st in self.streams.items() if not st.ended and st.reset is None]
        # None for all three (h2's defaults) sends no priority: the first stream depends on nothing
        self.conn.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", self.authority),
                                     (":path", path), ("user-agent", "mpvlab-dash-client")], end_stream=True,
                               priority_depends_on=max(open_) if open_ else None,
                               priority_exclusive=True if open_ else None,
                               priority_weight=16 if open_ else None)
        self.streams[sid] = StreamState(sid, path)
        return sid, self.conn.data_to_send()

    def feed(self, data: bytes) -> bytes:
        """Bytes read from the socket in; the bytes to write back out (may be b"")."""
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            raise H2Error(f"HTTP/2 protocol error from the server: {e}") from None
        for ev in events:
            sid = getattr(ev, "stream_id", None)
            st = self.streams.get(sid) if sid is not None else None
            if isinstance(ev, h2.events.ResponseReceived) and st is not None:
                hdrs = {str(k): str(v) for k, v in ev.headers}
                st.headers = hdrs
                st.status = int(hdrs.get(":status", "0"))
                st.t_headers = self.now()
            elif isinstance(ev, h2.events.DataReceived) and st is not None:
                if ev.data:
                    st.chunks.append(bytes(ev.data))
                    if st.t_first is None:
                        st.t_first = self.now()
                # Consumed as far as HTTP/2 flow control goes: the socket's buffer is the only limit.
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and st is not None:
                st.ended = True
                st.t_end = self.now()
            elif isinstance(ev, h2.events.StreamReset) and st is not None:
                st.reset = int(ev.error_code)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.terminated = f"GOAWAY (error {ev.error_code}, last stream {ev.last_stream_id})"
        return self.conn.data_to_send()

    def done(self, sid: int) -> None:
        """The client has consumed the stream: forget it (its bytes were handed over)."""
        self.streams.pop(sid, None)
