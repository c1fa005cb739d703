"""Test/bench bed for mpvlab-delayline: a client - router - server line of network namespaces, the
daemon behind an NFQUEUE rule in the router, and probes (mpvlab/testbed/probes.py: ICMP echo with kernel
receive timestamps, UDP sequence blaster). Used by tests/test_delayline.py, tests/test_capacity.py,
bench/bench_delayline.py and bench/bench_traces.py.

The namespaces and processes belong to a testbed.bed.Bed (run ledger, owner lock) and are removed by
``Line.close()`` (also on failure), or after a killed test by the next bed or `mpvlab cleanup`.
Run as a script (``python mpvlab/testbed/delayline.py probe ...``) it is the probes and nothing else.
"""

from __future__ import annotations

if __name__ == "__main__":
    # Inside a namespace as a probe: hand over to the stdlib-only probes before importing the bed.
    import runpy
    runpy.run_module("mpvlab.testbed.probes", run_name="__main__")

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc
from mpvlab.core.netns import Netns
from mpvlab.testbed.bed import Bed, Rig

DELAYLINE_DIR = checkout_root() / "links" / "delayline"
PROBES = "mpvlab.testbed.probes"   # run as a module (`python -m`)
# HDL_DELAYLINE_BIN points the bed at another build (used to check that
# the tests catch deliberately broken variants).
BINARY = Path(os.environ.get("HDL_DELAYLINE_BIN", DELAYLINE_DIR / "build" / "mpvlab-delayline"))
PYTHON = sys.executable


def build() -> Path:
    if "HDL_DELAYLINE_BIN" in os.environ:
        return BINARY
    proc.run(["make", "-s", "-C", str(DELAYLINE_DIR)], timeout=120)
    return BINARY


def stop_and_read_stats(process: subprocess.Popen[str], stats: Path, what: str, timeout: float = 5.0) -> dict[str, Any]:
    """SIGTERM a line (NFQUEUE or AF_XDP), wait, return the stats JSON it wrote on exit; raises naming
    `what` on a non-zero exit, and kills it when it does not exit within `timeout`."""
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    if process.returncode != 0:
        raise RuntimeError(f"{what} exit {process.returncode}: {err}")
    return dict(json.loads(stats.read_text()))


# --------------------------------------------------------------------------
# Schedules: (t_us, delay_us) points, optional period.


@dataclass(frozen=True)
class Schedule:
    points: tuple[tuple[int, int], ...]
    period_us: int = 0

    def text(self) -> str:
        lines = ["# written by mpvlab/testbed/delayline.py", f"period_us {self.period_us}"]
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
class Line(Rig):
    """client (c0) --- (rc) router (rs) --- (s0) server, IPv4 only."""

    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    bed: Bed = field(default_factory=Bed)

    client_ip: str = "10.77.1.1"
    router_c_ip: str = "10.77.1.254"
    router_s_ip: str = "10.77.2.254"
    server_ip: str = "10.77.2.1"

    @property
    def tmp(self) -> Path:
        return self.bed.workdir

    @property
    def ns_c(self) -> str:
        return self.bed.nodes["c"].name

    @property
    def ns_r(self) -> str:
        return self.bed.nodes["r"].name

    @property
    def ns_s(self) -> str:
        return self.bed.nodes["s"].name

    def ifn(self, role: str) -> str:
        return self.bed.ifname(role)

    def nsx(self, ns: str, *args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return Netns(ns).run(list(args), check=check, timeout=timeout)

    def up(self) -> Line:
        self.bed.open()
        c, r, s = (self.bed.node(role) for role in ("c", "r", "s"))
        for ns in (c, r, s):
            ns.run(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
            ns.run(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
        self.bed.veth(c, self.ifn("c0"), r, self.ifn("rc"))
        self.bed.veth(s, self.ifn("s0"), r, self.ifn("rs"))
        for ns, dev, ip in ((c, "c0", self.client_ip), (s, "s0", self.server_ip),
                            (r, "rc", self.router_c_ip), (r, "rs", self.router_s_ip)):
            ns.run(["ip", "addr", "add", f"{ip}/24", "dev", self.ifn(dev)])
        c.run(["ip", "route", "add", "default", "via", self.router_c_ip])
        s.run(["ip", "route", "add", "default", "via", self.router_s_ip])
        r.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])
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
        p = self.bed.popen(ns, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
        # the bed deletes the namespaces (their veths, qdiscs and iptables rules) and the workdir
        self.bed.close()

    def down(self) -> None:
        self.close()

    # ---------------------------------------------------------------- daemon

    def delayline(self, sched: Schedule, queue: int = 0, t0_ns: int | None = None,
                  loss: float = 0.0, seed: int = 1, maxlen: int = 65536,
                  rt_prio: int = 50, name: str = "dl",
                  extra: Sequence[str] = (), binary: Path | None = None) -> Daemon:
        """extra: more command-line arguments (capacity, outages, GE loss, --release-log).
        binary: another build of the daemon (a benchmark compares two in one run)."""
        sfile = self.tmp / f"{name}.sched"
        sfile.write_text(sched.text())
        d = Daemon(line=self, name=name, sched=sched, queue=queue,
                   ready=self.tmp / f"{name}.ready", stats=self.tmp / f"{name}.stats.json",
                   steplog=self.tmp / f"{name}.steps.csv")
        args = [str(binary or BINARY), "--queue", str(queue), "--schedule", str(sfile),
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
        cp = self.nsx(ns, PYTHON, "-m", PROBES, "probe", *args, timeout=timeout)
        return json.loads(cp.stdout)

    def udp_blast(self, count: int, pps: int, listen_s: float, size: int = 1000) -> tuple[Any, Any]:
        """`count` UDP datagrams of `size` bytes at `pps` from the server to a receiver on the client
        that listens `listen_s` seconds (started and ready first): (sender's report, receiver's
        report: received, reorders, duplicates, max_seq)."""
        ready = self.tmp / "udp.ready"
        ready.unlink(missing_ok=True)
        rx = self.spawn(self.ns_c, [PYTHON, "-m", PROBES, "probe", "udprecv", "--port", "9000",
                                    "--duration", repr(listen_s), "--ready", str(ready)])
        end = time.monotonic() + 5
        while not ready.exists() and time.monotonic() < end:
            time.sleep(0.01)
        tx = self.probe(self.ns_s, ["udpsend", "--dst", self.client_ip, "--port", "9000", "--count",
                                    str(count), "--size", str(size), "--pps", str(pps)])
        out, _ = rx.communicate(timeout=listen_s + 10)
        return tx, json.loads(out)

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
        return stop_and_read_stats(self.proc, self.stats, "delay line", timeout)

    def steps(self) -> list[tuple[int, int]]:
        rows = self.steplog.read_text().splitlines()[1:]
        return [(int(a), int(b)) for a, b in (r.split(",") for r in rows if r)]

    def cpu_ticks(self) -> int:
        """utime + stime of the daemon (clock ticks) from /proc/PID/stat."""
        assert self.proc is not None
        ticks = proc.cpu_ticks(self.proc.pid)
        if ticks is None:
            raise ProcessLookupError(f"delay line {self.proc.pid} is gone")
        return ticks


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
