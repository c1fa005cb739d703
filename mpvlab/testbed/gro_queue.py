"""A link direction's bottleneck queue as the product builds it (links.emulator.apply_direction, from a
LinkDirection with its `buffer_counting`), filled by one CUBIC bulk flow; what it held
(tests/test_buffer_counting.py, bench/bench_gro_queue.py).

    a (sender: TSO/GSO/GRO off, every packet one wire frame) → e (edge: forwards)
      → r0 [the direction's ingress: GRO as the counting sets it] r [IFB: tbf (+ pfifo)] → r1 → b

The edge hop is the dual-path topology's (mpvlab/topologies/dual_path.py): a sent skb stays charged to
its socket (TCP Small Queues) until the next namespace's IP layer receives it, and the router queues
at its ingress (IFB, before IP receive), so with the sender attached to the router a flow without GRO
would stop at ~100 frames in a 256-packet queue (measured: 154 kB) and never fill it, while GRO frees
the merged skbs and lets it run. The edge's IP receive releases the charge first, as in a run. No
delay and no loss: no delay line, the queue is all there is. `tc -s -j qdisc show` of the IFB is read
every 20 ms; the tbf's backlog and queue length include its pfifo child's (tbf counts what it
enqueued). The kernel's figures are read, nothing is computed from the configuration.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from mpvlab.core.netns import Netns
from mpvlab.links.emulator import DirectionPlan, apply_direction
from mpvlab.links.schedule import Schedule
from mpvlab.links.spec import LinkDirection
from mpvlab.testbed import iperf
from mpvlab.testbed.bed import Bed

SAMPLE_S = 0.02
QUEUE_NUM = 9          # unused (no delay line), but a plan names one
RECEIVER = "10.204.3.2"
PORT = 5201


class GroBed:
    """a — e — r — b, offloads off on every veth (the router's ingress GRO is the counting's to set)."""

    def __init__(self) -> None:
        self.bed = Bed()

    def __enter__(self) -> GroBed:
        bed = self.bed.open()
        try:
            a, e, r, b = (bed.node(x) for x in ("a", "e", "r", "b"))
            self.a, self.r, self.b = a, r, b
            self.r_in, self.r_out, self.ifb = bed.ifname("r0"), bed.ifname("r1"), bed.ifname("ri")
            bed.link(a, bed.ifname("a0"), "10.204.1.1/24", e, bed.ifname("e0"), "10.204.1.2/24")
            bed.link(e, bed.ifname("e1"), "10.204.2.1/24", r, self.r_in, "10.204.2.2/24")
            bed.link(r, self.r_out, "10.204.3.1/24", b, bed.ifname("b0"), f"{RECEIVER}/24")
            a.run(["ip", "route", "add", "default", "via", "10.204.1.2"])
            e.run(["ip", "route", "add", "default", "via", "10.204.2.2"])
            r.run(["ip", "route", "add", "10.204.1.0/24", "via", "10.204.2.1"])
            b.run(["ip", "route", "add", "default", "via", "10.204.3.1"])
            for ns in (e, r):
                ns.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])
            for ns in (a, b):
                ns.run(["sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1"])
            a.run(["ip", "route", "replace", "10.204.3.0/24", "via", "10.204.1.2", "congctl", "cubic"])
        except BaseException:
            self.bed.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.bed.close()       # the namespaces take veths, IFB and qdiscs with them

    def iperf(self, seconds: float) -> dict[str, Any]:
        """One CUBIC bulk flow a → b for `seconds`; iperf3's JSON report."""
        return iperf.bulk(self.bed, self.b, self.a, RECEIVER, PORT, seconds)


@dataclass
class QueueRun:
    counting: str
    limit_packets: int | None
    byte_bound: int | None          # LinkDirection.queue_byte_bound(): None for merged_packets
    burst_bytes: int
    ingress_gro: str                # ethtool -k of the ingress interface while the flow ran
    tree: list[dict[str, Any]]      # tc -j qdisc show of the shaper's device, as applied
    samples: list[tuple[int, int]] = field(default_factory=list)   # (backlog bytes, backlog skbs)
    drops: int = 0
    goodput_bps: float = 0.0

    @property
    def max_backlog_bytes(self) -> int:
        return max((b for b, _ in self.samples), default=0)

    @property
    def skbs_at_max_bytes(self) -> int:
        return max(self.samples, key=lambda x: x[0])[1] if self.samples else 0

    @property
    def max_backlog_skbs(self) -> int:
        return max((n for _, n in self.samples), default=0)

    def drain_ms(self, rate_bit: int) -> float:
        return self.max_backlog_bytes * 8 / rate_bit * 1e3

    def text(self, rate_bit: int) -> str:
        per = round(self.max_backlog_bytes / self.skbs_at_max_bytes) if self.skbs_at_max_bytes else None
        bound = "none" if self.byte_bound is None else f"{self.byte_bound:,} B"
        return (f"{self.counting:14} configured {self.limit_packets} pkt, byte bound {bound}, burst "
                f"{self.burst_bytes:,} B, ingress GRO {self.ingress_gro}: largest backlog {self.max_backlog_bytes:,} B "
                f"in {self.skbs_at_max_bytes} skbs ({per} B/skb; most skbs {self.max_backlog_skbs}), drain "
                f"{self.drain_ms(rate_bit):.1f} ms at {rate_bit / 1e6:g} Mbit/s, drops {self.drops}"
                f"{'' if self.drops else ' (limit never reached: a lower bound)'}, goodput "
                f"{self.goodput_bps / 1e6:.2f} Mbit/s, {len(self.samples)} samples")


def _gro(ns: Netns, dev: str) -> str:
    feats = ns.run(["ethtool", "-k", dev]).stdout
    return next((ln.split(":", 1)[1].strip() for ln in feats.splitlines()
                 if ln.strip().startswith("generic-receive-offload:")), "unknown")


def _root(ns: Netns, dev: str) -> dict[str, Any]:
    return [q for q in json.loads(ns.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev]).stdout) if q.get("root")][0]


def measure(gb: GroBed, spec: LinkDirection, seconds: float, *, force_gro: bool | None = None) -> QueueRun:
    """Apply `spec` as the down direction a → b through the product's link step, run one bulk flow
    for `seconds` and return what the queue held. `force_gro`: set the ingress's GRO first (for a
    `bytes` queue, which leaves it as the hosts' offloads have it); a packet counting sets its own."""
    assert spec.rate is not None
    r, dev_in, dev_out, ifb = gb.r, gb.r_in, gb.r_out, gb.ifb
    r.run(["ethtool", "-K", dev_in, "gro", "off"])        # as hosts.offloads false leaves it
    if force_gro is not None:
        r.run(["ethtool", "-K", dev_in, "gro", "on" if force_gro else "off"])
    plan = DirectionPlan(path="gq", direction="down", router=r, in_if=dev_in, out_if=dev_out, ifb=ifb,
                         queue_num=QUEUE_NUM, spec=spec, schedule=Schedule.constant(0), seed=0)
    assert not plan.needs_delay_line
    apply_direction(plan, gb.bed.workdir, time.monotonic_ns(), lambda _ref: None)
    try:
        run = QueueRun(spec.buffer_counting, spec.buffer.packets, spec.queue_byte_bound(), spec.effective_burst(),
                       _gro(r, dev_in),
                       json.loads(r.run(["tc", "-raw", "-j", "qdisc", "show", "dev", ifb]).stdout))
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                q = _root(r, ifb)
                run.samples.append((int(q.get("backlog", 0)), int(q.get("qlen", 0))))
                time.sleep(SAMPLE_S)

        t = threading.Thread(target=sample)
        t.start()
        try:
            rep = gb.iperf(seconds)
        finally:
            stop.set()
            t.join()
        run.drops = int(_root(r, ifb).get("drops", 0))
        run.goodput_bps = float(rep["end"]["sum_received"]["bits_per_second"])
        return run
    finally:
        # our own namespace's objects: the ingress redirect and the IFB (its qdiscs go with it)
        r.run(["tc", "qdisc", "del", "dev", dev_in, "ingress"], check=False)
        r.run(["ip", "link", "del", ifb], check=False)
