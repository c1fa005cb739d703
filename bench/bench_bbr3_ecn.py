"""BBRv3's ECN response (cc/bbr3.bpf.c, param `ecn`) at a link that marks: the virtual-queue marker
(mpvlab/links/ecn.py) on the tbf of the dumbbell, against the same link without a response.

Path: testbed.dumbbell.DelayDumbbell, 25 Mbit/s tbf on the router's egress to the receiver, RTT 4 ms
(the delay line on the ACK path; v3 uses ECN only while min_rtt <= 5 ms, ECN_MAX_RTT_US), a deep
buffer of 10 x BDP (125 KB), burst 3028 B (2 frames), step marking at K = 1 x BDP (12.5 KB = 4 ms).
One iperf3 bulk flow per config, `--seconds` long (default 20), steady state from `--warmup` (5 s).
`net.ipv4.tcp_ecn` is set in the sender's and receiver's namespaces only.

Configs (the marker is attached in all of them; it counts not-ECT packets without marking them):
- bbr3+ecn:   ECN negotiated, bbr3 with `ecn` on (v3's response: ecn_alpha, inflight_lo cut);
- bbr3:       ECN negotiated and marked, bbr3 with `ecn` off (the marks are echoed and ignored);
- cubic+ecn:  ECN negotiated, CUBIC (halves cwnd once per window on ECE): the marker end to end;
- cubic:      ECN not negotiated (tcp_ecn=0): not-ECT, never marked, CUBIC fills the buffer.

Per config: goodput over rate x 1448/1514; the tbf backlog (collectors/qdiscstat, 200 Hz) p50/p90
and the virtual queue's (the marker's own samples, 200 Hz) p50/p90 in the steady window, and the
mean |virtual - real| between each qdisc sample and the nearest marker sample (the two samplers
are not synchronised; a 5 ms grid at 25 Mbit/s moves the queue by up to 15.6 KB); tbf drops and
the sender's retransmits; ECT packets and CE marks; bbr3's ecn_alpha (median of its state export
in the steady window, a fraction) and whether ECN was eligible; the tbf's dequeue rate over the
configured one where it stayed backlogged through the steady window (qdiscstat sent_bytes).

    sudo .venv/bin/python bench/bench_bbr3_ecn.py [--seconds 20] [--warmup 5] [--k-bdp 1] [--rtt-ms 4]
                                                  [--configs ...]
                                                  [--json OUT]
Not a test: figures depend on the host; printed with the configured values beside them.
"""
from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()

from mpvlab import cc  # noqa: E402
from mpvlab.cc import bbr3  # noqa: E402
from mpvlab.collectors.qdiscstat import build_qdiscstat, load_samples, sample_queues  # noqa: E402
from mpvlab.core.hoststeal import StealMeter  # noqa: E402
from mpvlab.core.netns import Netns  # noqa: E402
from mpvlab.links import ecn  # noqa: E402
from mpvlab.testbed.dumbbell import DelayDumbbell, steady_goodput  # noqa: E402

FRAME, PAYLOAD = 1514, 1448
PORT = 5343
RATE = 25_000_000
RTT_MS = 4.0                             # default; --rtt-ms
BURST = 2 * FRAME
HZ = 200
CONFIGS = {"bbr3+ecn": ("bbr3", True, True), "bbr3": ("bbr3", False, True),
           "cubic+ecn": ("cubic", False, True), "cubic": ("cubic", False, False)}


@dataclass
class Result:
    config: str
    goodput_ratio: float
    q_p50_bdp: float
    q_p90_bdp: float
    vq_p50_bdp: float
    vq_p90_bdp: float
    vq_minus_q_mean_kb: float
    abs_diff_mean_kb: float
    tbf_drops: int
    retrans: int
    ect: int
    not_ect: int
    marked: int
    ecn_alpha: float | None
    ecn_eligible: str
    tbf_rate_ratio: float
    steal: float


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[int(p * (len(xs) - 1))] if xs else float("nan")


def run_config(label: str, seconds: float, warmup: float, work: Path, K: int, rtt_ms: float = RTT_MS) -> Result:
    """One config: K in bytes; the buffer is 10 x BDP at `rtt_ms`."""
    BDP = RATE / 8 * rtt_ms / 1000
    LIMIT = int(10 * BDP)
    algo, ecn_param, negotiate = CONFIGS[label]
    work.mkdir(parents=True, exist_ok=True)
    state, events = work / "state.csv", work / "events.csv"
    with DelayDumbbell(prefix="h20e", rate_bit=RATE, burst_bytes=BURST, limit_bytes=LIMIT, rtt_ms=rtt_ms,
                       workdir=work) as d:
        assert d.bed is not None
        for ns in (d.ns_a, d.ns_b):
            Netns(ns).sysctl("net.ipv4.tcp_ecn", "1" if negotiate else "0")
        marker = ecn.start_marker(Netns(d.ns_r), "h20er1", RATE, K, LIMIT, name=ecn.marker_name(f"mv{d.bed.run_id}b"),
                                  label="bench", workdir=work, sample_hz=HZ,
                                  popen=lambda argv, log: d.bed.popen(d.ns_r, argv, "ecnmark", stdout=log, stderr=log))
        t0 = time.monotonic_ns()
        if algo == "bbr3":
            with bbr3.load_bbr3("h20ex", "bbr3", ecn=ecn_param, workdir=work, state_csv=state, events_csv=events,
                                state_hz=50):
                d.set_cc("h20ex")
                before = marker.snapshot()
                with sample_queues(d.ns_r, work / "q", t0, hz=HZ), StealMeter() as m:
                    r = d.iperf(seconds, omit=0, port=PORT, server_output=True)
                after = marker.snapshot()
                d.set_cc("cubic")
        else:
            d.set_cc("cubic")
            before = marker.snapshot()
            with sample_queues(d.ns_r, work / "q", t0, hz=HZ), StealMeter() as m:
                r = d.iperf(seconds, omit=0, port=PORT, server_output=True)
            after = marker.snapshot()
        marker.stop()
        if not d.delay_alive():
            raise RuntimeError("delay line died")
    counts = ecn.window(before, after)
    qrows, _ = load_samples(work / "q")
    tbf = [q for q in qrows if q["dev"] == "h20er1" and q["kind"] == "tbf"]
    steady = [q for q in tbf if warmup <= float(q["t_s"]) <= seconds]
    q = [float(x["backlog_bytes"]) for x in steady]
    drops = int(tbf[-1]["drops"]) - int(tbf[0]["drops"]) if tbf else -1
    vrows = [v for v in ecn.load_samples(marker.files["samples"], t0) if warmup <= v["t_s"] <= seconds]
    vq = [v["vq_backlog_bytes"] for v in vrows]
    # nearest marker sample to each qdisc sample
    vt = [v["t_s"] for v in vrows]
    diffs = []
    for x in steady:
        i = bisect.bisect_left(vt, float(x["t_s"]))
        cands = [j for j in (i - 1, i) if 0 <= j < len(vt)]
        if cands:
            j = min(cands, key=lambda j: abs(vt[j] - float(x["t_s"])))
            if abs(vt[j] - float(x["t_s"])) <= 1.0 / HZ:
                diffs.append(vq[j] - float(x["backlog_bytes"]))
    # The tbf's dequeue rate over the steady window when it never ran empty (a backlogged token bucket
    # sends at its real rate): what the virtual queue's drain (the configured rate) is compared with.
    rate_ratio = float("nan")
    if len(steady) > 2 and min(q) > 0:
        dt = float(steady[-1]["t_s"]) - float(steady[0]["t_s"])
        rate_ratio = (int(steady[-1]["sent_bytes"]) - int(steady[0]["sent_bytes"])) * 8 / dt / RATE
    alpha, eligible = None, "-"
    if algo == "bbr3":
        rows = bbr3.read_rows(state)
        acks: dict[str, int] = {}
        for row in rows:
            acks[row["flow_id"]] = max(acks.get(row["flow_id"], 0), int(row["acks"]))
        flow = max(acks, key=lambda k: acks[k])
        fr = [row for row in rows if row["flow_id"] == flow]
        t_start = int(fr[0]["t_ns"])
        st = [row for row in fr if (int(row["t_ns"]) - t_start) / 1e9 >= warmup]
        alpha = statistics.median(float(row["ecn_alpha"]) for row in st) if st else None
        eligible = "yes" if any(row["ecn_eligible"] == "1" for row in st) else "no"
    return Result(label, steady_goodput(r, warmup) / (RATE * PAYLOAD / FRAME), pct(q, .5) / BDP, pct(q, .9) / BDP,
                  pct(vq, .5) / BDP, pct(vq, .9) / BDP,
                  statistics.mean(diffs) / 1000 if diffs else float("nan"),
                  statistics.mean(abs(x) for x in diffs) / 1000 if diffs else float("nan"),
                  drops, int(r["end"]["sum_sent"].get("retransmits", 0)), counts["ect"], counts["not_ect"],
                  counts["marked"], alpha, eligible, rate_ratio, m.window.lost)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--k-bdp", type=float, default=1.0, help="mark threshold K in BDPs (default 1)")
    ap.add_argument("--rtt-ms", type=float, default=RTT_MS,
                    help="RTT (default 4; above 5 ms v3 never becomes ECN-eligible)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (BPF, network namespaces)")
    cc.build()
    build_qdiscstat()
    ecn.check_built()
    BDP = RATE / 8 * a.rtt_ms / 1000
    LIMIT = int(10 * BDP)
    k = int(a.k_bdp * BDP)
    print(f"== bbr3 ECN: {RATE / 1e6:.0f} Mbit/s tbf, RTT {a.rtt_ms:g} ms, BDP {BDP / 1000:.1f} KB, buffer "
          f"{LIMIT / BDP:.0f} x BDP, mark threshold K = {k / BDP:g} x BDP ({k} B); bulk {a.seconds:.0f} s, "
          f"steady from {a.warmup:.0f} s")
    print(f"   {'config':10s} | {'gp/ideal':>8s} | {'q p50':>5s} {'q p90':>5s} | {'vq p50':>6s} {'vq p90':>6s} (xBDP) | "
          f"{'vq-q':>6s} {'|vq-q|':>6s} (KB) | {'drops':>5s} {'retx':>5s} | {'ECT':>6s} {'notECT':>6s} {'CE':>5s} | "
          f"{'alpha':>5s} {'elig':>4s} | {'tbf rate':>8s} | steal")
    results = []
    with tempfile.TemporaryDirectory(prefix="h20e-ecn-") as tmp:
        for label in a.configs.split(","):
            res = run_config(label, a.seconds, a.warmup, Path(tmp) / label, k, a.rtt_ms)
            results.append(res)
            al = f"{res.ecn_alpha:5.3f}" if res.ecn_alpha is not None else "    -"
            print(f"   {res.config:10s} | {res.goodput_ratio:8.3f} | {res.q_p50_bdp:5.2f} {res.q_p90_bdp:5.2f} | "
                  f"{res.vq_p50_bdp:6.2f} {res.vq_p90_bdp:6.2f}        | {res.vq_minus_q_mean_kb:6.2f} "
                  f"{res.abs_diff_mean_kb:6.2f}      | {res.tbf_drops:5d} {res.retrans:5d} | {res.ect:6d} "
                  f"{res.not_ect:6d} {res.marked:5d} | {al} {res.ecn_eligible:>4s} | {res.tbf_rate_ratio:8.5f} | "
                  f"{res.steal:.1%}", flush=True)
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
