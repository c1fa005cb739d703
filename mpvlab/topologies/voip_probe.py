"""VoIP-like UDP probe (stdlib only; runs inside a namespace as `python3 voip_probe.py send|recv ...`).

send: constant-bit-rate UDP, by default 80 kbit/s of 150-byte IP packets (= 66.67 packets/s; the
      UDP payload is 150 - 28 = 122 bytes). Each payload carries a magic, a sequence number and its
      send time (CLOCK_MONOTONIC ns, taken just before sendto). Packets are sent on an absolute
      schedule t0 + i/pps, so sleep overshoot never accumulates into a lower rate. On exit (end of
      --duration or SIGTERM) it writes {"sent": N, ...} to --summary.
recv: records (seq, t_send, t_recv) for every probe packet until SIGTERM, then writes the CSV
      seq,t_send_ns,t_recv_ns,owd_ns,queuing_delay_ns,d_study_ns and a summary JSON. t_recv is the
      kernel's receive timestamp (SO_TIMESTAMPNS), not the moment this process got the CPU: a clock
      read after recv() adds the receiver's own scheduling delay (tens of ms on a loaded 2-core VM)
      to the packet's. The kernel stamps CLOCK_REALTIME; it is moved to CLOCK_MONOTONIC by the
      two clocks' offset read beside it (they tick together; only a clock step between the packet's
      arrival and the read could skew it, by the step).

All namespaces of one machine share CLOCK_MONOTONIC, so owd = t_recv - t_send is a true one-way
delay and queuing_delay = owd - min(owd). d_study is the no-clock-sync form of the SABRE study,
d(i) = (t_recv,i - t_recv,0) - (t_ref,i - t_ref,0), with the send time as t_ref: the server's veth
to the router is unshaped and has no delay, so the send time is the router-arrival time up to
microseconds. d_study equals owd(i) - owd(first received), i.e. it is relative to the first packet
rather than to the minimum.
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import socket
import struct
import sys
import time

MAGIC = 0x766F6970  # "voip"
# <asm-generic/socket.h> (x86_64, arm64): Python's socket module does not name them. The kernel's
# control message carries a struct timespec of two 64-bit fields.
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("qq")
HEADER = struct.Struct("!IIQ")  # magic, seq, t_send_ns
IP_UDP_HEADERS = 28

_stop = False


def _on_term(_signum: int, _frame: object) -> None:
    global _stop
    _stop = True


def send(args: argparse.Namespace) -> int:
    payload_len = args.ip_size - IP_UDP_HEADERS
    if payload_len < HEADER.size:
        print(f"--ip-size must be at least {HEADER.size + IP_UDP_HEADERS}", file=sys.stderr)
        return 2
    pps = args.rate_bps / 8.0 / args.ip_size
    interval_ns = round(1e9 / pps)
    pad = bytes(payload_len - HEADER.size)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 6)
    dst = (args.dst, args.port)
    t0 = time.monotonic_ns()
    end = t0 + round(args.duration * 1e9) if args.duration > 0 else None
    seq = errors = 0
    while not _stop:
        target = t0 + seq * interval_ns
        if end is not None and target >= end:
            break
        now = time.monotonic_ns()
        if target > now:
            time.sleep((target - now) / 1e9)
            if _stop:
                break
        t_send = time.monotonic_ns()
        try:
            sock.sendto(HEADER.pack(MAGIC, seq, t_send) + pad, dst)
        except OSError:
            errors += 1  # counted as sent-and-lost: the receiver never sees it
        seq += 1
    with open(args.summary, "w") as f:
        json.dump({"sent": seq, "send_errors": errors, "pps": pps, "ip_size": args.ip_size,
                   "rate_bps": args.rate_bps, "t0_ns": t0, "t_last_ns": time.monotonic_ns()}, f)
    return 0


def _kernel_rx_monotonic_ns(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """The packet's kernel receive time on CLOCK_MONOTONIC, or None if it carried no timestamp."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(data)
            return sec * 1_000_000_000 + nsec - _realtime_minus_monotonic_ns()
    return None


def _realtime_minus_monotonic_ns(tries: int = 5) -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, read between two monotonic reads; of a few tries, the one
    whose reads were closest (a preemption between them would skew the midpoint by half the gap)."""
    best: tuple[int, int] | None = None
    for _ in range(tries):
        m1 = time.monotonic_ns()
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        m2 = time.monotonic_ns()
        if best is None or m2 - m1 < best[0]:
            best = (m2 - m1, real - (m1 + m2) // 2)
    assert best is not None
    return best[1]


def recv(args: argparse.Namespace) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((args.bind, args.port))
    sock.settimeout(0.1)  # wake up to notice SIGTERM
    if args.ready:
        open(args.ready, "w").close()
    rows: list[tuple[int, int, int]] = []
    foreign = 0
    user_stamped = 0   # packets that came without a kernel timestamp (none expected)
    while not _stop:
        try:
            data, ancdata, _flags, _addr = sock.recvmsg(2048, socket.CMSG_SPACE(TIMESPEC.size))
        except TimeoutError:
            continue
        except InterruptedError:
            continue
        t_recv = _kernel_rx_monotonic_ns(ancdata)
        if t_recv is None:
            user_stamped += 1
            t_recv = time.monotonic_ns()
        if len(data) < HEADER.size:
            foreign += 1
            continue
        magic, seq, t_send = HEADER.unpack_from(data)
        if magic != MAGIC:
            foreign += 1
            continue
        rows.append((seq, t_send, t_recv))
    seen: set[int] = set()
    dups = reordered = 0
    last = -1
    for seq, _, _ in rows:
        if seq in seen:
            dups += 1
        seen.add(seq)
        if seq < last:
            reordered += 1
        last = max(last, seq)
    owds = [tr - ts for _, ts, tr in rows]
    owd_min = min(owds) if owds else 0
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seq", "t_send_ns", "t_recv_ns", "owd_ns", "queuing_delay_ns", "d_study_ns"])
        if rows:
            _, ts0, tr0 = rows[0]
            for (seq, ts, tr), owd in zip(rows, owds):
                w.writerow([seq, ts, tr, owd, owd - owd_min, (tr - tr0) - (ts - ts0)])
    with open(args.summary, "w") as f:
        json.dump({"received": len(rows), "unique": len(seen), "duplicates": dups, "reordered": reordered,
                   "foreign": foreign, "max_seq": last, "owd_min_ns": owd_min,
                   "rx_timestamp": "kernel SO_TIMESTAMPNS", "user_stamped": user_stamped}, f)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--rate-bps", type=float, default=80_000.0)
    s.add_argument("--ip-size", type=int, default=150)
    s.add_argument("--duration", type=float, default=0.0, help="seconds; 0 = until SIGTERM")
    s.add_argument("--summary", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--csv", required=True)
    r.add_argument("--summary", required=True)
    r.add_argument("--ready", default="")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    return send(args) if args.mode == "send" else recv(args)


if __name__ == "__main__":
    sys.exit(main())
