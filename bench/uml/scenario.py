#!/usr/bin/env python3
"""Run an mpvlab scenario's network and bulk transfer inside the User-Mode Linux kernel that
bench/uml/build.sh makes, with the per-packet schedulers in it (issue 50's prototype; the design
note is docs/kernel-uml.md). Never run by CI: it needs the built kernel.

    .venv/bin/python bench/uml/scenario.py SCENARIO OUT_DIR [--backend delayline|netem] [--trace]

The scenario is read and validated by mpvlab itself (the same errors as `mpvlab validate`). Only what
the guest reproduces is accepted; anything else is refused naming the field, before the guest boots:
  topology dual-path with exactly 2 paths; workload bulk with `duration`; transport.cc cubic (the
  guest kernel's default); transport.scheduler default / minrtt / bdp, run in the guest as the
  kernel's default / the per-packet mpv_minrtt / mpv_bdp (bench/uml/sched_mpvlab.c, not the host's
  steering controller); per path: down.rate (or none), down.buffer, down.burst, one constant delay
  applied to each direction (up.delay must equal down.delay); no loss, capacity, outages, ECN,
  line_rate, delay patterns, path-level delay, up.rate.
OUT_DIR/summary.json: the scenario, the case line the guest ran, the kernel (path, sha256, uname),
the per-case result of bench/uml/report.py (goodput total and per path, decisions, switches, RTT
p50/p99 beside the configured value, CPU per data segment, the decision check with --trace) and
the boot timings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from mpvlab.input.scenario import load_scenario  # noqa: E402
from mpvlab.links.spec import ConstantDelay, LinkDirection  # noqa: E402

# The host's scheduler names (mpvlab/schedulers/registry.py) -> the guest kernel's (sched_mpvlab.c).
GUEST_SCHEDULER = {"default": "default", "minrtt": "mpv_minrtt", "bdp": "mpv_bdp"}
NS_PER_MS = 1_000_000
CASE_NAME = "scenario"


class NotInGuest(ValueError):
    """A scenario field the guest cannot reproduce: the message names it and what is allowed."""


def _constant_ms(where: str, d: LinkDirection) -> float:
    if not isinstance(d.delay, ConstantDelay):
        raise NotInGuest(f"{where}.delay: the guest has one constant delay per path (kind constant), "
                         f"not {d.delay.kind}")
    return d.delay.value / NS_PER_MS


def _plain(where: str, d: LinkDirection) -> None:
    refused = {"loss": d.loss > 0, "loss_model": d.loss_model is not None, "capacity": d.capacity is not None,
               "outages": bool(d.outages), "ecn_mark": d.ecn_mark is not None,
               "line_rate": d.line_rate is not None, "order": d.order != "shape-then-delay"}
    for field, given in refused.items():
        if given:
            raise NotInGuest(f"{where}.{field}: not reproduced in the guest (bench/uml/scenario.py lists "
                             f"what is); leave it at its default")


def case_line(scenario_path: Path, backend: str, trace: bool) -> tuple[str, dict[str, Any]]:
    """The guest's case line for the scenario (bench/uml/guest.sh's columns), and the resolved scenario."""
    sc, _ = load_scenario(scenario_path)
    src = scenario_path.name
    if sc.topology.kind != "dual-path" or len(sc.paths) != 2:
        raise NotInGuest(f"{src}: topology: the guest builds dual-path with exactly 2 paths "
                         f"(got {sc.topology.kind}, {len(sc.paths)} paths)")
    duration_ns = getattr(sc.workload, "duration", None) if sc.workload.kind == "bulk" else None
    if duration_ns is None:
        raise NotInGuest(f"{src}: workload: the guest runs kind bulk with `duration` (it sends for a time)")
    if sc.transport.cc != "cubic":
        raise NotInGuest(f"{src}: transport.cc: the guest kernel's connections use cubic; got {sc.transport.cc!r}")
    if sc.transport.scheduler not in GUEST_SCHEDULER:
        raise NotInGuest(f"{src}: transport.scheduler: the guest has {', '.join(GUEST_SCHEDULER)}; "
                         f"got {sc.transport.scheduler!r}")
    rates, delays, limits, bursts = [], [], [], []
    for name, p in sc.paths.items():
        where = f"{src}: paths.{name}"
        if p.delay is not None:
            raise NotInGuest(f"{where}.delay: give each direction's constant delay instead of a path pattern")
        _plain(f"{where}.down", p.down)
        _plain(f"{where}.up", p.up)
        if p.up.rate is not None:
            raise NotInGuest(f"{where}.up.rate: the guest shapes server -> client only")
        down_ms, up_ms = _constant_ms(f"{where}.down", p.down), _constant_ms(f"{where}.up", p.up)
        if down_ms != up_ms:
            raise NotInGuest(f"{where}.up.delay: the guest delays both directions of a path equally; "
                             f"down {down_ms:g} ms, up {up_ms:g} ms")
        if p.down.rate is not None and p.down.rate % 1_000_000:
            raise NotInGuest(f"{where}.down.rate: whole Mbit/s in the guest; got {p.down.rate} bit/s")
        rates.append(str(p.down.rate // 1_000_000) if p.down.rate else "0")
        delays.append(f"{down_ms:g}")
        limits.append(p.down.buffer.to_bytes() if p.down.rate else 0)
        bursts.append(p.down.effective_burst() if p.down.rate else 0)
    if len(set(limits)) != 1 or len(set(bursts)) != 1:
        raise NotInGuest(f"{src}: paths.*.down.buffer / burst: the guest uses one queue limit and one burst "
                         f"for both paths; got {limits} and {bursts}")
    seconds = duration_ns / 1e9
    if seconds != int(seconds):
        raise NotInGuest(f"{src}: workload.duration: whole seconds in the guest; got {seconds:g} s")
    sched = GUEST_SCHEDULER[sc.transport.scheduler]
    traced = "1" if trace and sched != "default" else "0"
    line = (f"{CASE_NAME} {sched} {','.join(rates)} {delays[0]} {delays[1]} {backend} {int(seconds)} {traced} "
            f"{limits[0]} {bursts[0]}")
    return line, sc.model_dump(mode="json")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--backend", choices=("delayline", "netem"), default="delayline",
                    help="the delay inside the guest: the project's delay line (default) or netem")
    ap.add_argument("--trace", action="store_true", help="log every decision and check it against its definition")
    args = ap.parse_args(argv)
    try:
        line, resolved = case_line(args.scenario, args.backend, args.trace)
    except NotInGuest as e:
        print(f"scenario.py: {e}", file=sys.stderr)
        return 2
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cases = out / "scenario-case.txt"
    cases.write_text(line + "\n")
    kernel = Path(os.environ.get("MPVLAB_UML_KERNEL",
                                 Path(os.environ.get("MPVLAB_UML_CACHE", "/var/cache/mpvlab/uml")) / "build" / "linux"))
    if not kernel.exists():
        print(f"scenario.py: no UML kernel at {kernel}: run bench/uml/build.sh first", file=sys.stderr)
        return 2
    print(f"booting {kernel} for: {line}", flush=True)
    subprocess.run([str(HERE / "run.sh"), str(cases), str(out)], check=True)
    rep = subprocess.run([sys.executable, str(HERE / "report.py"), str(out)], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    result = json.loads(next(x for x in rep if x.startswith("{")))
    boot = dict(x.split(None, 1) for x in rep if x and not x.startswith("{"))
    summary = {"prototype": "bench/uml/scenario.py (issue 50)", "scenario": resolved, "case": line,
               "kernel": {"path": str(kernel), "sha256": _sha256(kernel),
                          "uname": (out / "uname.txt").read_text().strip()},
               "result": result, "boot": boot}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(result))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
