"""mpvlab/player/gstreamer/h2_conn.py against an in-process HTTP/2 server (the `h2` package's server side), no
network: requests become streams 1, 3, 5 …, each after the previous open one (priority); interleaved DATA frames of concurrent streams land in
their own stream, in order; every byte is acknowledged so the HTTP/2 windows never hold the sender
(only the socket does); resets, errors and GOAWAY surface."""

from __future__ import annotations


import h2.config
import h2.connection
import h2.events
import pytest

from mpvlab.player.gstreamer.h2_conn import WINDOW, H2Conn, H2Error  # noqa: E402


def _pair() -> tuple[H2Conn, h2.connection.H2Connection]:
    cli = H2Conn("srv:443", now=lambda: 1.5)
    srv = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    srv.initiate_connection()
    srv.receive_data(cli.start())
    cli.feed(srv.data_to_send())
    return cli, srv


def test_streams_in_order_with_interleaved_data_and_wide_windows() -> None:
    cli, srv = _pair()
    a, out_a = cli.request("/v/seg1.m4s")
    b, out_b = cli.request("/v/seg2.m4s")
    assert (a, b) == (1, 3)
    evs = srv.receive_data(out_a + out_b)
    got = {e.stream_id: dict(e.headers) for e in evs if isinstance(e, h2.events.RequestReceived)}
    # The second stream depends exclusively on the first, still open: the server sends them in order.
    prio = {e.stream_id: e.priority_updated for e in evs if isinstance(e, h2.events.RequestReceived)}
    assert prio[1] is None
    assert (prio[3].depends_on, prio[3].exclusive) == (1, True)
    assert got[1][":path"] == "/v/seg1.m4s" and got[3][":authority"] == "srv:443" and got[3][":scheme"] == "https"
    # Our SETTINGS gave every stream a 16 MiB window and the connection 16 MiB more than the default.
    assert srv.remote_settings.initial_window_size == WINDOW
    assert srv.local_flow_control_window(1) == WINDOW
    for sid in (1, 3):
        srv.send_headers(sid, [(":status", "200")])
    body = {1: b"a" * 100_000, 3: b"b" * 70_000}
    # Interleave 10 kB DATA frames of the two streams, well past the default 64 KiB windows.
    for i in range(0, 100_000, 10_000):
        for sid in (3, 1):
            chunk = body[sid][i:i + 10_000]
            if chunk:
                srv.send_data(sid, chunk, end_stream=i + 10_000 >= len(body[sid]))
        cli_out = cli.feed(srv.data_to_send())
        srv.receive_data(cli_out)                 # the WINDOW_UPDATEs go back
    for sid in (1, 3):
        st = cli.streams[sid]
        assert st.status == 200 and st.ended and st.t_headers == st.t_first == st.t_end == 1.5
        assert b"".join(st.chunks) == body[sid]
        # every byte acknowledged: the server's window for the stream is full again (or the stream closed)
    assert srv.outbound_flow_control_window >= WINDOW + 65_535 - 170_000
    cli.done(1)
    assert 1 not in cli.streams and 3 in cli.streams


def test_reset_status_and_goaway_surface() -> None:
    cli, srv = _pair()
    sid, out = cli.request("/missing")
    srv.receive_data(out)
    srv.send_headers(sid, [(":status", "404")], end_stream=True)
    cli.feed(srv.data_to_send())
    assert cli.streams[sid].status == 404 and cli.streams[sid].ended
    sid2, out = cli.request("/x")
    srv.receive_data(out)
    srv.reset_stream(sid2, error_code=8)
    cli.feed(srv.data_to_send())
    assert cli.streams[sid2].reset == 8
    srv.close_connection(error_code=0, last_stream_id=sid2)
    cli.feed(srv.data_to_send())
    assert cli.terminated is not None and "GOAWAY" in cli.terminated
    cli, _ = _pair()
    with pytest.raises(H2Error, match="protocol error"):
        cli.feed(b"\x00\x00\x01" b"\x00" b"\x00" b"\x00\x00\x00\x00" b"x")    # DATA on stream 0
