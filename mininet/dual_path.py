"""Mininet custom topology: mpvlab's dual path (a Wi-Fi-like and an LTE-like path between a client
with two interfaces and a server), for use with Mininet's own `mn`:

    mn --custom mininet/dual_path.py --topo dualpath --link tc --controller none
    mn --custom mininet/dual_path.py --topo dualpath,wifi_mbit=20,lte_mbit=8,lte_delay=30ms,prefix=x --link tc --controller none

    client c ── (wifi: wifi_mbit[, wifi_delay]) ── router rw ── server s
             └─ (lte:  lte_mbit[, lte_delay])   ── router rl ──┘

Addresses: client 10.0.1.2 (wifi) and 10.0.2.2 (lte); server 10.0.11.2 (reached over wifi) and
10.0.12.2 (reached over lte), so the destination picks the path: in the CLI, `c ping 10.0.11.2` runs
over rw, `c ping 10.0.12.2` over rl. `prefix` starts every node name (and so every interface name,
`<prefix>c-eth0`), so two of these never meet on one host. No switch: no controller is needed.

This file is read by `mn` only (no import of mpvlab); mpvlab's own runs build the same shape with
more (an edge hop, per-run names, IFB shaping, MPTCP endpoints) in mpvlab/topologies/dual_path.py.
"""

from __future__ import annotations

from typing import Any

from mininet.node import Node
from mininet.topo import Topo


class Routed(Node):
    """An end host with static routes: `routes` is a list of (prefix, gateway)."""

    def config(self, routes: tuple[tuple[str, str], ...] = (), **params: Any) -> Any:
        out = super().config(**params)
        for prefix, via in routes:
            self.cmd(f"ip route replace {prefix} via {via}")
        return out


class Router(Routed):
    """A namespace that forwards IPv4 (the sysctl is the namespace's own)."""

    def config(self, **params: Any) -> Any:
        self.cmd("sysctl -qw net.ipv4.ip_forward=1")
        return super().config(**params)


def _delay(delay: str) -> dict[str, str]:
    """A one-way delay (e.g. "10ms") for TCLink, which sets it with netem: none unless asked for,
    since a kernel without sch_netem rejects it (mpvlab's own runs delay with their own delay line)."""
    return {"delay": delay} if delay else {}


class DualPath(Topo):
    """Client and server joined by two routed paths, each a shaped link (use `--link tc`)."""

    def build(self, wifi_mbit: float = 20.0, wifi_delay: str = "", lte_mbit: float = 10.0,
              lte_delay: str = "", prefix: str = "", **_opts: Any) -> None:
        c = self.addHost(f"{prefix}c", cls=Routed, ip="10.0.1.2/24", routes=(("10.0.11.0/24", "10.0.1.1"),
                                                                         ("10.0.12.0/24", "10.0.2.1")))
        # The server forwards between its two sides and the routers send the rest its way, so that every
        # node reaches every other (`--test pingall`); client <-> server traffic never takes that turn.
        s = self.addHost(f"{prefix}s", cls=Router, ip="10.0.11.2/24", routes=(("10.0.1.0/24", "10.0.11.1"),
                                                                          ("10.0.2.0/24", "10.0.12.1")))
        rw = self.addHost(f"{prefix}rw", cls=Router, ip="10.0.1.1/24", routes=(("default", "10.0.11.2"),))
        rl = self.addHost(f"{prefix}rl", cls=Router, ip="10.0.2.1/24", routes=(("default", "10.0.12.2"),))
        self.addLink(c, rw, params1={"ip": "10.0.1.2/24"}, params2={"ip": "10.0.1.1/24"},
                     bw=wifi_mbit, **_delay(wifi_delay))
        self.addLink(c, rl, params1={"ip": "10.0.2.2/24"}, params2={"ip": "10.0.2.1/24"},
                     bw=lte_mbit, **_delay(lte_delay))
        self.addLink(rw, s, params1={"ip": "10.0.11.1/24"}, params2={"ip": "10.0.11.2/24"})
        self.addLink(rl, s, params1={"ip": "10.0.12.1/24"}, params2={"ip": "10.0.12.2/24"})


# What `mn --custom` reads: topology name -> constructor
topos = {"dualpath": DualPath}
