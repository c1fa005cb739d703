"""The physical topology kind as a backend of the one run life cycle (mpvlab/runner/lifecycle.py):
SSH masters, preflight, interface guards, host settings, links (bring_up); the pre-run probes; the
client's counters and the server's subflows as collectors; the kind's summary. Teardown is the run's
ExitStack: the journal is undone before the guards compare the interfaces with their snapshots."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from mpvlab.core import proc
from mpvlab.core.errors import RunFailed
from mpvlab.core.hosts import SshHost, ssh_master
from mpvlab.core.ifguard import interface_guard
import mpvlab.content as content
from mpvlab.runner import fidelity
from mpvlab.runner.context import RunContext
from mpvlab.runner.physical.collect import NOT_COLLECTED, SubflowPoller, read_counters, summarise
from mpvlab.links import path as link_path
from mpvlab.links.emulator import DirectionHandle
from mpvlab.runner.physical.emulation import apply_link, link_record
from mpvlab.runner.physical.hostops import clock_offset_ns
from mpvlab.runner.physical.hostsetup import configure_transport, make_dirs
from mpvlab.runner.physical.journal import Journal
from mpvlab.runner.physical.preflight import preflight
from mpvlab.runner.physical.probes import ping_min_ms, run_probes
from mpvlab.runner.physical.state import PhysicalRun
from mpvlab.runner.steps import ensure_content
from mpvlab.runner.workloads.base import Client, Ends, Outcome
from mpvlab.topologies.physical import PhysicalPlan, key_dir_default, make_plan

SSH_CONTROL_DIR = Path("/run/mpvlab/ssh")


@dataclass(frozen=True)
class PhysicalEnds(Ends):
    """The ends on real hosts; the physical workloads (physical/video.py) also need the run's state."""

    run: PhysicalRun | None = None


def bring_up(ctx: RunContext, stack: contextlib.ExitStack) -> PhysicalNetwork:
    """Hosts, preflight, guards, host settings and links; run time zero after the kind's own lead
    (its probes run per path, so it grows with the number of paths)."""
    sc, phase = ctx.scenario, ctx.opts.progress
    plan = make_plan(sc.topology, sc.paths, ctx.opts.key_dir or key_dir_default())  # key files checked
    prov: dict[str, Any] = {"roles": {"client": plan.client, "server": plan.server,
                                      "emulator": {p.name: p.emulator for p in plan.paths}},
                            "paths": {p.name: {"client_if": p.client_if, "server_address": p.server_address,
                                               "gateway": p.gateway, "emulator": p.emulator,
                                               "emulator_server_if": p.emulator_server_if,
                                               "emulator_client_if": p.emulator_client_if} for p in plan.paths},
                            "not_collected": NOT_COLLECTED}
    ctx.extra_prov["physical"] = prov
    net = PhysicalNetwork(plan, prov)
    # Pushed first, so it sees the end of the teardown: what the guards found, what the journal could
    # not undo, and whether the hosts still run anything of ours.
    stack.push(net.after_teardown)

    SSH_CONTROL_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, host in list(plan.hosts.items()):
        if isinstance(host, SshHost):
            phase(f"ssh {host.name}")
            def record_master(pid: int) -> None:
                ctx.ledger.add_proc(proc.ProcRef.of(pid, "ssh master"))
            plan.hosts[name] = stack.enter_context(ssh_master(host, SSH_CONTROL_DIR, on_start=record_master))
    journal = Journal(ctx, plan.hosts)
    run = PhysicalRun(ctx, plan, journal, prov=prov)
    net.run, net.journal = run, journal
    prov["changes"] = journal.entries               # the same list: undo results appear in it

    phase("preflight")
    video = ensure_content(sc)
    assert isinstance(video, content.ContentInfo)
    prov["preflight"] = preflight(run, sc, video)
    for name, ifs in plan.interfaces_by_host().items():
        g = interface_guard(plan.host(name), ifs)
        stack.enter_context(g)
        net.guards.append((name, g))
    prov["guarded_interfaces"] = plan.interfaces_by_host()
    stack.callback(journal.undo_all)                # runs before the guards check

    phase("host settings")
    make_dirs(run)
    for name in {plan.client, *plan.emulator_hosts()}:      # where a process runs on run time
        run.offsets[name] = clock_offset_ns(plan.host(name))
    prov["clock_offsets_ns"] = {n: {"offset": o, "bound": b} for n, (o, b) in run.offsets.items()}
    prov["transport"] = configure_transport(run, sc)
    net.base_rtt = {p.name: ping_min_ms(run, p) for p in plan.paths} if sc.fidelity.probe else {}

    n = len(plan.paths)
    lead_s = (sc.fidelity.probe_duration / 1e9 * n + 2.0 * n + 4.0) if sc.fidelity.probe else 3.0
    ctx.t0_ns = time.monotonic_ns() + int(lead_s * 1e9)

    phase("links")
    links: list[tuple[str, link_path.PathLink]] = []
    for p in plan.paths:
        spec = sc.paths[p.name]
        sched = fidelity.PathSchedules(down=link_path.schedule_for(spec.down, ctx.scenario_file.parent),
                                       up=link_path.schedule_for(spec.up, ctx.scenario_file.parent))
        net.schedules[p.name] = sched
        if p.emulator is None:
            continue
        link = apply_link(run, p, spec.down, spec.up, (sched.down, sched.up), sc.seed,
                          on_applied=lambda h: stack.callback(link_path.record_stats, prov, h))
        net.links += link.handles
        links.append((p.emulator, link))
    prov["links"] = {label: rec for host_name, link in links for label, rec in link_record(run, host_name, link).items()}
    net.ends = PhysicalEnds(plan.host(plan.server), (Client("client", plan.host(plan.client),
                                                            run.client_addrs[plan.paths[0].name]),),
                            plan.paths[0].server_address, sc.transport.cc, run=run)
    return net


@dataclass
class PhysicalNetwork:
    plan: PhysicalPlan
    prov: dict[str, Any]
    run: PhysicalRun | None = None
    journal: Journal | None = None
    ends: Ends = field(init=False, repr=False)     # set once the hosts are ready (bring_up)
    guards: list[tuple[str, interface_guard]] = field(default_factory=list)
    links: list[DirectionHandle] = field(default_factory=list)
    schedules: dict[str, fidelity.PathSchedules] = field(default_factory=dict)
    base_rtt: dict[str, float | None] = field(default_factory=dict)
    poller: SubflowPoller | None = None
    before: dict[str, dict[str, int]] = field(default_factory=dict)
    after: dict[str, dict[str, int]] = field(default_factory=dict)

    # No emulated nodes here; the local processes in the ledger (ssh clients of the remote ones) are
    # watched by the life cycle all the same.
    nodes: tuple[Any, ...] = ()

    def check(self) -> None:
        for h in self.links:
            if not h.alive():
                raise RunFailed(f"delay line {h.plan.label} on {h.plan.router.name} died — the path lost "
                                "all packets from then on")

    def precheck(self, ctx: RunContext) -> dict[str, Any]:
        assert self.run is not None
        return run_probes(self.run, ctx.scenario, self.schedules, self.base_rtt)

    def before_t0(self, ctx: RunContext, stack: contextlib.ExitStack) -> None:
        pass                            # no packet capture on this kind (scenario.py refuses observe.pcap)

    def ready(self, ctx: RunContext) -> None:
        pass      # run time zero was set after the kind's own lead (bring_up): remote hosts' delay lines

    def judge(self, ctx: RunContext, fid: dict[str, Any], summary: dict[str, Any]) -> None:
        # The physical probes' verdict (precheck) is the run's. The emulator hosts' delay-line statistics
        # are copied back (logs/, provenance delay_lines) but not judged on this kind: no queue samples
        # come back to judge the rate with. With the probe off there is then no verdict at all, which the
        # provenance says in words (fidelity_ok stays null: not checked, rather than passed).
        if fid.get("skipped"):
            fid["skipped_reason"] = (
                "pre-run probe off in the scenario (fidelity.probe: false), and a physical topology makes no "
                "whole-run verdict (its delay-line statistics are in provenance delay_lines, not judged): "
                "fidelity not checked (fidelity_ok null)")

    def check_state(self, ctx: RunContext, outcome: Outcome, summary: dict[str, Any]) -> None:
        return None     # the physical kind's summary carries no cross-checks (collect.py)

    def start_collectors(self, ctx: RunContext, stack: contextlib.ExitStack, port: int, max_run_s: float) -> None:
        assert self.run is not None
        self.poller = SubflowPoller(self.run, ctx.data / "subflows.csv")
        self.before = read_counters(self.run)
        self.poller.start()
        stack.callback(self.poller.stop)

    def poll(self, ctx: RunContext) -> None:
        pass

    def stop_collectors(self, ctx: RunContext) -> None:
        assert self.run is not None and self.poller is not None
        self.poller.stop()
        self.after = read_counters(self.run)

    def summarise(self, ctx: RunContext, outcome: Outcome, fid: dict[str, Any]) -> dict[str, Any]:
        assert self.run is not None and self.poller is not None
        return summarise(self.run, ctx.scenario, outcome, self.before, self.after, self.poller)

    def after_teardown(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                       tb: TracebackType | None) -> bool:
        """The guards' verdict into provenance (they raise on a difference and attach what they found
        as notes); the ledger forgets the remote processes once all are stopped."""
        if exc is not None and getattr(exc, "__notes__", None):
            self.prov["guard_problems"] = list(exc.__notes__)
        elif exc is None:
            self.prov["guard"] = {name: {"interfaces": g.ifnames, "problems": []} for name, g in self.guards}
        if self.run is not None and all(s.process.poll() is not None for s in self.run.started):
            self.run.ctx.ledger.remote_procs = []   # all stopped: a later cleanup need not reach the hosts
            self.run.ctx.ledger.save()
        if self.journal is not None:
            self.prov["undo_failures"] = [e for e in self.journal.entries if e.get("undo_exit") != 0]
        return False
