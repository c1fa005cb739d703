"""Two namespaces joined by one or more veths, a 3 Mbit/s tbf on side a of each: the queue sampler's
bed (tests/test_qdiscstat.py, bench/bench_qdiscstat.py).

    a  <dev_a (link 1)> --veth-- <dev_b>  b      10.77.0.1/24 -- 10.77.0.2/24 (the default subnet)

`quiet` (the test's default): IPv6 off and static neighbours, so no frame but the test's own
crosses a qdisc and counts are exact. Namespaces and processes belong to a testbed.bed.Bed
(run ledger, owner lock).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

from mpvlab.core.netns import Netns
from mpvlab.testbed.bed import Bed, Rig

PY = sys.executable
TBF = ["rate", "3mbit", "burst", "3028", "limit", "100000"]

# Every interface's counters as /sys shows them inside the namespace (`ip netns exec` mounts its /sys).
READ_SYS = r"""
import json, os, sys
out = {}
for dev in os.listdir("/sys/class/net"):
    d = f"/sys/class/net/{dev}/statistics"
    out[dev] = {k: int(open(f"{d}/{k}").read()) for k in
                ("rx_bytes", "rx_packets", "rx_dropped", "tx_bytes", "tx_packets", "tx_dropped")}
print(json.dumps(out))
"""


@dataclass
class QdiscPair(Rig):
    tag: str                                   # names the test's own extra interfaces (hqs<tag>…)
    subnets: tuple[str, ...] = ("10.77.0",)    # one veth per subnet: side a .1, side b .2
    quiet: bool = True
    a: str = ""
    b: str = ""
    devs_a: list[str] = field(default_factory=list)
    devs_b: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    bed: Bed = field(default_factory=Bed, repr=False)

    @property
    def dev_a(self) -> str:
        return self.devs_a[0]

    @property
    def dev_b(self) -> str:
        return self.devs_b[0]

    def up(self) -> None:
        self.bed.open()
        a, b = self.bed.node("a"), self.bed.node("b")
        self.a, self.b = a.name, b.name
        if self.quiet:
            for ns in (a, b):
                for key in ("all", "default"):
                    ns.run(["sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1"])
        for i, net in enumerate(self.subnets, 1):
            da, db = self.bed.ifname(f"a{i}"), self.bed.ifname(f"b{i}")
            self.devs_a.append(da)
            self.devs_b.append(db)
            self.bed.link(a, da, f"{net}.1/24", b, db, f"{net}.2/24", offloads=None)
            if self.quiet:
                # Static neighbours: no ARP frames through the qdisc, so counts are exact.
                self._neigh(a, da, f"{net}.2", b, db)
                self._neigh(b, db, f"{net}.1", a, da)
            a.run(["tc", "qdisc", "replace", "dev", da, "root", "tbf", *TBF])

    @staticmethod
    def _neigh(ns: Netns, dev: str, addr: str, peer: Netns, peer_dev: str) -> None:
        mac = json.loads(peer.run(["ip", "-j", "link", "show", peer_dev]).stdout)[0]["address"]
        ns.run(["ip", "neigh", "replace", addr, "lladdr", mac, "dev", dev, "nud", "permanent"])

    def down(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.procs.clear()
        self.bed.close()

    def spawn(self, ns: str, *argv: str) -> subprocess.Popen[str]:
        p = self.bed.popen(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def sys_counters(self, ns: str) -> dict[str, dict[str, int]]:
        return json.loads(Netns(ns).run([PY, "-c", READ_SYS]).stdout)
