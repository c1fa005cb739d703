"""The dual-path and dumbbell topology kinds: Mininet nodes, one router per path (tbf + delay lines),
MPTCP with one subflow per path; the collectors are the BPF scheduler trace, the steering scheduler,
the queue samplers of every router and the client/subflow sampler. The run's steps around them are
in lifecycle.py."""

from __future__ import annotations

import contextlib
import csv
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from mpvlab.links import ecn
from mpvlab.links import path as link_path
from mpvlab.links.emulator import DirectionHandle
import mpvlab.collectors as collectors
import mpvlab.schedulers as schedulers
from mpvlab.collectors import qdiscstat
from mpvlab.core import proc
from mpvlab.results import delayphases
from mpvlab.results.summary_parts.base import build, build_each
from mpvlab.results.summary_parts.network import EcnMarks, PathRecord
from mpvlab.results.summary_parts.observe import BbrDiagRecord
from mpvlab.runner import fidelity, runzero, sampling, transport
from mpvlab.topologies import dual_path
from mpvlab.core.errors import RunFailed
from mpvlab.runner import capture
from mpvlab.runner.context import RunContext
from mpvlab.runner.crosschecks import CheckState
from mpvlab.runner.views import summarise
from mpvlab.runner.workloads.base import Client, Ends, Outcome
from mpvlab.runner.steps import cc_record, mptcp_view, read_json, setup_cc


@dataclass
class EmulatedNetwork:
    """The emulated network of a run, up and configured: what the rest of the run stands on."""

    topo: dual_path.DualPath
    handles: list[DirectionHandle]
    schedules: dict[str, fidelity.PathSchedules]
    cc_name: str
    server_env: dict[str, str]
    ends: Ends
    # filled by start_collectors / stop_collectors
    sampler: sampling.Sampler | None = None
    bbr_diag: subprocess.Popen[bytes] | None = None     # observe.bbr_modes_hz: the INET_DIAG reader
    collectors: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    sched: Any = None
    counters_before: dict[str, dict[str, int]] = field(default_factory=dict)
    counters_after: dict[str, dict[str, int]] = field(default_factory=dict)
    mib_before: dict[str, dict[str, int]] = field(default_factory=dict)
    mib: dict[str, dict[str, int]] = field(default_factory=dict)
    trace_summary: dict[str, Any] = field(default_factory=dict)
    captures: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    cap: Any = None                     # observe.pcap's capture (mpvlab/runner/capture.py), or None
    ecn_window: ecn.WorkloadWindow | None = None   # ecn_mark: the markers' counts over the workload

    @property
    def nodes(self) -> list[Any]:
        return list(self.topo.nodes)

    def check_links(self) -> None:
        for h in self.handles:
            if not h.alive():
                raise RunFailed(h.describe_death() + " — the path lost all packets from then on")

    check = check_links

    def precheck(self, ctx: RunContext) -> dict[str, Any]:
        return fidelity.run_probes(self.topo, ctx.scenario, self.schedules, ctx.t0_ns, ctx.logs, handles=self.handles)

    def ready(self, ctx: RunContext) -> None:
        ctx.t0_ns = runzero.fix(self.handles, ctx.t0_ns, ctx.extra_prov)

    def judge(self, ctx: RunContext, fid: dict[str, Any], summary: dict[str, Any]) -> None:
        fidelity.finish_summary(ctx.scenario, ctx, self.schedules, fid, summary)

    def before_t0(self, ctx: RunContext, stack: contextlib.ExitStack) -> None:
        # observe.pcap: tcpdumps from before t0 until after the workload (issues 22/23).
        stack.enter_context(self.captures)
        self.cap = capture.start(ctx, self.captures, self.topo)

    def _mib_ends(self) -> dict[str, int]:
        return {"server": self.topo.server.pid, "client": self.topo.client.pid}

    def start_collectors(self, ctx: RunContext, stack: contextlib.ExitStack, port: int, max_run_s: float) -> None:
        sc, topo = ctx.scenario, self.topo
        self.sampler = sampling.Sampler(ctx.t0_ns, topo.client.pid, {p.name: p.client_if for p in topo.paths},
                                        topo.server.ns, port, ctx.data, sc.observe.sample_hz)
        trace = self.collectors
        stack.enter_context(trace)
        trace_proc = trace.enter_context(
            collectors.trace_scheduler(topo.server.ns.name, ctx.data / "schedtrace", ctx.t0_ns, sc.observe.sample_hz))
        ctx.ledger.add_proc(proc.ProcRef.of(trace_proc.pid, "schedtrace"))
        # Bottleneck queues and interface counters of every router, on the same t0 grid.
        for p in topo.paths:
            qp = trace.enter_context(qdiscstat.sample_queues(p.router.ns.name, ctx.data / "queues" / p.name,
                                                              ctx.t0_ns, sc.observe.sample_hz))
            ctx.ledger.add_proc(proc.ProcRef.of(qp.pid, f"qdiscstat {p.name}"))
        self.sched = trace.enter_context(schedulers.start_scheduler(
            sc.transport.scheduler, sc.transport.scheduler_params, topo.server.ns.name, ctx.data / "scheduler",
            ctx.t0_ns, announce=transport.announce_addresses(topo, sc)))
        if self.sched.pid is not None:
            ctx.ledger.add_proc(proc.ProcRef.of(self.sched.pid, f"scheduler {sc.transport.scheduler}"))
        self.counters_before = sampling.read_net_dev(topo.client.pid)
        self.ecn_window = ecn.WorkloadWindow(self.handles)
        self.ecn_window.start()
        self.mib_before = {end: sampling.read_mptcp_mib(pid) for end, pid in self._mib_ends().items()}
        if sc.observe.bbr_modes_hz is not None:
            self._start_bbr_diag(ctx, stack, port, sc.observe.bbr_modes_hz)
        self.sampler.start()
        stack.callback(self.sampler.stop)

    def _start_bbr_diag(self, ctx: RunContext, stack: contextlib.ExitStack, port: int, hz: int) -> None:
        """observe.bbr_modes_hz: mpvlab/cc/bbr_diag.py in the server's namespace, on the server's port."""
        log = (ctx.logs / "bbr_diag.log").open("wb")
        stack.callback(log.close)
        p = self.topo.server.ns.popen([sys.executable, "-m", "mpvlab.cc.bbr_diag", "--out", str(ctx.data / "bbr_diag.csv"),
                                       "--port", str(port), "--period-ms", f"{1000 / hz:g}"], stdout=log, stderr=log)
        ctx.ledger.add_proc(proc.ProcRef.of(p.pid, "bbr_diag"))
        self.bbr_diag = p
        stack.callback(self._stop_bbr_diag)

    def _stop_bbr_diag(self) -> None:
        if self.bbr_diag is not None and self.bbr_diag.poll() is None:
            self.bbr_diag.terminate()          # SIGTERM: it finishes the sample, writes its `# end` line
            try:
                self.bbr_diag.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.bbr_diag.kill()
                self.bbr_diag.wait()

    def poll(self, ctx: RunContext) -> None:
        pass

    def stop_collectors(self, ctx: RunContext) -> None:
        assert self.sampler is not None
        self.counters_after = sampling.read_net_dev(self.topo.client.pid)
        if self.ecn_window is not None:
            self.ecn_window.stop()
        self.mib = {end: sampling.mptcp_mib_delta(self.mib_before[end], sampling.read_mptcp_mib(pid))
                    for end, pid in self._mib_ends().items()}
        self.sampler.stop()
        self._stop_bbr_diag()
        self.captures.close()    # stop the captures (their counters are read first)
        self.collectors.close()  # stops the collectors and the scheduler, which write their summaries
        self.trace_summary = collectors.load_summary(ctx.data / "schedtrace")
        ctx.extra_prov["scheduler"] = read_json(ctx.data / "scheduler" / "scheduler.json")

    def _rtt_by_phase(self, ctx: RunContext, paths: dict[str, dict[str, Any]]) -> None:
        """paths.<name>.rtt_by_phase: the RTT each path had per level of its delay schedules
        (mpvlab/results/delayphases.py), from the subflow samples."""
        f = ctx.data / "subflows.csv"
        if not f.exists():
            return
        with f.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        for p in self.topo.paths:
            if p.name not in paths:
                continue
            samples = delayphases.path_srtt_samples(rows, p.client_addr)
            end_s = max((t for t, _ in samples), default=0.0)
            sched = self.schedules[p.name]
            paths[p.name]["rtt_by_phase"] = delayphases.rtt_by_phase(sched.down, sched.up, end_s, samples)

    def summarise(self, ctx: RunContext, outcome: Outcome, fid: dict[str, Any]) -> dict[str, Any]:
        assert self.sampler is not None
        body = summarise(ctx, self.topo, outcome, self.counters_before, self.counters_after, self.sampler,
                         self.trace_summary, self.sched.summary)
        body["mptcp"] = mptcp_view(self.mib, self.trace_summary)
        self._rtt_by_phase(ctx, body["paths"])
        body["ecn_marks"] = self.ecn_window.view() if self.ecn_window else None
        if body["ecn_marks"] is not None:
            build_each(EcnMarks, "ecn_marks", body["ecn_marks"])
        if ctx.scenario.observe.bbr_modes_hz is not None:
            from mpvlab.cc import bbr_diag
            from mpvlab.runner.workloads.video import video_requests_by_connection
            f = ctx.data / "bbr_diag.csv"
            if not f.exists() or self.bbr_diag is None or self.bbr_diag.returncode != 0:
                raise RunFailed(f"observe.bbr_modes_hz: the INET_DIAG reader failed (exit "
                                f"{None if self.bbr_diag is None else self.bbr_diag.returncode}; logs/bbr_diag.log)")
            access_log = ctx.logs / "apache" / "access.log"
            requests = video_requests_by_connection(access_log) if access_log.exists() else None
            body["bbr_diag"] = build(BbrDiagRecord, "bbr_diag", bbr_diag.summarize(f, ctx.t0_ns, requests))
        # observe.pcap: capture record, wire-order path switches (its byte cross-checks: check_state)
        pcap_view = capture.view(self.topo, self.cap, self.trace_summary)
        body["warnings"] += pcap_view.pop("warnings")
        body.update(pcap_view)
        # the parts completed here (their records are filled by several steps above); cross_checks
        # are made and typed at the run's end, in one place (crosschecks.apply)
        build_each(PathRecord, "paths", body["paths"])
        return body

    def check_state(self, ctx: RunContext, outcome: Outcome, summary: dict[str, Any]) -> CheckState:
        assert self.sampler is not None
        udp = None
        if ctx.scenario.workload_kind.transport == "udp":
            # the counters' window is the stream's plus a few seconds either side (views.UDP_OTHER_PACKETS)
            udp = ({p.name: {"rx_bytes": self.counters_after[p.client_if]["rx_bytes"]
                             - self.counters_before[p.client_if]["rx_bytes"],
                             "rx_packets": self.counters_after[p.client_if]["rx_packets"]
                             - self.counters_before[p.client_if]["rx_packets"]} for p in self.topo.paths},
                   outcome.duration_s or 0.0)
        tcp = udp is None           # the MPTCP trace and subflow checks
        return CheckState(ctx, outcome, topo=self.topo if tcp else None, sched=self.trace_summary if tcp else None,
                          cap=self.cap, counters=capture.counters_of(ctx.data, self.sampler), udp=udp,
                          schedules=self.schedules)


def bring_up_network(ctx: RunContext, stack: contextlib.ExitStack) -> EmulatedNetwork:
    """Topology, host settings, congestion control and link emulation, each undone by `stack`.
    Run time zero is provisional (now) until `ready` fixes it (runzero.py)."""
    sc, phase = ctx.scenario, ctx.opts.progress
    # The kind's registry entry names its builder; this backend drives the DualPath that
    # mpvlab/topologies/dual_path.py builds, so an entry naming another builder is a registry mistake.
    if (kind := sc.topology_kind).builder is None or (build := kind.build()) is not dual_path.build:
        raise RunFailed(f"topology {kind.name}: its builder {kind.builder} does not make the dual-path network "
                        f"the emulated backend drives (mpvlab/topologies/registry.py, mpvlab/runner/kinds.py)")
    phase("topology")
    topo: dual_path.DualPath = build(list(sc.paths), sc.topology.server_addressing, ctx.run_id, ctx.ledger.add_netns)
    stack.callback(dual_path.teardown, topo)
    ctx.extra_prov["topology"] = {
        "kind": sc.topology.kind, "server_addr": topo.server_addr, "server_addressing": topo.addressing,
        "netns": [n.ns.name for n in topo.nodes],
        "paths": {p.name: {"client_if": p.client_if, "client_addr": p.client_addr, "server_addr": p.server_addr,
                           "router": p.router.ns.name} for p in topo.paths},
    }
    ctx.extra_prov["hosts"] = transport.configure_hosts(topo, sc)
    if ecn.wanted([d for p in sc.paths.values() for d in (p.down, p.up)]):
        # ECN negotiated by the endpoints (the routers forward, their setting does not matter)
        ctx.extra_prov["hosts"]["ecn"] = ecn.enable_ecn([topo.server.ns, topo.client.ns])
    ctx.extra_prov["offloads"] = transport.set_offloads(topo, sc.hosts.offloads)

    phase("congestion control")
    cc_name = setup_cc(ctx, stack)
    ctx.extra_prov["server_routes"] = transport.set_server_cc(topo, cc_name)
    ctx.extra_prov["cc"] = cc_record(sc, cc_name)
    # The scheduler's server-side needs (userspace path manager for the steering policies) must be
    # in place before any MPTCP connection; it returns environment for Apache (send-buffer bound).
    sched_params = schedulers.parse_params(sc.transport.scheduler, sc.transport.scheduler_params)
    server_env = schedulers.prepare_server(sc.transport.scheduler, sched_params, topo.server.ns.name)

    ctx.t0_ns = time.monotonic_ns()      # provisional: the delay lines start on it; ready() moves it

    phase("links")
    ctx.extra_prov["link_backend"] = {"shaping": "tbf", "delay_and_loss": "nfqueue-delayline",
                                      "netem_available": _netem_available(topo.paths[0].router.ns)}
    schedules: dict[str, fidelity.PathSchedules] = {}
    links: list[tuple[dual_path.PathPlumbing, link_path.PathLink]] = []
    for p in topo.paths:
        spec = sc.paths[p.name]
        sched = fidelity.PathSchedules(down=link_path.schedule_for(spec.down, ctx.scenario_file.parent),
                                       up=link_path.schedule_for(spec.up, ctx.scenario_file.parent))
        schedules[p.name] = sched
        plans = link_path.path_plans(p.router.ns, p.name, p.index, server_if=p.router_server_if,
                                     client_if=p.router_client_if, down=spec.down, up=spec.up,
                                     schedules=(sched.down, sched.up), ifbs=link_path.ifb_names(ctx.run_id, p.index),
                                     seed=sc.seed, base_dir=ctx.scenario_file.parent)
        links.append((p, link_path.apply_path(
            plans, ctx.logs, ctx.t0_ns, ctx.ledger.add_proc, data_dir=ctx.data,
            on_applied=lambda h: stack.callback(link_path.record_stats, ctx.extra_prov, h))))
    ctx.extra_prov["links"] = {}
    for p, link in links:    # once every path is up, each with its router's qdiscs as they stand
        qdiscs = p.router.ns.run(["tc", "qdisc", "show"]).stdout.strip().splitlines()
        ctx.extra_prov["links"].update({label: {**rec, "qdiscs": qdiscs}
                                        for label, rec in link.record(router=p.router.ns.name).items()})
    handles = [h for _, link in links for h in link.handles]

    first = topo.paths[0]
    ends = Ends(topo.server.ns, (Client("client", topo.client.ns, first.client_addr, first.client_if),),
                topo.server_addr, cc_name, server_env)
    return EmulatedNetwork(topo, handles, schedules, cc_name, server_env, ends)


def _netem_available(ns: Any) -> bool:
    """Recorded in provenance: the delay line is used either way (one backend, one behaviour), but a
    reader comparing with netem-based testbeds should know whether netem could have been used."""
    cp = ns.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"], check=False)
    if cp.returncode == 0:
        ns.run(["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    return cp.returncode == 0
