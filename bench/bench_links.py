#!/usr/bin/env python3
"""Link-emulation fidelity through the platform's own path (topology → links → fidelity probes),
as a run sees it. Prints, per configuration, the configured value beside what was achieved:

  1. goodput of a tbf path vs the ideal rate × 1448/1514, at 3 / 25 / 100 Mbit/s and 1 Gbit/s;
  2. RTT error (mean, p50, p99, max) at 0 / 10 / 60 / 100 ms one-way delay, idle and while a
     720p H.264 player decodes in real time on the same machine.

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

REPO = Path(__file__).resolve().parent.parent

from mpvlab.links.emulator import DirectionPlan, apply_direction, stop_direction  # noqa: E402
from mpvlab import content  # noqa: E402
from mpvlab.core import naming, netns  # noqa: E402
from mpvlab.runner import fidelity, transport  # noqa: E402
from mpvlab.runner.steps import CONTENT_DIR, schedule_for  # noqa: E402
from mpvlab.input.scenario import parse_scenario  # noqa: E402
from mpvlab.topologies import dual_path  # noqa: E402


def scenario(rate: str | None, delay: str, buffer: str, probe_s: int) -> Any:
    down: dict[str, Any] = {"delay": delay, "buffer": buffer}
    if rate:
        down["rate"] = rate
    return parse_scenario({"name": "bench", "paths": {"wifi": {"down": down}, "lte": {"down": down}},
                           "fidelity": {"probe_duration": f"{probe_s}s"}})


def measure(sc: Any, run_id: str) -> dict[str, Any]:
    names: list[str] = []
    topo = dual_path.build(list(sc.paths), sc.topology.server_addressing, run_id, names.append)
    handles = []
    try:
        transport.configure_hosts(topo, sc)
        transport.set_offloads(topo, sc.hosts.offloads)
        transport.set_server_cc(topo, "cubic")
        t0 = time.monotonic_ns() + 10**9
        scheds = {}
        for p in topo.paths:
            spec = sc.paths[p.name]
            scheds[p.name] = fidelity.PathSchedules(down=schedule_for(spec.down, REPO), up=schedule_for(spec.up, REPO))
            plan = DirectionPlan(p.name, "down", p.router.ns, p.router_server_if, p.router_client_if,
                                 naming.ifname(run_id, f"{'ab'[p.index]}i0"), 0, spec.down, scheds[p.name].down, 1)
            handles.append(apply_direction(plan, Path("/tmp"), t0, lambda _r: None))
        work = Path(f"/tmp/mpvlab-bench-{run_id}")
        work.mkdir(exist_ok=True)
        res = fidelity.run_probes(topo, sc, scheds, t0, work, handles)   # handles: the rate check needs the tbfs
        res["delay_lines"] = [stop_direction(h) for h in handles]
        return res
    finally:
        dual_path.teardown(topo)
        for n in names:
            netns.delete_netns(n)


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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer configurations, shorter probes")
    args = ap.parse_args()
    probe_s = 3 if args.quick else 5
    rates = ["3mbit", "25mbit"] if args.quick else ["3mbit", "25mbit", "100mbit", "1gbit"]
    # The pre-check measures the tbf's own dequeue rate while kept backlogged (qdisc counters), not
    # TCP goodput: fidelity.run_probes' rate_down is {configured_bps, achieved_bps, ratio, backlogged_s}.
    print("1. a tbf path's rate while backlogged (10 ms one-way delay, both paths at once) vs configured")
    print(f"   {'configured':>10}  {'configured':>14}  {'achieved (wifi, lte)':>26}  ratio")
    for i, rate in enumerate(rates):
        bdp_buffer = "2MB" if rate in ("100mbit", "1gbit") else "200KB"
        res = measure(scenario(rate, "10ms", bdp_buffer, probe_s), f"bl{i:04d}")
        r = [res["paths"][p]["rate_down"] for p in ("wifi", "lte")]
        print(f"   {rate:>10}  {r[0]['configured_bps'] / 1e6:11.2f} Mb  "
              f"{r[0]['achieved_bps'] / 1e6:11.2f}, {r[1]['achieved_bps'] / 1e6:9.2f} Mb  "
              f"{r[0]['ratio']:.4f}, {r[1]['ratio']:.4f}")
    print("\n2. RTT error = measured − configured (ms), the pre-check's kernel-stamped ICMP probes, unshaped paths")
    print(f"   {'one-way':>8}  {'load':>10}  {'p1':>7} {'p50':>7} {'p99':>7} {'max':>7}   delay-line lateness p99 (us)")
    delays = ["0ms", "60ms"] if args.quick else ["0ms", "10ms", "60ms", "100ms"]
    for load in ("idle", "player"):
        ctx = decoding_player() if load == "player" else contextlib.nullcontext()
        with ctx:
            for j, d in enumerate(delays):
                res = measure(scenario(None, d, "1MB", 1), f"br{j}{'ip'[load == 'player']}000"[:6])
                rt = res["paths"]["wifi"]["rtt"]
                late = [x.get("lateness_us", {}).get("p99") for x in res["delay_lines"] if isinstance(x, dict)]
                print(f"   {d:>8}  {load:>10}  {rt['error_ms_p1']:7.3f} {rt['error_ms_p50']:7.3f} "
                      f"{rt['error_ms_p99']:7.3f} {rt['error_ms_max']:7.3f}   {late}")
    print("\nThe delay line's release lateness (last column) isolates the emulator's own error.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
