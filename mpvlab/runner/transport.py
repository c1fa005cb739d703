"""MPTCP and TCP settings of the client and server namespaces, and the congestion control choice,
as a scenario asks for them; the settings themselves are mpvlab/topologies/mptcp.py (the test bed uses
them too, without a scenario)."""

from __future__ import annotations

from typing import Any

from mpvlab.input.scenario import Scenario
from mpvlab.topologies import mptcp
from mpvlab.topologies.dual_path import DualPath
from mpvlab.topologies.mptcp import set_offloads, set_server_cc

__all__ = ["announce_addresses", "configure_hosts", "set_offloads", "set_server_cc"]


def configure_hosts(topo: DualPath, scenario: Scenario) -> dict[str, Any]:
    """Sysctls, MPTCP limits and endpoints. Returns what was set, read back, for provenance."""
    h = scenario.hosts
    return mptcp.configure_hosts(topo, tcp_no_metrics_save=h.tcp_no_metrics_save, client_tcp_rmem=h.client_tcp_rmem,
                                 server_tcp_wmem=h.server_tcp_wmem, subflows=scenario.expected_subflows,
                                 signal=scenario.transport.scheduler == "default")


def announce_addresses(topo: DualPath, scenario: Scenario) -> list[str]:
    """Server addresses the steering scheduler's controller, the server's userspace path manager, must
    announce on every connection: under `per-path` addressing, each further path's own server address
    (what configure_hosts() gives the in-kernel PM as `signal` endpoints under `default`)."""
    if topo.addressing != "per-path" or scenario.transport.scheduler == "default":
        return []
    return mptcp.further_server_addresses(topo, scenario.expected_subflows)
