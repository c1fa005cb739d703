"""The link step: one emulated path, both directions, on the host that emulates it — and what a run
keeps of it. Every backend (dual-path and dumbbell routers, the shared bottleneck's router, physical
emulator hosts), the test bed (mpvlab/testbed/dualpath.py) and the benches (bench/bench_links.py) build
their links here, so the tc/IFB/mirred sequence, the delay line and the provenance record exist once:

    schedule_for(direction spec, scenario folder)  -> the delay line's Schedule (trace files are
                                                      looked up in the scenario's folder, passed in)
    path_plans(host, path, interfaces, …)         -> (down, up) DirectionPlan: the in/out swap,
                                                      queue numbers, IFB names and seeds of a path
    apply_path(plans, workdir, t0, …, site)       -> PathLink: links.emulator.apply_direction on each
                                                      (tbf behind IFB + mirred, ECN marker, delay line)
    PathLink.record(), .stop_into(prov)           -> the provenance record; the delay lines' statistics

A `Site` (mpvlab/links/emulator.py) says how carefully the host is changed: a run's own namespace, or a real
machine whose every change is journalled first. links/ sits below the runner: nothing here imports
mpvlab.runner or mpvlab.input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mpvlab.core import naming, proc
from mpvlab.core.hosts import Host
from mpvlab.links.emulator import DirectionHandle, DirectionPlan, Site, apply_direction, stop_direction
from mpvlab.links.schedule import Schedule, read_trace
from mpvlab.links.spec import ConstantDelay, LinkDirection, PiecewiseDelay, SquareDelay, TraceDelay

# A tag per path in interface names: a dual-path run has at most 8 paths (MAX_PATHS).
PATH_LETTERS = "abcdefgh"


def schedule_for(d: LinkDirection, scenario_dir: Path) -> Schedule:
    """The delay line's schedule for one direction; a trace file is read relative to `scenario_dir`
    (the scenario's folder: the caller knows it, links/ does not read scenarios)."""
    delay = d.delay
    if isinstance(delay, ConstantDelay):
        return Schedule.constant(delay.value)
    if isinstance(delay, SquareDelay):
        return Schedule.square(delay.base, delay.amplitude, delay.period, delay.duty, delay.phase)
    if isinstance(delay, PiecewiseDelay):
        return Schedule.piecewise([(t, v) for t, v in delay.points], delay.repeat)
    assert isinstance(delay, TraceDelay)
    return Schedule.piecewise(read_trace(scenario_dir / delay.file), delay.repeat)


def ifb_names(run_id: str, index: int) -> tuple[str, str]:
    """The (down, up) IFB names of path `index`: run-scoped (naming.ifname), so concurrent runs and
    a physical host's own interfaces never collide with them."""
    letter = PATH_LETTERS[index]
    return naming.ifname(run_id, f"{letter}i0"), naming.ifname(run_id, f"{letter}i1")


def direction_seed(seed: int, index: int, queue: int) -> int:
    """The delay line's loss seed: one stream per path and direction, from the scenario's seed."""
    return seed * 1000 + index * 2 + queue


def path_plans(host: Host, name: str, index: int, *, server_if: str, client_if: str, down: LinkDirection,
               up: LinkDirection, schedules: tuple[Schedule, Schedule], ifbs: tuple[str, str], seed: int,
               queues: tuple[int, int] = (0, 1), base_dir: Path | None = None) -> tuple[DirectionPlan, DirectionPlan]:
    """Both directions of path `name` (the `index`-th) through `host`, entering and leaving by its
    server-facing and client-facing interfaces: down = server → client (in at server_if, out at
    client_if), up the reverse. `seed` is the scenario's (direction_seed); `queues` the NFQUEUE
    numbers; `base_dir` where a capacity trace is looked up first (the scenario's folder)."""
    return (
        DirectionPlan(name, "down", host, server_if, client_if, ifbs[0], queues[0], down, schedules[0],
                      seed=direction_seed(seed, index, 0), base_dir=base_dir),
        DirectionPlan(name, "up", host, client_if, server_if, ifbs[1], queues[1], up, schedules[1],
                      seed=direction_seed(seed, index, 1), base_dir=base_dir),
    )


@dataclass
class PathLink:
    """One path's emulated directions, as applied: their handles (for the fidelity check, run time
    zero, the ECN window and teardown), their provenance record and their statistics."""

    handles: list[DirectionHandle]

    def dead(self) -> DirectionHandle | None:
        """A direction whose delay line has exited (its path then loses every packet), or None."""
        return next((h for h in self.handles if not h.alive()), None)

    def record(self, **where: Any) -> dict[str, dict[str, Any]]:
        """The provenance record of each direction by label: `where` first (router, host, path — what
        the backend names the place by), then the link as configured."""
        return {h.plan.label: {**where, **direction_record(h)} for h in self.handles}

    def stop_into(self, prov: dict[str, Any]) -> None:
        """Stop every direction; its statistics go to prov["delay_lines"][label] (fidelity reads them)."""
        for h in self.handles:
            record_stats(prov, h)


# A site the run owns (a namespace it made): the default; Site is frozen, so one instance serves all.
OWN_SITE = Site()


def apply_path(plans: tuple[DirectionPlan, ...], workdir: Path, t0_ns: int,
               on_process: Callable[[proc.ProcRef], None], *, data_dir: Path | None = None,
               site: Site = OWN_SITE, on_applied: Callable[[DirectionHandle], object] | None = None) -> PathLink:
    """Apply each plan in order (links.emulator.apply_direction). `on_applied` is told each direction
    as soon as it exists (the run registers its teardown there, so a failure in the next direction
    still stops this one's delay line)."""
    link = PathLink([])
    for plan in plans:
        h = apply_direction(plan, workdir, t0_ns, on_process, data_dir=data_dir, site=site)
        link.handles.append(h)
        if on_applied is not None:
            on_applied(h)
    return link


def direction_record(h: DirectionHandle) -> dict[str, Any]:
    """What provenance keeps of one emulated direction as configured."""
    plan = h.plan
    return {"in_if": plan.in_if, "out_if": plan.out_if, "order": plan.spec.order,
            "burst_bytes": plan.spec.effective_burst(), "line_rate_bps": plan.spec.line_rate,
            # the queue's byte bound: tbf's limit (bytes), N × 1514 B (wire_packets), null (merged_packets)
            "limit_bytes": plan.spec.queue_byte_bound(),
            **queue_record(plan.spec, h.ingress_gro),
            "shaper_dev": plan.shaper_dev,
            "delay_backend": "nfqueue-delayline" if plan.needs_delay_line else "none",
            "schedule": plan.schedule.to_text().splitlines()[1:]}


def queue_record(spec: LinkDirection, ingress_gro: str | None) -> dict[str, Any]:
    """How the queue counts (buffer_counting) and the byte bound that follows from it. bytes keeps the
    record it always had (limit_bytes alone); a packet counting adds its skb limit, its byte bound
    (wire_packets: N × 1514 B; merged_packets: none, said in words) and the ingress GRO read back."""
    if spec.buffer_counting == "bytes":
        return {}
    bound = spec.queue_byte_bound()
    return {"buffer_counting": spec.buffer_counting, "limit_packets": spec.buffer.packets,
            "ingress_gro": ingress_gro,
            **({} if bound is not None else {"limit_bytes_note": NO_BYTE_BOUND})}


NO_BYTE_BOUND = ("none: the queue counts merged skbs (GRO at the router's ingress), each up to 64 KiB of IP "
                 "bytes, so the queue has no byte bound (limit_bytes null) and no check uses one")


def qdiscs_json(host: Host, devs: list[str]) -> dict[str, Any]:
    """The qdiscs of named devices as the host reports them (`tc -j`): a real machine's record names
    only the devices the run shaped."""
    return {dev: json.loads(host.run(["tc", "-j", "qdisc", "show", "dev", dev]).stdout or "[]") for dev in devs}


def record_stats(prov: dict[str, Any], h: DirectionHandle) -> None:
    """Stop one direction (delay line, ECN marker); its statistics into prov["delay_lines"][label]."""
    prov.setdefault("delay_lines", {})[h.plan.label] = stop_direction(h)
