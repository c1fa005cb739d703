"""The life cycle of a physical run (see the package docstring): SSH masters, preflight, interface
guards, host settings, links, Apache, probes, playback at run time zero, collection and teardown —
an ExitStack that undoes the journal before the guards compare the interfaces with their snapshots."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from core import proc
from mpvlab import content, fidelity, server
from mpvlab.run.physical.collect import (
    NOT_COLLECTED, SubflowPoller, pull_apache_logs, pull_player_files, read_counters, summarise,
)
from mpvlab.run.physical.emulation import LinkHandle, apply_link, link_record, stop_link
from mpvlab.run.physical.hostops import clock_offset_ns
from mpvlab.run.physical.hostsetup import configure_transport, make_dirs
from mpvlab.run.physical.journal import Journal
from mpvlab.run.physical.preflight import preflight
from mpvlab.run.physical.probes import ping_min_ms, run_probes
from mpvlab.run.physical.remote import start_apache, start_player
from mpvlab.run.physical.state import PhysicalRun
from core.hosts import SshHost, ssh_master
from core.ifguard import interface_guard
from topologies.physical import PhysicalPlan, key_dir_default, make_plan
from core.errors import RunFailed
from mpvlab.run.context import RunContext
from mpvlab.run.steps import ensure_content, read_json, schedule_for


SSH_CONTROL_DIR = Path("/run/mpvlab/ssh")


def execute(ctx: "RunContext", key_dir: Path | None = None) -> dict[str, Any]:

    sc, phase = ctx.scenario, ctx.opts.progress
    started_at = time.monotonic()
    plan = make_plan(sc.topology, sc.paths, key_dir or key_dir_default())           # key files checked: nothing has run yet
    phase("content")
    video = ensure_content(sc)
    assert isinstance(video, content.ContentInfo)
    ctx.extra_prov["content"] = {"kind": "progressive", **video.to_json()}
    prov: dict[str, Any] = {"roles": {"client": plan.client, "server": plan.server,
                                      "emulator": {p.name: p.emulator for p in plan.paths}},
                            "paths": {p.name: {"client_if": p.client_if, "server_address": p.server_address,
                                               "gateway": p.gateway, "emulator": p.emulator,
                                               "emulator_server_if": p.emulator_server_if,
                                               "emulator_client_if": p.emulator_client_if} for p in plan.paths},
                            "not_collected": NOT_COLLECTED}
    ctx.extra_prov["physical"] = prov
    try:
        summary, run, guards, journal = _run(ctx, plan, video, prov)
    except BaseException as e:
        # interface_guard attaches what it found left on the interfaces to the failure as a note.
        if getattr(e, "__notes__", None):
            prov["guard_problems"] = list(e.__notes__)
        raise
    prov["guard"] = {name: {"interfaces": g.ifnames, "problems": []} for name, g in guards}
    if all(s.process.poll() is not None for s in run.started):
        ctx.ledger.remote_procs = []      # all stopped: a later cleanup need not reach the hosts again
        ctx.ledger.save()
    prov["undo_failures"] = [e for e in journal.entries if e.get("undo_exit") != 0]
    summary["run_wall_s"] = round(time.monotonic() - started_at, 2)
    return summary


def _run(ctx: "RunContext", plan: PhysicalPlan, video: content.ContentInfo,
         prov: dict[str, Any]) -> tuple[dict[str, Any], PhysicalRun, list[tuple[str, interface_guard]], Journal]:

    sc, phase, log = ctx.scenario, ctx.opts.progress, ctx.opts.log
    with contextlib.ExitStack() as stack:
        SSH_CONTROL_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name, host in list(plan.hosts.items()):
            if isinstance(host, SshHost):
                phase(f"ssh {host.name}")
                def record_master(pid: int) -> None:
                    ctx.ledger.add_proc(proc.ProcRef.of(pid, "ssh master"))
                plan.hosts[name] = stack.enter_context(ssh_master(host, SSH_CONTROL_DIR, on_start=record_master))
        journal = Journal(ctx, plan.hosts)
        run = PhysicalRun(ctx, plan, journal, prov=prov)
        prov["changes"] = journal.entries               # the same list: undo results appear in it

        phase("preflight")
        prov["preflight"] = preflight(run, sc, video)
        guards: list[tuple[str, interface_guard]] = []
        for name, ifs in plan.interfaces_by_host().items():
            g = interface_guard(plan.host(name), ifs)
            stack.enter_context(g)
            guards.append((name, g))
        prov["guarded_interfaces"] = plan.interfaces_by_host()

        def undo() -> None:
            journal.undo_all()
        stack.callback(undo)                            # runs before the guards check
        phase("host settings")
        make_dirs(run)
        for name in {plan.client, *plan.emulator_hosts()}:      # where a process runs on run time
            run.offsets[name] = clock_offset_ns(plan.host(name))
        prov["clock_offsets_ns"] = {n: {"offset": o, "bound": b} for n, (o, b) in run.offsets.items()}
        prov["transport"] = configure_transport(run, sc)
        base_rtt = {p.name: ping_min_ms(run, p) for p in plan.paths} if sc.fidelity.probe else {}

        n = len(plan.paths)
        lead_s = (sc.fidelity.probe_duration / 1e9 * n + 2.0 * n + 4.0) if sc.fidelity.probe else 3.0
        ctx.t0_ns = time.monotonic_ns() + int(lead_s * 1e9)

        phase("links")
        links: list[LinkHandle] = []
        schedules: dict[str, fidelity.PathSchedules] = {}
        for p in plan.paths:
            spec = sc.paths[p.name]
            sched = fidelity.PathSchedules(down=schedule_for(spec.down, ctx.scenario_file.parent),
                                           up=schedule_for(spec.up, ctx.scenario_file.parent))
            schedules[p.name] = sched
            if p.emulator is None:
                continue
            for k, (direction, d) in enumerate((("down", spec.down), ("up", spec.up))):
                h = apply_link(run, p, direction, d, getattr(sched, direction), sc.seed * 1000 + p.index * 2 + k)
                links.append(h)
                stack.callback(lambda h=h: prov.setdefault("delay_lines", {}).__setitem__(h.label, stop_link(run, h)))
        prov["links"] = {h.label: link_record(plan.host(h.host_name), h) for h in links}

        def check_links() -> None:
            for h in links:
                if not h.alive():
                    raise RunFailed(f"delay line {h.label} on {plan.host(h.host_name).name} died — the path lost "
                                    "all packets from then on")

        phase("server")
        apache = start_apache(run, sc, video)
        stack.callback(lambda: proc.stop_child(apache.process))

        fid: dict[str, Any] = {"ok": None, "skipped": True, "warnings": []}
        if sc.fidelity.probe:
            phase("probes")
            fid = run_probes(run, sc, schedules, base_rtt)
            check_links()
        ctx.extra_prov["fidelity"] = fid
        for w in fid.get("warnings", []):
            log(f"fidelity warning: {w}")

        phase("waiting for time zero")
        while (wait := ctx.t0_ns - time.monotonic_ns()) > 0:
            check_links()
            time.sleep(min(wait / 1e9, 0.1))
        poller = SubflowPoller(run, ctx.data / "subflows.csv")
        before = read_counters(run)
        phase("playing")
        url = f"http://{plan.paths[0].server_address}:{server.PORT}/video.mp4"
        player = start_player(run, sc, url, round(sc.video.duration / 1e9 * sc.video.fps))
        poller.start()
        stack.callback(poller.stop)
        timeout_s = sc.video.duration / 1e9 * sc.player.timeout_factor + 30
        deadline = time.monotonic() + timeout_s + 10
        while player.process.poll() is None:
            check_links()
            if apache.process.poll() is not None:
                raise RunFailed(f"apache exited with code {apache.process.returncode} during playback")
            if time.monotonic() > deadline:
                player.process.kill()
                raise RunFailed(f"player did not finish within {timeout_s:.0f} s")
            phase(f"playing ({(time.monotonic_ns() - ctx.t0_ns) / 1e9:5.1f} s of {sc.video.duration / 1e9:g} s video)")
            time.sleep(0.2)
        poller.stop()
        after = read_counters(run)

        phase("collecting")
        pull_player_files(run)
        proc.stop_child(apache.process)
        pull_apache_logs(run)
        player_summary = read_json(ctx.logs / "player-summary.json")
        if player.process.returncode != 0:
            reason = (player_summary.get("reason") or player_summary.get("error")) if player_summary else None
            raise RunFailed(f"player exited with code {player.process.returncode}: {reason or 'see logs/player.log'}")
        summary = summarise(run, sc, player_summary, before, after, poller, fid)
    # Everything undone; the guards have compared the interfaces with their snapshots (they raise on
    # a difference).
    return summary, run, guards, journal

