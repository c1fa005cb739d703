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
import json
import time
from dataclasses import dataclass, field
from typing import Any

from mpvlab.collectors import qdiscstat
from mpvlab.links import ecn
from mpvlab.links import path as link_path
from mpvlab.links.emulator import DirectionHandle
from mpvlab.core import proc
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
from mpvlab.results.summary import EcnMarks, build_each
# competition_view: re-exported, the tests reach it as shared.competition_view
from mpvlab.runner.shared_summary import (PATH_LABEL, bottleneck_view, competition_view,  # noqa: F401
                                          summarise, summarise_udp)

# The kind's summary (summarise, summarise_udp and the views they build) is in shared_summary.py;
# PATH_LABEL lives there too, as the summary reads the queue folder it names.


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
        queue_bytes = spec.down.queue_byte_bound()
        assert queue_bytes is not None, "the scenario refuses merged_packets on this topology (no byte bound)"
        drain_s = (queue_bytes * 8 / spec.down.rate if spec.down.rate else 0.0) \
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
