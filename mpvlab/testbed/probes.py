"""Probes of the delay-line bed (mpvlab/testbed/delayline.py): ICMP echo with kernel receive timestamps,
a UDP sequence blaster and its receiver. Run inside a namespace as
``python -m mpvlab.testbed.probes probe KIND ...``; each prints JSON. Standard library and
mpvlab.core.icmp only (~6 ms of imports), so a probe starts fast.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from mpvlab.core.icmp import checksum

# --------------------------------------------------------------------------
# Probes

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def probe_ping(dst: str, count: int, interval: float, wait: float) -> list[dict[str, Any]]:
    """Echo requests at fixed times; RTT = kernel receive timestamp (SO_TIMESTAMPNS)
    minus CLOCK_REALTIME read just before sendto. send_mono_ns lets callers
    align samples with the daemon's CLOCK_MONOTONIC t0."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    ident = os.getpid() & 0xFFFF
    sent_real: dict[int, int] = {}
    samples: list[dict[str, Any]] = []
    start = time.monotonic_ns() + 20_000_000
    step = int(interval * 1e9)
    i = 0
    deadline: int | None = None

    def handle() -> None:
        data, anc, _, _ = sock.recvmsg(2048, 256)
        ihl = (data[0] & 0x0F) * 4
        typ, _, _, rid, seq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if typ != 0 or rid != ident or seq not in sent_real:
            return
        ts = None
        for lvl, t, val in anc:
            if lvl == socket.SOL_SOCKET and t == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", val[:16])
                ts = sec * 1_000_000_000 + nsec
        if ts is None:
            ts = time.time_ns()
        s = samples[seq]
        if s["rtt_ns"] is None:
            s["rtt_ns"] = ts - sent_real[seq]

    while True:
        now = time.monotonic_ns()
        if i < count:
            due = start + i * step
            if now >= due:
                seq = i & 0xFFFF
                hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
                payload = struct.pack("!Q", i) + b"hdl-probe" * 4
                csum = checksum(hdr + payload)
                pkt = struct.pack("!BBHHH", 8, 0, csum, ident, seq) + payload
                # Both clocks must describe the same instant: the RTT uses
                # CLOCK_REALTIME (kernel rx stamps), the schedule alignment
                # CLOCK_MONOTONIC. Retry if we were preempted between reads.
                for _ in range(100):
                    m1 = time.monotonic_ns()
                    real = time.time_ns()
                    send_mono = time.monotonic_ns()
                    if send_mono - m1 < 20_000:
                        break
                sent_real[seq] = real + (send_mono - m1) // 2
                sock.sendto(pkt, (dst, 0))
                samples.append({"seq": i, "send_mono_ns": send_mono, "rtt_ns": None})
                i += 1
                if i == count:
                    deadline = time.monotonic_ns() + int(wait * 1e9)
                continue
            timeout = (due - now) / 1e9
        else:
            assert deadline is not None
            if now >= deadline:
                break
            timeout = (deadline - now) / 1e9
        r, _, _ = select.select([sock], [], [], timeout)
        if r:
            handle()
    sock.close()
    return samples


def probe_udprecv(port: int, duration: float, ready: str) -> dict[str, Any]:
    """Receive sequence-numbered datagrams; count reorderings (a sequence
    number lower than one already seen) and duplicates."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    Path(ready).write_text("1")
    end = time.monotonic() + duration
    maxseq = -1
    got = reorders = dups = 0
    seen: set[int] = set()
    last_rx = time.monotonic()
    while time.monotonic() < end:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            if got and time.monotonic() - last_rx > 1.0:
                break
            continue
        last_rx = time.monotonic()
        (seq,) = struct.unpack("!Q", data[:8])
        if seq in seen:
            dups += 1
            continue
        seen.add(seq)
        got += 1
        if seq < maxseq:
            reorders += 1
        else:
            maxseq = seq
    return {"received": got, "reorders": reorders, "duplicates": dups, "max_seq": maxseq}


def probe_udpsend(dst: str, port: int, count: int, size: int, pps: float) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"\0" * max(0, size - 8)
    t0 = time.monotonic()
    for i in range(count):
        if pps > 0:
            due = t0 + i / pps
            while time.monotonic() < due:
                pass
        while True:
            try:
                sock.sendto(struct.pack("!Q", i) + pad, (dst, port))
                break
            except BlockingIOError:
                time.sleep(0.0005)
            except OSError as e:
                if e.errno == 105:  # ENOBUFS: qdisc full, try again
                    time.sleep(0.0005)
                    continue
                raise
    return {"sent": count, "duration_s": time.monotonic() - t0}


def _main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("probe")
    psub = pr.add_subparsers(dest="kind", required=True)
    p = psub.add_parser("ping")
    p.add_argument("--dst", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--interval", type=float, required=True)
    p.add_argument("--wait", type=float, default=1.0)
    p = psub.add_parser("udprecv")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--ready", required=True)
    p = psub.add_parser("udpsend")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--size", type=int, default=1000)
    p.add_argument("--pps", type=float, default=0.0)
    a = ap.parse_args(argv)
    if a.kind == "ping":
        out: Any = probe_ping(a.dst, a.count, a.interval, a.wait)
    elif a.kind == "udprecv":
        out = probe_udprecv(a.port, a.duration, a.ready)
    else:
        out = probe_udpsend(a.dst, a.port, a.count, a.size, a.pps)
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
