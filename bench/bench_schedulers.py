"""Benchmark of the MPTCP schedulers (schedulers/): default vs minrtt vs bdp on the platform's dual-path
testbed (tbf + NFQUEUE delay line, cubic). Prints figures with the configured values beside them.

    .venv/bin/python bench/bench_schedulers.py [--quick] [--out DIR]

Cases:
  share     3 Mbit/s paths, 10 / 50 ms one-way, demand 2 Mbit/s: byte share per path
  bulk      same paths, bulk sender: rate per path / tbf rate, total vs default, +/- the send-buffer bound
  cycle     path a 10 <-> 70 ms one-way (10 s square), path b 40 ms, demand 1 Mbit/s: switches
  steps     demand stepping below/above one path's capacity, 3 and 25 Mbit/s paths: conformance and
            steering latency, autotuned vs bounded send buffer
Needs root; about 6 minutes (--quick: about 2).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()

from mpvlab.links.schedule import Schedule  # noqa: E402
from mpvlab.testbed import dualpath as tb  # noqa: E402
from mpvlab.schedulers.params import sndbuf_for_paths  # noqa: E402

MS = 10**6


def paths_10_50(mbit: float) -> list[tb.PathCfg]:
    buf = max(100_000, int(mbit * 1e6 / 8 * 0.1))   # 100 ms of queue at the rate, at least 100 KB
    return [tb.PathCfg(mbit, Schedule.constant(10 * MS), buf), tb.PathCfg(mbit, Schedule.constant(50 * MS), buf)]


def bound(mbit: float) -> int:
    return sndbuf_for_paths([(mbit * 1e6, 0.02), (mbit * 1e6, 0.1)])


def lat(s: dict[str, Any], key: str) -> str:
    v = s["steering_latency_ms"][key]
    if not v["n"]:
        return "n=0"
    return f"n={v['n']} p50={v['p50']:.1f} p95={v['p95']:.1f} max={v['max']:.1f} ms"


def conf(s: dict[str, Any]) -> str:
    c = s["conformance"]
    if c["by_bytes"] is None:
        return "n/a (kernel default: no policy)"
    return (f"assigned {c['by_bytes']:.4f} of bytes ({c['by_decisions']:.4f} of data decisions), "
            f"on the wire {c['on_wire']:.4f} ({c['wire_bytes_excluded']} B sent on excluded subflows)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="hsc-bench-"))
    d = 5.0 if a.quick else 8.0
    print(f"results under {out}")

    print(f"\n== share: 3 Mbit/s paths a (10 ms) / b (50 ms) one-way, demand 2 Mbit/s, {d:g} s")
    for name in ("default", "minrtt", "bdp"):
        r = tb.run_case(name, {}, paths_10_50(3), 2e6, d, out / f"share-{name}")
        c = r.conn()
        print(f"{name:8s} share a={r.share('a'):.3f} b={r.share('b'):.3f}  received/demand="
              f"{r.transfer.received / (2e6 / 8 * d):.3f}  kernel path switches={c['path_switches']}  "
              f"conformance={conf(r.summary)}")

    print(f"\n== bulk: same paths, bulk sender, {d:g} s (rates are received frames / tbf rate 3 Mbit/s)")
    base = None
    for name, prm in (("default", {}), ("minrtt", {}), ("minrtt", {"sndbuf_bytes": bound(3)}),
                      ("bdp", {}), ("bdp", {"sndbuf_bytes": bound(3)})):
        r = tb.run_case(name, prm, paths_10_50(3), 0, d, out / f"bulk-{name}-{len(prm)}")
        tot = r.transfer.received / r.transfer.seconds
        base = base or tot
        sb = sorted({s["sndbuf"] for s in r.conn()["subflows"]})
        print(f"{name:8s} sndbuf={'autotuned' if not prm else prm['sndbuf_bytes']:>9} (kernel: {sb})  "
              f"a={r.rx_rate_bps('a') / 3e6:.3f}  b={r.rx_rate_bps('b') / 3e6:.3f}  "
              f"goodput={tot * 8 / 1e6:.3f} Mbit/s = {tot / base:.3f} x default")

    cyc = 12.0 if a.quick else 20.0
    print(f"\n== cycle: path a 10<->70 ms one-way (square, 10 s), b 40 ms, 3 Mbit/s, demand 1 Mbit/s, {cyc:g} s")
    for name in ("minrtt", "bdp"):
        p = [tb.PathCfg(3, Schedule.square(10 * MS, 60 * MS, 10 * 10**9, 0.5, 0)),
             tb.PathCfg(3, Schedule.constant(40 * MS))]
        r = tb.run_case(name, {}, p, 1e6, cyc, out / f"cycle-{name}")
        c = r.conn()
        print(f"{name:8s} preferred-path changes={c['preferred_changes']}  probes={c['probes']}  "
              f"priority changes={c['priority_changes']}  kernel path switches={c['path_switches']}  "
              f"share a={r.share('a'):.3f}")

    sd = 8.0 if a.quick else 12.0
    print(f"\n== steps: paths a 10 ms / b 50 ms one-way, demand 2/3 <-> 5/3 of one path's rate every 2 s, {sd:g} s")
    for mbit in (3, 25):
        for name in ("minrtt", "bdp"):
            for prm in ({}, {"sndbuf_bytes": bound(mbit)}):
                r = tb.run_case(name, prm, paths_10_50(mbit), mbit * 1e6 * 2 / 3, sd,
                                out / f"steps-{mbit}-{name}-{len(prm)}", rate_hi_bps=mbit * 1e6 * 5 / 3,
                                period_s=4.0)
                s = r.summary
                print(f"{mbit:2d} Mbit/s {name:6s} sndbuf={'autotuned' if not prm else prm['sndbuf_bytes']:>9}  "
                      f"conformance={conf(s)}")
                print(f"      decision->assignment {lat(s, 'decision_to_assignment')};  assignment->wire "
                      f"{lat(s, 'assignment_to_wire')};  decision->wire {lat(s, 'decision_to_wire')};  "
                      f"SET_FLAGS {s['set_flags']['calls']} calls, mean {s['set_flags']['mean_us']:.0f} us; "
                      f"received/demand={r.transfer.received / r.transfer.sent:.3f}")


if __name__ == "__main__":
    main()
