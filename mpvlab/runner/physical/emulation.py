"""Link emulation on physical emulator hosts, on the named interfaces only: links/emulator.py's two
orders — tbf (through an IFB at ingress for shape-then-delay) and an NFQUEUE delay line per
direction — each change journalled; the delay line's files are pulled back when it stops."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpvlab.links.emulator import DELAYLINE_BIN, FRAME_BYTES, DirectionPlan, tbf_argv
from mpvlab.core import naming, proc
from mpvlab.runner.physical.hostops import exists, read_file, write_file
from mpvlab.runner.physical.state import PhysicalRun, Started
from mpvlab.links.spec import LinkDirection
from mpvlab.core.hosts import Host
from mpvlab.topologies.physical import PathPlan
from mpvlab.core.errors import RunFailed

# NFQUEUE numbers on emulator hosts: away from 0, which other software on a real box may use.
QUEUE_BASE = 27100


@dataclass
class LinkHandle:
    label: str
    host_name: str
    plan: DirectionPlan
    files: dict[str, str] = field(default_factory=dict)
    started: Started | None = None
    qdiscs: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        return self.started is None or self.started.process.poll() is None


def apply_link(run: PhysicalRun, p: PathPlan, direction: str, d: LinkDirection, schedule: Any,
               seed: int) -> LinkHandle:
    """links/emulator.py's two orders, on an emulator host's named interfaces, journalled."""
    assert p.emulator is not None and p.emulator_server_if and p.emulator_client_if
    h = p.emulator
    host = run.plan.host(h)
    in_if, out_if = ((p.emulator_server_if, p.emulator_client_if) if direction == "down"
                     else (p.emulator_client_if, p.emulator_server_if))
    qnum = QUEUE_BASE + p.index * 2 + (0 if direction == "down" else 1)
    ifb = naming.ifname(run.ctx.run_id, f"{'ab'[p.index]}i{0 if direction == 'down' else 1}")
    plan = DirectionPlan(p.name, direction, host, in_if, out_if, ifb, qnum, d, schedule, seed)  # type: ignore[arg-type]
    handle = LinkHandle(plan.label, h, plan)
    if d.rate is not None:
        if d.order == "shape-then-delay":
            run.journal.will(h, ["ip", "link", "del", ifb], f"IFB {ifb}")
            host.run(["ip", "link", "add", ifb, "type", "ifb"])
            host.run(["ip", "link", "set", ifb, "up"])
            run.journal.will(h, ["tc", "qdisc", "del", "dev", in_if, "ingress"], f"ingress qdisc on {in_if}")
            host.run(["tc", "qdisc", "add", "dev", in_if, "handle", "ffff:", "ingress"])
            host.run(["tc", "filter", "add", "dev", in_if, "parent", "ffff:", "protocol", "all", "u32",
                      "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb])
            host.run(tbf_argv(ifb, d))
            handle.qdiscs = [ifb]
        else:
            run.journal.will(h, ["tc", "qdisc", "del", "dev", out_if, "root"], f"root qdisc on {out_if}")
            host.run(tbf_argv(out_if, d))
            handle.qdiscs = [out_if]
    if plan.needs_delay_line:
        _start_delay_line(run, handle)
        rule = ["FORWARD", "-i", in_if, "-o", out_if, "-j", "NFQUEUE", "--queue-num", str(qnum)]
        run.journal.will(h, ["iptables", "-w", "-D", *rule], f"iptables {' '.join(rule)}")
        # Inserted first: on a real router an earlier ACCEPT rule would otherwise bypass the delay.
        host.run(["iptables", "-w", "-I", rule[0], "1", *rule[1:]])
    return handle


def _start_delay_line(run: PhysicalRun, handle: LinkHandle) -> None:
    plan, h = handle.plan, handle.host_name
    host = run.plan.host(h)
    d = run.dirs[f"emu-{h}"]
    files = {k: f"{d}/delay-{plan.label}.{ext}" for k, ext in
             (("schedule", "schedule"), ("ready", "ready"), ("stats", "stats.json"), ("steps", "steps.csv"))}
    write_file(host, files["schedule"], plan.schedule.to_text())
    argv = [str(DELAYLINE_BIN), "--queue", str(plan.queue_num), "--schedule", files["schedule"],
            "--t0-ns", str(run.t0_on(h)), "--maxlen", str(plan.queue_maxlen()), "--ready-file", files["ready"],
            "--stats", files["stats"], "--step-log", files["steps"]]
    if plan.spec.loss > 0:
        argv += ["--loss", repr(plan.spec.loss), "--seed", str(plan.seed)]
    handle.files = files
    handle.started = run.start(h, argv, run.ctx.logs / f"delay-{plan.label}.log", f"delayline {plan.label}")
    deadline = time.monotonic() + 15.0
    while not exists(host, files["ready"]):
        if handle.started.process.poll() is not None:
            raise RunFailed(f"delay line {plan.label} on {host.name} exited with code "
                                    f"{handle.started.process.returncode} (see logs/delay-{plan.label}.log)")
        if time.monotonic() > deadline:
            raise RunFailed(f"delay line {plan.label} on {host.name} not ready within 15 s")
        time.sleep(0.05)


def stop_link(run: PhysicalRun, handle: LinkHandle) -> dict[str, Any]:
    if handle.started is None:
        return {"delay_line": "none (no delay or loss configured)"}
    rc = proc.stop_child(handle.started.process)
    host = run.plan.host(handle.host_name)
    raw = read_file(host, handle.files["stats"])
    for k in ("stats", "steps", "schedule"):
        data = raw if k == "stats" else read_file(host, handle.files[k])
        if data is not None:
            (run.ctx.logs / Path(handle.files[k]).name).write_bytes(data)
    try:
        stats: dict[str, Any] = json.loads(raw or b"")
    except ValueError:
        stats = {"error": "no stats written"}
    stats["exit_code"] = rc
    return stats



def link_record(host: Host, h: LinkHandle) -> dict[str, Any]:
    """What provenance keeps of one emulated direction, with its qdiscs as the host reports them."""
    return {"host": h.host_name, "in_if": h.plan.in_if, "out_if": h.plan.out_if, "order": h.plan.spec.order,
            "burst_bytes": h.plan.spec.effective_burst(),
            "limit_bytes": h.plan.spec.buffer.to_bytes(FRAME_BYTES),
            "delay_backend": "nfqueue-delayline" if h.plan.needs_delay_line else "none",
            "schedule": h.plan.schedule.to_text().splitlines()[1:],
            "qdiscs": {dev: json.loads(host.run(["tc", "-j", "qdisc", "show", "dev", dev]).stdout or "[]")
                       for dev in h.qdiscs}}
