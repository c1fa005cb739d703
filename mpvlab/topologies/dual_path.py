"""dual-path: a client with one interface per path (e.g. wifi, lte), one router node per path (the
"emulator box" of the published testbed), and a server.

    client c0 ──── a0 [router path 0] a1 ──── e1 [edge] e0 ──── s0 server
           c1 ──── b0 [router path 1] b1 ──── e2

Addressing (`single`): the server's one address lives on its loopback (10.0.100.1/32) and is reached
over every path; the client picks the path by source address (one policy-routing table per path).
The first path listed in the scenario carries the initial MPTCP subflow (client default route); the
in-kernel path manager adds one subflow per further path from a `subflow` endpoint on its address.
Addresses are the same in every run: each run has its own namespaces, so they never meet.

Addressing (`per-path`, dual-path only): the server has one address per path on its loopback
(10.0.101.1 for path 0, 10.0.102.1 for path 1). Each router routes only its own path's server address,
so the destination address alone determines the path. The client connects to path 0's address (main
table route) and has a host route to each further server address through that path with `src` its
path address. The server's in-kernel path manager signals path 1's address (`ip mptcp endpoint add
ADDR signal`); the client, with no subflow endpoint, accepts the ADD_ADDR and opens the join from the
source address its route picks: (10.0.2.2 → 10.0.102.1). Measured on kernel 6.18: exactly those two
subflows, (10.0.1.2, 10.0.101.1) and (10.0.2.2, 10.0.102.1).

Why the `edge` hop between the server and the routers: a packet the server sends stays charged to
its socket (TCP Small Queues) across a veth until the next namespace's IP layer receives it. The
routers shape at their ingress (IFB, before IP receive), so with the server attached directly TSQ
would hold each flow to a few packets in the bottleneck queue and the configured `buffer` would
never fill (measured: 5 packets in a 256-packet tbf). The edge's IP receive releases the socket's
charge first, so the bottleneck queue behaves like a router's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import Any, Callable

from mpvlab.core import naming
from mpvlab.emulation.nodes import EmuNode, add_link, add_node, stop_node

SERVER_ADDR = "10.0.100.1"


def per_path_server_addr(index: int) -> str:
    """The server's address reached over path `index` under `per-path` addressing."""
    return f"10.0.{101 + index}.1"


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
    server_addr: str = SERVER_ADDR   # the server address this path reaches (differs per path in `per-path`)


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
    server_addr: str = SERVER_ADDR   # the address the client connects to (path 0's in `per-path`)
    addressing: str = "single"
    nodes: list[EmuNode] = field(default_factory=list)

    def server_addrs(self) -> list[str]:
        """Every distinct server address, path order."""
        return list(dict.fromkeys(p.server_addr for p in self.paths))

    def interfaces(self) -> dict[str, list[str]]:
        """netns name -> its interfaces (for offload settings and counters)."""
        out: dict[str, list[str]] = {self.client.ns.name: [], self.server.ns.name: [self.server_if],
                                     self.edge.ns.name: [self.edge_server_if]}
        for p in self.paths:
            out[self.client.ns.name].append(p.client_if)
            out[self.edge.ns.name].append(p.edge_if)
            out[p.router.ns.name] = [p.router_client_if, p.router_server_if]
        return out


def build(path_names: list[str], addressing: str, run_id: str, on_netns: Callable[[str], None]) -> DualPath:
    """One router per path (in the order given; the first carries the initial subflow), `addressing`
    `single` or `per-path` (mpvlab/topologies/spec.py). Create nodes and links and configure addresses and routes. `on_netns` is told every namespace
    name before it is created (the run ledger), so a crash mid-build still gets cleaned."""
    created: list[EmuNode] = []

    def node(role: str) -> EmuNode:
        name = naming.netns_name(run_id, role)
        on_netns(name)
        n = add_node(name, role, lo_up=False)     # lo comes up in _configure's batch
        created.append(n)
        return n

    client, server, edge = node("client"), node("server"), node("edge")
    server_if, edge_server_if = naming.ifname(run_id, "s0"), naming.ifname(run_id, "e0")
    add_link(server, edge, server_if, edge_server_if)
    paths: list[PathPlumbing] = []
    for i, pname in enumerate(path_names):
        router = node(f"router{i}")
        letter = "abcdefgh"[i]     # ≤ 8 paths (scenario.py MAX_PATHS)
        p = PathPlumbing(
            name=pname, index=i, router=router,
            client_if=naming.ifname(run_id, f"c{i}"), client_addr=f"10.0.{i + 1}.2",
            router_client_if=naming.ifname(run_id, f"{letter}0"), router_client_addr=f"10.0.{i + 1}.1",
            router_server_if=naming.ifname(run_id, f"{letter}1"), router_server_addr=f"10.0.{i + 11}.1",
            edge_if=naming.ifname(run_id, f"e{i + 1}"), edge_addr=f"10.0.{i + 11}.2",
            table=100 + i,
            server_addr=per_path_server_addr(i) if addressing == "per-path" else SERVER_ADDR,
        )
        add_link(client, router, p.client_if, p.router_client_if)
        add_link(router, edge, p.router_server_if, p.edge_if)
        paths.append(p)
    topo = DualPath(run_id, client, server, edge, paths, server_if=server_if, edge_server_if=edge_server_if,
                    server_addr=paths[0].server_addr, addressing=addressing, nodes=created)
    _configure(topo)
    return topo


def _configure(t: DualPath) -> None:
    """Addresses, links, forwarding and routes. Each namespace's `ip` commands go in one batch (one
    process instead of ~10: `ip netns exec` costs ~8 ms each); within a namespace they keep this
    order, and no command depends on another namespace's."""
    c, s, e = t.client.ns, t.server.ns, t.edge.ns
    cmds: dict[str, list[list[str]]] = {}
    ns_of = {n.name: n for n in (c, s, e, *(p.router.ns for p in t.paths))}

    def ip(ns: Any, *argv: str) -> None:
        cmds.setdefault(ns.name, []).append(list(argv))

    for ns in ns_of.values():     # every node's loopback first (build() leaves it to this batch)
        ip(ns, "link", "set", "lo", "up")
    for addr in t.server_addrs():
        ip(s, "addr", "add", f"{addr}/32", "dev", "lo")
    ip(s, "addr", "add", f"{t.server_link_addr}/24", "dev", t.server_if)
    ip(s, "link", "set", t.server_if, "up")
    ip(e, "addr", "add", f"{t.edge_server_addr}/24", "dev", t.edge_server_if)
    ip(e, "link", "set", t.edge_server_if, "up")
    for addr in t.server_addrs():
        ip(e, "route", "add", f"{addr}/32", "via", t.server_link_addr)
    for p in t.paths:
        r = p.router.ns
        ip(c, "addr", "add", f"{p.client_addr}/24", "dev", p.client_if)
        ip(c, "link", "set", p.client_if, "up")
        ip(r, "addr", "add", f"{p.router_client_addr}/24", "dev", p.router_client_if)
        ip(r, "addr", "add", f"{p.router_server_addr}/24", "dev", p.router_server_if)
        ip(r, "link", "set", p.router_client_if, "up")
        ip(r, "link", "set", p.router_server_if, "up")
        # Only this path's server address: under `per-path` the other one is unreachable here.
        ip(r, "route", "add", f"{p.server_addr}/32", "via", p.edge_addr)
        ip(e, "addr", "add", f"{p.edge_addr}/24", "dev", p.edge_if)
        ip(e, "link", "set", p.edge_if, "up")
        ip(e, "route", "add", f"10.0.{p.index + 1}.0/24", "via", p.router_server_addr)
        # Client policy routing: traffic from this path's address leaves through this path.
        ip(c, "rule", "add", "from", p.client_addr, "table", str(p.table))
        ip(c, "route", "add", "default", "via", p.router_client_addr, "dev", p.client_if, "table", str(p.table))
    first = t.paths[0]
    ip(c, "route", "add", "default", "via", first.router_client_addr, "dev", first.client_if)
    if t.addressing == "per-path":
        # A join to a signalled address takes its source from the route (no subflow endpoint on the
        # client), so each further server address leaves through its path from that path's address.
        for p in t.paths[1:]:
            ip(c, "route", "add", f"{p.server_addr}/32", "via", p.router_client_addr, "dev", p.client_if,
               "src", p.client_addr)
    for name, batch in cmds.items():
        ns_of[name].ip_batch(batch)
    for fwd in (e, *(p.router.ns for p in t.paths)):
        fwd.sysctls({"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "0"})


def server_routes(t: DualPath) -> list[tuple[str, str, str]]:
    """(client subnet, via, dev) of each path as seen from the server; the transport layer installs
    them, because the route also selects the congestion control (`congctl`)."""
    return [(f"10.0.{p.index + 1}.0/24", t.edge_server_addr, t.server_if) for p in t.paths]


def teardown(t: DualPath) -> None:
    for n in t.nodes:
        stop_node(n)
