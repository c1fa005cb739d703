"""A two-path MPTCP bed for the collectors' tests and benchmark (tests/test_collectors.py,
tests/test_qdiscstat.py, bench/bench_collectors.py).

    server ns                              client ns
    10.0.1.2/24  <srv if s1> <--veth--> <cli if c1>  10.0.1.1/24   (path 1, initial subflow)
    10.0.2.2/24  <srv if s2> <--veth--> <cli if c2>  10.0.2.1/24   (path 2, joined subflow)

The client connects to 10.0.1.2 and the in-kernel path manager opens a second subflow from its
`subflow` endpoint 10.0.2.1 (policy routing per source address keeps each subflow on its path). Each
server-side veth egress is shaped by tbf; offloads are off so every packet on the wire is one
MTU-sized segment at most and interface counters can be compared with payload bytes. Namespaces and
processes belong to a testbed.bed.Bed (run ledger, owner lock).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mpvlab.core import proc
from mpvlab.testbed.bed import Bed, Rig

PY = sys.executable

# A bulk MPTCP (IPPROTO_MPTCP = 262) sender: accepts one connection, writes N bytes, closes.
SERVER_CODE = r"""
import socket, sys, time
port, nbytes = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(1)
print("listening", flush=True)
hold = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
c, _ = s.accept()
buf = memoryview(b"x" * 65536)
left = nbytes
while left > 0:
    left -= c.send(buf[:min(left, len(buf))])
time.sleep(hold)
c.close()
s.close()
"""

# The receiver: reads to EOF (or, with a hold time, exactly the expected bytes, then keeps
# the connection open that long), prints the byte count and the seconds it took.
CLIENT_CODE = r"""
import socket, sys, time
expect, hold = int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.connect((sys.argv[1], int(sys.argv[2])))
t = time.monotonic()
n = 0
while not (hold > 0 and n >= expect):
    b = s.recv(1 << 18)
    if not b:
        break
    n += len(b)
print(n, time.monotonic() - t, flush=True)
time.sleep(hold)
s.close()
"""

# Counts what leaves the given interfaces (PACKET_OUTGOING after the qdisc): packets,
# frame bytes, TCP payload bytes and "unique" payload (bytes above the highest sequence
# seen per flow, so TCP retransmissions are excluded). Prints JSON on SIGTERM. With a first
# argument --pcap=FILE it also writes every TCP frame, both ways, cut to 128 bytes (the headers
# and the MPTCP options), for the data-sequence analysis of mpvlab.collectors.wire_switches.
SNIFF_CODE = r"""
import json, select, signal, socket, struct, sys, time
args = sys.argv[1:]
pcap = None
if args and args[0].startswith("--pcap="):
    pcap = open(args.pop(0)[len("--pcap="):], "wb")
    pcap.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 128, 1))
socks = {}
for name in args:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind((name, 0))
    s.setblocking(False)
    socks[s.fileno()] = (name, s)
st = {n: {"pkts": 0, "frame_bytes": 0, "payload": 0, "unique": 0, "data_pkts": 0,
          "tcp_opt_len": {}} for n in args}
high = {}
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
def drain(fd):
    name, s = socks[fd]
    while True:
        try:
            d, addr = s.recvfrom(65536)
        except BlockingIOError:
            return
        if len(d) < 34 or d[12:14] != b"\x08\x00":
            continue
        if pcap is not None and d[23] == 6:
            now = time.time()
            pcap.write(struct.pack("<IIII", int(now), int(now % 1 * 1e6), min(len(d), 128), len(d)))
            pcap.write(d[:128])
        if addr[2] != socket.PACKET_OUTGOING:
            continue
        ihl = (d[14] & 15) * 4
        tot = struct.unpack("!H", d[16:18])[0]
        if d[23] != 6:
            continue
        t = 14 + ihl
        sport, dport, seq = struct.unpack("!HHI", d[t:t + 8])
        doff = (d[t + 12] >> 4) * 4
        pl = tot - ihl - doff
        r = st[name]
        r["pkts"] += 1
        r["frame_bytes"] += len(d)
        r["payload"] += pl
        if pl <= 0:
            continue
        r["data_pkts"] += 1
        o = str(doff - 20)
        r["tcp_opt_len"][o] = r["tcp_opt_len"].get(o, 0) + 1
        k = (d[26:34], sport, dport)
        end = (seq + pl) & 0xffffffff
        h = high.get(k)
        if h is None:
            r["unique"] += pl
            high[k] = end
            continue
        ahead = (end - h) & 0xffffffff  # how far this segment's end is beyond the highest
        if 0 < ahead < 0x80000000:
            r["unique"] += min(ahead, pl)
            high[k] = end
p = select.poll()
for fd in socks:
    p.register(fd, select.POLLIN)
print("ready", flush=True)
while not stop:
    for fd, _ in p.poll(100):
        drain(fd)
for fd in socks:
    drain(fd)
if pcap is not None:
    pcap.close()
print(json.dumps(st), flush=True)
"""


@dataclass
class Transfer:
    nbytes: int
    seconds: float


class TwoPath(Rig):
    """Context manager (Rig) creating (and always deleting) the two namespaces above. `tag` (up to 8
    alphanumerics) tells concurrent beds apart in logs; names carry the bed's run id."""

    def __init__(self, tag: str, rate_mbit: float, *, backup: bool = False,
                 limit_bytes: int = 2_000_000) -> None:
        if not tag.isalnum() or len(tag) > 8:
            raise ValueError("tag: up to 8 alphanumerics")
        self.tag = tag
        self.rate_mbit = rate_mbit
        self.backup = backup
        self.limit_bytes = limit_bytes
        self.bed = Bed()
        self.server_ns = self.client_ns = ""
        self.server_ifs = [self.bed.ifname("s1"), self.bed.ifname("s2")]
        self.client_ifs = [self.bed.ifname("c1"), self.bed.ifname("c2")]

    # -- lifecycle -----------------------------------------------------------------
    def up(self) -> None:
        self.bed.open()
        s, c = self.bed.node("server"), self.bed.node("client")
        self.server_ns, self.client_ns = s.name, c.name
        burst = max(3200, int(self.rate_mbit * 1e6 / 8 * 0.001))  # >= 1 ms at rate
        for i in (1, 2):
            si, ci = self.server_ifs[i - 1], self.client_ifs[i - 1]
            self.bed.link(s, si, f"10.0.{i}.2/24", c, ci, f"10.0.{i}.1/24")
            s.run(["tc", "qdisc", "replace", "dev", si, "root", "tbf", "rate", f"{self.rate_mbit}mbit",
                   "burst", str(burst), "limit", str(self.limit_bytes)])
        for ns in (s, c):
            ns.run(["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
                    "net.mptcp.enabled=1", "net.ipv4.tcp_no_metrics_save=1"])
            ns.run(["ip", "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2"])
        for i in (1, 2):
            c.run(["ip", "rule", "add", "from", f"10.0.{i}.1", "table", f"10{i}"])
            c.run(["ip", "route", "add", "default", "via", f"10.0.{i}.2", "dev", self.client_ifs[i - 1],
                   "table", f"10{i}"])
        ep = ["ip", "mptcp", "endpoint", "add", "10.0.2.1", "dev", self.client_ifs[1], "subflow"]
        if self.backup:
            ep.append("backup")
        c.run(ep)

    def down(self) -> None:
        self.bed.close()

    def popen(self, ns: str, argv: list[str]) -> subprocess.Popen[str]:
        return self.bed.popen(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # -- measurements --------------------------------------------------------------
    def tx_counters(self) -> dict[str, tuple[int, int]]:
        """Server-side interface tx (bytes, packets): Ethernet frames without FCS."""
        out: dict[str, tuple[int, int]] = {}
        for dev in self.server_ifs:
            js = json.loads(proc.run(["ip", "-j", "-s", "-n", self.server_ns, "link", "show", "dev", dev]).stdout)
            tx = js[0]["stats64"]["tx"]
            out[dev] = (int(tx["bytes"]), int(tx["packets"]))
        return out

    def transfer(self, nbytes: int, port: int = 5001, timeout: float = 120.0, *,
                 hold_s: float = 0.0,
                 on_received: Callable[[], None] | None = None) -> Transfer:
        """Bulk MPTCP transfer server -> client; returns what the client received. With
        hold_s > 0 both ends keep the connection open that long after the last byte
        arrived, and on_received() is called at that point."""
        srv = self.popen(self.server_ns, [PY, "-c", SERVER_CODE, str(port), str(nbytes), str(hold_s)])
        cli: subprocess.Popen[str] | None = None
        try:
            line = srv.stdout.readline() if srv.stdout else ""
            if line.strip() != "listening":
                raise RuntimeError(f"server did not start: {line!r} "
                                   f"{srv.stderr.read() if srv.stderr else ''}")
            cli = self.popen(self.client_ns, [PY, "-c", CLIENT_CODE, "10.0.1.2", str(port), str(nbytes),
                                              str(hold_s)])
            line = cli.stdout.readline() if cli.stdout else ""
            if not line.strip():
                cli.wait(timeout=timeout)
                raise RuntimeError(f"client failed: {cli.stderr.read() if cli.stderr else ''}")
            n, secs = line.split()
            if on_received is not None:
                on_received()
            cli.wait(timeout=timeout + hold_s)
            srv.wait(timeout=timeout + hold_s)
            if cli.returncode != 0 or srv.returncode != 0:
                raise RuntimeError(f"client/server exit {cli.returncode}/{srv.returncode}: "
                                   f"{srv.stderr.read() if srv.stderr else ''}")
            return Transfer(int(n), float(secs))
        finally:
            for p in (cli, srv):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()


class Sniffer:
    """Counts the server's outgoing packets per interface and, given a path, writes a headers-only
    capture of its TCP frames both ways (see SNIFF_CODE)."""

    def __init__(self, bed: TwoPath, pcap: Path | None = None) -> None:
        self.bed = bed
        self.pcap = pcap
        self.proc: subprocess.Popen[str] | None = None
        self.result: dict[str, Any] = {}

    def __enter__(self) -> Sniffer:
        pcap = [f"--pcap={self.pcap}"] if self.pcap is not None else []
        self.proc = self.bed.popen(self.bed.server_ns, [PY, "-c", SNIFF_CODE, *pcap, *self.bed.server_ifs])
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if line.strip() != "ready":
            self.proc.kill()
            raise RuntimeError(f"sniffer did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        time.sleep(0.2)  # let the last frames reach the packet sockets
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        if self.proc.returncode == 0 and out.strip():
            self.result = json.loads(out.strip().splitlines()[-1])
        elif not any(exc):
            raise RuntimeError(f"sniffer failed ({self.proc.returncode}): {err}")


def cpu_ns(pid: int) -> int:
    """Time the process has spent on a CPU (ns), from /proc/PID/schedstat."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def unique_tag() -> str:
    return f"{os.getpid() % 100000}{int(time.monotonic() * 10) % 100}"[:8]
