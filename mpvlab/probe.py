"""Tiny measurement programs the fidelity check runs inside the namespaces (stdlib only, so they
start fast). Run as `python -m mpvlab.probe SUBCOMMAND ...`.

  serve    --bind A --port P --duration S         UDP echo and TCP bulk source on the same port number
  rtt      --src A --dst B --port P --count N --interval-ms I --out CSV
           CSV: seq,t_send_ns,rtt_ns (CLOCK_MONOTONIC; lost probes have rtt_ns = -1)
  bulk     --src A --dst B --port P --duration S --out CSV
           downloads from the server's TCP source; CSV: t_ns,bytes_cumulative every 50 ms
"""

from __future__ import annotations

import argparse
import socket
import struct
import threading
import time

PROBE_FMT = "!IQ"  # seq, send time (ns)
PROBE_PAD = 100 - struct.calcsize(PROBE_FMT)  # 100-byte UDP payload
PROBE_CC = b"cubic"


def serve(bind: str, port: int, duration: float) -> None:
    stop = time.monotonic() + duration
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((bind, port))  # replies must come from the address probed
    udp.settimeout(0.2)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((bind, port))
    tcp.listen(8)
    tcp.settimeout(0.2)

    def echo() -> None:
        while time.monotonic() < stop:
            try:
                data, addr = udp.recvfrom(2048)
            except socket.timeout:
                continue
            udp.sendto(data, addr)

    def source(conn: socket.socket) -> None:
        chunk = b"\0" * 65536
        # The rate probe measures the emulated path, not the CC under test: the server's routes carry
        # the run's CC as `congctl`, which the kernel applies to every new connection (a socket option
        # set on the listener does not survive it), and a CC that paces below the link by design
        # (bbr3-s read 0.57 of the rate here) would make a sound path look broken. So the sending
        # socket switches to the kernel's CUBIC before its first byte; it fills a tbf queue.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, PROBE_CC)
        conn.settimeout(1.0)
        try:
            while time.monotonic() < stop:
                conn.sendall(chunk)
        except OSError:
            pass
        finally:
            conn.close()

    threading.Thread(target=echo, daemon=True).start()
    while time.monotonic() < stop:
        try:
            conn, _ = tcp.accept()
        except socket.timeout:
            continue
        threading.Thread(target=source, args=(conn,), daemon=True).start()
    time.sleep(0.1)


def rtt(src: str, dst: str, port: int, count: int, interval_ms: float, out: str) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.connect((dst, port))
    sent: dict[int, int] = {}
    got: dict[int, int] = {}
    done = threading.Event()

    def receive() -> None:
        s.settimeout(0.05)
        while not done.is_set():
            try:
                data = s.recv(2048)
            except socket.timeout:
                continue
            now = time.monotonic_ns()
            seq, t_send = struct.unpack_from(PROBE_FMT, data)
            got[seq] = now - t_send

    rx = threading.Thread(target=receive, daemon=True)
    rx.start()
    t_next = time.monotonic_ns()
    for seq in range(count):
        while (now := time.monotonic_ns()) < t_next:
            time.sleep(min(0.001, (t_next - now) / 1e9))
        t_send = time.monotonic_ns()
        sent[seq] = t_send
        s.send(struct.pack(PROBE_FMT, seq, t_send) + b"\0" * PROBE_PAD)
        t_next += int(interval_ms * 1e6)
    time.sleep(0.5)  # let the last replies (up to a few hundred ms of delay) arrive
    done.set()
    rx.join()
    with open(out, "w") as f:
        f.write("seq,t_send_ns,rtt_ns\n")
        for seq, t_send in sent.items():
            f.write(f"{seq},{t_send},{got.get(seq, -1)}\n")


def bulk(src: str, dst: str, port: int, duration: float, out: str) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(5.0)
    s.connect((dst, port))
    t_start = time.monotonic_ns()
    total = 0
    rows = [(t_start, 0)]
    next_mark = t_start + 50_000_000
    end = t_start + int(duration * 1e9)
    s.settimeout(0.05)
    while True:
        now = time.monotonic_ns()
        if now >= end:
            break
        try:
            n = len(s.recv(262144))
        except socket.timeout:
            n = 0
        total += n
        now = time.monotonic_ns()
        if now >= next_mark:
            rows.append((now, total))
            next_mark += 50_000_000
    s.close()
    with open(out, "w") as f:
        f.write("t_ns,bytes_cumulative\n")
        f.writelines(f"{t},{b}\n" for t, b in rows)


def main() -> None:
    ap = argparse.ArgumentParser(prog="mpvlab.probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("serve")
    a.add_argument("--bind", default="0.0.0.0")
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--duration", type=float, required=True)
    a = sub.add_parser("rtt")
    for k in ("--src", "--dst", "--out"):
        a.add_argument(k, required=True)
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--count", type=int, required=True)
    a.add_argument("--interval-ms", type=float, required=True)
    a = sub.add_parser("bulk")
    for k in ("--src", "--dst", "--out"):
        a.add_argument(k, required=True)
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--duration", type=float, required=True)
    args = ap.parse_args()
    if args.cmd == "serve":
        serve(args.bind, args.port, args.duration)
    elif args.cmd == "rtt":
        rtt(args.src, args.dst, args.port, args.count, args.interval_ms, args.out)
    else:
        bulk(args.src, args.dst, args.port, args.duration, args.out)


if __name__ == "__main__":
    main()
