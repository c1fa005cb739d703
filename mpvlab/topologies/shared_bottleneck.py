"""shared-bottleneck: N clients (1–8) and an optional cross-traffic receiver behind ONE router, which
holds the one bottleneck every server→client packet crosses (SABRE, WebRTC-style studies).

    server s0 ── e0 [edge] e1 ── rs [router] d0 ── c0 client0
                                         d1 ── c0 client1   (each leaf's own interface: c0 / x0)
                                         ...
                                         dx ── x0 cross

Why this shape: all downstream traffic — every player's and the cross traffic — enters the router
through its single server-facing interface `rs`, so one tbf on an IFB at rs's ingress is a queue
they all share (shape-then-delay with `links.emulator.apply_direction`), and one delay line in
FORWARD delays them all. Every client-facing router interface is tagged `d<…>`, so the iptables
wildcard `mv<id>d+` matches exactly the receiver side (all leaves, cross included) and nothing
else: the down rule is `-i mv<id>rs -o mv<id>d+`, the up rule `-i mv<id>d+ -o mv<id>rs`.

Why the `edge` hop (a plain forwarding namespace): an skb keeps its sending socket's reference
(and counts against that socket's TCP Small Queues budget, sk_wmem_alloc) across a veth into
another namespace until IP receive orphans it (ip_rcv_core). A tbf on an IFB at the ingress of the
FIRST namespace after the sender therefore holds skbs still charged to the sender, and TSQ
(≈ max(2 packets, 1 ms at the pacing rate) per socket) stops each TCP sender at a few packets in
the bottleneck: measured here, one CUBIC flow through 6 Mbit/s kept 5 packets (7.5 KB) in a
256-packet tbf instead of filling it. A real sender's NIC frees the skb at transmission, so
TSQ never sees the router's queue. One forwarding hop (edge) orphans every skb before the router,
and the buffer then fills as configured (tests/test_shared_bottleneck.py).

Addressing (same in every run; each run has its own namespaces):
    server      10.0.100.1/32 on lo, link 10.0.11.2/24 (edge 10.0.11.1)
    edge–router edge 10.0.12.2/24, router 10.0.12.1 (rs)
    client i    10.0.(i+1).2/24, router 10.0.(i+1).1       (i = 0..7)
    cross       10.0.50.2/24,    router 10.0.50.1
The server has one route per leaf subnet via the edge (the runner may `ip route replace` them
with `congctl`); each leaf's default route is via its router address.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mpvlab.links.emulator import DirectionPlan, LinkError
from mpvlab.links.schedule import Schedule
from mpvlab.core import naming, netns
from mpvlab.core.netns import Netns
from mpvlab.links.spec import LinkDirection
from mpvlab.emulation.nodes import EmuNode, add_link, add_node, stop_node

MAX_CLIENTS = 8
SERVER_ADDR = "10.0.100.1"
SERVER_GW_ADDR = "10.0.11.1"      # edge, server side: the server's next hop to every leaf
SERVER_LINK_ADDR = "10.0.11.2"
EDGE_ROUTER_ADDR = "10.0.12.2"    # edge, router side
ROUTER_SERVER_ADDR = "10.0.12.1"  # router, server side (rs)
CROSS_NET = 50
# Tags: rs = router's server side, d<i>/dx = router's receiver side (the iptables wildcard relies on
# no other tag starting with "d"), s0 / c0 / x0 = the end hosts' own interfaces, e0/e1 = the edge's,
# ib0/ib1 = IFBs.
RECEIVER_SIDE_TAG = "d"
_OFFLOAD_KEYS = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")


@dataclass(frozen=True)
class HostSettings:
    """Per-namespace TCP settings; defaults equal mpvlab.input.scenario.HostSpec's. The leaves' receive
    buffer matters: new namespaces get a 32 MB maximum, which would hide any throttle."""

    client_tcp_rmem: tuple[int, int, int] = (4096, 131072, 6291456)
    server_tcp_wmem: tuple[int, int, int] = (4096, 16384, 4194304)
    tcp_no_metrics_save: bool = True
    offloads: bool = False


@dataclass
class Leaf:
    """A receiver behind the router: a client (player) or the cross-traffic host."""

    role: str                   # client0.. | cross
    node: EmuNode
    if_: str                    # the leaf's own interface
    addr: str
    router_if: str              # router side facing this leaf
    router_addr: str

    @property
    def subnet(self) -> str:
        return self.addr.rsplit(".", 1)[0] + ".0/24"


@dataclass
class SharedBottleneck:
    run_id: str
    server: EmuNode
    edge: EmuNode
    router: EmuNode
    clients: list[Leaf]
    cross: Leaf | None
    router_server_if: str
    server_if: str
    edge_server_if: str
    edge_router_if: str
    server_addr: str = SERVER_ADDR
    server_gw_addr: str = SERVER_GW_ADDR
    server_link_addr: str = SERVER_LINK_ADDR
    edge_router_addr: str = EDGE_ROUTER_ADDR
    router_server_addr: str = ROUTER_SERVER_ADDR
    nodes: list[EmuNode] = field(default_factory=list)
    netns_names: list[str] = field(default_factory=list)
    host_record: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def leaves(self) -> list[Leaf]:
        return self.clients + ([self.cross] if self.cross else [])

    @property
    def receiver_side_pattern(self) -> str:
        """iptables interface wildcard matching every client-facing router interface (and only those)."""
        return naming.ifname(self.run_id, RECEIVER_SIDE_TAG) + "+"

    def interfaces(self) -> dict[str, list[str]]:
        """netns name -> its veth interfaces (offloads, counters)."""
        out = {self.server.ns.name: [self.server_if], self.edge.ns.name: [self.edge_server_if, self.edge_router_if],
               self.router.ns.name: [self.router_server_if] + [lf.router_if for lf in self.leaves]}
        for lf in self.leaves:
            out[lf.node.ns.name] = [lf.if_]
        return out

    def server_routes(self) -> list[tuple[str, str, str]]:
        """(leaf subnet, via, dev) as seen from the server — replace them with `congctl` to pick a CC."""
        return [(lf.subnet, self.server_gw_addr, self.server_if) for lf in self.leaves]

    # --- link emulation plans (applied by links.emulator.apply_direction) ------------------------
    def down_plan(self, spec: LinkDirection, schedule: Schedule, seed: int, queue_num: int = 0,
                  base_dir: Path | None = None) -> DirectionPlan:
        """server → every leaf. A shared queue needs the tbf where all flows meet, i.e. on the IFB at
        rs's ingress (shape-then-delay); delay-then-shape would put a tbf on each leaf's egress —
        one queue per leaf, not a shared bottleneck — so it is refused."""
        if spec.rate is not None and spec.order != "shape-then-delay":
            raise LinkError("shared-bottleneck: the down direction must be shape-then-delay (a tbf on each "
                            "client-facing egress would be one queue per client, not a shared bottleneck)")
        return DirectionPlan("shared", "down", self.router.ns, self.router_server_if, self.receiver_side_pattern,
                             naming.ifname(self.run_id, "ib0"), queue_num, spec, schedule, seed, base_dir=base_dir)

    def up_plan(self, spec: LinkDirection, schedule: Schedule, seed: int, queue_num: int = 1,
                base_dir: Path | None = None) -> DirectionPlan:
        """every leaf → server. Here the flows meet at rs's egress, so a rate needs delay-then-shape
        (tbf on rs); shape-then-delay would need an ingress qdisc on each leaf interface, which
        apply_direction (one in_if) does not do."""
        if spec.rate is not None and spec.order != "delay-then-shape":
            raise LinkError("shared-bottleneck: a rate on the up direction needs order delay-then-shape "
                            "(apply_direction shapes at ingress of one interface only; the up flows enter "
                            "through one interface per client)")
        return DirectionPlan("shared", "up", self.router.ns, self.receiver_side_pattern, self.router_server_if,
                             naming.ifname(self.run_id, "ib1"), queue_num, spec, schedule, seed, base_dir=base_dir)


def build(run_id: str, on_netns: Callable[[str], None], n_clients: int, cross: bool = True,
          hosts: HostSettings = HostSettings()) -> SharedBottleneck:
    """Create nodes and links and configure addresses, routes, sysctls and offloads. `on_netns` is
    told every namespace name before it is created (the run ledger), so a crash mid-build still gets
    cleaned; on any error here everything created so far is removed before the error propagates."""
    if not 1 <= n_clients <= MAX_CLIENTS:
        raise ValueError(f"shared-bottleneck: n_clients must be 1..{MAX_CLIENTS}, got {n_clients}")
    created: list[EmuNode] = []
    names: list[str] = []

    def node(role: str) -> EmuNode:
        name = naming.netns_name(run_id, role)
        on_netns(name)
        names.append(name)
        n = add_node(name, role)
        created.append(n)
        return n

    def leaf(role: str, own_tag: str, router_tag: str, net: int, router: EmuNode) -> Leaf:
        n = node(role)
        lf = Leaf(role, n, naming.ifname(run_id, own_tag), f"10.0.{net}.2",
                  naming.ifname(run_id, router_tag), f"10.0.{net}.1")
        # Each leaf is its own namespace, so its interface name may repeat across leaves ("c0").
        add_link(n, router, lf.if_, lf.router_if)
        return lf

    try:
        server, edge, router = node("server"), node("edge"), node("router")
        topo = SharedBottleneck(run_id, server, edge, router, [], None,
                                router_server_if=naming.ifname(run_id, "rs"), server_if=naming.ifname(run_id, "s0"),
                                edge_server_if=naming.ifname(run_id, "e0"), edge_router_if=naming.ifname(run_id, "e1"),
                                nodes=created, netns_names=names)
        add_link(server, edge, topo.server_if, topo.edge_server_if)
        add_link(edge, router, topo.edge_router_if, topo.router_server_if)
        for i in range(n_clients):
            topo.clients.append(leaf(f"client{i}", "c0", f"{RECEIVER_SIDE_TAG}{i}", i + 1, router))
        if cross:
            topo.cross = leaf("cross", "x0", f"{RECEIVER_SIDE_TAG}x", CROSS_NET, router)
        _configure(topo)
        topo.host_record = _configure_hosts(topo, hosts)
    except BaseException:
        _remove(created, names)
        raise
    return topo


def _configure(t: SharedBottleneck) -> None:
    s, e, r = t.server.ns, t.edge.ns, t.router.ns
    s.run(["ip", "addr", "add", f"{t.server_addr}/32", "dev", "lo"])
    s.run(["ip", "addr", "add", f"{t.server_link_addr}/24", "dev", t.server_if])
    s.run(["ip", "link", "set", t.server_if, "up"])
    e.run(["ip", "addr", "add", f"{t.server_gw_addr}/24", "dev", t.edge_server_if])
    e.run(["ip", "addr", "add", f"{t.edge_router_addr}/24", "dev", t.edge_router_if])
    e.run(["ip", "link", "set", t.edge_server_if, "up"])
    e.run(["ip", "link", "set", t.edge_router_if, "up"])
    r.run(["ip", "addr", "add", f"{t.router_server_addr}/24", "dev", t.router_server_if])
    r.run(["ip", "link", "set", t.router_server_if, "up"])
    for fwd in (e, r):
        fwd.sysctl("net.ipv4.ip_forward", "1")
        fwd.sysctl("net.ipv4.conf.all.rp_filter", "0")
    e.run(["ip", "route", "add", f"{t.server_addr}/32", "via", t.server_link_addr])
    r.run(["ip", "route", "add", f"{t.server_addr}/32", "via", t.edge_router_addr])
    # Connections the server opens (e.g. cross traffic senders) leave from its link address.
    r.run(["ip", "route", "add", f"{t.server_link_addr.rsplit('.', 1)[0]}.0/24", "via", t.edge_router_addr])
    for lf in t.leaves:
        ns = lf.node.ns
        ns.run(["ip", "addr", "add", f"{lf.addr}/24", "dev", lf.if_])
        ns.run(["ip", "link", "set", lf.if_, "up"])
        ns.run(["ip", "route", "add", "default", "via", lf.router_addr, "dev", lf.if_])
        r.run(["ip", "addr", "add", f"{lf.router_addr}/24", "dev", lf.router_if])
        r.run(["ip", "link", "set", lf.router_if, "up"])
        e.run(["ip", "route", "add", lf.subnet, "via", t.router_server_addr, "dev", t.edge_router_if])
        s.run(["ip", "route", "add", lf.subnet, "via", t.server_gw_addr, "dev", t.server_if])


def _rmem(v: tuple[int, int, int]) -> str:
    return " ".join(str(x) for x in v)


def _configure_hosts(t: SharedBottleneck, h: HostSettings) -> dict[str, dict[str, str]]:
    """Sysctls (set and read back by Netns.sysctl) and offloads; returns what was read back."""
    record: dict[str, dict[str, str]] = {}
    ends = [t.server.ns] + [lf.node.ns for lf in t.leaves]
    for ns in ends:
        ns.sysctl("net.ipv4.tcp_no_metrics_save", "1" if h.tcp_no_metrics_save else "0")
        ns.sysctl("net.ipv4.conf.all.rp_filter", "0")
    for lf in t.leaves:
        lf.node.ns.sysctl("net.ipv4.tcp_rmem", _rmem(h.client_tcp_rmem))
    t.server.ns.sysctl("net.ipv4.tcp_wmem", _rmem(h.server_tcp_wmem))
    for ns in ends:
        record[ns.name] = {k: ns.read_sysctl(k) for k in
                           ("net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")}
    state = "on" if h.offloads else "off"
    for ns_name, ifs in t.interfaces().items():
        ns = Netns(ns_name)
        for dev in ifs:
            ns.run(["ethtool", "-K", dev, "tso", state, "gso", state, "gro", state])
            feats = ns.run(["ethtool", "-k", dev]).stdout
            got = {line.split(":", 1)[0]: line.split(":", 1)[1].split()[0]
                   for line in feats.splitlines() if line.split(":", 1)[0] in _OFFLOAD_KEYS}
            # "off [fixed]" is fine when we want off; anything else not matching is a wrong experiment.
            bad = {k: v for k, v in got.items() if v != state}
            if bad:
                raise RuntimeError(f"{ns_name}/{dev}: offloads did not take ({bad}), wanted {state}")
            record.setdefault(ns_name, {})[f"offloads:{dev}"] = state
    return record


def _remove(nodes: list[EmuNode], names: list[str]) -> None:
    """Stop each node's shell, then delete its netns name (killing anything still inside): the
    kernel then frees the namespace with its veths, IFBs, qdiscs, iptables rules and NFQUEUEs."""
    for n in nodes:
        try:
            stop_node(n)
        except Exception:  # noqa: BLE001 - keep removing the rest
            pass
    for name in names:
        netns.delete_netns(name)


def teardown(t: SharedBottleneck) -> None:
    _remove(t.nodes, t.netns_names)
