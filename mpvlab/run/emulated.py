"""Emulated dual-path and dumbbell runs: Mininet nodes, one router per path (tbf + delay lines),
MPTCP with one subflow per path, Apache, the player, the BPF scheduler trace and queue samplers."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable

from links.emulator import DirectionHandle, DirectionPlan, apply_direction
import collectors
import schedulers
from collectors import qdiscstat
from core import hoststeal, naming, proc
from mpvlab import fidelity, sampling, transport
from topologies import dual_path
from core.errors import RunFailed
from mpvlab.run.context import RunContext
from mpvlab.run import liveness
from mpvlab.run.views import summarise
from mpvlab.run.workloads.base import Ends
from mpvlab.run.workloads.registry import WORKLOADS
from mpvlab.run.steps import (
    NO_FIDELITY_PROBE, mptcp_view, read_json, record_delay_stats, record_fidelity, schedule_for, setup_cc,
    wait_for_t0,
)




def execute(ctx: RunContext) -> dict[str, Any]:
    """The run of an emulated dual-path or dumbbell scenario, whatever its workload (workloads/)."""
    sc, phase = ctx.scenario, ctx.opts.progress
    run_started = time.monotonic()
    workload = WORKLOADS[sc.workload.kind]()
    workload.prepare(ctx)

    with contextlib.ExitStack() as stack:
        # Run time zero is fixed before the links come up, ahead of the probes, so the delay lines
        # start on the same clock the workload and samplers use; the workload's client starts at t0.
        lead_s = (sc.fidelity.probe_duration / 1e9 + 4.0) if sc.fidelity.probe else 2.0
        net = bring_up_network(ctx, stack, lead_s)
        topo, schedules, check_links = net.topo, net.schedules, net.check_links
        ends = Ends(topo.server.ns, topo.client.ns, topo.server_addr, net.cc_name, net.server_env)

        if sc.fidelity.probe:
            phase("fidelity probes")
            fid = fidelity.run_probes(topo, sc, schedules, ctx.t0_ns, ctx.logs)
            check_links()
        else:
            fid = dict(NO_FIDELITY_PROBE)
        record_fidelity(ctx, fid)

        workload.serve(ctx, stack, ends)

        phase("waiting for time zero")
        late_ms = wait_for_t0(ctx, check_links)

        phase(workload.progress(ctx))
        sampler = sampling.Sampler(ctx.t0_ns, topo.client.pid, {p.name: p.client_if for p in topo.paths},
                                   topo.server.ns, workload.port, ctx.data, sc.observe.sample_hz)
        trace_dir = ctx.data / "schedtrace"
        trace = contextlib.ExitStack()
        stack.enter_context(trace)
        trace_proc = trace.enter_context(
            collectors.trace_scheduler(topo.server.ns.name, trace_dir, ctx.t0_ns, sc.observe.sample_hz))
        ctx.ledger.add_proc(proc.ProcRef.of(trace_proc.pid, "schedtrace"))
        # Bottleneck queues and interface counters of every router, on the same t0 grid.
        for p in topo.paths:
            qp = trace.enter_context(qdiscstat.sample_queues(p.router.ns.name, ctx.data / "queues" / p.name,
                                                              ctx.t0_ns, sc.observe.sample_hz))
            ctx.ledger.add_proc(proc.ProcRef.of(qp.pid, f"qdiscstat {p.name}"))
        sched = trace.enter_context(schedulers.start_scheduler(
            sc.transport.scheduler, sc.transport.scheduler_params, topo.server.ns.name, ctx.data / "scheduler",
            ctx.t0_ns, announce=transport.announce_addresses(topo, sc)))
        if sched.pid is not None:
            ctx.ledger.add_proc(proc.ProcRef.of(sched.pid, f"scheduler {sc.transport.scheduler}"))
        counters_before = sampling.read_net_dev(topo.client.pid)
        mib_ends = {"server": topo.server.pid, "client": topo.client.pid}
        mib_before = {end: sampling.read_mptcp_mib(pid) for end, pid in mib_ends.items()}
        workload.start(ctx, stack, ends)
        watch = liveness.Watch.for_run(ctx, topo.nodes)   # issue 15/23 hook: components and node shells
        sampler.start()
        stack.callback(sampler.stop)
        ctx.extra_prov["player_start_late_ms"] = round(late_ms, 3)
        # CPU time the hypervisor took while the workload ran, recorded beside the results.
        with hoststeal.StealMeter() as playing_steal:
            while workload.running():
                check_links()
                watch.check()                              # issue 15/23 hook
                workload.check(ctx)
                phase(workload.progress(ctx))
                time.sleep(0.2)
        watch.check()   # issue 15/23 hook: a death that ended the workload is named, not its symptom
        counters_after = sampling.read_net_dev(topo.client.pid)
        mib = {end: sampling.mptcp_mib_delta(mib_before[end], sampling.read_mptcp_mib(pid))
               for end, pid in mib_ends.items()}
        sampler.stop()
        trace.close()  # stops the collectors and the scheduler, which write their summaries
        trace_summary = collectors.load_summary(trace_dir)
        ctx.extra_prov["scheduler"] = read_json(ctx.data / "scheduler" / "scheduler.json")

        phase("checks")
        outcome = workload.finish(ctx)
        summary = summarise(ctx, topo, outcome, counters_before, counters_after, sampler, fid,
                            trace_summary, sched.summary)
        summary["mptcp"] = mptcp_view(mib)
        summary["host_steal_during_playback"] = playing_steal.window.as_dict()
        summary["run_wall_s"] = round(time.monotonic() - run_started, 2)
    return summary


@dataclass
class Network:
    """The emulated network of a run, up and configured: what the rest of the run stands on."""

    topo: dual_path.DualPath
    handles: list[DirectionHandle]
    schedules: dict[str, fidelity.PathSchedules]
    cc_name: str
    check_links: Callable[[], None]
    server_env: dict[str, str]


def bring_up_network(ctx: RunContext, stack: contextlib.ExitStack, lead_s: float) -> Network:
    """Topology, host settings, congestion control and link emulation, each undone by `stack`.
    Run time zero is set to now + lead_s."""
    sc, phase = ctx.scenario, ctx.opts.progress
    if sc.topology.kind == "shared-bottleneck":
        raise RunFailed("topology shared-bottleneck is brought up by mpvlab.run.shared (runs only; "
                        "`mpvlab shell` does not support it yet)")
    phase("topology")
    topo = dual_path.build(list(sc.paths), sc.topology.server_addressing, ctx.run_id, ctx.ledger.add_netns)
    stack.callback(dual_path.teardown, topo)
    ctx.extra_prov["topology"] = {
        "kind": sc.topology.kind, "server_addr": topo.server_addr, "server_addressing": topo.addressing,
        "netns": [n.ns.name for n in topo.nodes],
        "paths": {p.name: {"client_if": p.client_if, "client_addr": p.client_addr, "server_addr": p.server_addr,
                           "router": p.router.ns.name} for p in topo.paths},
    }
    ctx.extra_prov["hosts"] = transport.configure_hosts(topo, sc)
    ctx.extra_prov["offloads"] = transport.set_offloads(topo, sc.hosts.offloads)

    phase("congestion control")
    cc_name = setup_cc(ctx, stack)
    ctx.extra_prov["server_routes"] = transport.set_server_cc(topo, cc_name)
    ctx.extra_prov["cc"] = {"requested": sc.transport.cc, "kernel_name": cc_name,
                            "params": dict(sc.transport.cc_params)}
    # The scheduler's server-side needs (userspace path manager for the steering policies) must be
    # in place before any MPTCP connection; it returns environment for Apache (send-buffer bound).
    sched_params = schedulers.parse_params(sc.transport.scheduler, sc.transport.scheduler_params)
    server_env = schedulers.prepare_server(sc.transport.scheduler, sched_params, topo.server.ns.name)

    ctx.t0_ns = time.monotonic_ns() + int(lead_s * 1e9)

    phase("links")
    ctx.extra_prov["link_backend"] = {"shaping": "tbf", "delay_and_loss": "nfqueue-delayline",
                                      "netem_available": _netem_available(topo.paths[0].router.ns)}
    schedules: dict[str, fidelity.PathSchedules] = {}
    handles: list[DirectionHandle] = []
    for p in topo.paths:
        spec = sc.paths[p.name]
        sched = fidelity.PathSchedules(down=schedule_for(spec.down, ctx.scenario_file.parent),
                                       up=schedule_for(spec.up, ctx.scenario_file.parent))
        schedules[p.name] = sched
        letter = "ab"[p.index]
        for direction, d, in_if, out_if, qnum in (
            ("down", spec.down, p.router_server_if, p.router_client_if, 0),
            ("up", spec.up, p.router_client_if, p.router_server_if, 1),
        ):
            plan = DirectionPlan(p.name, direction, p.router.ns, in_if, out_if,
                                 naming.ifname(ctx.run_id, f"{letter}i{qnum}"), qnum, d,
                                 getattr(sched, direction), seed=sc.seed * 1000 + p.index * 2 + qnum,
                                 base_dir=ctx.scenario_file.parent)
            h = apply_direction(plan, ctx.logs, ctx.t0_ns, ctx.ledger.add_proc)
            handles.append(h)
            stack.callback(record_delay_stats, ctx, h)
    ctx.extra_prov["links"] = {
        f"{h.plan.label}": {"router": h.plan.router.name, "in_if": h.plan.in_if, "out_if": h.plan.out_if,
                            "order": h.plan.spec.order, "burst_bytes": h.plan.spec.effective_burst(),
                            "limit_bytes": h.plan.spec.buffer.to_bytes(),
                            "delay_backend": "nfqueue-delayline" if h.plan.needs_delay_line else "none",
                            "schedule": h.plan.schedule.to_text().splitlines()[1:],
                            "qdiscs": h.plan.router.run(["tc", "qdisc", "show"]).stdout.strip().splitlines()}
        for h in handles
    }

    def check_links() -> None:
        for h in handles:
            if not h.alive():
                raise RunFailed(h.describe_death() + " — the path lost all packets from then on")

    return Network(topo, handles, schedules, cc_name, check_links, server_env)


def _netem_available(ns: Any) -> bool:
    """Recorded in provenance: the delay line is used either way (one backend, one behaviour), but a
    reader comparing with netem-based testbeds should know whether netem could have been used."""
    cp = ns.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"], check=False)
    if cp.returncode == 0:
        ns.run(["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    return cp.returncode == 0
