#!/usr/bin/env python3
"""Bulk MPTCP transfer for the UML probe (issue 50): server sends, client receives.

Runs inside the UML guest (the host's Python through hostfs), no project imports.
  xfer.py server ADDR PORT SECONDS   # accept one MPTCP connection, send for SECONDS, close
  xfer.py client ADDR PORT           # connect over MPTCP, read to EOF, print JSON
The client prints {"bytes": N, "seconds": S, "first_byte_s": F}: seconds from connect() to EOF.
MPVLAB_XFER_PROTO=tcp uses plain TCP (a guest kernel without MPTCP, e.g. Debian's user-mode-linux).
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time

IPPROTO_MPTCP = 262


def proto() -> int:
    return socket.IPPROTO_TCP if os.environ.get("MPVLAB_XFER_PROTO") == "tcp" else IPPROTO_MPTCP
CHUNK = 64 * 1024


def serve(addr: str, port: int, seconds: float) -> None:
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto())
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # MPTCP joins arrive at the server's other (announced) addresses: listen on all of them.
    # Bound to ADDR only, every join SYN to path 2's address met no listener (a reset; measured
    # in the 6.12 guest: MPJoinSynTx 1 at the client, the SYN on path 2, MPJoinSynRx 0).
    lsock.bind(("0.0.0.0" if proto() == IPPROTO_MPTCP else addr, port))
    lsock.listen(1)
    print("ready", flush=True)
    conn, _ = lsock.accept()
    buf = b"\0" * CHUNK
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        sent += conn.send(buf)
    conn.shutdown(socket.SHUT_WR)
    conn.recv(1)  # wait for the client's close, so every byte was delivered
    conn.close()
    print(json.dumps({"sent": sent}), flush=True)


def fetch(addr: str, port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto())
    start = time.monotonic()
    sock.connect((addr, port))
    total = 0
    first = None
    while True:
        data = sock.recv(1 << 20)
        if not data:
            break
        if first is None:
            first = time.monotonic() - start
        total += len(data)
    seconds = time.monotonic() - start
    sock.close()
    print(json.dumps({"bytes": total, "seconds": round(seconds, 4),
                      "first_byte_s": round(first or 0.0, 4)}), flush=True)


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[1] == "server":
        serve(argv[2], int(argv[3]), float(argv[4]))
        return 0
    if len(argv) == 4 and argv[1] == "client":
        fetch(argv[2], int(argv[3]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
