"""Test/bench harness for mpvlab-delayline: a client - router - server line of
network namespaces, the daemon behind an NFQUEUE rule in the router, and
probes (ICMP echo with kernel receive timestamps, UDP sequence blaster).

Everything it creates carries the prefix ``hdl`` plus a random token and is
removed by ``Line.close()`` (also on failure). Probes run inside a namespace
as ``ip netns exec NS python hdl_harness.py probe ...`` and print JSON.

Used by tests/test_delayline.py and bench/bench_delayline.py; the Python
orchestration proper lives elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

HERE = Path(__file__).resolve().parent
# HDL_DELAYLINE_BIN points the harness at another build (used to check that
# the tests catch deliberately broken variants).
BINARY = Path(os.environ.get("HDL_DELAYLINE_BIN", HERE / "build" / "mpvlab-delayline"))
PYTHON = sys.executable


def run(args: Sequence[str], check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run an argument list (never a shell string)."""
    cp = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and cp.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({cp.returncode}): {cp.stderr.strip()}")
    return cp


def build() -> Path:
    if "HDL_DELAYLINE_BIN" in os.environ:
        return BINARY
    run(["make", "-s", "-C", str(HERE)], timeout=120)
    return BINARY


# --------------------------------------------------------------------------
# Schedules: (t_us, delay_us) points, optional period.


@dataclass(frozen=True)
class Schedule:
    points: tuple[tuple[int, int], ...]
    period_us: int = 0

    def text(self) -> str:
        lines = ["# written by hdl_harness", f"period_us {self.period_us}"]
        lines += [f"{t} {d}" for t, d in self.points]
        return "\n".join(lines) + "\n"

    def delay_us(self, t_rel_ns: int) -> int:
        """Same rule as the daemon: last point with t <= t_rel."""
        t = t_rel_ns
        if self.period_us:
            t %= self.period_us * 1000
        elif t < 0:
            return self.points[0][1]
        d = self.points[0][1]
        for pt, pd in self.points:
            if pt * 1000 <= t:
                d = pd
        return d

    def steps_ns(self, start_rel_ns: int, end_rel_ns: int) -> list[tuple[int, int]]:
        """(t_rel_ns, new_delay_us) of every change of value in [start, end]."""
        out: list[tuple[int, int]] = []
        if self.period_us:
            p = self.period_us * 1000
            k = start_rel_ns // p
            while k * p <= end_rel_ns:
                for t, _ in self.points:
                    tt = k * p + t * 1000
                    if start_rel_ns <= tt <= end_rel_ns:
                        out.append((tt, self.delay_us(tt)))
                k += 1
        else:
            out = [(t * 1000, d) for t, d in self.points if start_rel_ns <= t * 1000 <= end_rel_ns]
        # keep only real changes of value
        res: list[tuple[int, int]] = []
        for tt, d in out:
            if self.delay_us(tt - 1) != d:
                res.append((tt, d))
        return res


def constant(delay_us: int) -> Schedule:
    return Schedule(((0, delay_us),))


def square(low_us: int, high_us: int, period_us: int, low_first: bool = True) -> Schedule:
    a, b = (low_us, high_us) if low_first else (high_us, low_us)
    return Schedule(((0, a), (period_us // 2, b)), period_us)


def fifo_expected_ns(arrivals_rel_ns: Sequence[int], sched: Schedule) -> list[int]:
    """Expected one-way delay of each packet through the line: the daemon's
    rule target_i = max(a_i + d(a_i), target_{i-1})."""
    out: list[int] = []
    last = -(1 << 62)
    for a in arrivals_rel_ns:
        tgt = max(a + sched.delay_us(a) * 1000, last)
        last = tgt
        out.append(tgt - a)
    return out


# --------------------------------------------------------------------------
# Topology


@dataclass
class Line:
    """client (c0) --- (rc) router (rs) --- (s0) server, IPv4 only."""

    token: str = field(default_factory=lambda: secrets.token_hex(2))
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="hdl-")))

    client_ip: str = "10.77.1.1"
    router_c_ip: str = "10.77.1.254"
    router_s_ip: str = "10.77.2.254"
    server_ip: str = "10.77.2.1"

    @property
    def ns_c(self) -> str:
        return f"hdl-{self.token}-c"

    @property
    def ns_r(self) -> str:
        return f"hdl-{self.token}-r"

    @property
    def ns_s(self) -> str:
        return f"hdl-{self.token}-s"

    def ifn(self, role: str) -> str:
        return f"hdl{self.token}{role}"  # 9 chars, well under IFNAMSIZ

    def nsx(self, ns: str, *args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return run(["ip", "netns", "exec", ns, *args], check=check, timeout=timeout)

    def up(self) -> "Line":
        for ns in (self.ns_c, self.ns_r, self.ns_s):
            run(["ip", "netns", "add", ns])
            self.created.append(ns)
            self.nsx(ns, "ip", "link", "set", "lo", "up")
            self.nsx(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            self.nsx(ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        # veths are created inside the namespaces, so none ever lives in the host
        self.nsx(self.ns_c, "ip", "link", "add", self.ifn("c0"), "type", "veth",
                 "peer", "name", self.ifn("rc"), "netns", self.ns_r)
        self.nsx(self.ns_s, "ip", "link", "add", self.ifn("s0"), "type", "veth",
                 "peer", "name", self.ifn("rs"), "netns", self.ns_r)
        self.nsx(self.ns_c, "ip", "addr", "add", f"{self.client_ip}/24", "dev", self.ifn("c0"))
        self.nsx(self.ns_s, "ip", "addr", "add", f"{self.server_ip}/24", "dev", self.ifn("s0"))
        self.nsx(self.ns_r, "ip", "addr", "add", f"{self.router_c_ip}/24", "dev", self.ifn("rc"))
        self.nsx(self.ns_r, "ip", "addr", "add", f"{self.router_s_ip}/24", "dev", self.ifn("rs"))
        for ns, dev in ((self.ns_c, "c0"), (self.ns_s, "s0"), (self.ns_r, "rc"), (self.ns_r, "rs")):
            self.nsx(ns, "ip", "link", "set", self.ifn(dev), "up")
        self.nsx(self.ns_c, "ip", "route", "add", "default", "via", self.router_c_ip)
        self.nsx(self.ns_s, "ip", "route", "add", "default", "via", self.router_s_ip)
        self.nsx(self.ns_r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        # ARP once so the first probes do not measure neighbour resolution
        warm = self.ping(3, 0.02, wait_s=0.5)
        if not any(x["rtt_ns"] is not None for x in warm):
            raise RuntimeError("no connectivity client -> server through the router")
        return self

    def queue_rule(self, in_dev: str, queue: int) -> list[str]:
        return ["FORWARD", "-i", self.ifn(in_dev), "-j", "NFQUEUE", "--queue-num", str(queue)]

    def add_queue(self, in_dev: str, queue: int) -> None:
        """Packets entering the router on in_dev ('rs': server->client,
        'rc': client->server) go through NFQUEUE queue. No --queue-bypass:
        a dead daemon must mean 100 % loss."""
        self.nsx(self.ns_r, "iptables", "-A", *self.queue_rule(in_dev, queue))

    def tbf(self, dev: str, rate: str, burst: int, limit: int) -> None:
        self.nsx(self.ns_r, "tc", "qdisc", "replace", "dev", self.ifn(dev), "root", "tbf",
                 "rate", rate, "burst", str(burst), "limit", str(limit))

    def tcp_buffers(self, max_bytes: int) -> None:
        """Raise the TCP buffer maxima in client and server (per-namespace
        sysctls), so high-BDP flows are not capped by the 4/6 MB defaults."""
        for ns in (self.ns_c, self.ns_s):
            self.nsx(ns, "sysctl", "-qw", f"net.ipv4.tcp_rmem=4096 131072 {max_bytes}")
            self.nsx(ns, "sysctl", "-qw", f"net.ipv4.tcp_wmem=4096 16384 {max_bytes}")
            self.nsx(ns, "sysctl", "-qw", f"net.core.rmem_max={max_bytes}")
            self.nsx(ns, "sysctl", "-qw", f"net.core.wmem_max={max_bytes}")

    def spawn(self, ns: str, args: Sequence[str]) -> subprocess.Popen[str]:
        p = subprocess.Popen(["ip", "netns", "exec", ns, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)  # only our own PIDs
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        # deleting a namespace removes its veths, qdiscs and iptables rules
        for ns in self.created:
            run(["ip", "netns", "del", ns], check=False)
        self.created.clear()
        for f in self.tmp.glob("*"):
            f.unlink(missing_ok=True)
        try:
            self.tmp.rmdir()
        except OSError:
            pass

    def __enter__(self) -> "Line":
        try:
            return self.up()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- daemon

    def delayline(self, sched: Schedule, queue: int = 0, t0_ns: int | None = None,
                  loss: float = 0.0, seed: int = 1, maxlen: int = 65536,
                  rt_prio: int = 50, name: str = "dl",
                  extra: Sequence[str] = ()) -> "Daemon":
        """extra: more command-line arguments (capacity, outages, GE loss, --release-log)."""
        sfile = self.tmp / f"{name}.sched"
        sfile.write_text(sched.text())
        d = Daemon(line=self, name=name, sched=sched, queue=queue,
                   ready=self.tmp / f"{name}.ready", stats=self.tmp / f"{name}.stats.json",
                   steplog=self.tmp / f"{name}.steps.csv")
        args = [str(BINARY), "--queue", str(queue), "--schedule", str(sfile),
                "--ready-file", str(d.ready), "--stats", str(d.stats),
                "--step-log", str(d.steplog), "--maxlen", str(maxlen),
                "--rt-prio", str(rt_prio)]
        if t0_ns is not None:
            args += ["--t0-ns", str(t0_ns)]
        if loss:
            args += ["--loss", repr(loss), "--seed", str(seed)]
        args += list(extra)
        d.proc = self.spawn(self.ns_r, args)
        d.wait_ready()
        return d

    # ---------------------------------------------------------------- probes

    def probe(self, ns: str, args: Sequence[str], timeout: float = 60.0) -> Any:
        cp = self.nsx(ns, PYTHON, str(Path(__file__).resolve()), "probe", *args, timeout=timeout)
        return json.loads(cp.stdout)

    def ping(self, count: int, interval_s: float, dst: str | None = None,
             wait_s: float = 1.0) -> list[dict[str, Any]]:
        """ICMP echo from the client; per sample: seq, send_mono_ns, rtt_ns|None."""
        return self.probe(self.ns_c, ["ping", "--dst", dst or self.server_ip,
                                      "--count", str(count), "--interval", repr(interval_s),
                                      "--wait", repr(wait_s)],
                          timeout=count * interval_s + wait_s + 30)


@dataclass
class Daemon:
    line: Line
    name: str
    sched: Schedule
    queue: int
    ready: Path
    stats: Path
    steplog: Path
    proc: subprocess.Popen[str] | None = None

    def wait_ready(self, timeout: float = 5.0) -> None:
        assert self.proc is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.ready.exists():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"delay line exited {self.proc.returncode}: {self.proc.stderr.read() if self.proc.stderr else ''}")
            time.sleep(0.005)
        raise RuntimeError("delay line did not become ready")

    def stop(self, timeout: float = 5.0) -> dict[str, Any]:
        """SIGTERM, wait, return the stats JSON (raises on non-zero exit)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        if self.proc.returncode != 0:
            raise RuntimeError(f"delay line exit {self.proc.returncode}: {err}")
        return json.loads(self.stats.read_text())

    def steps(self) -> list[tuple[int, int]]:
        rows = self.steplog.read_text().splitlines()[1:]
        return [(int(a), int(b)) for a, b in (r.split(",") for r in rows if r)]

    def cpu_ticks(self) -> int:
        """utime + stime of the daemon (clock ticks) from /proc/PID/stat."""
        assert self.proc is not None
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return int(fields[11]) + int(fields[12])


# --------------------------------------------------------------------------
# Probes (run inside a namespace by ``python hdl_harness.py probe ...``)

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def _icmp_checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


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
                csum = _icmp_checksum(hdr + payload)
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
        except socket.timeout:
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


# --------------------------------------------------------------------------
# Capacity runs: bulk TCP through the line, release-log analysis


def bulk_tcp(line: Line, seconds: float, cc: str = "cubic") -> dict[str, Any]:
    """iperf3 bulk server->client for `seconds` (data crosses the router's 'rs' queue)."""
    srv = line.spawn(line.ns_c, ["iperf3", "-s", "-1", "-p", "5201", "-B", line.client_ip])
    time.sleep(0.3)
    cp = line.nsx(line.ns_s, "iperf3", "-c", line.client_ip, "-p", "5201", "-t", str(seconds),
                  "-C", cc, "-J", timeout=seconds + 30)
    srv.wait(timeout=10)
    return json.loads(cp.stdout)


@dataclass(frozen=True)
class Rel:
    """One row of the delay line's --release-log."""

    seq: int
    len: int
    arrival_ns: int
    fate: str
    depart_ns: int
    target_ns: int
    release_ns: int
    q_packets: int
    q_bytes: int


def read_release_log(path: Path) -> list[Rel]:
    rows = path.read_text().splitlines()
    assert rows[0] == "seq,len,arrival_ns,fate,depart_ns,target_ns,release_ns,q_packets,q_bytes", rows[0]
    out = []
    for r in rows[1:]:
        f = r.split(",")
        out.append(Rel(int(f[0]), int(f[1]), int(f[2]), f[3], int(f[4]), int(f[5]), int(f[6]),
                       int(f[7]), int(f[8])))
    out.sort(key=lambda x: x.seq)
    return out


def window_errors(rels: Sequence[Rel], count_opps: Any, window_ns: int = 100_000_000,
                  skip_s: float = 1.0, mtu: int = 1500) -> dict[str, Any]:
    """Delivered IP bytes (by departure time) per window vs opportunities x mtu, over the windows
    from skip_s after the first departure to one window before the last: the bulk flow's steady
    span (slow start and the iperf3 tail excluded). count_opps(a, b) = opportunities in (a, b]."""
    import bisect
    dep = sorted((r.depart_ns, r.len) for r in rels if r.fate == "A")
    times = [t for t, _ in dep]
    cum = [0]
    for _, n in dep:
        cum.append(cum[-1] + n)
    start = (times[0] // window_ns) * window_ns + int(skip_s * 1e9)
    errs: list[int] = []
    tot_d = tot_o = 0
    a = start
    while a + 2 * window_ns <= times[-1]:
        b = a + window_ns
        d = cum[bisect.bisect_right(times, b)] - cum[bisect.bisect_right(times, a)]
        o = count_opps(a, b) * mtu
        errs.append(d - o)
        tot_d += d
        tot_o += o
        a = b
    errs.sort()
    q = lambda p: errs[min(len(errs) - 1, int(p * len(errs)))]  # noqa: E731
    return {"windows": len(errs), "delivered_bytes": tot_d, "opportunity_bytes": tot_o,
            "total_error": (tot_d - tot_o) / tot_o if tot_o else 0.0,
            "window_error_bytes": {"min": errs[0], "p1": q(0.01), "p50": q(0.5), "p99": q(0.99),
                                   "max": errs[-1]},
            "span_s": len(errs) * window_ns / 1e9}
