#!/usr/bin/env python3
"""Link-emulation fidelity through the platform's own path (topology → links → fidelity probes),
as a run sees it. Prints, per configuration, the configured value beside what was achieved:

  1. the tbf's dequeue rate while backlogged (the pre-run probe's paced UDP stream keeps it so) vs the
     configured rate, at 3 / 25 / 100 Mbit/s and 1 Gbit/s;
  2. RTT error (p1, p50, p99, max; kernel-stamped ICMP echoes, mpvlab/runner/kping.py) at 0 / 10 /
     60 / 100 ms one-way delay, idle and while a 720p H.264 player decodes in real time on the same
     machine, beside the delay lines' own release lateness.

Usage (root): .venv/bin/python bench/bench_links.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator
from mpvlab.core.paths import checkout_root

REPO = checkout_root()

from mpvlab import content  # noqa: E402
from mpvlab.core import ledger, naming, netns, proc  # noqa: E402
from mpvlab.links import path as link_path  # noqa: E402
from mpvlab.links.emulator import DirectionHandle, stop_direction  # noqa: E402
from mpvlab.runner import fidelity, transport  # noqa: E402
from mpvlab.runner.steps import CONTENT_DIR  # noqa: E402
from mpvlab.input.scenario import parse_scenario  # noqa: E402
from mpvlab.topologies import dual_path  # noqa: E402


def scenario(rate: str | None, delay: str, buffer: str, probe_s: int) -> Any:
    down: dict[str, Any] = {"delay": delay, "buffer": buffer}
    if rate:
        down["rate"] = rate
    return parse_scenario({"name": "bench", "paths": {"wifi": {"down": down}, "lte": {"down": down}},
                           "fidelity": {"probe_duration": f"{probe_s}s"}})


def measure(sc: Any, run_id: str) -> dict[str, Any]:
    work = Path(f"/tmp/mpvlab-bench-{run_id}")     # the run's own folder: its delay lines' files too
    work.mkdir(exist_ok=True)
    # The run ledger, as a run keeps one: a bench killed mid-way (SIGKILL included) leaves namespaces
    # and delay lines that the next run or `mpvlab cleanup` removes by this file.
    led = ledger.Ledger.create(run_id, work)
    names: list[str] = []

    def created(name: str) -> None:
        names.append(name)
        led.add_netns(name)

    handles: list[DirectionHandle] = []
    topo = None
    try:
        topo = dual_path.build(list(sc.paths), sc.topology.server_addressing, run_id, created)
        transport.configure_hosts(topo, sc)
        transport.set_offloads(topo, sc.hosts.offloads)
        transport.set_server_cc(topo, "cubic")
        t0 = time.monotonic_ns() + 10**9
        scheds = {}
        for p in topo.paths:
            spec = sc.paths[p.name]
            scheds[p.name] = fidelity.PathSchedules(down=link_path.schedule_for(spec.down, REPO),
                                                    up=link_path.schedule_for(spec.up, REPO))
            plans = link_path.path_plans(p.router.ns, p.name, p.index, server_if=p.router_server_if,
                                         client_if=p.router_client_if, down=spec.down, up=spec.up,
                                         schedules=(scheds[p.name].down, scheds[p.name].up),
                                         ifbs=link_path.ifb_names(run_id, p.index), seed=sc.seed)
            handles += link_path.apply_path(plans, work, t0, led.add_proc).handles
        res = fidelity.run_probes(topo, sc, scheds, t0, work, handles=handles)   # handles: the tbfs it measures
        stats = {h.plan.label: stop_direction(h) for h in handles}
        res["delay_lines"] = [v for label, v in stats.items() if label.endswith("-down")]   # the lines measured
        return res
    finally:
        for h in handles:          # a probe that failed leaves its lines running: stop them first
            if h.process is not None and h.process.poll() is None:
                proc.stop_child(h.process)
        if topo is not None:
            dual_path.teardown(topo)
        for n in names:
            netns.delete_netns(n)
        led.remove()


@contextlib.contextmanager
def decoding_player() -> Iterator[None]:
    """A real-time 720p decode on the host (what a run's player costs), looping for the duration."""
    video = content.ensure_progressive(CONTENT_DIR, 20.0, 5_240_000)
    p = subprocess.Popen(["gst-launch-1.0", "-q", "filesrc", f"location={video.path}", "!", "qtdemux", "!",
                          "h264parse", "!", "avdec_h264", "!", "fakesink", "sync=true"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        p.terminate()
        p.wait()


def _mbit(bps: float | None) -> str:
    return f"{bps / 1e6:.2f}" if bps is not None else "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer configurations, shorter probes")
    args = ap.parse_args()
    probe_s = 3 if args.quick else 5
    rates = ["3mbit", "25mbit"] if args.quick else ["3mbit", "25mbit", "100mbit", "1gbit"]
    print("1. tbf dequeue rate while backlogged (10 ms one-way delay, both paths at once) vs the configured rate")
    print(f"   {'configured':>10}  {'achieved (wifi, lte)':>26}  {'ratio':>14}  backlogged s")
    for rate in rates:
        bdp_buffer = "2MB" if rate in ("100mbit", "1gbit") else "200KB"
        res = measure(scenario(rate, "10ms", bdp_buffer, probe_s), naming.new_run_id("bl"))
        r = [res["paths"][p]["rate_down"] for p in ("wifi", "lte")]
        print(f"   {rate:>10}  {_mbit(r[0].get('achieved_bps')):>11}, {_mbit(r[1].get('achieved_bps')):>9} Mb  "
              f"{r[0].get('ratio')}, {r[1].get('ratio')}  {r[0].get('backlogged_s')}, {r[1].get('backlogged_s')}")
    print("\n2. RTT error = measured − expected (ms), kernel-stamped ICMP echoes, unshaped paths")
    print(f"   {'one-way':>8}  {'load':>10}  {'p1':>7} {'p50':>7} {'p99':>7} {'max':>7}   delay-line lateness p99 (us)")
    delays = ["0ms", "60ms"] if args.quick else ["0ms", "10ms", "60ms", "100ms"]
    for load in ("idle", "player"):
        ctx = decoding_player() if load == "player" else contextlib.nullcontext()
        with ctx:
            for d in delays:
                res = measure(scenario(None, d, "1MB", 1), naming.new_run_id("br"))
                rt = res["paths"]["wifi"]["rtt"]
                late = [x.get("lateness_us", {}).get("p99") for x in res["delay_lines"] if isinstance(x, dict)]
                print(f"   {d:>8}  {load:>10}  {rt['error_ms_p1']:7.3f} {rt['error_ms_p50']:7.3f} "
                      f"{rt['error_ms_p99']:7.3f} {rt['error_ms_max']:7.3f}   {late}")
    print("\nThe echoes are stamped by the kernel on both ends; the delay line's release lateness (last")
    print("column) isolates the emulator's own error.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
