"""BBRv3-S against BBRv3 on the BBR-S study's bursty token bucket (docs/studies.md §2): tbf 25 Mbit/s,
burst 1 MB, limit 10 MB, RTT 20 ms (delay line on the ACK path, testbed.dumbbell.DelayDumbbell).

One bulk iperf3 flow per CC, `--seconds` long (default 20); steady window [`--warmup`, end]. Per CC:
the bandwidth estimate the CC used (state CSV `bw_est_bps`: bbr3 min(max_bw, bw_lo), bbr3-s the
percentile x factor) and, for bbr3-s, the raw percentile, over the link's payload rate
(25 Mbit/s x 1448/1514): median, p95, max and share of samples above 1.1 x; goodput / link; the tbf
backlog (median, x BDP); the host's CPU steal.

`--onoff` replaces the bulk flow with the study's DASH-like on/off sender of bench/bench_bbrs.py
(4 MB "segments", each sent and fully acknowledged, then 0.5 s idle); goodput is then the median
per-segment rate (a full 1 MB bucket per segment predicts 1.314 x the link).

`--old-object PATH` adds bbr3-s built from another bbr3.bpf.c (e.g. main's, before the censoring of
pacing-limited samples) for a before/after comparison:
    git show main:cc/bbr3.bpf.c > /tmp/x/bbr3.bpf.c
    clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -Icc/build -Icc -c /tmp/x/bbr3.bpf.c -o /tmp/x/bbr3.bpf.o

    sudo .venv/bin/python bench/bench_bbr3s_bursty.py [--seconds 20] [--onoff] [--old-object PATH] [--json OUT]
Not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()
for _p in (ROOT / "bench",):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from mpvlab import cc  # noqa: E402
from mpvlab.cc import bbr3  # noqa: E402
from mpvlab.cc.user_bpf import load_bpf_cc  # noqa: E402
from mpvlab.collectors.qdiscstat import build_qdiscstat, load_samples, sample_queues  # noqa: E402
from mpvlab.core.hoststeal import StealMeter  # noqa: E402
from mpvlab.testbed.dumbbell import DelayDumbbell  # noqa: E402
import bench_bbrs  # noqa: E402  (the on/off sender and sink)

RATE, BURST, LIMIT, RTT_MS = 25_000_000, 1_000_000, 10_000_000, 20.0
SEGMENT, GAP_S = 4_000_000, 0.5
IDEAL = RATE * 1448 / 1514
BDP = RATE / 8 * RTT_MS / 1000


def dist(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"median": statistics.median(s), "p95": s[int(0.95 * (len(s) - 1))], "max": s[-1],
            "over_1.1": sum(x > 1.1 for x in s) / len(s)}


def run(label: str, obj: Path, params: dict[str, int], seconds: float, warmup: float, work: Path,
        onoff: bool = False) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    with DelayDumbbell(prefix="h20b", rate_bit=RATE, burst_bytes=BURST, limit_bytes=LIMIT, rtt_ms=RTT_MS,
                       workdir=work) as d:
        with load_bpf_cc(obj, "h20bur", params, workdir=work, state_csv=work / "state.csv",
                         events_csv=work / "events.csv", state_hz=50):
            d.set_cc("h20bur")
            t0 = time.monotonic_ns()
            with sample_queues(d.ns_r, work / "q", t0, hz=50), StealMeter() as m:
                if onoff:
                    segs, _ = bench_bbrs.run_onoff(d, "h20bur", SEGMENT, GAP_S, seconds, work, poll_ss=False)
                else:
                    r = d.iperf(seconds, omit=warmup, port=5351)
            d.set_cc("cubic")
    rows = bbr3.read_rows(work / "state.csv")
    acks: dict[str, int] = {}
    for row in rows:
        acks[row["flow_id"]] = max(acks.get(row["flow_id"], 0), int(row["acks"]))
    flow = max(acks, key=lambda k: acks[k])
    fr = [row for row in rows if row["flow_id"] == flow]
    t_start = int(fr[0]["t_ns"])
    steady = [row for row in fr if (int(row["t_ns"]) - t_start) / 1e9 >= warmup]
    qrows, _ = load_samples(work / "q")
    backlog = [float(q["backlog_bytes"]) for q in qrows
               if q["dev"] == "h20br1" and q["kind"] == "tbf" and float(q["t_s"]) >= warmup]
    if onoff:   # median per-segment rate of the segments that start after the warm-up
        t_first = segs[0][0]
        rates = [SEGMENT * 8 / (e - b) for b, e in segs if b - t_first >= warmup] or \
            [SEGMENT * 8 / (e - b) for b, e in segs]
        goodput = statistics.median(rates) / IDEAL
    else:
        goodput = float(r["end"]["sum_received"]["bits_per_second"]) / IDEAL
    out = {"cc": label, "goodput": goodput,
           "est": dist([float(x["bw_est_bps"]) / IDEAL for x in steady]),
           "modes": {k: sum(1 for x in steady if bbr3.state_label(x["mode"], x["phase"]) == k) / len(steady)
                     for k in sorted({bbr3.state_label(x["mode"], x["phase"]) for x in steady})},
           "queue_med_bdp": statistics.median(backlog) / BDP if backlog else float("nan"),
           "steal": m.window.lost}
    if params.get("estimator"):
        out["raw"] = dist([float(x["raw_percentile_bw_bps"]) / IDEAL for x in steady if x["raw_percentile_bw_bps"]])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--onoff", action="store_true", help="DASH-like on/off segments instead of bulk")
    ap.add_argument("--old-object", type=Path, help="a bbr3.bpf.o to compare (run as bbr3-s)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (BPF, network namespaces)")
    cc.build()
    build_qdiscstat()
    s_params = bbr3.loader_params("bbr3-s", 100, 85.0, 0.85)
    runs = [("bbr3", bbr3.OBJECT, bbr3.loader_params("bbr3")), ("bbr3-s", bbr3.OBJECT, s_params)]
    if a.old_object:
        runs.append(("bbr3-s (old object)", a.old_object, s_params))
    print(f"== bursty token bucket: tbf {RATE / 1e6:.0f} Mbit/s, burst {BURST / 1e6:.0f} MB, limit {LIMIT / 1e6:.0f} MB, "
          f"RTT {RTT_MS:.0f} ms; {'on/off 4 MB segments, 0.5 s gaps' if a.onoff else 'bulk'} {a.seconds:.0f} s, steady [{a.warmup:.0f} s, end]; x = / link payload rate "
          f"{IDEAL / 1e6:.2f} Mbit/s; bbr3-s N 100, p 85, factor 0.85")
    res = []
    with tempfile.TemporaryDirectory(prefix="h20-bursty-") as tmp:
        for label, obj, params in runs:
            r = run(label, obj, params, a.seconds, a.warmup, Path(tmp) / label.replace(" ", "_"), a.onoff)
            res.append(r)
            e = r["est"]
            line = (f"   {label:20s} {'segment goodput median' if a.onoff else 'goodput'} {r['goodput']:.3f}x | estimate median {e['median']:.3f}x p95 {e['p95']:.3f}x "
                    f"max {e['max']:.2f}x >1.1x {e['over_1.1']:.1%}")
            if "raw" in r:
                line += f" | raw pct median {r['raw']['median']:.3f}x p95 {r['raw']['p95']:.3f}x"
            line += f" | queue med {r['queue_med_bdp']:.2f} BDP | steal {r['steal']:.1%}"
            print(line, flush=True)
            print("      state shares: " + ", ".join(f"{k} {v:.0%}" for k, v in r["modes"].items()))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
