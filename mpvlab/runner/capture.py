"""observe.pcap in an emulated run (issues 22, 23): which interfaces each capture point means, the
capture around the run, and its part of the summary — the capture record with its byte cross-check
against the interface counters, and the wire-order path-switch count from the server's capture."""

from __future__ import annotations

import contextlib
from typing import Any

from mpvlab.collectors import pcap, wire_switches
from mpvlab.results import checks as checks_mod
from mpvlab.runner.context import RunContext
from mpvlab.topologies import dual_path

# What the summary says when there is no server capture to count wire-order switches from.
WIRE_NOT_COLLECTED = "not collected: observe.pcap.points has no `server`"


def taps(topo: dual_path.DualPath, points: list[str]) -> list[pcap.Tap]:
    """Every interface of each point: the client's one per path, the server's one, a router's two."""
    by_point: dict[str, tuple[str, list[str]]] = {
        "client": (topo.client.ns.name, [p.client_if for p in topo.paths]),
        "server": (topo.server.ns.name, [topo.server_if]),
    }
    for p in topo.paths:
        by_point[f"router-{p.name}"] = (p.router.ns.name, [p.router_client_if, p.router_server_if])
    return [pcap.Tap(pt, by_point[pt][0], ifname) for pt in points for ifname in by_point[pt][1]]


def start(ctx: RunContext, stack: contextlib.ExitStack, topo: dual_path.DualPath) -> pcap.Capture | None:
    """Start the captures (None without observe.pcap); they stop when `stack` closes."""
    spec = ctx.scenario.observe.pcap
    if spec is None:
        return None
    ctx.opts.progress("packet capture")
    return stack.enter_context(pcap.capture(taps(topo, spec.points), ctx.data / "pcap", spec.snaplen,
                                            spec.max_mb * 1_000_000, register=ctx.ledger.add_proc))


def view(topo: dual_path.DualPath, cap: pcap.Capture | None, sched: dict[str, Any]) -> dict[str, Any]:
    """Summary fields: `capture`, `path_switches_wire`, `wire_switches`, and cross-checks/warnings to merge."""
    out: dict[str, Any] = {"capture": None, "path_switches_wire": None,
                           "wire_switches": {"not_collected": WIRE_NOT_COLLECTED}, "checks": {}, "warnings": []}
    if cap is None:
        return out
    out["capture"] = cap.summary()
    for r in cap.results:
        checks_mod.record(out["checks"], out["warnings"], f"pcap_bytes_{r.point}_{r.interface}", {
            "capture_bytes": r.bytes, "counter_bytes": r.counter_bytes, "ratio": r.ratio, "ok": bool(r.ok)})
        if r.dropped_by_kernel:
            out["warnings"].append(f"capture {r.file}: {r.dropped_by_kernel} packets dropped by kernel")
        if r.truncated:
            out["warnings"].append(f"capture {r.file} reached max_mb and was stopped early (truncated)")
    server = [r for r in cap.results if r.point == "server"]
    if server:
        wire = wire_switches.analyse(cap.out_dir / server[0].file)
        wire["truncated"] = server[0].truncated
        _join_decisions(wire, topo, sched)
        out["wire_switches"] = wire
        out["path_switches_wire"] = wire["totals"]["wire_switches"]
    return out


def _join_decisions(wire: dict[str, Any], topo: dual_path.DualPath, sched: dict[str, Any]) -> None:
    """Beside each connection's wire count, the BPF trace's decision-level count (same token), the ratio,
    and each subflow's path (its client address)."""
    decisions = {c["conn"]: c for c in sched["connections"]}    # conn: the token, 8 hex digits
    for token, c in wire["connections"].items():
        d = decisions.get(token)
        c["decision_path_switches"] = None if d is None else d["path_switches"]
        c["wire_per_decision_switch"] = (round(c["wire_switches"] / d["path_switches"], 3)
                                         if d is not None and d["path_switches"] else None)
    t = wire["totals"]
    t["decision_path_switches"] = sched["totals"]["path_switches"]
    t["wire_per_decision_switch"] = (round(t["wire_switches"] / t["decision_path_switches"], 3)
                                     if t["decision_path_switches"] else None)
    path_of = {p.client_addr: p.name for p in topo.paths}
    for sf in wire["subflows"].values():
        sf["path"] = path_of.get(sf["peer"])
