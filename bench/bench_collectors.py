"""CPU overhead of the MPTCP scheduler trace (collectors/build/mpvlab-schedtrace).

For each aggregate rate (two tbf paths of rate/2 each, mpvlab/testbed/twopath.py) a bulk MPTCP
transfer of ~DURATION seconds runs once without and once with the collector. Reported:
- collector process CPU (from /proc/PID/schedstat, only while the transfer runs) as % of
  one core,
- BPF program run time (kernel BPF run-time stats, enabled by --bpf-stats for the run;
  host-wide: includes the tcp_probe filter running for every other TCP socket) as % of
  one core over the collector's lifetime,
- their sum against the 2 % target, and the goodput with/without the collector.

    sudo .venv/bin/python bench/bench_collectors.py [--rates 25,100] [--duration 6]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()

from mpvlab import collectors  # noqa: E402
from mpvlab.collectors import load_summary, trace_scheduler  # noqa: E402
from mpvlab.testbed.twopath import TwoPath, cpu_ns, unique_tag  # noqa: E402

TARGET_PCT = 2.0
# TCP payload per 1514-byte frame with timestamps and the MPTCP DSS option (see tests)
GOODPUT_FACTOR = 1424 / 1514


def one_rate(rate_mbit: float, duration_s: float, tag: str, out_root: Path) -> dict[str, float]:
    nbytes = int(rate_mbit * 1e6 / 8 * GOODPUT_FACTOR * duration_s)
    with TwoPath(tag, rate_mbit / 2, limit_bytes=max(200_000, int(rate_mbit * 1e6 / 8 * 0.1))) as bed:
        bed.transfer(nbytes // 10)  # warm-up (ARP, route caches)
        base = bed.transfer(nbytes)
        out = out_root / f"r{int(rate_mbit)}"
        with trace_scheduler(bed.server_ns, out, time.monotonic_ns(), sample_hz=100,
                             bpf_stats=True) as proc:
            c0, w0 = cpu_ns(proc.pid), time.monotonic_ns()
            traced = bed.transfer(nbytes)
            c1, w1 = cpu_ns(proc.pid), time.monotonic_ns()
    s = load_summary(out)
    bpf_ns = sum(v["run_time_ns"] for v in (s["bpf_stats"] or {}).values() if v)
    bpf_runs = sum(v["run_cnt"] for v in (s["bpf_stats"] or {}).values() if v)
    life_s = s["stop_t"] - s["start_t"]
    conn = s["connections"][0] if s["connections"] else {}
    return {
        "rate": rate_mbit,
        "goodput_base": base.nbytes * 8 / base.seconds / 1e6,
        "goodput_traced": traced.nbytes * 8 / traced.seconds / 1e6,
        "proc_pct": 100.0 * (c1 - c0) / (w1 - w0),
        "bpf_pct": 100.0 * bpf_ns / 1e9 / life_s,
        "bpf_ns_per_run": bpf_ns / bpf_runs if bpf_runs else 0.0,
        "decisions_per_s": conn.get("decisions", 0) / traced.seconds,
        "switches": conn.get("path_switches", 0),
        "samples": s["samples"],
        "lost": s["lost_events"]["total"],
        "per_prog": {k: (v["run_cnt"], 100.0 * v["run_time_ns"] / 1e9 / life_s)
                     for k, v in (s["bpf_stats"] or {}).items() if v},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="25,100", help="aggregate Mbit/s, comma-separated")
    ap.add_argument("--duration", type=float, default=6.0, help="seconds per transfer")
    a = ap.parse_args()
    collectors.build()
    rates = [float(x) for x in a.rates.split(",") if x]
    with tempfile.TemporaryDirectory(prefix="hob-bench-") as tmp:
        results = [one_rate(r, a.duration, f"{unique_tag()[:6]}{i}", Path(tmp))
                   for i, r in enumerate(rates)]
    print(f"{'rate':>9} {'goodput no trace':>17} {'goodput traced':>15} {'collector CPU':>14} "
          f"{'BPF run time':>13} {'total':>7} {'target':>7} {'decisions/s':>12} {'ns/BPF run':>11} "
          f"{'lost':>5}")
    ok = True
    for r in results:
        tot = r["proc_pct"] + r["bpf_pct"]
        ok &= tot <= TARGET_PCT and r["lost"] == 0
        print(f"{r['rate']:>5g} Mb/s {r['goodput_base']:>8.2f} ({r['goodput_base'] / r['rate']:.3f}x)"
              f" {r['goodput_traced']:>6.2f} ({r['goodput_traced'] / r['rate']:.3f}x)"
              f" {r['proc_pct']:>12.3f} % {r['bpf_pct']:>11.3f} % {tot:>5.2f} % {TARGET_PCT:>5.1f} %"
              f" {r['decisions_per_s']:>12.0f} {r['bpf_ns_per_run']:>11.0f} {r['lost']:>5d}")
    for r in results:
        parts = ", ".join(f"{k} {n} runs {pct:.3f} %" for k, (n, pct) in r["per_prog"].items())
        print(f"{r['rate']:>5g} Mb/s BPF by program: {parts}")
    print("CPU figures are % of one core; goodput ratios are against the configured aggregate "
          f"rate (ideal payload ratio {GOODPUT_FACTOR:.3f}).")
    print("within target" if ok else "OVER TARGET or events lost")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
