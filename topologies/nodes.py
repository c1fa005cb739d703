"""Mininet glue: nodes and links built with Mininet's Python API, without switches, controllers,
netem or Mininet's global cleanup (which kills every `mnexec` and deletes every `*-ethN` link on the
host — other runs included).

Each Mininet node (a shell started by `mnexec -cdn` in a new network namespace) is also given a name
under /run/netns (`ip netns attach`), so every other component addresses it as `ip netns exec NAME`
with argument lists, and cleanup can find it by run id. Mininet itself is only given names the
platform generates (run id + fixed roles); nothing from a scenario reaches its shell.
"""

from __future__ import annotations

from dataclasses import dataclass

from mininet.link import Link
from mininet.node import Node

from core import proc
from core.netns import Netns


@dataclass
class EmuNode:
    """A Mininet node with a stable netns name."""

    mn: Node
    ns: Netns

    @property
    def pid(self) -> int:
        return int(self.mn.pid)


def add_node(netns_name: str, role: str) -> EmuNode:
    node = Node(role, inNamespace=True)
    proc.run(["ip", "netns", "attach", netns_name, str(node.pid)])
    ns = Netns(netns_name)
    ns.run(["ip", "link", "set", "lo", "up"])
    return EmuNode(node, ns)


def add_link(a: EmuNode, b: EmuNode, ifname_a: str, ifname_b: str) -> Link:
    """A veth pair created directly inside the two namespaces (never visible in the host's)."""
    return Link(a.mn, b.mn, intfName1=ifname_a, intfName2=ifname_b)


def stop_node(node: EmuNode) -> None:
    """Stop the node's shell (Mininet's per-node terminate, not its global cleanup)."""
    node.mn.terminate()
