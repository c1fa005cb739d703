"""A run on the shared-bottleneck topology: N players and optional cross traffic behind ONE router.

    server ── edge ── router [the scenario's one path: tbf + delay line] ── client0 … clientN-1
                                                                         └─ cross (bulk TCP, VoIP probe)

The run's life cycle is the one of every kind (lifecycle.py); this module is the kind's backend:
topology, congestion control and the link (bring_up), the pre-run check from client0 alone on the
link, the collectors (queue counters, samplers, the cross traffic of cross.py — all started at t0)
and the kind's summary. The workload runs one client in every clientI; the rtp workload (live video
over UDP) runs with one client, its viewer, and its summary is summarise_udp's: the `rtp` record, the
viewer's own interface counters (Ends' Client.iface) checked against the datagrams its socket read,
the bottleneck and the cross traffic.

Transport: every player is an MPTCP connection with ONE subflow (mptcpize, as in dual-path runs;
MPTCP limits 0 and no endpoints, so no joins). One code path for server and player, and the
per-subflow collectors see the players like any other run. The cross traffic is plain TCP (iperf3,
the chosen CC set per socket) and UDP (the probe), sent by the server to the cross host.

Results: summary["players"][clientI] holds each player's QoE, summary["aggregate"] their totals;
data/clientI/links.csv the client's interface counters; data/subflows.csv the server's sockets;
data/queues/shared/ the router's qdisc counters; data/cross/voip-probe.csv one row per probe packet
(queuing delay = owd − min owd, and the study's clock-free d(i)); summary["cross_traffic"] the bulk
flow's goodput and the probe's delivered rate, loss and queuing-delay percentiles.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from mpvlab.collectors import qdiscstat
from mpvlab.links import ecn
from mpvlab.links import path as link_path
from mpvlab.links.emulator import FRAME_BYTES, DirectionHandle
from mpvlab.core import proc
from mpvlab.results import delaywindows, metrics
from mpvlab.runner import fidelity, runzero, sampling
from mpvlab.runner import steps
from mpvlab.runner.cross import CrossTraffic
from mpvlab.core.netns import Netns
from mpvlab.core.errors import RunFailed
from mpvlab.runner.context import RunContext
from mpvlab.runner.workloads.base import Client, Ends, Outcome
from mpvlab.topologies import shared_bottleneck as sb
from mpvlab.topologies.mptcp import set_route_cc
from mpvlab.runner.crosschecks import CheckState
from mpvlab.runner.views import cc_state_view
from mpvlab.results.summary import (BottleneckRecord, ClientCounters, Competition, CrossTraffic as CrossTrafficPart,
                                    EcnMarks, SharedAggregate, SharedPlayer, Subflow, build, build_each, build_list)
from mpvlab.runner.workloads.video import dash_view, network_discards

PATH_LABEL = "shared"       # the delay lines' and queue folder's label (the path's name is the user's)
TCP_PAYLOAD = 1448          # per full frame: 1500 − IP 20 − TCP 20 − timestamps 12


# ---------------------------------------------------------------------------------------------
# What fidelity.run_probes needs of a topology (server, client, paths): client0 stands for the path.


@dataclass
class _ProbePath:
    name: str
    client_addr: str
    server_addr: str


@dataclass
class _ProbeView:
    server: Any
    client: Any
    server_addr: str
    paths: list[_ProbePath]

    def server_addrs(self) -> list[str]:
        return [self.server_addr]


def _tbf_counters(ns: Netns, dev: str) -> dict[str, int]:
    qs = [q for q in json.loads(ns.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev]).stdout) if q["kind"] == "tbf"]
    if len(qs) != 1:
        raise RunFailed(f"expected one tbf on {dev}, found {len(qs)}")
    return {"bytes": int(qs[0]["bytes"]), "packets": int(qs[0]["packets"]), "drops": int(qs[0]["drops"])}


def _configure_mptcp(topo: sb.SharedBottleneck) -> dict[str, Any]:
    """MPTCP on, and no second subflow anywhere: limits 0, no endpoints (one subflow per player)."""
    record: dict[str, Any] = {}
    for ns in [topo.server.ns] + [c.node.ns for c in topo.clients]:
        ns.sysctl("net.mptcp.enabled", "1")
        ns.run(["ip", "mptcp", "limits", "set", "subflow", "0", "add_addr_accepted", "0"])
        record[ns.name] = {"net.mptcp.enabled": ns.read_sysctl("net.mptcp.enabled"),
                           "mptcp_limits": ns.run(["ip", "mptcp", "limits", "show"]).stdout.strip()}
    return record


def bring_up(ctx: RunContext, stack: contextlib.ExitStack) -> SharedNetwork:
    """Topology (N clients, a cross host when there is cross traffic), MPTCP with one subflow per
    player, the players' congestion control, the bottleneck link; run time zero provisional (now) until `ready` fixes it."""
    sc, phase = ctx.scenario, ctx.opts.progress
    (pname, spec), = sc.paths.items()
    cross_spec = sc.cross_traffic
    phase("topology")
    h = sc.hosts
    if (kind := sc.topology_kind).builder is None or (build := kind.build()) is not sb.build:
        raise RunFailed(f"topology {kind.name}: its builder {kind.builder} does not make the shared-bottleneck "
                        f"network the shared backend drives (mpvlab/topologies/registry.py, mpvlab/runner/kinds.py)")
    topo: sb.SharedBottleneck = build(ctx.run_id, ctx.ledger.add_netns, sc.n_clients,
                    cross=cross_spec is not None and (cross_spec.bulk is not None or cross_spec.voip is not None),
                    hosts=sb.HostSettings(h.client_tcp_rmem, h.server_tcp_wmem, h.tcp_no_metrics_save, h.offloads))
    stack.callback(sb.teardown, topo)
    ctx.extra_prov["topology"] = {
        "kind": sc.topology.kind, "clients": sc.n_clients, "server_addr": topo.server_addr,
        "netns": list(topo.netns_names), "router_server_if": topo.router_server_if,
        "leaves": {lf.role: {"if": lf.if_, "addr": lf.addr, "router_if": lf.router_if} for lf in topo.leaves}}
    ctx.extra_prov["hosts"] = {**topo.host_record, "mptcp": _configure_mptcp(topo)}
    if ecn.wanted([spec.down, spec.up]):
        # ECN negotiated by the endpoints: the server and every leaf (players and cross hosts)
        ctx.extra_prov["hosts"]["ecn"] = ecn.enable_ecn([topo.server.ns] + [lf.node.ns for lf in topo.leaves])

    phase("congestion control")
    cc_name = steps.setup_cc(ctx, stack)
    # The players' routes carry the congestion control (as dual-path); the cross host's route stays
    # plain: iperf3 sets its own per socket.
    ctx.extra_prov["server_routes"] = set_route_cc(
        topo.server.ns, [(lf.subnet, topo.server_gw_addr, topo.server_if) for lf in topo.clients], cc_name)
    ctx.extra_prov["cc"] = steps.cc_record(sc, cc_name)

    ctx.t0_ns = time.monotonic_ns()      # provisional: the delay lines start on it; ready() moves it

    phase("links")
    sched = fidelity.PathSchedules(down=link_path.schedule_for(spec.down, ctx.scenario_file.parent),
                                   up=link_path.schedule_for(spec.up, ctx.scenario_file.parent))
    # The topology's own plans: the one router's receiver-side wildcard and its order rules (sb.down_plan);
    # seeds and the trace folder as links.path.path_plans gives every other backend's path 0.
    plans = (topo.down_plan(spec.down, sched.down, seed=link_path.direction_seed(sc.seed, 0, 0), queue_num=0,
                            base_dir=ctx.scenario_file.parent),
             topo.up_plan(spec.up, sched.up, seed=link_path.direction_seed(sc.seed, 0, 1), queue_num=1,
                          base_dir=ctx.scenario_file.parent))
    link = link_path.apply_path(plans, ctx.logs, ctx.t0_ns, ctx.ledger.add_proc, data_dir=ctx.data,
                                on_applied=lambda hd: stack.callback(link_path.record_stats, ctx.extra_prov, hd))
    handles: list[DirectionHandle] = link.handles
    # Each direction's record carries its router's qdiscs, as in the other backends (one router here).
    qdiscs = topo.router.ns.run(["tc", "qdisc", "show"]).stdout.strip().splitlines()
    ctx.extra_prov["links"] = {label: {**rec, "qdiscs": qdiscs}
                               for label, rec in link.record(path=pname, router=topo.router.ns.name).items()}
    ifb = plans[0].ifb if spec.down.rate is not None else None
    ends = Ends(topo.server.ns, tuple(Client(lf.role, lf.node.ns, lf.addr, lf.if_) for lf in topo.clients),
                topo.server_addr, cc_name)
    return SharedNetwork(topo, pname, sched, handles, ifb, ends)


@dataclass
class SharedNetwork:
    topo: sb.SharedBottleneck
    path_name: str                      # the scenario's one path
    schedules: fidelity.PathSchedules
    handles: list[DirectionHandle]
    ifb: str | None                     # the downlink's tbf device (None: no rate limit)
    ends: Ends
    collectors: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    samplers: list[sampling.Sampler] = field(default_factory=list)
    cross: CrossTraffic | None = None
    run_s: float = 0.0                  # the longest the workload may take: the bulk flow's default length
    leaves_before: dict[str, dict[str, int]] = field(default_factory=dict)
    leaves_after: dict[str, dict[str, int]] = field(default_factory=dict)
    tbf_before: dict[str, int] | None = None
    tbf_after: dict[str, int] | None = None
    t_start: int = 0
    t_end: int = 0
    ecn_window: ecn.WorkloadWindow | None = None   # ecn_mark: the markers' counts over the workload

    @property
    def nodes(self) -> list[Any]:
        return list(self.topo.nodes)

    def check(self) -> None:
        for hd in self.handles:
            if not hd.alive():
                raise RunFailed(hd.describe_death() + " — the bottleneck lost all packets from then on")

    def precheck(self, ctx: RunContext) -> dict[str, Any]:
        c0 = self.topo.clients[0]
        view = _ProbeView(self.topo.server, c0.node, self.topo.server_addr,
                          [_ProbePath(self.path_name, c0.addr, self.topo.server_addr)])
        fid = fidelity.run_probes(view, ctx.scenario, {self.path_name: self.schedules},
                                  ctx.t0_ns, ctx.logs, handles=self.handles)
        fid["probed_from"] = c0.role
        return fid

    def ready(self, ctx: RunContext) -> None:
        ctx.t0_ns = runzero.fix(self.handles, ctx.t0_ns, ctx.extra_prov)

    def judge(self, ctx: RunContext, fid: dict[str, Any], summary: dict[str, Any]) -> None:
        fidelity.finish_summary(ctx.scenario, ctx, {self.path_name: self.schedules}, fid, summary)

    def before_t0(self, ctx: RunContext, stack: contextlib.ExitStack) -> None:
        pass                            # no packet capture on this kind (scenario.py refuses observe.pcap)

    def start_collectors(self, ctx: RunContext, stack: contextlib.ExitStack, port: int, max_run_s: float) -> None:
        sc, topo = ctx.scenario, self.topo
        spec = sc.paths[self.path_name]
        cross_spec = sc.cross_traffic
        # A full queue's drain time plus the one-way delays: what the probe receiver waits at the end.
        drain_s = (spec.down.buffer.to_bytes(FRAME_BYTES) * 8 / spec.down.rate if spec.down.rate else 0.0) \
            + (self.schedules.down.max_delay_ns + self.schedules.up.max_delay_ns) / 1e9 + 0.3
        (ctx.data / "cross").mkdir(parents=True, exist_ok=True)
        self.cross = CrossTraffic(topo, ctx.data / "cross", ctx, cross_spec.bulk if cross_spec else None,
                                  cross_spec.voip if cross_spec else None, drain_s)
        stack.callback(self.cross.stop)
        stack.enter_context(self.collectors)
        qp = self.collectors.enter_context(qdiscstat.sample_queues(
            topo.router.ns.name, ctx.data / "queues" / PATH_LABEL, ctx.t0_ns, sc.observe.sample_hz))
        ctx.ledger.add_proc(proc.ProcRef.of(qp.pid, "qdiscstat shared"))
        self.samplers = [sampling.Sampler(ctx.t0_ns, topo.clients[0].node.pid, {}, topo.server.ns, port, ctx.data,
                                          sc.observe.sample_hz, links=False)]
        for lf in topo.clients:
            (ctx.data / lf.role).mkdir(parents=True, exist_ok=True)
            self.samplers.append(sampling.Sampler(ctx.t0_ns, lf.node.pid, {self.path_name: lf.if_}, topo.server.ns,
                                                  port, ctx.data / lf.role, sc.observe.sample_hz, subflows=False))
        self.leaves_before = {lf.role: sampling.read_net_dev(lf.node.pid)[lf.if_] for lf in topo.leaves}
        self.tbf_before = _tbf_counters(topo.router.ns, self.ifb) if self.ifb else None
        self.ecn_window = ecn.WorkloadWindow(self.handles)
        self.ecn_window.start()
        self.t_start = time.monotonic_ns()
        self.run_s = max_run_s
        self.cross.start_voip()
        if self.cross.bulk_due():
            self.cross.start_bulk(self.run_s)
        for s in self.samplers:
            s.start()
            stack.callback(s.stop)

    def poll(self, ctx: RunContext) -> None:
        assert self.cross is not None
        if self.cross.bulk_due():
            remaining = self.run_s - (time.monotonic_ns() - self.t_start) / 1e9
            self.cross.start_bulk(max(1.0, remaining))
        self.cross.poll()

    def stop_collectors(self, ctx: RunContext) -> None:
        assert self.cross is not None
        topo = self.topo
        self.t_end = time.monotonic_ns()
        self.leaves_after = {lf.role: sampling.read_net_dev(lf.node.pid)[lf.if_] for lf in topo.leaves}
        self.tbf_after = _tbf_counters(topo.router.ns, self.ifb) if self.ifb else None
        if self.ecn_window is not None:
            self.ecn_window.stop()
        self.cross.stop()
        for s in self.samplers:
            s.stop()
        self.collectors.close()

    def summarise(self, ctx: RunContext, outcome: Outcome, fid: dict[str, Any]) -> dict[str, Any]:
        assert self.cross is not None
        if ctx.scenario.workload_kind.transport == "udp":
            body = summarise_udp(ctx, self.ends, outcome, self.bottleneck_view(ctx, outcome),
                                 self.cross.checked_result(), self.leaves_before, self.leaves_after, self.samplers)
        else:
            body = summarise(ctx, self.topo, outcome, self.leaves_before, self.leaves_after, self.tbf_before,
                             self.tbf_after, (self.t_end - self.t_start) / 1e9, self.samplers,
                             self.cross.checked_result())
            # every flow named; the CC's model over the players' flows only (mpvlab/results/flows.py)
            body["cc_state"] = cc_state_view(ctx, self.samplers[0], (self.t_end - ctx.t0_ns) / 1e9)
        body["ecn_marks"] = self.ecn_window.view() if self.ecn_window else None
        if body["ecn_marks"] is not None:
            build_each(EcnMarks, "ecn_marks", body["ecn_marks"])
        return body

    def check_state(self, ctx: RunContext, outcome: Outcome, summary: dict[str, Any]) -> CheckState:
        """No MPTCP trace or capture on this kind; a UDP workload's viewer interface against its socket."""
        udp = ((summary["clients"], summary["bottleneck"]["window_s"])
               if ctx.scenario.workload_kind.transport == "udp" else None)
        return CheckState(ctx, outcome, udp=udp, schedules={self.path_name: self.schedules})

    def bottleneck_view(self, ctx: RunContext, outcome: Outcome) -> dict[str, Any]:
        """The link for a UDP workload: its receiver's payload is what the socket read (outcome.wire)."""
        assert self.cross is not None
        leaf_rx = {r: self.leaves_after[r]["rx_bytes"] - self.leaves_before[r]["rx_bytes"] for r in self.leaves_before}
        return bottleneck_view(ctx, leaf_rx, self.tbf_before, self.tbf_after, (self.t_end - self.t_start) / 1e9,
                               (outcome.wire or {}).get("udp_payload_bytes", 0), self.cross.result)


def summarise_udp(ctx: RunContext, ends: Ends, outcome: Outcome, bottleneck: dict[str, Any], cross: dict[str, Any],
                  before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
                  samplers: list[sampling.Sampler]) -> dict[str, Any]:
    """The kind's part of the summary for a UDP workload (rtp: one viewer in client0): its own record,
    the bottleneck and the cross traffic, and the viewer's interface counters checked against the
    datagrams its receiver read (views.udp_wire_check) — its own interface, as the bottleneck's also
    carries the cross traffic."""
    (viewer,) = ends.clients
    assert viewer.iface is not None
    counters = build_each(ClientCounters, "clients", {viewer.role: {
        "interface": viewer.iface, "rx_bytes": after[viewer.role]["rx_bytes"] - before[viewer.role]["rx_bytes"],
        "rx_packets": after[viewer.role]["rx_packets"] - before[viewer.role]["rx_packets"]}})
    bulk = cross.get("bulk")
    build(CrossTrafficPart, "cross_traffic", cross)
    return {
        "transport": f"udp, {ctx.scenario.workload.kind} to one client ({viewer.role})",
        **outcome.fields,
        "competition": competition_view(bottleneck["rate_bps"], outcome.fields.get("rtp") or {}, bulk),
        "clients": counters,
        "bottleneck": bottleneck,
        "cross_traffic": cross,
        "cross_checks": {},         # filled by the cross-checks (crosschecks.py) at the run's end
        "subflows": [],
        "warnings": [],
        "sampler_errors": [e for s in samplers for e in s.errors],
    }


def competition_view(link_bps: int | None, rtp: dict[str, Any], bulk: dict[str, Any] | None) -> dict[str, Any] | None:
    """Both flows' rates over the bulk flow's interval (null when no bulk flow ran): the viewer's 1 s
    received bins that lie wholly inside it (a bin half inside would mix in the stream alone) and the
    bulk flow's goodput over the same interval."""
    if not bulk or not bulk.get("seconds") or bulk.get("goodput_bps") is None:
        return None
    lo, hi = bulk["start_s"], bulk["start_s"] + bulk["seconds"]
    bins = [x["received_bps"] for x in rtp.get("received_per_second", [])
            if x["second"] >= math.ceil(lo) and x["second"] + 1 <= hi]
    rtp_bps = round(sum(bins) / len(bins)) if bins else None
    total = (rtp_bps or 0) + bulk["goodput_bps"]
    return build(Competition, "competition", {
        "link_bps": link_bps, "interval_s": [lo, round(hi, 3)], "rtp_bins": len(bins),
        "rtp_received_bps": rtp_bps, "bulk_goodput_bps": bulk["goodput_bps"],
        "rtp_share": round(rtp_bps / total, 4) if rtp_bps is not None and total else None,
        "definition": "over the bulk flow's interval: the mean of the viewer's whole 1 s received bins "
                      "inside it (RTP bytes, UDP payload) and the bulk flow's goodput (TCP payload)"})


def bottleneck_view(ctx: RunContext, leaf_rx: dict[str, int], tbf_before: dict[str, int] | None,
                    tbf_after: dict[str, int] | None, window_s: float, workload_payload: int,
                    cross: dict[str, Any]) -> dict[str, Any]:
    """The shared link over the collectors' window: its configuration, what each leaf received, the
    tbf's counters and utilisation, and the payload every flow got beside the ideal."""
    (pname, spec), = ctx.scenario.paths.items()
    bottleneck: dict[str, Any] = {
        "path": pname, "rate_bps": spec.down.rate, "limit_bytes": spec.down.buffer.to_bytes(FRAME_BYTES),
        "burst_bytes": spec.down.effective_burst(), "window_s": round(window_s, 3),
        "leaf_rx_bytes": leaf_rx, "leaf_rx_bytes_total": sum(leaf_rx.values()),
        "queue": steps.queue_view(ctx.data / "queues" / PATH_LABEL, ctx.queue_rows),
    }
    if tbf_before and tbf_after:
        tbf = {k: tbf_after[k] - tbf_before[k] for k in tbf_before}
        bottleneck["tbf"] = tbf
        assert spec.down.rate is not None
        bottleneck["utilisation"] = round(tbf["bytes"] * 8 / (spec.down.rate * window_s), 4)
    # Payload the bottleneck carried in the window: the workload's (players' HTTP bodies, RTP
    # datagrams), the bulk flow's goodput and the probe's UDP payload (an upper bound: rate × window
    # × 1448/1514 for full TCP frames).
    payload = workload_payload
    if "bulk" in cross:
        payload += cross["bulk"].get("bytes_received") or 0
    if "voip" in cross:
        payload += cross["voip"]["received"] * (cross["voip"]["packet_size"] - 28)
    bottleneck["payload_bytes"] = payload
    if spec.down.rate:
        bottleneck["payload_ideal_bytes"] = round(spec.down.rate / 8 * window_s * TCP_PAYLOAD / FRAME_BYTES)
    return build(BottleneckRecord, "bottleneck", bottleneck)


PLAYER_KEYS = ("underflows", "underflow_total_s", "picture_discards", "picture_discards_no_underflow",
               "frames_rendered_late", "frames_accounted", "underflow_episodes", "frames_expected",
               "frames_rendered", "startup_delay_s", "stall_ratio", "playback_s", "bytes_received",
               "download_complete", "cpu")


def player_start(configured_ns: int, ps: dict[str, Any]) -> dict[str, Any]:
    """A player's configured start (topology.client_stagger), its actual one (its own `start` event,
    already on the run's clock) and the window its QoE covers."""
    actual, end = ps.get("t_start"), ps.get("t_eos")
    return {"configured_s": configured_ns / 1e9,
            "actual_s": round(float(actual), 6) if isinstance(actual, (int, float)) else None,
            "qoe_window_s": ([round(float(actual), 6), round(float(end), 6)]
                             if isinstance(actual, (int, float)) and isinstance(end, (int, float)) else None)}


def _sum(vals: list[Any]) -> Any:
    return sum(vals) if vals and all(isinstance(v, (int, float)) for v in vals) else None


def summarise(ctx: RunContext, topo: sb.SharedBottleneck, outcome: Outcome,
              before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
              tbf_before: dict[str, int] | None, tbf_after: dict[str, int] | None, window_s: float,
              samplers: list[sampling.Sampler], cross: dict[str, Any]) -> dict[str, Any]:
    """The kind's part of the summary: each player's QoE, their aggregate, the bottleneck's counters
    and the cross traffic (the run head and the workload's warnings come from lifecycle.py)."""
    summaries = outcome.per_client
    leaf_bytes = {role: {"rx_bytes": after[role]["rx_bytes"] - before[role]["rx_bytes"],
                         "rx_packets": after[role]["rx_packets"] - before[role]["rx_packets"]} for role in before}
    players: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    configured = dict(zip([lf.role for lf in topo.clients], ctx.scenario.client_starts_ns))
    for role, ps in summaries.items():
        v: dict[str, Any] = {k: ps.get(k) for k in PLAYER_KEYS}
        v["start"] = player_start(configured.get(role, 0), ps)
        v["picture_discards_network"] = network_discards(ps.get("picture_discards"),
                                                         ps.get("picture_discards_no_underflow"))
        v["dash"] = dash_view(ps) if ps.get("dash") else None
        v["interface_rx_bytes"] = leaf_bytes[role]["rx_bytes"]
        v["mean_throughput_bps"] = (round(ps["bytes_received"] * 8 / ps["playback_s"])
                                    if ps.get("playback_s") and ps.get("bytes_received") else None)
        players[role] = build(SharedPlayer, f"players.{role}", v)
    thr = [v["mean_throughput_bps"] for v in players.values() if v["mean_throughput_bps"]]
    stalls = [v["stall_ratio"] for v in players.values() if v["stall_ratio"] is not None]
    startups = [v["startup_delay_s"] for v in players.values() if v["startup_delay_s"] is not None]
    def dash_mean(key: str) -> float | None:
        # the study's per-run QoE: defined only when every player ran DASH and reported it
        vals = [(v["dash"] or {}).get(key) for v in players.values()]
        nums = [x for x in vals if isinstance(x, (int, float))]
        return round(sum(nums) / len(nums), 6) if vals and len(nums) == len(vals) else None

    def dash_all(key: str) -> list[float] | None:
        # every player's value, when at least two players ran DASH and all reported it (fairness is
        # about how players differ: one player has none)
        vals = [(v["dash"] or {}).get(key) for v in players.values()]
        nums = [float(x) for x in vals if isinstance(x, (int, float))]
        return nums if len(vals) >= 2 and len(nums) == len(vals) else None

    rates, stall_rates = dash_all("bitrate_avg_bps"), dash_all("stall_rate")
    aggregate = {
        "players": len(players),
        **{f"{k}_mean": dash_mean(k) for k in ("quality_avg", "bitrate_avg_bps", "bitrate_switches", "stall_rate",
                                               "rebuffer_ratio")},
        "bitrate_fairness_jain": round(metrics.jain_index(rates), 6) if rates and any(rates) else None,
        "bitrate_avg_bps_min": min(rates) if rates else None,
        "bitrate_avg_bps_max": max(rates) if rates else None,
        "stall_rate_max": max(stall_rates) if stall_rates else None,
        "frames_accounted_all": all(v["frames_accounted"] for v in players.values()),
        **{k: _sum([v[k] for v in players.values()]) for k in (
            "frames_expected", "frames_rendered", "picture_discards", "underflows", "underflow_total_s",
            "bytes_received", "interface_rx_bytes")},
        "stall_ratio_mean": round(sum(stalls) / len(stalls), 6) if stalls else None,
        "stall_ratio_max": max(stalls) if stalls else None,
        "startup_delay_s_mean": round(sum(startups) / len(startups), 6) if startups else None,
        # Jain's index of the players' mean throughputs: 1 = equal shares, 1/N = one player took all
        # (metrics.jain_index, the report's one formula; undefined, so None, when every player got 0)
        "throughput_fairness_jain": (round(metrics.jain_index(thr), 4)
                                     if len(thr) == len(players) and thr and any(thr) else None),
    }
    build(SharedAggregate, "aggregate", aggregate)
    voip = cross.get("voip")
    if voip and voip.get("csv"):
        # the probe's delays over named windows (whole run, steady state, SABRE's modes): mpvlab/results/delaywindows.py
        with open(voip["csv"], newline="") as fh:
            rows = list(csv.DictReader(fh))
        voip["windows"] = delaywindows.windows(rows, ctx.t0_ns, summaries, ctx.scenario.playout_buffer_ns / 1e9)
    build(CrossTrafficPart, "cross_traffic", cross)
    bottleneck = bottleneck_view(ctx, {r: b["rx_bytes"] for r, b in leaf_bytes.items()}, tbf_before, tbf_after,
                                 window_s, _sum([v["bytes_received"] for v in players.values()]) or 0, cross)
    seen: dict[tuple[str, str], str] = {}
    for s in samplers:
        seen.update(s.subflows_seen)
    subflows = build_list(Subflow, "subflows", [{"local": k[0], "peer": k[1], "cc": v} for k, v in sorted(seen.items())])
    expected_cc = ctx.extra_prov["cc"]["kernel_name"]
    wrong = [s for s in subflows if s["cc"] != expected_cc]
    if wrong:
        raise RunFailed(f"player subflows not running {expected_cc}: {wrong}")
    peers = {s["peer"].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:") for s in subflows}
    missing = [lf.role for lf in topo.clients if lf.addr not in peers]
    if missing:
        raise RunFailed(f"no video connection to {missing} was seen on the server (subflows: {subflows})")
    return {
        "transport": "mptcp, one subflow per player",
        "video_length_s": outcome.fields["video_length_s"],
        "player_mode": outcome.fields["player_mode"],
        "http": outcome.fields["http"],
        "players": players,
        "aggregate": aggregate,
        "bottleneck": bottleneck,
        "cross_traffic": cross,
        "subflows": subflows,
        "warnings": warnings,
        "sampler_errors": [e for s in samplers for e in s.errors],
    }
