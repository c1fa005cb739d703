"""Mininet glue: nodes and links built with Mininet's Python API, without switches, controllers,
netem or Mininet's global cleanup (which kills every `mnexec` and deletes every `*-ethN` link on the
host — other runs included).

Each Mininet node (a shell started by `mnexec -cdn` in a new network namespace) is also given a name
under /run/netns (`ip netns attach`), so every other component addresses it as `ip netns exec NAME`
with argument lists, and cleanup can find it by run id. Mininet itself is only given names the
platform generates (run id + fixed roles); nothing from a scenario reaches its shell.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass

# Mininet's node module imports distutils.version. In the venv, setuptools' import hook
# (_distutils_hack, put on sys.meta_path by a .pth file) answers that with the whole of setuptools:
# 0.1 s of every run's start-up (issue 16). The standard library's own distutils (still in Python
# 3.11) has the same StrictVersion, so the hook is stepped around for this one import (and the
# standard library's notice that distutils goes away in 3.12 is not repeated on every run).
_setuptools_hooks = [f for f in sys.meta_path if type(f).__module__ == "_distutils_hack"]
for _hook in _setuptools_hooks:
    sys.meta_path.remove(_hook)
try:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The distutils package is deprecated", DeprecationWarning)
        from mininet.link import Link
        from mininet.node import Node
finally:
    sys.meta_path[0:0] = _setuptools_hooks

# after the hooks are back: only the Mininet import above steps around them
from mpvlab.core import proc  # noqa: E402
from mpvlab.core.netns import Netns  # noqa: E402


# IPv6 off in every node's namespace before its links exist (`all` for what exists, `default` for the
# veths created next). The emulated network is IPv4; with IPv6 on, each veth got a link-local address
# ~2-3 s after its carrier came up (linkwatch, then duplicate-address detection), and that address
# change reached the programs inside: Chromium's network-change notifier closed its HTTP/2 sessions
# with net::ERR_NETWORK_CHANGED, killing the dash.js page's script mid-transfer when it came during the
# page load (issue 51; player/README.md). It also kept DAD/MLD/router-solicitation packets off the
# shaped links. Per namespace: the host's own setting is untouched.
NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}


@dataclass
class EmuNode:
    """A Mininet node with a stable netns name."""

    mn: Node
    ns: Netns

    @property
    def pid(self) -> int:
        return int(self.mn.pid)


def add_node(netns_name: str, role: str, lo_up: bool = True) -> EmuNode:
    """`lo_up=False`: the caller brings the loopback up itself (in the namespace's first `ip -batch`,
    one process fewer per node)."""
    node = Node(role, inNamespace=True)
    proc.run(["ip", "netns", "attach", netns_name, str(node.pid)])
    ns = Netns(netns_name)
    ns.sysctls(NO_IPV6)
    if lo_up:
        ns.run(["ip", "link", "set", "lo", "up"])
    return EmuNode(node, ns)


def add_link(a: EmuNode, b: EmuNode, ifname_a: str, ifname_b: str) -> Link:
    """A veth pair created directly inside the two namespaces (never visible in the host's)."""
    return Link(a.mn, b.mn, intfName1=ifname_a, intfName2=ifname_b)


def stop_node(node: EmuNode) -> None:
    """Stop the node's shell (Mininet's per-node terminate, not its global cleanup)."""
    node.mn.terminate()
