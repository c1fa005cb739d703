"""The two ends of an MPTCP bulk transfer, run inside the server and client namespaces.

    bulk_endpoint.py send --port P --bytes N | --seconds S --cc NAME --ready FILE --out FILE [--sndbuf B]
    bulk_endpoint.py recv --addr A --port P --t0-ns T --out FILE

Both open their sockets with IPPROTO_MPTCP directly (no mptcpize). The sender sets the congestion
control on its listening socket: on an MPTCP socket TCP_CONGESTION applies to every subflow,
including the ones that join later (a route's `congctl` reaches only the first). The receiver
connects at run time zero (CLOCK_MONOTONIC, shared by every namespace), reads to EOF and records
when the connection was opened, the first and last byte arrived, and how many bytes came.
Standalone on purpose: it imports nothing of mpvlab, so it starts fast in any namespace.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

IPPROTO_MPTCP = 262
CHUNK = 64 * 1024


def _write_json(path: str, data: dict[str, object]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def send(args: argparse.Namespace) -> int:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.cc.encode())
    if args.sndbuf:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.sndbuf)
    ls.bind(("0.0.0.0", args.port))   # wildcard: joins to a second signalled address must reach it
    ls.listen(4)
    _write_json(args.ready, {"pid": os.getpid(), "port": args.port})
    conn, peer = ls.accept()
    cc = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    payload = bytes(CHUNK)
    sent = 0
    t_start = time.monotonic_ns()
    deadline = t_start + int(args.seconds * 1e9) if args.seconds else None
    while True:
        if args.bytes is not None and sent >= args.bytes:
            break
        if deadline is not None and time.monotonic_ns() >= deadline:
            break
        n = CHUNK if args.bytes is None else min(CHUNK, args.bytes - sent)
        sent += conn.send(payload[:n])
    t_end = time.monotonic_ns()
    conn.shutdown(socket.SHUT_WR)
    conn.recv(1)            # the receiver closes after EOF: the data has been delivered, not just queued
    conn.close()
    _write_json(args.out, {"peer": f"{peer[0]}:{peer[1]}", "cc": cc, "bytes_sent": sent,
                           "t_accept_ns": t_start, "t_last_send_ns": t_end})
    return 0


def recv(args: argparse.Namespace) -> int:
    while (wait := args.t0_ns - time.monotonic_ns()) > 0:
        time.sleep(min(wait / 1e9, 0.05))
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    t_connect = time.monotonic_ns()
    s.connect((args.addr, args.port))
    got = 0
    t_first = t_last = None
    buf = bytearray(CHUNK)
    while True:
        n = s.recv_into(buf)
        if n == 0:
            break
        now = time.monotonic_ns()
        t_first = t_first or now
        t_last = now
        got += n
    s.close()
    _write_json(args.out, {"bytes_received": got, "t_connect_ns": t_connect, "t_first_byte_ns": t_first,
                           "t_last_byte_ns": t_last})
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("send")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bytes", type=int)
    s.add_argument("--seconds", type=float)
    s.add_argument("--cc", required=True)
    s.add_argument("--sndbuf", type=int, default=0)
    s.add_argument("--ready", required=True)
    s.add_argument("--out", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--addr", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--t0-ns", type=int, required=True)
    r.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.role == "send" and (args.bytes is None) == (args.seconds is None):
        ap.error("send needs exactly one of --bytes and --seconds")
    return send(args) if args.role == "send" else recv(args)


if __name__ == "__main__":
    sys.exit(main())
