"""Every topology kind a scenario may name (`topology.kind`), listed once, in the schema's order.

Each entry carries what the rest of the platform needs of it: how many paths it takes, which server
addressings it offers, which workloads it runs, whether `mpvlab shell` opens it and whether `mpvlab
plot` draws it, its builder (the module that makes its network), which runner backend brings it up
(`backend`: mpvlab/runner/kinds.py maps the name to the code; this package sits below the runner and
never imports it), the summary model that describes its runs (`summary`: a class of
mpvlab/results/summary.py) and its lines of the console summary. The scenario schema, the checks,
the CLI, the flow roles and the console ask the entry; nothing else names a kind.

Adding a kind: one entry here, its builder, its backend (a line in mpvlab/runner/kinds.py), and a
summary model if none fits: docs/extending.md, "Adding a topology kind".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_PATHS = 8     # one subflow per path: the steering policy's and the kernel's per-connection limit
                  # (MPTCP_PM_ADDR_MAX / POL_MAX_SF)


@dataclass(frozen=True)
class TopologyKind:
    name: str
    description: str
    paths: tuple[int, int]                  # fewest and most paths it takes
    addressing: tuple[str, ...]             # topology.server_addressing values it offers
    workloads: tuple[str, ...]              # workload.kind values it runs (mpvlab/workloads/registry.py)
    builder: str | None                     # "module:function" that makes its network; None: it makes none
    backend: str                            # the runner's bring-up (mpvlab/runner/kinds.py BACKENDS)
    summary: str                            # its runs' summary model in mpvlab/results/summary.py
    shell: bool = False                     # `mpvlab shell` opens it in Mininet's CLI
    plot: bool = True                       # `mpvlab plot` draws its per-path figures
    pcap: bool = False                      # observe.pcap can capture at its nodes (client, server, routers)
    several_clients: bool = False           # topology.clients players and cross_traffic behind one bottleneck
    real_hosts: bool = False                # real machines and interfaces (topology.hosts, roles, paths.*.physical)

    def path_count_problem(self, names: list[str]) -> str | None:
        """Why `names` (the scenario's paths) do not fit this kind, or None."""
        lo, hi = self.paths
        if lo <= len(names) <= hi:
            return None
        if lo == hi:
            return (f"paths: topology {self.name} needs exactly {lo} path{'s' if lo > 1 else ''}, "
                    f"got {len(names)}: {names}")
        between = f"{lo} or {hi}" if hi == lo + 1 else f"{lo} to {hi}"
        return f"paths: topology {self.name} takes {between} paths, got {len(names)}: {names}"

    def build(self) -> Callable[..., Any]:
        """Its builder, imported on demand (Mininet is loaded only by what builds a network)."""
        if self.builder is None:
            raise ValueError(f"topology {self.name} builds no network of its own")
        module, _, function = self.builder.partition(":")
        return getattr(importlib.import_module(module), function)

    def shell_refusal(self) -> str | None:
        """Why `mpvlab shell` cannot open it (the sentence after the scenario's file), or None."""
        if self.shell:
            return None
        if self.real_hosts:
            return f"topology.kind {self.name} has no emulated network to open a shell on (log in to its hosts instead)"
        opens = " and ".join(k.name for k in ENTRIES if k.shell)
        return f"topology.kind {self.name}: mpvlab shell supports {opens} only (run it with `mpvlab run`)"

    def plot_refusal(self) -> str | None:
        """Why `mpvlab plot` draws nothing for its runs, or None."""
        if self.plot:
            return None
        draws = "/".join(k.name for k in ENTRIES if k.plot)
        return (f"mpvlab plot draws per-path figures of {draws} runs; a {self.name} run has its data in "
                "data/ (no plots yet)")

    def console_lines(self, s: Mapping[str, Any], workload_lines: list[str]) -> list[str]:
        """Its lines of the console summary around the workload's (`workload_lines`)."""
        if not self.several_clients:
            paths = ", ".join(f"{n} {v['rx_bytes'] / 1e6:.2f} MB ({v['share']:.0%})" for n, v in s["paths"].items())
            return [f"  bytes per path: {paths}", *workload_lines]
        lines = list(workload_lines)
        b = s["bottleneck"]
        if "utilisation" in b:
            lines.append(f"  bottleneck utilisation {b['utilisation']:.1%}, drops {b['tbf']['drops']}")
        x = s["cross_traffic"]
        if x.get("bulk", {}).get("goodput_bps"):
            lines.append(f"  bulk {x['bulk']['cc_requested']}: {x['bulk']['goodput_bps'] / 1e6:.3f} Mbit/s")
        if "voip" in x:
            q = x["voip"]["queuing_delay_ms"]
            lines.append(f"  voip: {x['voip']['delivered_bps'] / 1e3:.1f} kbit/s delivered, loss "
                         f"{x['voip']['loss_rate']:.2%}, queuing delay p50 {q['p50']} p95 {q['p95']} p99 {q['p99']} ms")
        return lines


# dual-path: one router node ("emulator box") per path between a client with one interface per path
# and a server; dumbbell: the same builder with one path. `per-path` server addressing needs a
# router per path to route each server address over its own path.
DUAL_PATH = TopologyKind(
    "dual-path", "client, one router per path, server: 2 to 8 paths", (2, MAX_PATHS), ("single", "per-path"),
    ("video", "bulk"), "mpvlab.topologies.dual_path:build", "emulated", "EmulatedSummary", shell=True, pcap=True)
DUMBBELL = TopologyKind(
    "dumbbell", "server — router — client: one path, the single-bottleneck studies", (1, 1), ("single",),
    ("video", "bulk", "rtp"), "mpvlab.topologies.dual_path:build", "emulated", "EmulatedSummary",
    shell=True, pcap=True)
SHARED_BOTTLENECK = TopologyKind(
    "shared-bottleneck", "`clients` players (and the cross-traffic host) behind one router whose one path "
    "they all share", (1, 1), ("single",), ("video", "rtp"), "mpvlab.topologies.shared_bottleneck:build",
    "shared", "SharedSummary", plot=False, several_clients=True)
PHYSICAL = TopologyKind(
    "physical", "real hosts and interfaces, 1 or 2 paths", (1, 2), ("single",), ("video",), None, "real-hosts",
    "PhysicalSummary", plot=False, real_hosts=True)   # plot: its provenance has no topology.paths

ENTRIES: tuple[TopologyKind, ...] = (DUAL_PATH, DUMBBELL, SHARED_BOTTLENECK, PHYSICAL)
REGISTRY: dict[str, TopologyKind] = {k.name: k for k in ENTRIES}
NAMES: tuple[str, ...] = tuple(REGISTRY)


def get(name: str) -> TopologyKind:
    """The entry of `name`; ValueError lists the kinds there are."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a topology kind here; available: {', '.join(REGISTRY)}") from None


def runs_workload(workload: str) -> tuple[TopologyKind, ...]:
    """The kinds that run `workload`, in registry order."""
    return tuple(k for k in ENTRIES if workload in k.workloads)


def summarised_by(model: str) -> tuple[str, ...]:
    """Names of the kinds whose runs the summary model `model` describes (its `topology` Literal)."""
    return tuple(k.name for k in ENTRIES if k.summary == model)
