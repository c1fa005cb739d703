"""Kernel-stamped ICMP echo: the RTT of a path as the kernel sees it, with no userspace on the path.

Run inside the client's namespace: `python -m mpvlab.runner.kping --pair SRC,DST,OUT [--pair ...]
--count N --interval-ms I`. The far end is the server's kernel answering echo requests (no echo
program), and both stamps are the kernel's own (SO_TIMESTAMPING, software): the send stamp is taken
when the request leaves through the device (veth calls skb_tx_timestamp), the receive stamp when the
reply enters the stack. Scheduling delays of this program therefore do not enter the RTT, only the
moment a request is sent (which is recorded, kernel-stamped, and used to look up the schedule).

CSV per pair: seq,t_send_ns,rtt_ns,user_rtt_ns — t_send_ns on CLOCK_MONOTONIC (the kernel's
CLOCK_REALTIME stamps converted with an offset read once, bracketed to a few µs); rtt_ns = −1 for a
lost probe; user_rtt_ns is what a userspace stamp (monotonic_ns before send, after recv) would have
read — kept so a reader sees the measurement noise the kernel stamps remove.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import struct
import sys
import time
from mpvlab.core import icmp

SO_TIMESTAMPING = 37            # asm-generic/socket.h (SCM_TIMESTAMPING has the same value)
SOF_TX_SOFTWARE = 1 << 1
SOF_RX_SOFTWARE = 1 << 3
SOF_SOFTWARE = 1 << 4
SOF_OPT_ID = 1 << 7             # the error-queue message carries the send's index (ee_data)
SOF_OPT_TSONLY = 1 << 11        # ... and no copy of the packet
IP_RECVERR = 11
MSG_ERRQUEUE = 0x2000
ICMP_ECHO, ICMP_ECHOREPLY = 8, 0
PAYLOAD = 56                    # ping's default: 84-byte IP packets


def _echo(ident: int, seq: int) -> bytes:
    body = struct.pack("!Q", seq) + b"\xa5" * (PAYLOAD - 8)
    hdr = struct.pack("!BBHHH", ICMP_ECHO, 0, 0, ident, seq & 0xFFFF)
    return struct.pack("!BBHHH", ICMP_ECHO, 0, icmp.checksum(hdr + body), ident, seq & 0xFFFF) + body


def _ts_from_cmsg(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    for level, typ, data in ancdata:
        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPING and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data, 0)   # ts[0]: the software stamp
            if sec or nsec:
                return sec * 1_000_000_000 + nsec
    return None


def _ee_data(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    for level, typ, data in ancdata:
        if level == socket.IPPROTO_IP and typ == IP_RECVERR and len(data) >= 16:
            return int(struct.unpack_from("I", data, 12)[0])  # sock_extended_err.ee_data
    return None


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME − CLOCK_MONOTONIC, from the tightest of a few brackets (a few µs)."""
    best: tuple[int, int] | None = None
    for _ in range(20):
        a = time.monotonic_ns()
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.monotonic_ns()
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) // 2)
    assert best is not None
    return best[1]


class _Pair:
    def __init__(self, src: str, dst: str, out: str, ident: int) -> None:
        self.dst, self.out, self.ident = dst, out, ident
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self.sock.bind((src, 0))        # only replies to this path's client address
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                             SOF_TX_SOFTWARE | SOF_RX_SOFTWARE | SOF_SOFTWARE | SOF_OPT_ID | SOF_OPT_TSONLY)
        self.sock.setblocking(False)
        self.tx: dict[int, int] = {}        # seq → kernel send stamp (realtime)
        self.rx: dict[int, int] = {}        # seq → kernel receive stamp (realtime)
        self.user_tx: dict[int, int] = {}
        self.user_rx: dict[int, int] = {}

    def send(self, seq: int) -> None:
        self.user_tx[seq] = time.monotonic_ns()
        self.sock.sendto(_echo(self.ident, seq), (self.dst, 0))

    def drain(self) -> None:
        while True:      # send stamps: the n-th send's stamp carries n (OPT_ID), which is our seq
            try:
                _, anc, _, _ = self.sock.recvmsg(0, 1024, MSG_ERRQUEUE)
            except (BlockingIOError, InterruptedError):
                break
            ts, n = _ts_from_cmsg(anc), _ee_data(anc)
            if ts is not None and n is not None:
                self.tx.setdefault(n, ts)
        while True:
            try:
                data, anc, _, addr = self.sock.recvmsg(2048, 1024)
            except (BlockingIOError, InterruptedError):
                break
            now = time.monotonic_ns()
            ihl = (data[0] & 0x0F) * 4
            if len(data) < ihl + 16 or addr[0] != self.dst:
                continue
            typ, _, _, ident, _ = struct.unpack_from("!BBHHH", data, ihl)
            if typ != ICMP_ECHOREPLY or ident != self.ident:
                continue
            seq = struct.unpack_from("!Q", data, ihl + 8)[0]
            ts = _ts_from_cmsg(anc)
            if ts is not None:
                self.rx.setdefault(seq, ts)
                self.user_rx.setdefault(seq, now)

    def write(self, count: int, offset: int) -> None:
        with open(self.out, "w") as f:
            f.write("seq,t_send_ns,rtt_ns,user_rtt_ns\n")
            for seq in range(count):
                tx = self.tx.get(seq)
                rx = self.rx.get(seq)
                t_send = tx - offset if tx is not None else self.user_tx.get(seq, -1)
                rtt = rx - tx if (tx is not None and rx is not None) else -1
                urtt = (self.user_rx[seq] - self.user_tx[seq]) if seq in self.user_rx else -1
                f.write(f"{seq},{t_send},{rtt},{urtt}\n")


def run(pairs: list[tuple[str, str, str]], count: int, interval_ms: float, tail_s: float,
        wait_for_go: bool = False) -> None:
    base = os.getpid() & 0xFFFF
    ps = [_Pair(src, dst, out, (base + i) & 0xFFFF) for i, (src, dst, out) in enumerate(pairs)]
    offset = realtime_offset_ns()
    if wait_for_go and not sys.stdin.readline():
        return          # the caller went away before the check began: nothing to measure
    step = int(interval_ms * 1e6)
    t_next = time.monotonic_ns()
    end = t_next + count * step + int(tail_s * 1e9)
    seq = 0
    fds = [p.sock for p in ps]
    while True:
        now = time.monotonic_ns()
        if seq < count and now >= t_next:
            for p in ps:
                p.send(seq)
            seq += 1
            t_next += step
            continue
        if now >= end or (seq >= count and all(len(p.rx) >= count and len(p.tx) >= count for p in ps)):
            break
        wake = t_next if seq < count else end
        r, _, _ = select.select(fds, [], [], max(0.0, (wake - now) / 1e9))
        for p in ps:
            if p.sock in r:
                p.drain()
    for p in ps:
        p.drain()
        p.write(count, offset)


def main() -> None:
    ap = argparse.ArgumentParser(prog="mpvlab.runner.kping")
    ap.add_argument("--pair", action="append", required=True, help="SRC,DST,OUT_CSV")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--interval-ms", type=float, required=True)
    ap.add_argument("--tail-s", type=float, default=1.0, help="longest wait for the last replies")
    ap.add_argument("--wait-for-go", action="store_true",
                    help="set up, then start on a line from stdin (end of input: exit without sending)")
    a = ap.parse_args()
    run([tuple(x.split(",", 2)) for x in a.pair], a.count, a.interval_ms, a.tail_s,
        a.wait_for_go)


if __name__ == "__main__":
    main()
