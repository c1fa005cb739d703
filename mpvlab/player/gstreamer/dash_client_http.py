"""The HTTP exchange of mpvlab's own DASH client (mpvlab/player/gstreamer/dash_client.py): TLS with ALPN on the
MPTCP socket, requests written (HTTP/1.1 pipelined, or HTTP/2 streams through h2_conn.py), and
responses read paced and back-pressured, their bodies handed to the appsrc as they arrive."""

from __future__ import annotations

import socket
import ssl
import time
from typing import Literal, overload

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

from mpvlab.player.gstreamer.dash_client_checks import ReadChecks  # noqa: E402
from mpvlab.player.gstreamer.dash_client_net import (APPSRC_LIMIT, BACKPRESSURE_POLL_S, MAX_HEADER_BYTES,  # noqa: E402
                                                     READ_CHUNK, RECV_TIMEOUT_S, FetchError, Request)


class HttpExchange(ReadChecks):
    """Requests out, responses in, over the session's one socket (`sock`)."""

    def _tls(self, raw: socket.socket) -> socket.socket:
        """TLS over the connected MPTCP socket, trusting exactly --ca-file (or the system's store),
        offering only the protocol asked for: a server that picks another one is an error, not a
        silent fallback."""
        ctx = ssl.create_default_context(cafile=self.ca_file)
        ctx.set_alpn_protocols([self.http_version])
        raw.settimeout(5.0)
        try:
            s = ctx.wrap_socket(raw, server_hostname=self.host)
        except (ssl.SSLError, OSError) as e:
            raw.close()
            raise FetchError(f"TLS handshake with {self.host}:{self.port}: {e}") from None
        self.alpn, self.tls_version = s.selected_alpn_protocol(), s.version()
        if self.alpn != self.http_version:
            s.close()
            raise FetchError(f"the server negotiated ALPN {self.alpn!r}, not {self.http_version!r}")
        if self.http_version == "h2":
            from mpvlab.player.gstreamer.h2_conn import H2Conn
            self.h2 = H2Conn(f"{self.host}:{self.port}", self._now)
            s.sendall(self.h2.start())
        s.settimeout(RECV_TIMEOUT_S)
        return s

    def _send(self, reqs: list[Request]) -> None:
        assert self.sock is not None
        reqs = [r for r in reqs if r.cached is None]
        if not reqs:
            return
        if self.h2 is not None:
            parts = []
            for r in reqs:
                r.stream_id, out = self.h2.request(r.path)
                parts.append(out)
            self._write(b"".join(parts))
            return
        self._write(b"".join(f"GET {r.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                        f"User-Agent: mpvlab-dash-client\r\n\r\n".encode() for r in reqs))

    def _write(self, data: bytes) -> None:
        assert self.sock is not None
        if not data:
            return
        self.sock.settimeout(5.0)
        try:
            self.sock.sendall(data)
        finally:
            self.sock.settimeout(RECV_TIMEOUT_S)

    def _recv(self, want: int) -> bytes:
        """One paced, back-pressured read of at most `want` bytes (b"" never: EOF raises)."""
        assert self.sock is not None and self.appsrc is not None
        while not self._stop.is_set():
            self._maybe_tick()
            if self.appsrc.get_property("current-level-bytes") >= APPSRC_LIMIT:
                time.sleep(BACKPRESSURE_POLL_S)
                continue
            n, wait = self.pacer.allowance(want)
            if n == 0:
                time.sleep(min(wait, 0.05))
                continue
            try:
                data = self.sock.recv(min(n, READ_CHUNK))
            except TimeoutError:
                continue
            if not data:
                raise FetchError("the server closed the connection")
            self.pacer.took(len(data))
            self._bytes_since_tick += len(data)
            return data
        raise FetchError("stopped")

    @overload
    def _read_response(self, req: Request, push: Literal[False]) -> tuple[bytes, float, float]: ...

    @overload
    def _read_response(self, req: Request, push: Literal[True]) -> tuple[int, float, float]: ...

    def _read_response(self, req: Request, push: bool) -> tuple[bytes | int, float, float]:
        """Status line + headers + Content-Length body. push: hand the body to the appsrc as it
        arrives and return its length; else return the body."""
        if req.cached is not None:
            if push:
                self._push(req.cached)
            t = self._now()
            return (len(req.cached) if push else req.cached), t, t
        if self.h2 is not None:
            return self._read_response_h2(req, push)
        t_fb: float | None = None
        while b"\r\n\r\n" not in self._rx:
            if len(self._rx) > MAX_HEADER_BYTES:
                raise FetchError(f"{req.path}: response headers longer than {MAX_HEADER_BYTES} bytes")
            chunk = self._recv(1448)
            if t_fb is None:
                t_fb = self._now()
            self._rx += chunk
        head, _, rest = bytes(self._rx).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise FetchError(f"{req.path}: not an HTTP/1.x response: {lines[0][:80]!r}")
        status = int(parts[1])
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        if status != 200:
            raise FetchError(f"GET {req.path}: HTTP {status}")
        if "chunked" in hdrs.get("transfer-encoding", "").lower() or "content-length" not in hdrs:
            raise FetchError(f"GET {req.path}: no Content-Length (chunked bodies are not supported)")
        length = int(hdrs["content-length"])
        if t_fb is None:
            t_fb = self._now()
        got = bytearray(rest[:length])
        self._rx = bytearray(rest[length:])
        if push and got:
            self._push(bytes(got))
        total = len(got)
        body = got if not push else None
        while total < length:
            chunk = self._recv(length - total)
            extra = b""
            if len(chunk) > length - total:
                chunk, extra = chunk[:length - total], chunk[length - total:]
            total += len(chunk)
            if push:
                self._push(chunk)
            else:
                assert body is not None
                body += chunk
            if extra:
                self._rx += extra
        t_lb = self._now()
        return (total if push else bytes(body or b"")), t_fb, t_lb

    def _read_response_h2(self, req: Request, push: bool) -> tuple[bytes | int, float, float]:
        """The request's stream to its end, reading the socket (paced, back-pressured) as needed;
        other streams' data that arrives meanwhile stays in H2Conn until their turn."""
        st = self.h2.streams[req.stream_id]
        body = bytearray()
        total = 0
        while True:
            if st.status is not None and st.status != 200:
                raise FetchError(f"GET {req.path}: HTTP {st.status}")
            while st.chunks:
                chunk = st.chunks.popleft()
                total += len(chunk)
                if push:
                    self._push(chunk)
                else:
                    body += chunk
            if st.ended:
                break
            if st.reset is not None:
                raise FetchError(f"GET {req.path}: stream reset by the server (error {st.reset})")
            if self.h2.terminated:
                raise FetchError(f"GET {req.path}: the server ended the connection: {self.h2.terminated}")
            self._write(self.h2.feed(self._recv(READ_CHUNK)))
        # Times as the frames were read (wire order), not when this loop got to the stream: a stream the
        # server finished while an earlier one was being consumed keeps its own times.
        t_lb = st.t_end if st.t_end is not None else self._now()
        t_fb = next((t for t in (st.t_first, st.t_headers) if t is not None), t_lb)
        self.h2.done(req.stream_id)
        return (total if push else bytes(body)), t_fb, t_lb

    def _push(self, data: bytes) -> None:
        assert self.appsrc is not None
        ret = self.appsrc.emit("push-buffer", Gst.Buffer.new_wrapped(data))
        if ret not in (Gst.FlowReturn.OK, Gst.FlowReturn.FLUSHING):
            raise FetchError(f"appsrc refused data: {ret.value_name}")
