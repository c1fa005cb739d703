"""The network's part of the summary of a dual-path/dumbbell run: per-path bytes and shares, the cross-checks
between interface counters, the scheduler trace and Apache's log, and the player's QoE."""

from __future__ import annotations

import csv
import math

from pathlib import Path
from typing import Any

from mpvlab.runner import sampling
from mpvlab.topologies import dual_path
from mpvlab.runner.context import RunContext
from mpvlab.runner.steps import check_subflows
from mpvlab.runner.workloads.base import Outcome
from mpvlab.runner.steps import queue_view
from mpvlab.results.summary_parts.base import build, build_list
from mpvlab.results.summary_parts.network import CCStateView, Subflow
from mpvlab.results.summary_parts.observe import SteeringRecord


def _scheduler_view(topo: dual_path.DualPath, sched: dict[str, Any]) -> dict[str, Any]:
    """Per path: payload bytes the MPTCP scheduler handed to that path's subflows (the collector's
    exact count), and the connection-level decision and switch counts."""
    by_addr = {p.client_addr: p.name for p in topo.paths}
    handed = {p.name: 0 for p in topo.paths}
    for conn in sched["connections"]:
        for sf in conn["subflows"]:
            addr = sf["remote"].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
            if addr in by_addr:
                handed[by_addr[addr]] += sf["bytes_handed"]
    t = sched["totals"]
    return {"bytes_handed": handed, "connections": t["connections"], "decisions": t["decisions"],
            "data_carrying_decisions": t["data_carrying_decisions"], "path_switches": t["path_switches"],
            "lost_events": sched["lost_events"]["total"],
            "definition": sched["definitions"].get("path_switch")}




def _steering_view(steer: dict[str, Any]) -> dict[str, Any] | None:
    """How far to trust a steered scheduler: conformance of the kernel's data assignments to the policy
    and steering latency (schedulers/README.md). None for the kernel's own scheduler."""
    if not steer:
        return None
    return build(SteeringRecord, "steering", {
        "policy": steer.get("policy"), "conformance": steer.get("conformance"),
        "steering_latency_ms": steer.get("steering_latency_ms"), "set_flags": steer.get("set_flags"),
        "priority_changes": sum(c.get("priority_changes", 0) for c in steer.get("connections", [])),
        "lost_events": steer.get("lost_events")})




# Per data segment on the wire beyond its payload: Ethernet 14 + IPv4 20 + TCP 20 + options 36
# (timestamps 12 + MPTCP DSS 24), measured in collectors/README.md.
SEGMENT_OVERHEAD = 90


def retransmitted_segments_by_path(topo: dual_path.DualPath, subflows_csv: Path) -> dict[str, int]:
    """Segments the server's subflows of each path retransmitted (tcpi_total_retrans in the last
    `ss` sample of each subflow; a subflow's peer address names its path)."""
    last: dict[tuple[str, str], int] = {}
    if subflows_csv.exists():
        with subflows_csv.open() as fh:
            for row in csv.DictReader(fh):
                if row["retrans"]:
                    last[(row["local"], row["peer"])] = int(row["retrans"])
    by_addr = {p.client_addr: p.name for p in topo.paths}
    out: dict[str, int] = {}
    for (_local, peer), n in last.items():
        name = by_addr.get(peer.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:"))
        if name is not None:
            out[name] = out.get(name, 0) + n
    return out


QUIET_MIN_S = 0.5    # a path "stopped carrying data" when its client saw no data for this long
DATA_STEP_BYTES = 1000   # less than one full data segment (1514 B on the wire), more than link chatter


def quiet_intervals(links_csv: Path, min_gap_s: float = QUIET_MIN_S) -> dict[str, list[list[float]]]:
    """Per path: the intervals [last byte before, first byte after] (run clock, s) in which the client
    received nothing on that path for at least `min_gap_s`, up to the last byte received on any path
    (after it every path is idle because the workload is done, not because a path stopped). An outage,
    a handover or a scheduler leaving a path unused shows here; the edges are as sharp as the
    sampling period (observe.sample_hz)."""
    series: dict[str, list[tuple[float, int]]] = {}
    try:
        with links_csv.open() as fh:
            for row in csv.DictReader(fh):
                series.setdefault(row["path"], []).append((float(row["t_s"]), int(row["rx_bytes"])))
    except (OSError, KeyError, ValueError):
        return {}
    changes: dict[str, list[float]] = {}
    for path, rows in series.items():
        # A step counts when at least one data segment's worth arrived: ARP and other link chatter
        # (not cut by an outage, which acts on IP packets) must not split a quiet stretch.
        changes[path] = [t for (t, b), (_t0, b0) in zip(rows[1:], rows) if b - b0 >= DATA_STEP_BYTES]
    last_any = max((c[-1] for c in changes.values() if c), default=None)
    out: dict[str, list[list[float]]] = {}
    for path, times in changes.items():
        gaps = []
        for a, b in zip(times, times[1:]):
            if b - a >= min_gap_s and last_any is not None and b <= last_any:
                gaps.append([round(a, 3), round(b, 3)])
        out[path] = gaps
    return out


def interface_vs_collector(rx_bytes: int, rx_packets: int, handed: int | None, retransmitted: int) -> dict[str, Any]:
    """A path's interface bytes less per-packet headers against the payload the scheduler handed to
    its subflow (within 1 %: pure ACKs and the HTTP header differ). A TCP retransmission whose
    original also arrived (an RTO, a spurious fast retransmit) crosses the interface twice but is
    handed once, so the upper bound also allows the path's retransmitted segments at a full payload
    each (measured: 1.2 % over with 59 retransmissions after 49 tail drops on a 3 Mbit/s path)."""
    wire_payload = rx_bytes - rx_packets * SEGMENT_OVERHEAD
    ratio = wire_payload / handed if handed else None
    retrans_allow = retransmitted * (1514 - SEGMENT_OVERHEAD) / handed if handed else 0.0
    return {"ratio": None if ratio is None else round(ratio, 5), "tolerance": 0.01,
            "retransmitted_segments": retransmitted, "retransmission_allowance": round(retrans_allow, 5),
            "ok": ratio is not None and 0.99 <= ratio <= 1.01 + retrans_allow}


def lost_events_check(lost: int) -> dict[str, Any]:
    """The scheduler trace's own count of events its ring buffer could not deliver: any makes the
    decision and switch counts short."""
    return {"lost": lost, "ok": lost == 0}


def connections_check(key: str, requests: int, traced: int) -> dict[str, Any]:
    """Like with like: `requests` counts the connections that carried the workload's requests (for
    dash.js, not the page loaded before t0: workloads/video.py apache_connections); the trace counts
    connections the scheduler served between t0 and the end, including idle ones that only closed
    then (a TLS close_notify), so it may exceed the count. A shortfall is a real miss."""
    return {key: requests, "traced": traced, "ok": traced >= requests}


def subflow_address_check(topo: dual_path.DualPath, subflows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each subflow must join a path's client address to that path's server address (under `per-path`
    addressing the server address names the path; under `single` it is the same for every path)."""
    def host(endpoint: str) -> str:
        return endpoint.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
    expected = {p.name: [p.client_addr, p.server_addr] for p in topo.paths}
    allowed = {(c, s) for c, s in expected.values()}
    seen = sorted({(host(sf["peer"]), host(sf["local"])) for sf in subflows})
    stray = [list(x) for x in seen if x not in allowed]
    return {"addressing": topo.addressing, "expected": expected, "seen": [list(x) for x in seen],
            "stray": stray, "ok": not stray}


def cc_state_view(ctx: RunContext, sampler: sampling.Sampler, playback_s: float | None) -> dict[str, Any] | None:
    """Names every flow of the run's per-flow series (data/flows.json, .csv) and, for a CC whose state
    the registry names, its model over the workload's flows during playback (mpvlab/results/flows.py).
    A CC without a state model needs only the flows' names: mpvlab/results/flow_ids.py, without
    pandas and numpy (their imports alone were ~0.5 CPU-s of a run's fixed cost, issue 36)."""
    from mpvlab.results import flow_ids
    rules = flow_ids.RoleRules(sampler.server_port, flow_ids.preflight_ports(ctx.logs / "apache" / "access.log"))
    spec = ctx.scenario.transport.cc_entry.state
    if spec is None:
        tokens = flow_ids.mptcp_tokens(ctx.data)
        names = {flow_ids.SS_SAMPLES: flow_ids.ss_flow_times(ctx.data / flow_ids.SS_SAMPLES, rules),
                 flow_ids.SCHED_SAMPLES: flow_ids.sched_flow_times(ctx.data / flow_ids.SCHED_SAMPLES, rules)}
        flow_ids.write_flow_index(ctx.data, rules, flow_ids.flow_index(names, tokens))
        return None
    # Here, not at the top: flows brings pandas, which run/warmup.py imports while the network comes up.
    from mpvlab.results import flows
    tokens = flows.mptcp_tokens(ctx.data)
    from mpvlab.cc.registry import KERNEL_BBR_STATE       # the ss samples' columns (also kernel BBR's state)
    series = {"subflows.csv": flows.read_state(ctx.data / "subflows.csv", KERNEL_BBR_STATE, rules, ctx.t0_ns),
              flows.SCHED_SAMPLES: flows.sched_flows(ctx.data / flows.SCHED_SAMPLES, rules)}
    if spec.file not in series:          # kernel BBR's state is the ss samples, read above
        series[spec.file] = flows.read_state(ctx.data / spec.file, spec, rules, ctx.t0_ns)
    rows = series[spec.file]
    log = ctx.logs / "apache" / "access.log"
    activity = flows.flow_activity(ctx.data / "subflows.csv", rules, log, tokens, log.exists())
    view = build(CCStateView, "cc_state", flows.state_view(rows, f"data/{spec.file}", (0.0, float(playback_s or 0.0)),
                                                           tokens, activity).to_json())
    flows.write_flows(ctx.data, rules, series, tokens)
    return view


def summarise(ctx: RunContext, topo: dual_path.DualPath, outcome: Outcome, before: dict[str, dict[str, int]],
              after: dict[str, dict[str, int]], sampler: sampling.Sampler,
              sched: dict[str, Any], steer: dict[str, Any]) -> dict[str, Any]:
    """The network's part of the summary (per-path bytes, scheduler trace) around the workload's own
    part (`outcome.fields`); the run head and the workload's warnings are added by the life cycle
    (lifecycle.py), which also runs the cross-checks (crosschecks.py) over it."""
    sc = ctx.scenario
    per_path: dict[str, dict[str, Any]] = {}
    total = 0
    for p in topo.paths:
        rx = after[p.client_if]["rx_bytes"] - before[p.client_if]["rx_bytes"]
        per_path[p.name] = {"interface": p.client_if, "rx_bytes": rx,
                            "rx_packets": after[p.client_if]["rx_packets"] - before[p.client_if]["rx_packets"]}
        total += rx
    playback_s = outcome.duration_s
    for v in per_path.values():
        v["share"] = round(v["rx_bytes"] / total, 4) if total else 0.0
        v["mean_throughput_bps"] = round(v["rx_bytes"] * 8 / playback_s) if playback_s else None
    view = _scheduler_view(topo, sched)
    quiet = quiet_intervals(ctx.data / "links.csv")
    for p in topo.paths:
        per_path[p.name]["bottleneck"] = queue_view(ctx.data / "queues" / p.name, ctx.queue_rows)
        # When the path stopped and resumed carrying data (outages, handovers, an unused path).
        per_path[p.name]["quiet_intervals_s"] = quiet.get(p.name, [])
        outages = sorted({(a, b) for d in (sc.paths[p.name].down, sc.paths[p.name].up) for a, b in d.outages})
        if outages:
            per_path[p.name]["outages_configured_s"] = [[a / 1e9, b / 1e9] for a, b in outages]
    if ctx.scenario.workload_kind.transport == "udp":
        # No MPTCP connection to trace: the interface counters are checked against the datagrams the
        # workload's own receiver read instead (udp_wire_check, run by crosschecks.py).
        for v in per_path.values():
            v["payload_bytes_handed"] = None
        return _body(ctx, sc, outcome, total, per_path, [], {"path_switches": None, "decisions": None,
                     "definition": None}, steer, sampler, playback_s)
    for name, v in per_path.items():
        v["payload_bytes_handed"] = view["bytes_handed"][name]
    subflows = build_list(Subflow, "subflows",
                          [{"local": k[0], "peer": k[1], "cc": v} for k, v in sorted(sampler.subflows_seen.items())])
    expected_cc = ctx.extra_prov["cc"]["kernel_name"]
    check_subflows(sc, subflows, expected_cc, per_path)
    return _body(ctx, sc, outcome, total, per_path, subflows, view, steer, sampler, playback_s)


def _body(ctx: RunContext, sc: Any, outcome: Outcome, total: int, per_path: dict[str, dict[str, Any]],
          subflows: list[dict[str, Any]], view: dict[str, Any], steer: dict[str, Any],
          sampler: sampling.Sampler, playback_s: float | None) -> dict[str, Any]:
    cc_state = cc_state_view(ctx, sampler, playback_s)
    return {
        "scheduler": sc.transport.scheduler,
        **outcome.fields,
        "bytes_total": total,
        "paths": per_path,
        "subflows": subflows,
        "path_switches": view["path_switches"],
        "steering": _steering_view(steer),
        "scheduler_decisions": view["decisions"],
        "path_switch_definition": view["definition"],
        "cross_checks": {},         # filled by the cross-checks (crosschecks.py) at the run's end
        "warnings": [],
        "sampler_errors": sampler.errors,
        "cc_state": cc_state,
    }


UDP_OVERHEAD = 14 + 20 + 8   # Ethernet, IPv4, UDP headers: what the interface counts beyond the UDP payload
UDP_OTHER_PACKETS = 20       # ARP, IPv6 neighbour/router solicitation the client's interface may see too
# … and per neighbour-reachability cycle: UDP confirms no neighbour, so the client's entry for its router
# and the router's for the client go stale after base_reachable_time (30 s, drawn from 15 … 45 s) and
# each is re-probed by one unicast ARP request or reply arriving at the client; the router's IPv6
# router solicitations back off (4, 8, 16 … s: tcpdump on a viewer's interface, 28 s: 3 of them and
# 1 ARP reply). A 5 min competition run saw 23 other packets.
NEIGH_MIN_REACHABLE_S = 15.0
NEIGH_PACKETS_PER_CYCLE = 2


def udp_other_packets_allowed(window_s: float) -> int:
    """Packets other than the workload's datagrams the client's interface may receive in `window_s`."""
    return UDP_OTHER_PACKETS + NEIGH_PACKETS_PER_CYCLE * math.ceil(max(window_s, 0.0) / NEIGH_MIN_REACHABLE_S)


def udp_wire_check(per_path: dict[str, dict[str, Any]], wire: dict[str, int], window_s: float) -> dict[str, Any]:
    """The client interface's receive counters (read `window_s` apart) against what the workload's
    receiver read from its UDP socket: every datagram crossed the interface once with 42 bytes of
    headers, and little else did (udp_other_packets_allowed other packets, of at most 1 % of the bytes)."""
    (name, v), = per_path.items()
    dgrams, payload = wire.get("udp_datagrams", 0), wire.get("udp_payload_bytes", 0)
    expected = payload + dgrams * UDP_OVERHEAD
    extra_pkts, extra_bytes = v["rx_packets"] - dgrams, v["rx_bytes"] - expected
    allowed = udp_other_packets_allowed(window_s)
    ok = dgrams > 0 and 0 <= extra_pkts <= allowed and 0 <= extra_bytes <= 0.01 * expected
    return {f"bytes_{name}_interface_vs_udp_socket": {
        "interface_rx_bytes": v["rx_bytes"], "interface_rx_packets": v["rx_packets"],
        "socket_datagrams": dgrams, "socket_udp_payload_bytes": payload, "expected_interface_bytes": expected,
        "other_packets": extra_pkts, "other_bytes": extra_bytes, "other_packets_allowed": allowed,
        "tolerance": f"0 ≤ other packets ≤ {UDP_OTHER_PACKETS} + {NEIGH_PACKETS_PER_CYCLE} per "
                     f"{NEIGH_MIN_REACHABLE_S:g} s of the {window_s:.1f} s window, 0 ≤ other bytes ≤ 1 %", "ok": ok}}
