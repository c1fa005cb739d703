"""Two emulated paths built with the platform's own code, plus a paced or bulk MPTCP sender, for the
scheduler tests and benchmark (tests/test_schedulers.py, bench/bench_schedulers.py).

topologies.dual_path.build (client, server, one router per path; server 10.0.100.1 on lo reached over
both paths) + topologies.mptcp (MPTCP limits/endpoints, offloads off, server route congctl: what a
run's transport step applies, here with a scenario's default host settings) +
links.path.apply_path, a run's link step (tbf on an IFB at the router's ingress, then the C delay line). The
bed's run ledger (testbed.bed.Bed) lists every namespace and daemon, so another engineer's
`mpvlab run` never takes them for orphans, and a killed test's are reaped by the next bed.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mpvlab.core.hoststeal import StealMeter, StealWindow
from mpvlab.core.netns import Netns
from mpvlab.links import path as link_path
from mpvlab.links.emulator import DirectionHandle, stop_direction
from mpvlab.links.schedule import Schedule
from mpvlab.links.spec import LinkDirection
import mpvlab.schedulers as schedulers
from mpvlab.testbed.bed import Bed
from mpvlab.topologies import dual_path, mptcp

PORT = 5201
PY = sys.executable

# Sender (server namespace): MPTCP listener; SO_SNDBUF on the listener like the preload shim does for
# Apache (the kernel doubles it); then either bulk (rate 0) or paced writes of rate*10ms every 10 ms.
SENDER = r"""
import socket, sys, time
port, rate, dur, sndbuf = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rate_hi, period, cc = float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
if cc != "-":  # on the listener, as cc/preload does for Apache: every subflow then runs it
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
if sndbuf:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
s.bind(("0.0.0.0", port)); s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
buf = memoryview(b"x" * (1 << 20))

def demand(t):
    # bytes due by time t: `rate` bit/s, or `rate_hi` in the second half of every `period` s. A function
    # of elapsed time, not of loop turns, so a late wake-up (loaded machine) sends more, never less.
    if period <= 0:
        return rate / 8 * t
    cycles, rem = divmod(t, period)
    half = period / 2
    return (cycles * (rate + rate_hi) * half + rate * min(rem, half) + rate_hi * max(0.0, rem - half)) / 8

t0 = time.monotonic(); sent = 0; step = 0.01
while True:
    now = time.monotonic() - t0
    if now >= dur:
        break
    if rate <= 0:
        sent += c.send(buf[:65536])
        continue
    due = int(demand(min(now + step, dur))) - sent   # this step's data, written at its start
    while due > 0:
        n = c.send(buf[:min(due, len(buf))]); sent += n; due -= n
    time.sleep(max(0.0, step - ((time.monotonic() - t0) - now)))
c.shutdown(socket.SHUT_WR)
c.recv(1)
print(sent, flush=True)
c.close()
"""

RECEIVER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.connect((sys.argv[1], int(sys.argv[2])))
t = time.monotonic(); n = 0
while True:
    b = s.recv(1 << 18)
    if not b:
        break
    n += len(b)
print(n, time.monotonic() - t, flush=True)
s.close()
"""



@dataclass
class PathCfg:
    rate_mbit: float
    delay: Schedule            # one-way, applied in both directions
    buffer_bytes: int = 100_000


@dataclass
class DualPathBed:
    run_id: str
    topo: dual_path.DualPath
    workdir: Path
    t0_ns: int
    paths: list[PathCfg]
    bed: Bed                   # the ledger behind this bed's namespaces and processes
    handles: list[Any] = field(default_factory=list)

    @property
    def server(self) -> Netns:
        return self.topo.server.ns

    @property
    def client(self) -> Netns:
        return self.topo.client.ns

    def rx_bytes(self) -> dict[str, int]:
        out = {}
        for p in self.topo.paths:
            cp = self.client.run(["cat", f"/sys/class/net/{p.client_if}/statistics/rx_bytes"])
            out[p.name] = int(cp.stdout)
        return out


# A scenario's default host settings (mpvlab/input/scenario.py Hosts), which the scheduler tests ran with.
CLIENT_TCP_RMEM = (4096, 131072, 6291456)
SERVER_TCP_WMEM = (4096, 16384, 4194304)


@contextlib.contextmanager
def testbed(paths: list[PathCfg], cc: str = "cubic", workdir: Path | None = None) -> Iterator[DualPathBed]:
    handles: list[DirectionHandle] = []
    topo = None
    with Bed(workdir) as bed:
        assert bed.ledger is not None
        try:
            topo = dual_path.build(["a", "b"][:len(paths)], "single", bed.run_id, bed.ledger.add_netns)
            mptcp.configure_hosts(topo, tcp_no_metrics_save=True, client_tcp_rmem=CLIENT_TCP_RMEM,
                                  server_tcp_wmem=SERVER_TCP_WMEM, subflows=len(paths), signal=True)
            mptcp.set_offloads(topo, False)
            mptcp.set_server_cc(topo, cc)
            t0 = time.monotonic_ns()
            for p, cfg in zip(topo.paths, paths):
                down = LinkDirection.model_validate({"rate": f"{cfg.rate_mbit}mbit", "buffer": f"{cfg.buffer_bytes}B"})
                plans = link_path.path_plans(p.router.ns, p.name, p.index, server_if=p.router_server_if,
                                             client_if=p.router_client_if, down=down, up=LinkDirection(),
                                             schedules=(cfg.delay, cfg.delay),
                                             ifbs=link_path.ifb_names(bed.run_id, p.index), seed=0)
                link_path.apply_path(plans, bed.workdir, t0, bed.ledger.add_proc, on_applied=handles.append)
            yield DualPathBed(bed.run_id, topo, bed.workdir, t0, paths, bed, handles)
        finally:
            for h in handles:
                with contextlib.suppress(Exception):
                    stop_direction(h)
            if topo is not None:
                with contextlib.suppress(Exception):
                    dual_path.teardown(topo)


@dataclass
class Transfer:
    sent: int
    received: int
    seconds: float
    path_rx_bytes: dict[str, int]


def transfer(bed: DualPathBed, rate_bps: float, duration_s: float, sndbuf_setsockopt: int = 0,
             during: Any = None, rate_hi_bps: float = 0.0, period_s: float = 0.0, cc: str = "-") -> Transfer:
    """Run the sender in the server namespace and the receiver in the client namespace. `rate_bps`
    0 = bulk; with period_s > 0 the demand is rate_hi_bps in the second half of every period. `during` (a context manager factory) is entered after the listener is up and before
    the client connects: the scheduler must be running before the join arrives."""
    srv = bed.bed.popen(bed.server, [PY, "-c", SENDER, str(PORT), repr(rate_bps), repr(duration_s),
                                     str(sndbuf_setsockopt), repr(rate_hi_bps), repr(period_s), cc], "sender",
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert srv.stdout is not None
        line = srv.stdout.readline().decode().strip()
        if line != "listening":
            raise RuntimeError(f"sender did not start: {line} {srv.stderr.read().decode() if srv.stderr else ''}")
        before = bed.rx_bytes()
        with (during() if during else contextlib.nullcontext()):
            cli = bed.client.run([PY, "-c", RECEIVER, bed.topo.server_addr, str(PORT)], timeout=duration_s + 60)
            out, err = srv.communicate(timeout=30)
        after = bed.rx_bytes()
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    received, secs = cli.stdout.split()
    return Transfer(int(out.decode().split()[-1]), int(received), float(secs),
                    {k: after[k] - before[k] for k in after})


@dataclass
class CaseResult:
    scheduler: str
    transfer: Transfer
    summary: dict[str, Any]
    out_dir: Path
    duration_s: float
    steal: StealWindow   # CPU time the hypervisor took during the transfer (mpvlab/core/hoststeal.py)

    def share(self, path: str) -> float:
        total = sum(self.transfer.path_rx_bytes.values())
        return self.transfer.path_rx_bytes[path] / total if total else 0.0

    def rx_rate_bps(self, path: str) -> float:
        """Bits per second of frames received on a path's client interface (tbf shapes frame bytes)."""
        return self.transfer.path_rx_bytes[path] * 8 / self.transfer.seconds

    def conn(self) -> dict[str, Any]:
        conns = self.summary.get("connections", [])
        # the one data connection: the one that carried the most bytes
        return max(conns, key=lambda c: sum(s["bytes_handed"] for s in c["subflows"]))


def run_case(scheduler: str, params: dict[str, Any], paths: list[PathCfg], rate_bps: float, duration_s: float,
             out_dir: Path, *, cc: str = "cubic", rate_hi_bps: float = 0.0, period_s: float = 0.0) -> CaseResult:
    """One transfer under one scheduler on a fresh testbed. `default` runs the controller in observe mode
    so that the same counters exist for comparison."""
    if scheduler == "default":
        params = {"observe": True, **params}
    p = schedulers.parse_params(scheduler, params)
    out_dir.mkdir(parents=True, exist_ok=True)
    with testbed(paths, cc=cc) as bed:
        env = schedulers.prepare_server(scheduler, p, bed.server.name)
        sndbuf = int(env.get("MPVLAB_SNDBUF", "0"))  # what the preload shim would pass to setsockopt

        @contextlib.contextmanager
        def during() -> Iterator[Any]:
            with schedulers.start_scheduler(scheduler, p, bed.server.name, out_dir, bed.t0_ns) as h:
                if h.pid is not None:   # the controller runs outside the namespace: list it
                    bed.bed.watch(h.pid, f"scheduler {scheduler}")
                yield h

        with StealMeter() as meter:
            t = transfer(bed, rate_bps, duration_s, sndbuf, during, rate_hi_bps, period_s, cc)
    return CaseResult(scheduler, t, schedulers.load_summary(out_dir), out_dir, duration_s, meter.window)
