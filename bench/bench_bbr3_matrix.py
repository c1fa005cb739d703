"""BBRv3 (cc/bbr3.bpf.c) over a matrix of tbf paths: rate x RTT x buffer, one bulk flow each.

Path: the tbf dumbbell with a delay line on the ACK path (testbed.dumbbell.DelayDumbbell): rate 3, 25,
100 Mbit/s; RTT 20, 100 ms; tbf limit 0.5, 2, 10 x BDP (BDP = rate x RTT, wire bytes); tbf burst
max(2 frames, 2 ms of the rate). One iperf3 bulk flow per config, `--seconds` long (default 20).
Steady state = from `--warmup` (default 5 s: STARTUP, DRAIN and the first PROBE_BW cycle at 100 ms are
over by then) to the end.

Per config:
- goodput / ideal: receiver-side bytes (iperf3 server intervals) in the steady window over
  rate x 1448/1514 (the payload a tbf counting 1514-byte frames carries); goal >= 0.95;
- standing queue: the tbf backlog sampled at 100 Hz by collectors/qdiscstat in the steady window,
  median and p90, over BDP; goal (deep buffer, 10 x BDP) <= 1.5 x BDP. Beside it, in packets: the BDP,
  the queue's p90 and bbr3's own cwnd p90 and bandwidth estimate (x rate) — without loss v3 bounds
  in-flight data by cwnd = 2 x BDP + the ack-aggregation allowance, +2 packets in PROBE_BW UP
  (bbr_quantization_budget), so a queue of up to cwnd - BDP packets is v3's own design; at a 5-packet
  BDP (3 Mbit/s, 20 ms) the 2 packets alone are 0.4 BDP;
- loss per round (the CC's own round accounting, bbr3 state CSV): share of steady-state rounds whose
  loss rate exceeded 2 %, and the median loss rate of the lossy ones; goal (shallow buffer, 0.5 x
  BDP): <= 2 % most of the time, i.e. few rounds over;
- order: STARTUP -> DRAIN -> PROBE_BW first, every PROBE_BW sub-state change one of v3's
  (mpvlab/cc/bbr3.py PROBE_BW_ORDER), each change starting where the previous ended; "ok" or what broke;
- CPU: steal over the run (mpvlab/core/hoststeal.py), 1-min load average, iperf3's sender / receiver CPU.

    sudo .venv/bin/python bench/bench_bbr3_matrix.py [--seconds 20] [--warmup 5] [--rates 3,25,100]
                                                     [--json OUT]
Not a test: throughput figures depend on the host; printed with the configured values beside them.
"""
from __future__ import annotations

import argparse
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
from mpvlab.testbed.dumbbell import DelayDumbbell, steady_goodput  # noqa: E402

FRAME, PAYLOAD = 1514, 1448
PORT = 5321
LOSS_THRESH = 0.02  # v3's loss_thresh


@dataclass
class Result:
    rate_mbit: float
    rtt_ms: float
    buf_bdp: float
    goodput_ratio: float
    queue_med_bdp: float
    queue_p90_bdp: float
    bdp_pkts: float         # the BDP in 1514-byte frames
    queue_p90_pkts: float
    cwnd_p90_pkts: float    # bbr3's cwnd (packets) over the steady window, p90
    bw_est_med: float       # bbr3's bandwidth estimate over the steady window, median, x rate
    rounds: int
    rounds_over_2pct: int
    lossy_rounds: int
    lossy_median_rate: float
    retrans_pct: float
    order: str
    steal: float
    loadavg: float
    cpu_snd: float
    cpu_rcv: float


def order_check(events: list[dict[str, str]], flow: str) -> str:
    trans = [e for e in events if e["flow_id"] == flow and e["kind"] == "transition"]
    first = [(e["from_mode"], e["to_mode"]) for e in trans[:2]]
    note = ""
    if first[:1] == [("STARTUP", "PROBE_BW")]:
        # v3 leaves STARTUP (full pipe, or too much loss in STARTUP) and checks DRAIN's exit in the
        # same ACK (bbr_check_drain): with inflight already at the target, DRAIN lasts no ACK and
        # the export sees STARTUP -> PROBE_BW:DOWN (seen with a 0.5 x BDP buffer).
        note = ", DRAIN within one ACK"
    elif first != [("STARTUP", "DRAIN"), ("DRAIN", "PROBE_BW")]:
        return f"start {first}"
    bad = set(bbr3.probe_bw_transitions(events, flow)) - bbr3.PROBE_BW_ORDER
    if bad:
        return f"unexpected {sorted(bad)}"
    for e0, e1 in zip(trans, trans[1:]):
        if (e1["from_mode"], e1["from_phase"]) != (e0["to_mode"], e0["to_phase"]):
            return f"chain broken at t_ns {e1['t_ns']}"
    n_cycles = sum(1 for p in bbr3.probe_bw_transitions(events, flow) if p == ("UP", "DOWN"))
    return f"ok ({len(trans)} changes, {n_cycles} UP->DOWN{note})"


def run_config(rate: int, rtt_ms: float, buf: float, seconds: float, warmup: float, work: Path) -> Result:
    bdp = rate / 8 * rtt_ms / 1000
    burst = max(2 * FRAME, int(rate / 8 * 0.002))
    limit = max(int(buf * bdp), FRAME)
    work.mkdir(parents=True, exist_ok=True)
    state, events = work / "state.csv", work / "events.csv"
    with DelayDumbbell(prefix="h20m", rate_bit=rate, burst_bytes=burst, limit_bytes=limit, rtt_ms=rtt_ms,
                       workdir=work) as d:
        with bbr3.load_bbr3("h20mx", "bbr3", workdir=work, state_csv=state, events_csv=events, state_hz=50):
            d.set_cc("h20mx")
            t0 = time.monotonic_ns()
            with sample_queues(d.ns_r, work / "q", t0, hz=100), StealMeter() as m:
                r = d.iperf(seconds, omit=0, port=PORT, server_output=True)
            d.set_cc("cubic")
        if not d.delay_alive():
            raise RuntimeError("delay line died")
    qrows, _ = load_samples(work / "q")
    # the client connects ~0.1 s after t0; close enough for a 5 s warm-up
    backlog = [float(q["backlog_bytes"]) for q in qrows
               if q["dev"] == "h20mr1" and q["kind"] == "tbf" and warmup <= float(q["t_s"]) <= seconds]
    rows, ev = bbr3.read_rows(state), bbr3.read_rows(events)
    acks: dict[str, int] = {}
    for row in rows:
        acks[row["flow_id"]] = max(acks.get(row["flow_id"], 0), int(row["acks"]))
    flow = max(acks, key=lambda k: acks[k])
    fr = [row for row in rows if row["flow_id"] == flow]
    t_start = int(fr[0]["t_ns"])
    steady = [row for row in fr if (int(row["t_ns"]) - t_start) / 1e9 >= warmup]
    a, b = steady[0], steady[-1]
    rounds = int(b["rounds"]) - int(a["rounds"])
    over = int(b["rounds_over_thresh"]) - int(a["rounds_over_thresh"])
    lossy = [e for e in ev if e["flow_id"] == flow and e["kind"] == "loss_round"
             and (int(e["t_ns"]) - t_start) / 1e9 >= warmup]
    lossy_rates = [int(e["round_lost"]) / max(1, int(e["round_delivered"]) + int(e["round_lost"])) for e in lossy]
    sent = r["end"]["sum_sent"]
    retrans = 100.0 * sent.get("retransmits", 0) * PAYLOAD / max(1, sent["bytes"])
    cpu = r["end"].get("cpu_utilization_percent", {})
    q = sorted(backlog) or [float("nan")]
    cwnds = sorted(float(row["cwnd"]) for row in steady)
    bw_est = statistics.median(float(row["bw_est_bps"]) for row in steady) / rate
    return Result(rate / 1e6, rtt_ms, buf, steady_goodput(r, warmup) / (rate * PAYLOAD / FRAME),
                  statistics.median(q) / bdp, q[int(0.9 * (len(q) - 1))] / bdp, bdp / FRAME,
                  q[int(0.9 * (len(q) - 1))] / FRAME, cwnds[int(0.9 * (len(cwnds) - 1))], bw_est, rounds, over, len(lossy),
                  statistics.median(lossy_rates) if lossy_rates else 0.0, retrans, order_check(ev, flow),
                  m.window.lost, float(Path("/proc/loadavg").read_text().split()[0]),
                  float(cpu.get("host_total", float("nan"))), float(cpu.get("remote_total", float("nan"))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--rates", default="3,25,100", help="Mbit/s, comma-separated")
    ap.add_argument("--rtts", default="20,100", help="ms")
    ap.add_argument("--buffers", default="0.5,2,10", help="x BDP")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (BPF, network namespaces)")
    cc.build()
    build_qdiscstat()
    rates = [int(float(x) * 1e6) for x in a.rates.split(",")]
    rtts = [float(x) for x in a.rtts.split(",")]
    bufs = [float(x) for x in a.buffers.split(",")]
    print(f"== bbr3 matrix: bulk iperf3 {a.seconds:.0f} s per config, steady state = [{a.warmup:.0f} s, end]; "
          "goals: goodput/ideal >= 0.95, deep-buffer queue <= 1.5 BDP, shallow-buffer rounds over 2 % loss rare")
    print(f"   {'rate':>5s} {'RTT':>4s} {'buf':>4s} | {'gp/ideal':>8s} | {'q med':>5s} {'q p90':>5s} (xBDP) | "
          f"{'BDP':>5s} {'q p90':>5s} {'cwnd':>5s} (pkts) {'bw est':>6s} | "
          f"{'rounds':>6s} {'>2%':>4s} {'lossy':>5s} {'med loss':>8s} {'retx%':>6s} | {'steal':>5s} {'load':>4s} "
          f"{'cpuS':>5s} {'cpuR':>5s} | order")
    results: list[Result] = []
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="h20-matrix-") as tmp:
        for rate in rates:
            for rtt in rtts:
                for buf in bufs:
                    res = run_config(rate, rtt, buf, a.seconds, a.warmup, Path(tmp) / f"{rate}-{rtt}-{buf}")
                    results.append(res)
                    print(f"   {res.rate_mbit:5.0f} {res.rtt_ms:4.0f} {res.buf_bdp:4.1f} | {res.goodput_ratio:8.3f} | "
                          f"{res.queue_med_bdp:5.2f} {res.queue_p90_bdp:5.2f}        | "
                          f"{res.bdp_pkts:5.1f} {res.queue_p90_pkts:5.1f} {res.cwnd_p90_pkts:5.0f}        "
                          f"{res.bw_est_med:6.3f} | {res.rounds:6d} "
                          f"{res.rounds_over_2pct:4d} {res.lossy_rounds:5d} {res.lossy_median_rate:8.3f} "
                          f"{res.retrans_pct:6.2f} | {res.steal:5.1%} {res.loadavg:4.1f} {res.cpu_snd:5.1f} "
                          f"{res.cpu_rcv:5.1f} | {res.order}", flush=True)
    print(f"   (rate Mbit/s, RTT ms, buffer x BDP; ideal = rate x 1448/1514; whole matrix "
          f"{time.monotonic() - t_all:.0f} s)")
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
