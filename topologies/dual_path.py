"""dual-path: a client with one interface per path (e.g. wifi, lte), one router node per path (the
"emulator box" of the published testbed), and a server.

    client c0 ──── a0 [router path 0] a1 ──── e1 [edge] e0 ──── s0 server
           c1 ──── b0 [router path 1] b1 ──── e2

Addressing (`single`): the server's one address lives on its loopback (10.0.100.1/32) and is reached
over every path; the client picks the path by source address (one policy-routing table per path).
The first path listed in the scenario carries the initial MPTCP subflow (client default route); the
in-kernel path manager adds one subflow per further path from a `subflow` endpoint on its address.
Addresses are the same in every run: each run has its own namespaces, so they never meet.

Why the `edge` hop between the server and the routers: a packet the server sends stays charged to
its socket (TCP Small Queues) across a veth until the next namespace's IP layer receives it. The
routers shape at their ingress (IFB, before IP receive), so with the server attached directly TSQ
would hold each flow to a few packets in the bottleneck queue and the configured `buffer` would
never fill (measured: 5 packets in a 256-packet tbf). The edge's IP receive releases the socket's
charge first, so the bottleneck queue behaves like a router's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpvlab import naming
from mpvlab.scenario import Scenario
from topologies.nodes import EmuNode, add_link, add_node, stop_node

SERVER_ADDR = "10.0.100.1"


@dataclass
class PathPlumbing:
    name: str
    index: int
    router: EmuNode
    client_if: str
    client_addr: str
    router_client_if: str       # router side facing the client
    router_client_addr: str
    router_server_if: str       # router side facing the server
    router_server_addr: str
    edge_if: str                # edge side facing this path's router
    edge_addr: str
    table: int


@dataclass
class DualPath:
    run_id: str
    client: EmuNode
    server: EmuNode
    edge: EmuNode
    paths: list[PathPlumbing]
    server_if: str
    server_link_addr: str = "10.0.10.2"
    edge_server_if: str = ""
    edge_server_addr: str = "10.0.10.1"
    server_addr: str = SERVER_ADDR
    nodes: list[EmuNode] = field(default_factory=list)

    def interfaces(self) -> dict[str, list[str]]:
        """netns name -> its interfaces (for offload settings and counters)."""
        out: dict[str, list[str]] = {self.client.ns.name: [], self.server.ns.name: [self.server_if],
                                     self.edge.ns.name: [self.edge_server_if]}
        for p in self.paths:
            out[self.client.ns.name].append(p.client_if)
            out[self.edge.ns.name].append(p.edge_if)
            out[p.router.ns.name] = [p.router_client_if, p.router_server_if]
        return out


def build(scenario: Scenario, run_id: str, on_netns: "callable[[str], None]") -> DualPath:  # type: ignore[valid-type]
    """Create nodes and links and configure addresses and routes. `on_netns` is told every namespace
    name before it is created (the run ledger), so a crash mid-build still gets cleaned."""
    created: list[EmuNode] = []

    def node(role: str) -> EmuNode:
        name = naming.netns_name(run_id, role)
        on_netns(name)
        n = add_node(name, role)
        created.append(n)
        return n

    client, server, edge = node("client"), node("server"), node("edge")
    server_if, edge_server_if = naming.ifname(run_id, "s0"), naming.ifname(run_id, "e0")
    add_link(server, edge, server_if, edge_server_if)
    paths: list[PathPlumbing] = []
    for i, pname in enumerate(scenario.paths):
        router = node(f"router{i}")
        letter = "ab"[i]
        p = PathPlumbing(
            name=pname, index=i, router=router,
            client_if=naming.ifname(run_id, f"c{i}"), client_addr=f"10.0.{i + 1}.2",
            router_client_if=naming.ifname(run_id, f"{letter}0"), router_client_addr=f"10.0.{i + 1}.1",
            router_server_if=naming.ifname(run_id, f"{letter}1"), router_server_addr=f"10.0.{i + 11}.1",
            edge_if=naming.ifname(run_id, f"e{i + 1}"), edge_addr=f"10.0.{i + 11}.2",
            table=100 + i,
        )
        add_link(client, router, p.client_if, p.router_client_if)
        add_link(router, edge, p.router_server_if, p.edge_if)
        paths.append(p)
    topo = DualPath(run_id, client, server, edge, paths, server_if=server_if, edge_server_if=edge_server_if,
                    nodes=created)
    _configure(topo)
    return topo


def _configure(t: DualPath) -> None:
    c, s, e = t.client.ns, t.server.ns, t.edge.ns
    s.run(["ip", "addr", "add", f"{t.server_addr}/32", "dev", "lo"])
    s.run(["ip", "addr", "add", f"{t.server_link_addr}/24", "dev", t.server_if])
    s.run(["ip", "link", "set", t.server_if, "up"])
    e.run(["ip", "addr", "add", f"{t.edge_server_addr}/24", "dev", t.edge_server_if])
    e.run(["ip", "link", "set", t.edge_server_if, "up"])
    e.sysctl("net.ipv4.ip_forward", "1")
    e.sysctl("net.ipv4.conf.all.rp_filter", "0")
    e.run(["ip", "route", "add", f"{t.server_addr}/32", "via", t.server_link_addr])
    for p in t.paths:
        r = p.router.ns
        c.run(["ip", "addr", "add", f"{p.client_addr}/24", "dev", p.client_if])
        c.run(["ip", "link", "set", p.client_if, "up"])
        r.run(["ip", "addr", "add", f"{p.router_client_addr}/24", "dev", p.router_client_if])
        r.run(["ip", "addr", "add", f"{p.router_server_addr}/24", "dev", p.router_server_if])
        r.run(["ip", "link", "set", p.router_client_if, "up"])
        r.run(["ip", "link", "set", p.router_server_if, "up"])
        r.sysctl("net.ipv4.ip_forward", "1")
        r.sysctl("net.ipv4.conf.all.rp_filter", "0")
        r.run(["ip", "route", "add", f"{t.server_addr}/32", "via", p.edge_addr])
        e.run(["ip", "addr", "add", f"{p.edge_addr}/24", "dev", p.edge_if])
        e.run(["ip", "link", "set", p.edge_if, "up"])
        e.run(["ip", "route", "add", f"10.0.{p.index + 1}.0/24", "via", p.router_server_addr])
        # Client policy routing: traffic from this path's address leaves through this path.
        c.run(["ip", "rule", "add", "from", p.client_addr, "table", str(p.table)])
        c.run(["ip", "route", "add", "default", "via", p.router_client_addr, "dev", p.client_if,
               "table", str(p.table)])
    first = t.paths[0]
    c.run(["ip", "route", "add", "default", "via", first.router_client_addr, "dev", first.client_if])


def server_routes(t: DualPath) -> list[tuple[str, str, str]]:
    """(client subnet, via, dev) of each path as seen from the server; the transport layer installs
    them, because the route also selects the congestion control (`congctl`)."""
    return [(f"10.0.{p.index + 1}.0/24", t.edge_server_addr, t.server_if) for p in t.paths]


def teardown(t: DualPath) -> None:
    for n in t.nodes:
        stop_node(n)
