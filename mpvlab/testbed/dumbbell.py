"""Three-namespace dumbbell for exercising congestion controls (tests/test_cc.py, test_bbr3.py,
bench/bench_bbrs.py).

    a (sender, 10.201.1.1) --- r (router, tbf on egress to b) --- b (receiver, 10.201.2.2)

The bottleneck is a tbf on the router's egress towards the receiver (as in the BBR-S study), not on
the sender's own interface: a qdisc on the sender would push back on TCP through TCP Small Queues
and hide the queue from the congestion control. The congestion control is selected the way the
orchestrator does it: a `congctl NAME` attribute on the sender's route to the receiver.

`DelayDumbbell` adds a propagation delay (BBR's model needs an RTT): the platform's C delay line
(links/delayline) behind an NFQUEUE rule in the router's FORWARD chain, on the reverse path
(receiver → sender). Delaying ACKs instead of data keeps the delay line out of the bottleneck queue
(so the qdisc's backlog is the standing queue, nothing else) and needs one NFQUEUE slot per ACK only.
The queue number is per network namespace, so beds in other namespaces cannot collide.

Namespaces and processes belong to a testbed.bed.Bed (ledger, owner lock): close() or, after a
killed test, the next bed / `mpvlab cleanup` removes them.
"""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc
from mpvlab.core.netns import Netns
from mpvlab.links.schedule import Schedule
from mpvlab.testbed import iperf
from mpvlab.testbed.bed import Bed

SENDER_ADDR = "10.201.1.1"
ROUTER_A_ADDR = "10.201.1.2"
ROUTER_B_ADDR = "10.201.2.1"
RECEIVER_ADDR = "10.201.2.2"
RECEIVER_NET = "10.201.2.0/24"
SENDER_NET = "10.201.1.0/24"

REPO = checkout_root()
DELAYLINE = REPO / "links" / "delayline" / "build" / "mpvlab-delayline"
QUEUE_NUM = 7


@dataclass
class Dumbbell:
    prefix: str = "hcc"          # interface and file names (namespaces carry the bed's run id)
    rate_bit: int = 25_000_000
    burst_bytes: int = 15_000
    limit_bytes: int = 150_000
    offloads: bool = False  # gso/tso/gro on every veth
    workdir: Path | None = None
    bed: Bed | None = field(default=None, init=False)

    @property
    def ns_a(self) -> str:
        return self._node("a")

    @property
    def ns_r(self) -> str:
        return self._node("r")

    @property
    def ns_b(self) -> str:
        return self._node("b")

    def _node(self, role: str) -> str:
        assert self.bed is not None, "open the dumbbell first"
        return self.bed.nodes[role].name

    def ns(self, ns: str, *args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return Netns(ns).run(list(args), check=check, timeout=timeout)

    def open(self) -> Dumbbell:
        self.bed = Bed(self.workdir).open()
        try:
            a, r, b = (self.bed.node(role) for role in ("a", "r", "b"))
            p = self.prefix
            self.bed.link(a, f"{p}a0", f"{SENDER_ADDR}/24", r, f"{p}r0", f"{ROUTER_A_ADDR}/24",
                          offloads=self.offloads)
            self.bed.link(r, f"{p}r1", f"{ROUTER_B_ADDR}/24", b, f"{p}b0", f"{RECEIVER_ADDR}/24",
                          offloads=self.offloads)
            r.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
            for ns in (a, b):
                # Independent runs: no cached metrics (ssthresh, rtt) between connections.
                ns.run(["sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1"])
            b.run(["ip", "route", "add", SENDER_NET, "via", ROUTER_B_ADDR])
            self.set_cc("cubic")
            r.run(["tc", "qdisc", "replace", "dev", f"{p}r1", "root", "tbf", "rate", f"{self.rate_bit}bit",
                   "burst", str(self.burst_bytes), "limit", str(self.limit_bytes)])
        except BaseException:
            self.close()
            raise
        return self

    def set_cc(self, name: str) -> None:
        """Select the sender's CC for new connections to the receiver (route congctl)."""
        self.ns(self.ns_a, "ip", "route", "replace", RECEIVER_NET, "via", ROUTER_A_ADDR,
                "dev", f"{self.prefix}a0", "congctl", name)

    def close(self) -> None:
        # The bed stops what it started and deletes the namespaces (veths, qdiscs, rules with them).
        if self.bed is not None:
            self.bed.close()
            self.bed = None

    def __enter__(self) -> Dumbbell:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def iperf(self, seconds: float, omit: float = 2.0, port: int = 5201, server_output: bool = False) -> dict:
        """Bulk TCP from sender to receiver; returns iperf3's JSON summary (with `server_output`, the
        receiver's own per-interval report in `server_output_json`, as the benches' steady windows use)."""
        assert self.bed is not None
        return iperf.bulk(self.bed, Netns(self.ns_b), Netns(self.ns_a), RECEIVER_ADDR, port, seconds,
                          server_args=["-J"] if server_output else [],
                          client_args=[*(["--get-server-output"] if server_output else []),
                                       *(["-O", str(omit)] if omit else [])],
                          extra_timeout=omit + 30 + (10 if server_output else 0))


def steady_goodput(report: dict, warmup: float) -> float:
    """Receiver-side payload bit/s over the receiver's intervals that start at or after `warmup`
    (`Dumbbell.iperf(..., server_output=True)`'s report)."""
    ivs = [iv["sum"] for iv in report["server_output_json"]["intervals"] if iv["sum"]["start"] >= warmup - 1e-6]
    secs = sum(s["seconds"] for s in ivs)
    return sum(s["bytes"] for s in ivs) * 8 / secs if secs else float("nan")


@dataclass
class DelayDumbbell(Dumbbell):
    rtt_ms: float = 20.0
    _delay_proc: subprocess.Popen | None = None

    def open(self) -> DelayDumbbell:
        super().open()
        try:
            if self.rtt_ms > 0:
                self._start_delay()
        except BaseException:
            self.close()
            raise
        return self

    def _start_delay(self) -> None:
        assert self.bed is not None
        if not DELAYLINE.exists():
            raise RuntimeError(f"{DELAYLINE} missing: run ./setup.sh")
        work = self.bed.workdir
        sched = Schedule.constant(int(self.rtt_ms * 1e6)).to_file(work / f"{self.prefix}.schedule")
        ready = work / f"{self.prefix}.delay.ready"
        ready.unlink(missing_ok=True)
        log = work / f"{self.prefix}.delay.log"
        # ACKs are at most one per data packet: 100 Mbit/s is ~8.3 kpkt/s; x RTT x 4 headroom.
        maxlen = max(4096, int(8300 * self.rtt_ms / 1000 * 4))
        argv = [str(DELAYLINE), "--queue", str(QUEUE_NUM), "--schedule", str(sched), "--t0-ns",
                str(time.monotonic_ns()), "--maxlen", str(maxlen), "--ready-file", str(ready),
                "--stats", str(work / f"{self.prefix}.delay.json")]
        with log.open("wb") as f:
            self._delay_proc = self.bed.popen(self.ns_r, argv, "delay line", stdout=f, stderr=subprocess.STDOUT)
        proc.wait_ready(self._delay_proc, ready, "delay line", 5.0, log=log, error=RuntimeError)
        p = self.prefix
        self.ns(self.ns_r, "iptables", "-w", "-A", "FORWARD", "-i", f"{p}r1", "-o", f"{p}r0",
                "-j", "NFQUEUE", "--queue-num", str(QUEUE_NUM))

    def delay_alive(self) -> bool:
        return self._delay_proc is None or self._delay_proc.poll() is None

    def close(self) -> None:
        if self._delay_proc is not None:
            proc.stop_child(self._delay_proc, grace=5)
            self._delay_proc = None
        super().close()  # deleting the namespaces removes the iptables rule with them

    def __enter__(self) -> DelayDumbbell:
        return self.open()

    @property
    def bdp_bytes(self) -> float:
        """Bottleneck rate x RTT in wire bytes (what the tbf queue limit is measured in)."""
        return self.rate_bit / 8 * self.rtt_ms / 1000
