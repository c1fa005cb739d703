"""Benchmark of trace-driven capacity in the C delay line (links/delayline, mpvlab/links/capacity.py).
Not a test: every figure is printed beside its configured value.

1. For each shipped Mahimahi trace: a bulk TCP flow (iperf3, cubic) through the line alone (no
   delay, no queue limit = Mahimahi's default) for the whole trace (or --seconds). From the line's
   release log: delivered IP bytes per 100 ms window vs the trace's opportunities x 1500 B (total
   error and per-window error distribution, from 1 s after the start); departures that differ from
   Mahimahi's (reference model, packet for packet); release lateness vs the opportunity (all
   packets, and packets departing in the trace's busiest 10 % of windows = its peak rates).
2. Capacity: a synthetic trace of N opportunities per ms (84/ms = 1.01 Gbit/s of 1504-byte
   opportunities), bulk TCP for 5 s, no release log: delivered vs opportunities, lateness, CPU.

Run as root:  .venv/bin/python bench/bench_traces.py [--seconds S] [--only NAME] [--skip-traces]
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import time
from pathlib import Path
from typing import Any
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()
from mpvlab.testbed import delayline as H  # noqa: E402
from mpvlab.links import capacity as C  # noqa: E402

TRACES = ROOT / "links" / "traces" / "mahimahi"
NAMES = ["Verizon-LTE-short.down", "Verizon-LTE-short.up", "TMobile-LTE-short.down",
         "TMobile-LTE-short.up", "ATT-LTE-driving-2016.down", "ATT-LTE-driving-2016.up"]


def q(xs: list[float], p: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, int(p * len(ys) + 0.999999) - 1))] if ys else float("nan")


def one_trace(name: str, seconds: float) -> dict[str, Any]:
    tr = C.read_mahimahi_trace(TRACES / name)
    with H.Line() as ln:
        ln.tcp_buffers(32 << 20)
        ln.add_queue("rs", 0)
        rlog = ln.tmp / "rel.csv"
        t0 = time.monotonic_ns() + 300_000_000  # the flow starts ~0.3 s into the trace
        d = ln.delayline(H.constant(0), t0_ns=t0, extra=["--capacity-trace", str(tr.path),
                                                         "--release-log", str(rlog)])
        c0 = d.cpu_ticks()
        H.bulk_tcp(ln, seconds)
        cpu = d.cpu_ticks() - c0
        st = d.stop()
        rels = H.read_release_log(rlog)
    queued = [r for r in rels if r.fate in "AQS"]
    ref = C.mahimahi_departures(tr, [r.arrival_ns for r in queued], [r.len for r in queued])
    mism = sum(1 for r, x in zip(queued, ref) if (r.depart_ns if r.fate in "AS" else None) != x)
    w = H.window_errors(rels, tr.count_between)
    acc = [r for r in rels if r.fate == "A"]
    late = [(r.release_ns - r.depart_ns) / 1e3 for r in acc]
    early = sum(1 for r in acc if r.release_ns < r.depart_ns)
    # peak-rate windows: the top 10 % of 100 ms windows by opportunities, over the flow's span
    W = 100_000_000
    start, end = acc[0].depart_ns // W * W, acc[-1].depart_ns
    wins = [(tr.count_between(a, a + W), a) for a in range(start, end - W, W)]
    wins.sort(reverse=True)
    top = sorted(a for _, a in wins[:max(1, len(wins) // 10)])
    peak_bps = wins[0][0] * 1500 * 8 / 0.1 if wins else 0.0
    thresh_bps = wins[max(0, len(wins) // 10 - 1)][0] * 1500 * 8 / 0.1 if wins else 0.0
    late_peak = [(r.release_ns - r.depart_ns) / 1e3 for r in acc
                 if (i := bisect.bisect_right(top, r.depart_ns) - 1) >= 0 and r.depart_ns < top[i] + W]
    span_opps = tr.count_between(start, end)
    return {"trace": name, "trace_mean_mbit": tr.mean_bps / 1e6, "seconds": seconds,
            "span_mean_mbit": span_opps * 1500 * 8 / ((end - start) / 1e9) / 1e6,
            "windows": w, "mismatches_vs_mahimahi": mism, "packets": len(queued), "early": early,
            "lateness_us": {"p50": q(late, .5), "p99": q(late, .99), "max": max(late)},
            "peak": {"windows": len(top), "peak_mbit": peak_bps / 1e6, "from_mbit": thresh_bps / 1e6,
                     "packets": len(late_peak), "p99_us": q(late_peak, .99), "max_us": max(late_peak or [0])},
            "daemon_lateness_us": st["lateness_us"], "cpu_s": cpu / 100,
            "drops": {k: st[k] for k in ("drops_queue", "drops_overflow", "drops_netlink", "drops_local")}}


def capacity(per_ms: int, seconds: float) -> dict[str, Any]:
    with H.Line() as ln:
        f = ln.tmp / "flat.trace"
        f.write_text("1\n" * per_ms)
        ln.tcp_buffers(64 << 20)
        ln.add_queue("rs", 0)
        d = ln.delayline(H.constant(0), extra=["--capacity-trace", str(f)])
        c0 = d.cpu_ticks()
        t_start = time.monotonic()
        res = H.bulk_tcp(ln, seconds)
        wall = time.monotonic() - t_start
        cpu = d.cpu_ticks() - c0
        st = d.stop()
    opp_bps = per_ms * 1000 * 1504 * 8
    good = res["end"]["sum_received"]["bits_per_second"]
    ideal = per_ms * 1000 * 1448 * 8   # one 1500-byte IP packet (1448 B payload) per opportunity
    return {"opportunities_per_ms": per_ms, "opportunity_gbit": opp_bps / 1e9, "goodput_gbit": good / 1e9,
            "ideal_goodput_gbit": ideal / 1e9, "goodput_vs_ideal": good / ideal,
            "lateness_us": st["lateness_us"], "cpu_share": cpu / 100 / wall,
            "drops": {k: st[k] for k in ("drops_overflow", "drops_netlink", "drops_local")},
            "max_queue_packets": st["capacity"]["max_queue_packets"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=0, help="flow length per trace (default: the whole trace)")
    ap.add_argument("--only", choices=NAMES)
    ap.add_argument("--skip-traces", action="store_true")
    ap.add_argument("--json", type=Path, help="also write all figures here")
    a = ap.parse_args()
    H.build()
    out: dict[str, Any] = {"traces": [], "capacity": []}
    if not a.skip_traces:
        print("1. Shipped traces, bulk TCP through the line alone (no delay, no queue limit)")
        print(f"   {'trace':<27} {'s':>4} {'mean Mbit/s':>11} {'delivered/opps-1':>16} {'window err B min/p1/p50/p99/max':>34}"
              f" {'mism':>5} {'late p50/p99/max us':>20} {'peak Mbit/s (top10% from)':>26} {'peak p99/max us':>16}")
        for name in [a.only] if a.only else NAMES:
            secs = a.seconds or C.read_mahimahi_trace(TRACES / name).period_ms / 1000
            r = one_trace(name, secs)
            out["traces"].append(r)
            w, e = r["windows"], r["windows"]["window_error_bytes"]
            print(f"   {name:<27} {secs:>4.0f} {r['span_mean_mbit']:>11.2f} {w['total_error'] * 100:>+15.3f}%"
                  f" {e['min']:>7}/{e['p1']}/{e['p50']}/{e['p99']}/{e['max']:<5}"
                  f" {r['mismatches_vs_mahimahi']:>5} {r['lateness_us']['p50']:>6.0f}/{r['lateness_us']['p99']:.0f}/"
                  f"{r['lateness_us']['max']:.0f}"
                  f" {r['peak']['peak_mbit']:>12.1f} ({r['peak']['from_mbit']:.1f})"
                  f" {r['peak']['p99_us']:>9.0f}/{r['peak']['max_us']:.0f}", flush=True)
            print(f"      {w['windows']} windows of 100 ms over {w['span_s']:.1f} s; {r['packets']} packets;"
                  f" early releases {r['early']}; drops {r['drops']}; daemon CPU {r['cpu_s']:.2f} s", flush=True)
    print("\n2. Line capacity: flat synthetic trace, bulk TCP 5 s, no release log")
    for per_ms in (84, 168):
        r = capacity(per_ms, 5)
        out["capacity"].append(r)
        print(f"   {per_ms} opportunities/ms = {r['opportunity_gbit']:.3f} Gbit/s configured: goodput"
              f" {r['goodput_gbit']:.3f} Gbit/s vs ideal {r['ideal_goodput_gbit']:.3f} ({r['goodput_vs_ideal']:.3f});"
              f" lateness {json.dumps(r['lateness_us'])}; daemon {r['cpu_share'] * 100:.0f} % of a core;"
              f" drops {r['drops']}; max queue {r['max_queue_packets']} pkts", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
