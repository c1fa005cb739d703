"""A run on the shared-bottleneck topology: N players and optional cross traffic behind ONE router.

    server ── edge ── router [the scenario's one path: tbf + delay line] ── client0 … clientN-1
                                                                         └─ cross (bulk TCP, VoIP probe)

Same life cycle as a dual-path run (mpvlab/run/emulated.py): content → topology → congestion control →
links → fidelity probe (from client0, alone on the link) → Apache → time zero → players, cross
traffic and samplers, all started at t0 → checks → summary. Everything started is in the run's
ledger and is stopped by the ExitStack on success, error or Ctrl-C; the namespaces go last.

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
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors import qdiscstat
from links.emulator import FRAME_BYTES, DirectionHandle, apply_direction
from core import hoststeal, proc
from mpvlab import fidelity, sampling, server
from mpvlab.run import liveness, steps
from core.netns import Netns
from core.errors import RunFailed
from mpvlab.run.context import RunContext
from mpvlab.scenario import BulkTrafficSpec, VoipTrafficSpec
from topologies import cross_traffic as ct
from topologies import shared_bottleneck as sb
from mpvlab.run.workloads.video import dash_view

PATH_LABEL = "shared"       # the delay lines' and queue folder's label (the path's name is the user's)
VOIP_PORT = 4000
BULK_PORT = 5301            # not the fidelity probe's 5201
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


# ---------------------------------------------------------------------------------------------
# Cross traffic, started at t0 (bulk: at t0 + start) and stopped exactly once.


@dataclass
class CrossTraffic:
    topo: sb.SharedBottleneck
    workdir: Path
    ctx: RunContext
    bulk_spec: BulkTrafficSpec | None
    voip_spec: VoipTrafficSpec | None
    drain_s: float
    probe: ct.Probe | None = None
    bulk: ct.BulkFlow | None = None
    bulk_t_start: int = 0
    bulk_cc_seen: str | None = None
    bulk_bytes_last: tuple[int, int] = (0, 0)   # (t, bytes_received) last read while the flow ran
    result: dict[str, Any] = field(default_factory=dict)
    stopped: bool = False

    @property
    def cross(self) -> sb.Leaf:
        assert self.topo.cross is not None
        return self.topo.cross

    def start_voip(self) -> None:
        if self.voip_spec is None:
            return
        v = self.voip_spec
        self.probe = ct.start_probe(self.topo.server.ns, self.cross.node.ns, self.cross.addr, VOIP_PORT,
                                    self.workdir, "probe", self.ctx.ledger.add_proc, rate_bps=float(v.rate),
                                    ip_size=v.packet_size)

    def bulk_due(self) -> bool:
        return (self.bulk_spec is not None and self.bulk is None
                and time.monotonic_ns() >= self.ctx.t0_ns + self.bulk_spec.start)

    def start_bulk(self, run_s: float) -> None:
        assert self.bulk_spec is not None
        dur_s = self.bulk_spec.duration / 1e9 if self.bulk_spec.duration is not None else run_s
        self.bulk_t_start = time.monotonic_ns()
        self.bulk = ct.start_bulk(self.topo.server.ns, self.cross.node.ns, self.cross.addr, BULK_PORT,
                                  self.bulk_spec.cc, dur_s, self.workdir, "bulk", self.ctx.ledger.add_proc)

    def poll(self) -> None:
        """While the bulk flow runs: its receiver's byte count (kept, as the connection's counters
        vanish when iperf3 ends) and, once, the congestion control its data socket really uses."""
        if self.bulk is None or self.bulk.client is None or self.bulk.client.poll() is not None:
            return
        self.bulk_bytes_last = ct.bulk_bytes_received(self.cross.node.ns)
        if self.bulk_cc_seen is None and time.monotonic_ns() - self.bulk_t_start > 1e9:
            self.bulk_cc_seen = ct.bulk_cc(self.topo.server.ns, self.cross.addr)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.bulk is not None:
            self.poll()
            info = ct.stop_bulk(self.bulk)
            if self.bulk_spec is not None and self.bulk_spec.duration is None:
                # Ended by the run when the last player finished: iperf3 then reports an "interrupt"
                # and no totals; the goodput below is the receiving kernel's count.
                info["stopped_by_run"] = True
            t_last, got = self.bulk_bytes_last
            secs = (t_last - self.bulk_t_start) / 1e9 if t_last else 0.0
            # iperf3 ended by itself (bulk.duration): its own count is the complete one, over its own
            # receive interval (which runs past the sender's end by the queue's drain time).
            if info.get("client_exit") == 0 and self.bulk_spec and self.bulk_spec.duration is not None:
                got, secs = _iperf3_received(self.bulk.client_log) or (got, secs)
            self.result["bulk"] = {
                "cc_requested": self.bulk.cc, "cc_seen": self.bulk_cc_seen, "iperf3": info,
                "start_s": round((self.bulk_t_start - self.ctx.t0_ns) / 1e9, 3), "seconds": round(secs, 3),
                "bytes_received": got, "goodput_bps": round(got * 8 / secs) if secs > 0 else None}
        elif self.bulk_spec is not None:
            self.result["bulk"] = {"cc_requested": self.bulk_spec.cc, "started": False,
                                   "note": "the players finished before bulk.start"}
        if self.probe is not None:
            res = ct.stop_probe(self.probe, drain_s=self.drain_s)
            self.result["voip"] = _voip_view(res, self.probe, self.voip_spec)


def _iperf3_received(client_log: Path) -> tuple[int, float] | None:
    """(bytes, seconds) the iperf3 receiver counted, from the client's end-of-test JSON."""
    try:
        r = json.loads(client_log.read_text())["end"]["sum_received"]
        return int(r["bytes"]), float(r["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _quantile(xs: list[float], q: float) -> float | None:
    """Nearest-rank quantile (no interpolation: every value reported was measured)."""
    if not xs:
        return None
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, math.ceil(q * len(ys)) - 1))]


def _voip_view(res: ct.ProbeResult, probe: ct.Probe, spec: VoipTrafficSpec | None) -> dict[str, Any]:
    assert spec is not None
    send = json.loads(probe.files["send.json"].read_text())
    send_s = (int(send["t_last_ns"]) - int(send["t0_ns"])) / 1e9
    qd = [r["queuing_delay_ns"] / 1e6 for r in res.rows]
    ds = [r["d_study_ns"] / 1e6 for r in res.rows]
    owd_min = min((r["owd_ns"] for r in res.rows), default=None)

    def pcts(xs: list[float]) -> dict[str, float | None]:
        return {k: (None if (v := _quantile(xs, q)) is None else round(v, 3))
                for k, q in (("p50", .5), ("p95", .95), ("p99", .99), ("max", 1.0))}

    return {
        "rate_configured_bps": spec.rate, "packet_size": spec.packet_size, "csv": str(res.csv),
        "sent": res.sent, "received": res.received, "lost": res.lost, "duplicates": res.duplicates,
        "loss_rate": round(res.loss_rate, 5), "send_s": round(send_s, 3),
        # IP bytes delivered per second of sending: what the receiver got of the configured rate
        "delivered_bps": round(res.received * spec.packet_size * 8 / send_s) if send_s > 0 else None,
        "owd_min_ms": None if owd_min is None else round(owd_min / 1e6, 3),
        "queuing_delay_ms": pcts(qd),      # owd − min owd (all namespaces share CLOCK_MONOTONIC)
        "rx_timestamp": res.rx_timestamp, "user_stamped": res.user_stamped,
        "d_study_ms": pcts(ds),            # docs/studies.md §4: relative to the first packet, no clock sync
    }


# ---------------------------------------------------------------------------------------------


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


def _set_server_cc(topo: sb.SharedBottleneck, cc_name: str) -> list[str]:
    """The players' congestion control via the server's routes to the client subnets (as dual-path);
    the cross host's route stays plain: iperf3 sets its own per socket."""
    s = topo.server.ns
    for lf in topo.clients:
        s.run(["ip", "route", "replace", lf.subnet, "via", topo.server_gw_addr, "dev", topo.server_if,
               "congctl", cc_name])
    routes = s.run(["ip", "route", "show"]).stdout.strip().splitlines()
    for lf in topo.clients:
        line = next((r for r in routes if r.startswith(lf.subnet)), "")
        if f"congctl {cc_name}" not in line:
            raise RunFailed(f"server route to {lf.subnet} did not take congctl {cc_name}: {line!r}")
    return routes


def execute(ctx: RunContext) -> dict[str, Any]:
    sc, phase = ctx.scenario, ctx.opts.progress
    run_started = time.monotonic()
    (pname, spec), = sc.paths.items()
    cross_spec = sc.cross_traffic
    bulk_spec = cross_spec.bulk if cross_spec else None
    voip_spec = cross_spec.voip if cross_spec else None

    phase("content")
    video = steps.ensure_content(sc)
    ctx.extra_prov["content"] = steps.content_provenance(video)

    with contextlib.ExitStack() as stack:
        lead_s = (sc.fidelity.probe_duration / 1e9 + 4.0) if sc.fidelity.probe else 2.0
        phase("topology")
        h = sc.hosts
        topo = sb.build(ctx.run_id, ctx.ledger.add_netns, sc.n_clients,
                        cross=bulk_spec is not None or voip_spec is not None,
                        hosts=sb.HostSettings(h.client_tcp_rmem, h.server_tcp_wmem, h.tcp_no_metrics_save, h.offloads))
        stack.callback(sb.teardown, topo)
        ctx.extra_prov["topology"] = {
            "kind": sc.topology.kind, "clients": sc.n_clients, "server_addr": topo.server_addr,
            "netns": list(topo.netns_names), "router_server_if": topo.router_server_if,
            "leaves": {lf.role: {"if": lf.if_, "addr": lf.addr, "router_if": lf.router_if} for lf in topo.leaves}}
        ctx.extra_prov["hosts"] = {**topo.host_record, "mptcp": _configure_mptcp(topo)}

        phase("congestion control")
        cc_name = steps.setup_cc(ctx, stack)
        ctx.extra_prov["server_routes"] = _set_server_cc(topo, cc_name)
        ctx.extra_prov["cc"] = {"requested": sc.transport.cc, "kernel_name": cc_name,
                                "params": dict(sc.transport.cc_params)}

        ctx.t0_ns = time.monotonic_ns() + int(lead_s * 1e9)

        phase("links")
        sched = fidelity.PathSchedules(down=steps.schedule_for(spec.down, ctx.scenario_file.parent),
                                       up=steps.schedule_for(spec.up, ctx.scenario_file.parent))
        plans = [topo.down_plan(spec.down, sched.down, seed=sc.seed * 1000, queue_num=0),
                 topo.up_plan(spec.up, sched.up, seed=sc.seed * 1000 + 1, queue_num=1)]
        handles: list[DirectionHandle] = []
        for plan in plans:
            hd = apply_direction(plan, ctx.logs, ctx.t0_ns, ctx.ledger.add_proc)
            handles.append(hd)
            stack.callback(steps.record_delay_stats, ctx, hd)
        ctx.extra_prov["links"] = {
            hd.plan.label: {"path": pname, "router": hd.plan.router.name, "in_if": hd.plan.in_if,
                            "out_if": hd.plan.out_if, "order": hd.plan.spec.order,
                            "burst_bytes": hd.plan.spec.effective_burst(),
                            "limit_bytes": hd.plan.spec.buffer.to_bytes(FRAME_BYTES),
                            "delay_backend": "nfqueue-delayline" if hd.plan.needs_delay_line else "none",
                            "schedule": hd.plan.schedule.to_text().splitlines()[1:]}
            for hd in handles}
        ctx.extra_prov["links"]["qdiscs"] = topo.router.ns.run(["tc", "qdisc", "show"]).stdout.strip().splitlines()
        ifb = plans[0].ifb if spec.down.rate is not None else None

        def check_links() -> None:
            for hd in handles:
                if not hd.alive():
                    raise RunFailed(hd.describe_death() + " — the bottleneck lost all packets from then on")

        if sc.fidelity.probe:
            phase("fidelity probe")
            view = _ProbeView(topo.server, topo.clients[0].node, topo.server_addr,
                              [_ProbePath(pname, topo.clients[0].addr, topo.server_addr)])
            fid = fidelity.run_probes(view, sc, {pname: sched}, ctx.t0_ns, ctx.logs)  # type: ignore[arg-type]
            fid["probed_from"] = topo.clients[0].role
            check_links()
        else:
            fid = dict(steps.NO_FIDELITY_PROBE)
        steps.record_fidelity(ctx, fid)

        phase("server")
        apache, video_name, http = steps.start_server(ctx, stack, video, topo.server.ns, cc_name, {},
                                                       topo.server_addr, topo.clients[0].node.ns)
        frames = steps.frames_of(sc)
        timeout_s = sc.video.duration / 1e9 * sc.player.timeout_factor + 30
        # A full queue's drain time plus the one-way delays: what the probe receiver waits at the end.
        drain_s = (spec.down.buffer.to_bytes(FRAME_BYTES) * 8 / spec.down.rate if spec.down.rate else 0.0) \
            + (sched.down.max_delay_ns + sched.up.max_delay_ns) / 1e9 + 0.3
        (ctx.data / "cross").mkdir(parents=True, exist_ok=True)
        xt = CrossTraffic(topo, ctx.data / "cross", ctx, bulk_spec, voip_spec, drain_s)
        stack.callback(xt.stop)

        phase("waiting for time zero")
        late_ms = steps.wait_for_t0(ctx, check_links)

        phase("playing")
        trace = contextlib.ExitStack()
        stack.enter_context(trace)
        qp = trace.enter_context(qdiscstat.sample_queues(topo.router.ns.name, ctx.data / "queues" / PATH_LABEL,
                                                          ctx.t0_ns, sc.observe.sample_hz))
        ctx.ledger.add_proc(proc.ProcRef.of(qp.pid, "qdiscstat shared"))
        samplers = [sampling.Sampler(ctx.t0_ns, topo.clients[0].node.pid, {}, topo.server.ns, http.port, ctx.data,
                                     sc.observe.sample_hz, links=False)]
        for lf in topo.clients:
            (ctx.data / lf.role).mkdir(parents=True, exist_ok=True)
            samplers.append(sampling.Sampler(ctx.t0_ns, lf.node.pid, {pname: lf.if_}, topo.server.ns, http.port,
                                             ctx.data / lf.role, sc.observe.sample_hz, subflows=False))
        leaves_before = {lf.role: sampling.read_net_dev(lf.node.pid)[lf.if_] for lf in topo.leaves}
        tbf_before = _tbf_counters(topo.router.ns, ifb) if ifb else None
        # CPU time the hypervisor took over the bottleneck's measured window (as for dual-path runs).
        playing_steal = hoststeal.StealMeter().start()
        t_start = time.monotonic_ns()
        xt.start_voip()
        if xt.bulk_due():
            xt.start_bulk(timeout_s + 10)
        players: dict[str, tuple[Any, Any]] = {}
        for lf in topo.clients:
            out_dir = ctx.logs / lf.role
            out_dir.mkdir(parents=True, exist_ok=True)
            players[lf.role] = steps.start_player(ctx, lf.node.ns, topo.server_addr, video_name, frames, out_dir,
                                                   http, label=f"player {lf.role}")
            ctx.ledger.add_proc(players[lf.role][1])
        for s in samplers:
            s.start()
            stack.callback(s.stop)
        ctx.extra_prov["player_start_late_ms"] = round(late_ms, 3)
        deadline = time.monotonic() + timeout_s + 10
        watch = liveness.Watch.for_run(ctx, topo.nodes)   # issue 15/23 hook: components and node shells
        while any(p.poll() is None for p, _ in players.values()):
            check_links()
            watch.check()                                  # issue 15/23 hook
            if not apache.alive():
                raise RunFailed(f"apache exited with code {apache.process.returncode} during playback")
            if time.monotonic() > deadline:
                raise RunFailed(f"players did not finish within {timeout_s:.0f} s")
            if xt.bulk_due():
                xt.start_bulk(max(1.0, deadline - time.monotonic()))
            xt.poll()
            running = sum(p.poll() is None for p, _ in players.values())
            phase(f"playing ({(time.monotonic_ns() - ctx.t0_ns) / 1e9:5.1f} s of {sc.video.duration / 1e9:g} s "
                  f"video; {running} of {len(players)} players running)")
            time.sleep(0.2)
        watch.check()   # issue 15/23 hook: a death that ended the players is named, not its symptom
        t_end = time.monotonic_ns()
        leaves_after = {lf.role: sampling.read_net_dev(lf.node.pid)[lf.if_] for lf in topo.leaves}
        tbf_after = _tbf_counters(topo.router.ns, ifb) if ifb else None
        steal = playing_steal.stop()
        xt.stop()
        for s in samplers:
            s.stop()
        trace.close()

        phase("checks")
        summaries: dict[str, dict[str, Any]] = {}
        for role, (p, _ref) in players.items():
            ps = steps.read_json(ctx.logs / role / "player-summary.json")
            if p.returncode != 0:
                reason = ps.get("reason") or ps.get("error") if ps else None
                raise RunFailed(f"player {role} exited with code {p.returncode}: "
                                f"{reason or f'see logs/{role}/player.log'}")
            summaries[role] = ps
        summary = summarise(ctx, topo, summaries, leaves_before, leaves_after, tbf_before, tbf_after,
                             (t_end - t_start) / 1e9, samplers, fid, xt.result)
        # Every player request must have used the scenario's protocol (as for dual-path runs).
        tally = server.tally_access_log(ctx.logs / "apache" / "access.log", http)
        if not tally["ok"]:
            raise RunFailed(f"not every player request used {tally['expected']}"
                                   f"{' over TLS' if http.tls else ''}: {tally}")
        summary["host_steal_during_playback"] = steal.as_dict()
        summary["http"] = {"protocol": http.protocol, "tls": http.tls is not None, "port": http.port,
                           **{k: tally[k] for k in ("requests", "by_protocol", "by_tls_version", "by_cipher")}}
        summary["run_wall_s"] = round(time.monotonic() - run_started, 2)
    return summary


PLAYER_KEYS = ("underflows", "underflow_total_s", "picture_discards", "picture_discards_no_underflow",
               "frames_rendered_late", "frames_accounted", "underflow_episodes", "frames_expected",
               "frames_rendered", "startup_delay_s", "stall_ratio", "playback_s", "bytes_received",
               "download_complete", "cpu")


def _sum(vals: list[Any]) -> Any:
    return sum(vals) if vals and all(isinstance(v, (int, float)) for v in vals) else None


def summarise(ctx: RunContext, topo: sb.SharedBottleneck, summaries: dict[str, dict[str, Any]],
               before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
               tbf_before: dict[str, int] | None, tbf_after: dict[str, int] | None, window_s: float,
               samplers: list[sampling.Sampler], fid: dict[str, Any], cross: dict[str, Any]) -> dict[str, Any]:
    sc = ctx.scenario
    (pname, spec), = sc.paths.items()
    leaf_bytes = {role: {"rx_bytes": after[role]["rx_bytes"] - before[role]["rx_bytes"],
                         "rx_packets": after[role]["rx_packets"] - before[role]["rx_packets"]} for role in before}
    players: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    for role, ps in summaries.items():
        v: dict[str, Any] = {k: ps.get(k) for k in PLAYER_KEYS}
        v["dash"] = dash_view(ps) if ps.get("dash") else None
        v["interface_rx_bytes"] = leaf_bytes[role]["rx_bytes"]
        v["mean_throughput_bps"] = (round(ps["bytes_received"] * 8 / ps["playback_s"])
                                    if ps.get("playback_s") and ps.get("bytes_received") else None)
        players[role] = v
        if ps.get("picture_discards_no_underflow"):
            warnings.append(f"{role}: {ps['picture_discards_no_underflow']} picture discard(s) while its playout "
                            "buffer had data: the CPU was late, not the network (set player.cpu)")
    thr = [v["mean_throughput_bps"] for v in players.values() if v["mean_throughput_bps"]]
    stalls = [v["stall_ratio"] for v in players.values() if v["stall_ratio"] is not None]
    startups = [v["startup_delay_s"] for v in players.values() if v["startup_delay_s"] is not None]
    aggregate = {
        "players": len(players),
        "frames_accounted_all": all(v["frames_accounted"] for v in players.values()),
        **{k: _sum([v[k] for v in players.values()]) for k in (
            "frames_expected", "frames_rendered", "picture_discards", "underflows", "underflow_total_s",
            "bytes_received", "interface_rx_bytes")},
        "stall_ratio_mean": round(sum(stalls) / len(stalls), 6) if stalls else None,
        "stall_ratio_max": max(stalls) if stalls else None,
        "startup_delay_s_mean": round(sum(startups) / len(startups), 6) if startups else None,
        # Jain's index of the players' mean throughputs: 1 = equal shares, 1/N = one player took all
        "throughput_fairness_jain": (round(sum(thr) ** 2 / (len(thr) * sum(x * x for x in thr)), 4)
                                     if len(thr) == len(players) and thr else None),
    }
    bottleneck: dict[str, Any] = {
        "path": pname, "rate_bps": spec.down.rate, "limit_bytes": spec.down.buffer.to_bytes(FRAME_BYTES),
        "burst_bytes": spec.down.effective_burst(), "window_s": round(window_s, 3),
        "leaf_rx_bytes": {r: b["rx_bytes"] for r, b in leaf_bytes.items()},
        "leaf_rx_bytes_total": sum(b["rx_bytes"] for b in leaf_bytes.values()),
        "queue": steps.queue_view(ctx.data / "queues" / PATH_LABEL),
    }
    if tbf_before and tbf_after:
        tbf = {k: tbf_after[k] - tbf_before[k] for k in tbf_before}
        bottleneck["tbf"] = tbf
        assert spec.down.rate is not None
        bottleneck["utilisation"] = round(tbf["bytes"] * 8 / (spec.down.rate * window_s), 4)
    # Payload the bottleneck carried in the window: the players' HTTP bodies, the bulk flow's goodput
    # and the probe's UDP payload (an upper bound: rate × window × 1448/1514 for full TCP frames).
    payload = _sum([v["bytes_received"] for v in players.values()]) or 0
    if "bulk" in cross:
        payload += cross["bulk"].get("bytes_received") or 0
    if "voip" in cross:
        payload += cross["voip"]["received"] * (cross["voip"]["packet_size"] - 28)
    bottleneck["payload_bytes"] = payload
    if spec.down.rate:
        bottleneck["payload_ideal_bytes"] = round(spec.down.rate / 8 * window_s * TCP_PAYLOAD / FRAME_BYTES)
    seen: dict[tuple[str, str], str] = {}
    for s in samplers:
        seen.update(s.subflows_seen)
    subflows = [{"local": k[0], "peer": k[1], "cc": v} for k, v in sorted(seen.items())]
    expected_cc = ctx.extra_prov["cc"]["kernel_name"]
    wrong = [s for s in subflows if s["cc"] != expected_cc]
    if wrong:
        raise RunFailed(f"player subflows not running {expected_cc}: {wrong}")
    peers = {s["peer"].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:") for s in subflows}
    missing = [lf.role for lf in topo.clients if lf.addr not in peers]
    if missing:
        raise RunFailed(f"no video connection to {missing} was seen on the server (subflows: {subflows})")
    bulk = cross.get("bulk")
    if bulk and bulk.get("cc_seen") not in (None, bulk["cc_requested"]):
        raise RunFailed(f"bulk flow ran {bulk['cc_seen']}, not {bulk['cc_requested']}")
    return {
        "run_id": ctx.run_id,
        "scenario": sc.name,
        "topology": sc.topology.kind,
        "workload": sc.workload.kind,
        "cc": sc.transport.cc,
        "transport": "mptcp, one subflow per player",
        "seed": sc.seed,
        "video_length_s": sc.video.duration / 1e9,
        "player_mode": sc.player.mode,
        "players": players,
        "aggregate": aggregate,
        "bottleneck": bottleneck,
        "cross_traffic": cross,
        "subflows": subflows,
        "warnings": warnings,
        "fidelity_ok": fid.get("ok"),
        "fidelity_warnings": fid.get("warnings", []),
        "sampler_errors": [e for s in samplers for e in s.errors],
    }
