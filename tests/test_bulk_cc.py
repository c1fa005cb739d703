"""Which congestion control the competition's bulk flow ran (mpvlab/topologies/cross_traffic.py bulk_cc):
read from the kernel (`ss`) while iperf3 runs, and a run whose bulk flow ran another CC than asked fails
(mpvlab/runner/cross.py). iperf3 opens a control connection first, which keeps the namespace's default
CC; under load its data connection may not be up yet when the CC is first read. A competition run failed
that way ("bulk flow ran bbr, not cubic", then passed on re-run): the control connection alone was read
as the bulk flow. Here real TCP connections in a namespace of the test's own play both roles."""

from __future__ import annotations

import secrets
import socket
import threading

import pytest

from mpvlab.core import proc
from mpvlab.core.netns import Netns, delete_netns
from mpvlab.topologies import cross_traffic as ct


def _connected_pair(ns: Netns, listener: socket.socket, cc: str) -> tuple[socket.socket, socket.socket]:
    """(client, accepted server side) of a loopback TCP connection in `ns`, the client on `cc`."""
    def make() -> socket.socket:
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        return c
    client = ns.call(make)
    client.connect(listener.getsockname())
    server, _ = listener.accept()
    return client, server


def _send_all_read_all(client: socket.socket, server: socket.socket, n: int) -> None:
    """n bytes client → server, every byte read, so the kernel has acked all of them."""
    got = 0

    def reader() -> None:
        nonlocal got
        while got < n:
            chunk = server.recv(65536)
            if not chunk:
                return
            got += len(chunk)
    t = threading.Thread(target=reader)
    t.start()
    client.sendall(b"x" * n)
    t.join(timeout=30)
    assert got == n


@pytest.mark.netns
def test_the_control_connection_alone_is_never_taken_for_the_bulk_flow() -> None:
    ns = Netns(f"hbc-{secrets.token_hex(3)}")
    proc.run(["ip", "netns", "add", ns.name])
    socks: list[socket.socket] = []
    try:
        ns.run(["ip", "link", "set", "lo", "up"])

        def listen() -> socket.socket:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            s.listen(4)
            return s
        listener = ns.call(listen)
        socks.append(listener)
        # iperf3's control connection: the default CC here (bbr, as a route's congctl gives it), a few
        # hundred bytes of parameters.
        control = _connected_pair(ns, listener, "bbr")
        socks += control
        _send_all_read_all(*control, 600)
        assert ct.bulk_cc(ns, "127.0.0.1") is None
        # The data connection, on the CC asked for, once it has carried more than the threshold.
        data = _connected_pair(ns, listener, "cubic")
        socks += data
        _send_all_read_all(*data, 2 * ct.DATA_CONNECTION_MIN_ACKED)
        assert ct.bulk_cc(ns, "127.0.0.1") == "cubic"
    finally:
        for s in socks:
            s.close()
        delete_netns(ns.name)


def test_busiest_cc_reads_ss_and_skips_connections_below_the_threshold() -> None:
    """Two connections as `ss -Htin` prints them: the busier one's CC, unless neither reached min_acked."""
    text = ("ESTAB 0 0 10.0.0.1:40000 10.0.0.2:5201\n\t bbr wscale:7,7 rto:204 bytes_acked:600 segs_out:4\n"
            "ESTAB 0 0 10.0.0.1:40002 10.0.0.2:5201\n\t cubic wscale:7,7 rto:204 bytes_acked:900000 segs_out:700\n")
    assert ct.busiest_cc(text) == "cubic"
    assert ct.busiest_cc(text, min_acked=10**6) is None
    assert ct.busiest_cc(text.splitlines()[0] + "\n" + text.splitlines()[1] + "\n") is None
