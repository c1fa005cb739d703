"""Coexistence: BBRv3 (cc/bbr3.bpf.c) and a kernel CC (bbr v1, cubic) as two bulk flows on one
25 Mbit/s tbf bottleneck.

How the two CCs share the path: both flows run sender -> receiver through the tbf dumbbell with the
delay line (testbed.dumbbell.DelayDumbbell, RTT 20 ms by default), each iperf3 client choosing its
CC per socket (`iperf3 -C NAME`, TCP_CONGESTION) - the way the platform's cross traffic picks its
CC (mpvlab/topologies/cross_traffic.py) - while the route's default stays cubic. bbr3 is registered for the
run under a run-scoped name. Both flows start together and run `--seconds` (default 60).

Throughput: receiver-side bytes per 1 s interval (iperf3 server output), over the steady window
[`--warmup` s, end]; printed as each flow's Mbit/s, its share of the sum, the sum / ideal
(25 Mbit/s x 1448/1514) and Jain's fairness index; plus each flow's retransmissions, the tbf's
backlog (collectors/qdiscstat, median over the window, x BDP) and the host's CPU steal.

    sudo .venv/bin/python bench/bench_bbr3_coexist.py [--seconds 60] [--buffers 2,10] [--json OUT]
Not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()

from mpvlab import cc  # noqa: E402
from mpvlab.cc import bbr3  # noqa: E402
from mpvlab.collectors.qdiscstat import build_qdiscstat, load_samples, sample_queues  # noqa: E402
from mpvlab.core.hoststeal import StealMeter  # noqa: E402
from mpvlab.testbed.dumbbell import RECEIVER_ADDR, DelayDumbbell  # noqa: E402

RATE = 25_000_000
FRAME, PAYLOAD = 1514, 1448
IDEAL = RATE * PAYLOAD / FRAME
PORTS = (5341, 5342)
BBR3_NAME = "h20co3"


def two_flows(d: DelayDumbbell, ccs: tuple[str, str], seconds: float, work: Path) -> list[dict]:
    """Two iperf3 bulk flows started together, flow i with CC ccs[i]; their client JSONs (with the
    server's receiver-side intervals)."""
    assert d.bed is not None
    servers = [d.bed.popen(d.ns_b, ["iperf3", "-s", "-1", "-J", "-B", RECEIVER_ADDR, "-p", str(p)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in PORTS]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        listening = d.ns(d.ns_b, "ss", "-ltnH").stdout
        if all(f":{p}" in listening for p in PORTS):
            break
        time.sleep(0.05)
    outs = [work / f"client{i}.json" for i in range(2)]
    clients = []
    for i, (name, port) in enumerate(zip(ccs, PORTS)):
        with outs[i].open("w") as f:
            clients.append(d.bed.popen(d.ns_a, ["iperf3", "-c", RECEIVER_ADDR, "-p", str(port), "-C", name, "-J",
                                                "--get-server-output", "-t", str(seconds)],
                                       stdout=f, stderr=subprocess.STDOUT))
    for c in clients:
        c.wait(timeout=seconds + 60)
    for s in servers:
        try:
            s.wait(timeout=5)
        except subprocess.TimeoutExpired:
            s.terminate()
            s.wait(timeout=5)
    return [json.loads(o.read_text()) for o in outs]


def series(r: dict, warmup: float) -> list[float]:
    """Receiver-side bit/s per interval starting at or after `warmup`."""
    return [iv["sum"]["bytes"] * 8 / iv["sum"]["seconds"] for iv in r["server_output_json"]["intervals"]
            if iv["sum"]["start"] >= warmup - 1e-6 and iv["sum"]["seconds"] > 0.5]


def run_pair(other: str, buf_bdp: float, rtt_ms: float, seconds: float, warmup: float, work: Path) -> dict:
    bdp = RATE / 8 * rtt_ms / 1000
    work.mkdir(parents=True, exist_ok=True)
    with DelayDumbbell(prefix="h20k", rate_bit=RATE, limit_bytes=int(buf_bdp * bdp), rtt_ms=rtt_ms,
                       workdir=work) as d:
        with bbr3.load_bbr3(BBR3_NAME, "bbr3", workdir=work, state_csv=work / "state.csv",
                            events_csv=work / "events.csv", state_hz=20):
            t0 = time.monotonic_ns()
            with sample_queues(d.ns_r, work / "q", t0, hz=50), StealMeter() as m:
                res = two_flows(d, (BBR3_NAME, other), seconds, work)
        if not d.delay_alive():
            raise RuntimeError("delay line died")
    qrows, _ = load_samples(work / "q")
    backlog = [float(q["backlog_bytes"]) for q in qrows
               if q["dev"] == "h20kr1" and q["kind"] == "tbf" and float(q["t_s"]) >= warmup]
    # which CC each data socket ran: the bbr3 flow must show up in bbr3's own state export
    rows = bbr3.read_rows(work / "state.csv")
    bbr3_ports = {r["dport"] for r in rows if int(r["acks"]) > 1000}
    x = [statistics.fmean(series(r, warmup)) for r in res]
    jain = sum(x) ** 2 / (2 * sum(v * v for v in x))
    return {"other": other, "buf_bdp": buf_bdp, "rtt_ms": rtt_ms, "bbr3_mbps": x[0] / 1e6, "other_mbps": x[1] / 1e6,
            "bbr3_share": x[0] / sum(x), "sum_over_ideal": sum(x) / IDEAL, "jain": jain,
            "retx": [r["end"]["sum_sent"].get("retransmits", 0) for r in res],
            "queue_med_bdp": statistics.median(backlog) / bdp if backlog else float("nan"),
            "bbr3_socket_seen": str(PORTS[0]) in bbr3_ports and str(PORTS[1]) not in bbr3_ports,
            "steal": m.window.lost, "loadavg": float(Path("/proc/loadavg").read_text().split()[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--rtt", type=float, default=20.0, help="ms")
    ap.add_argument("--buffers", default="2,10", help="tbf limit, x BDP")
    ap.add_argument("--others", default="bbr,cubic")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (BPF, network namespaces)")
    cc.build()
    build_qdiscstat()
    print(f"== coexistence on one {RATE / 1e6:.0f} Mbit/s tbf, RTT {a.rtt:.0f} ms: bbr3 vs a kernel CC, two bulk "
          f"flows started together, {a.seconds:.0f} s, steady window [{a.warmup:.0f} s, end]; fair share 0.5")
    print(f"   {'pair':15s} {'buf':>5s} | {'bbr3':>6s} {'other':>6s} Mbit/s | {'bbr3 share':>10s} | "
          f"{'sum/ideal':>9s} | {'Jain':>5s} | {'retx bbr3/other':>15s} | {'q med':>6s} | steal  load | cc check")
    out = []
    with tempfile.TemporaryDirectory(prefix="h20-coexist-") as tmp:
        for buf in [float(b) for b in a.buffers.split(",")]:
            for other in a.others.split(","):
                r = run_pair(other, buf, a.rtt, a.seconds, a.warmup, Path(tmp) / f"{other}-{buf}")
                out.append(r)
                print(f"   bbr3 vs {other:7s} {buf:4.1f}x | {r['bbr3_mbps']:6.2f} {r['other_mbps']:6.2f}        | "
                      f"{r['bbr3_share']:10.3f} | {r['sum_over_ideal']:9.3f} | {r['jain']:5.3f} | "
                      f"{r['retx'][0]:7d}/{r['retx'][1]:<7d} | {r['queue_med_bdp']:5.2f}x | {r['steal']:5.1%} "
                      f"{r['loadavg']:4.1f} | {'ok' if r['bbr3_socket_seen'] else 'CC NOT AS ASKED'}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
