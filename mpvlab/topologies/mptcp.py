"""MPTCP and TCP settings of a dual-path topology's client and server, and the congestion control
choice, with no scenario in sight: the orchestrator (mpvlab/runner/transport.py) reads them from a
scenario, the test bed (mpvlab/testbed/dualpath.py) passes its own.

The congestion control is selected by the server's routes (`ip route ... congctl NAME`): the kernel
applies a route's congestion control to every passively opened socket (tcp_ca_openreq_child), which
covers every MPTCP subflow Apache accepts without changing Apache — and, unlike the namespace
default sysctl, it is allowed for cubic and for BPF congestion controls inside a namespace.
"""

from __future__ import annotations

from typing import Any

from mpvlab.core.errors import RunFailed
from mpvlab.core.netns import Netns
from mpvlab.topologies.dual_path import DualPath, server_routes


def _triple(values: tuple[int, int, int]) -> str:
    return " ".join(str(v) for v in values)


def configure_hosts(topo: DualPath, *, tcp_no_metrics_save: bool, client_tcp_rmem: tuple[int, int, int],
                    server_tcp_wmem: tuple[int, int, int], subflows: int, signal: bool) -> dict[str, Any]:
    """Sysctls, MPTCP limits and endpoints for `subflows` subflows (one per path up to that many).
    `signal`: under `per-path` addressing the in-kernel PM signals the further addresses (False
    when a steering scheduler's controller announces them). Returns what was set, read back."""
    c, s = topo.client.ns, topo.server.ns
    record: dict[str, Any] = {}
    for ns, buffers in ((c, {"net.ipv4.tcp_rmem": _triple(client_tcp_rmem)}),
                        (s, {"net.ipv4.tcp_wmem": _triple(server_tcp_wmem)})):
        ns.sysctls({"net.mptcp.enabled": "1",
                    "net.ipv4.tcp_no_metrics_save": "1" if tcp_no_metrics_save else "0",
                    "net.ipv4.conf.all.rp_filter": "0", **buffers})
        # One subflow per further path (at least 2, the value every two-path result was measured with).
        further_max = str(max(2, len(topo.paths) - 1))
        ns.run(["ip", "mptcp", "limits", "set", "subflow", further_max, "add_addr_accepted", further_max])
    further = topo.paths[1:subflows]
    if topo.addressing == "per-path":
        # The server signals each further path's own address; the client joins it from the source its
        # route to that address picks (mpvlab/topologies/dual_path.py). A client `subflow` endpoint would also
        # try (path address -> path 0's server address), which no router forwards. Under a steering
        # scheduler the server runs the userspace path manager, which ignores endpoints: the
        # controller announces these addresses itself (mpvlab.runner.transport.announce_addresses()).
        if signal:
            for addr in further_server_addresses(topo, subflows):
                s.run(["ip", "mptcp", "endpoint", "add", addr, "signal"])
    else:
        # One extra subflow per further path, from that path's client address.
        for p in further:
            c.run(["ip", "mptcp", "endpoint", "add", p.client_addr, "dev", p.client_if, "subflow"])
    for ns in (c, s):
        record[ns.name] = ns.read_sysctls(["net.mptcp.enabled", "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_rmem",
                                           "net.ipv4.tcp_wmem", "net.core.rmem_max",
                                           "net.ipv4.tcp_congestion_control"])
        record[ns.name]["mptcp_limits"] = ns.run(["ip", "mptcp", "limits", "show"]).stdout.strip()
        record[ns.name]["mptcp_endpoints"] = ns.run(["ip", "mptcp", "endpoint", "show"]).stdout.strip()
    return record


def further_server_addresses(topo: DualPath, subflows: int) -> list[str]:
    """Under `per-path`, the server addresses of the paths after the first one the client connects to:
    the ones a path manager must signal (in-kernel `signal` endpoints, or the controller's ANNOUNCE)."""
    return [p.server_addr for p in topo.paths[1:subflows]]


def set_server_cc(topo: DualPath, cc_kernel_name: str) -> list[str]:
    """Install the server's routes to each path with `congctl`; returns them as read back."""
    return set_route_cc(topo.server.ns, server_routes(topo), cc_kernel_name)


def set_route_cc(server: Netns, routes: list[tuple[str, str, str]], cc_kernel_name: str) -> list[str]:
    """The congestion control step of every emulated topology: replace each (subnet, via, dev) route of
    `server` with one carrying `congctl cc_kernel_name`, then read the table back and fail the run if
    any of those routes did not take it. Returns the server's routes as read back (provenance)."""
    for subnet, via, dev in routes:
        server.run(["ip", "route", "replace", subnet, "via", via, "dev", dev, "congctl", cc_kernel_name])
    table = server.run(["ip", "route", "show"]).stdout.strip().splitlines()
    for subnet, _via, _dev in routes:
        line = next((r for r in table if r.startswith(subnet)), "")
        if f"congctl {cc_kernel_name}" not in line:
            raise RunFailed(f"server route to {subnet} did not take congctl {cc_kernel_name}: {line!r}")
    return table


def set_offloads(topo: DualPath, enabled: bool) -> dict[str, dict[str, str]]:
    """TSO/GSO/GRO on every emulated interface. Off by default: with them on, a veth hands TCP
    64 KB super-packets whose delivery-rate samples are not what a real NIC would produce."""
    state = "on" if enabled else "off"
    out: dict[str, dict[str, str]] = {}
    for ns_name, ifs in topo.interfaces().items():
        ns = Netns(ns_name)
        for dev in ifs:
            ns.run(["ethtool", "-K", dev, "tso", state, "gso", state, "gro", state], check=False)
            feats = ns.run(["ethtool", "-k", dev]).stdout
            out[dev] = {
                k: line.split(":", 1)[1].strip()
                for line in feats.splitlines()
                for k in ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")
                if line.startswith(k + ":")
            }
    return out
