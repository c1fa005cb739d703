"""Link emulation on physical emulator hosts, on the named interfaces only: the link step of every
backend (mpvlab/links/path.py), on a host the run does not own — each change journalled before it is made,
the ingress qdisc added (never replacing one), the NFQUEUE rule inserted first — with the delay lines
running on the emulator host (RemoteLines); their files are pulled back when they stop."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mpvlab.core import proc
from mpvlab.core.errors import RunFailed
from mpvlab.links import path as link_path
from mpvlab.links.emulator import DirectionHandle, Site, delayline_argv
from mpvlab.links.schedule import Schedule
from mpvlab.links.spec import LinkDirection
from mpvlab.runner.physical.hostops import exists, read_file, write_file
from mpvlab.runner.physical.state import PhysicalRun
from mpvlab.topologies.physical import PathPlan

# NFQUEUE numbers on emulator hosts: away from 0, which other software on a real box may use.
QUEUE_BASE = 27100
READY_TIMEOUT_S = 15.0       # an SSH round trip per poll, on a machine that may be busy


@dataclass(frozen=True)
class RemoteLines:
    """Delay lines on an emulator host: files in the run's folder there, the process started through
    the run (ledger: local ssh client and remote pid), run time zero on that host's clock."""

    run: PhysicalRun
    host_name: str

    def start(self, handle: DirectionHandle, t0_ns: int, on_process: Callable[[proc.ProcRef], None]) -> None:
        plan, host = handle.plan, self.run.plan.host(self.host_name)
        if plan.spec.has_impairments:
            # capacity/loss_model/outages read trace files and write their own on this machine
            raise RunFailed(f"{plan.label}: capacity, loss_model and outages are not supported on a physical "
                            f"emulator host ({host.name}); rate, buffer, delay and loss are")
        d = self.run.dirs[f"emu-{self.host_name}"]
        files = {k: f"{d}/delay-{plan.label}.{ext}" for k, ext in
                 (("schedule", "schedule"), ("ready", "ready"), ("stats", "stats.json"), ("steps", "steps.csv"))}
        write_file(host, files["schedule"], plan.schedule.to_text())
        argv = delayline_argv(plan, files, t0_ns + self.run.offsets[self.host_name][0])   # its clock
        log = self.run.ctx.logs / f"delay-{plan.label}.log"
        started = self.run.start(self.host_name, argv, log, f"delayline {plan.label}")   # in the ledger at once
        handle.process = started.process
        handle.files = {**{k: Path(v) for k, v in files.items()}, "stderr": log}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not exists(host, files["ready"]):
            if started.process.poll() is not None:
                raise RunFailed(f"delay line {plan.label} on {host.name} exited with code "
                                f"{started.process.returncode} (see logs/delay-{plan.label}.log)")
            if time.monotonic() > deadline:
                raise RunFailed(f"delay line {plan.label} on {host.name} not ready within {READY_TIMEOUT_S:g} s")
            time.sleep(0.05)

    def stats(self, handle: DirectionHandle) -> bytes | None:
        """The stats, and the line's step log and schedule copied into the run's logs/."""
        host = self.run.plan.host(self.host_name)
        raw = read_file(host, str(handle.files["stats"]))
        for k in ("stats", "steps", "schedule"):
            data = raw if k == "stats" else read_file(host, str(handle.files[k]))
            if data is not None:
                (self.run.ctx.logs / handle.files[k].name).write_bytes(data)
        return raw


def apply_link(run: PhysicalRun, p: PathPlan, spec_down: LinkDirection, spec_up: LinkDirection,
               schedules: tuple[Schedule, Schedule], seed: int,
               on_applied: Callable[[DirectionHandle], object]) -> link_path.PathLink:
    """Both directions of path `p` on its emulator host's named interfaces (mpvlab/links/path.py), each
    change journalled first; `on_applied` is told each direction as soon as it exists (teardown)."""
    assert p.emulator is not None and p.emulator_server_if and p.emulator_client_if
    h = p.emulator
    plans = link_path.path_plans(run.plan.host(h), p.name, p.index, server_if=p.emulator_server_if,
                                 client_if=p.emulator_client_if, down=spec_down, up=spec_up, schedules=schedules,
                                 ifbs=link_path.ifb_names(run.ctx.run_id, p.index), seed=seed,
                                 queues=(QUEUE_BASE + p.index * 2, QUEUE_BASE + p.index * 2 + 1))

    def journal(undo: list[str], what: str) -> None:
        run.journal.will(h, undo, what)

    site = Site(owned=False, journal=journal, lines=RemoteLines(run, h))
    return link_path.apply_path(plans, run.ctx.logs, run.ctx.t0_ns, run.ctx.ledger.add_proc, site=site,
                                on_applied=on_applied)


def link_record(run: PhysicalRun, host_name: str, link: link_path.PathLink) -> dict[str, Any]:
    """What provenance keeps of a path's emulated directions, with the shaped devices' qdiscs as the
    emulator host reports them."""
    host = run.plan.host(host_name)
    return {label: {**rec, "qdiscs": link_path.qdiscs_json(host, [rec["shaper_dev"]] if rec["shaper_dev"] else [])}
            for label, rec in link.record(host=host_name).items()}
