"""Benchmark of mpvlab-qdiscstat: CPU cost and grid jitter.

Namespace a of a testbed.qdisc.QdiscPair holds 4 interfaces (lo + 3 veths whose peers live in b)
and 3 tbf qdiscs (plus lo's noqueue: 4 qdisc rows and 4 link rows per sample). A light
UDP stream crosses one tbf so counters move. The sampler runs at 100 Hz and 1 kHz
(and 1 kHz with --rt-prio); for each run we print

- CPU % of one core: (utime + stime) from /proc/PID/stat (10 ms ticks) and the
  nanosecond run time from /proc/PID/schedstat, over a window after start-up;
- grid jitter: actual sample time - scheduled grid point (t0 + k/hz), p50/p99/max, from
  the CSV (the actual time is the midpoint of the dump request, see qdiscstat.c);
- missed grid points (from the sampler's summary line);

and, for scale, the cost of one fork of `tc -s qdisc show` + `ip -s link show`, the
approach this sampler replaces.

    sudo .venv/bin/python bench/bench_qdiscstat.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
import tempfile
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()

from mpvlab.collectors.qdiscstat import build_qdiscstat, load_samples  # noqa: E402
from mpvlab.testbed.qdisc import QdiscPair  # noqa: E402

PY = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")

TRICKLE = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
buf = b"x" * 1000
while True:
    s.sendto(buf, (sys.argv[1], 9))
    time.sleep(0.002)
"""


def cpu_ticks(pid: int) -> int:
    # fields after the ")" of comm: utime is field 14, stime 15 (1-based, whole line)
    rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def run_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure(exe: Path, ns: str, hz: int, seconds: float, rt_prio: int | None,
            out: Path) -> dict[str, float]:
    iv_us = 1_000_000 // hz
    t0 = time.monotonic_ns()
    ready = out / "ready"
    argv = [str(exe), "--netns", f"/run/netns/{ns}", "--interval-us", str(iv_us), "--t0-ns",
            str(t0), "--qdisc-out", str(out / "qdisc.csv"), "--link-out", str(out / "link.csv"),
            "--ready-file", str(ready)]
    if rt_prio:
        argv += ["--rt-prio", str(rt_prio)]
    p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        while not ready.exists():
            if p.poll() is not None:
                raise SystemExit(f"sampler failed: {p.stderr.read() if p.stderr else ''}")
            time.sleep(0.01)
        time.sleep(0.5)  # past start-up (exec, first dumps)
        w0, c0, r0 = time.monotonic(), cpu_ticks(p.pid), run_ns(p.pid)
        time.sleep(seconds)
        w1, c1, r1 = time.monotonic(), cpu_ticks(p.pid), run_ns(p.pid)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=10)
    if p.returncode != 0:
        raise SystemExit(f"sampler exit {p.returncode}: {err}")
    wall = w1 - w0
    qrows, lrows = load_samples(out)
    ts = sorted({float(r["t_s"]) for r in qrows})
    iv_ns = iv_us * 1000
    late_us = sorted(((round(t * 1e9) % iv_ns) / 1e3) for t in ts[1:])
    m = re.search(r"missed=(\d+)", err)
    return {
        "cpu_stat_pct": 100 * (c1 - c0) / CLK_TCK / wall,
        "cpu_sched_pct": 100 * (r1 - r0) / 1e9 / wall,
        "us_per_sample": (r1 - r0) / 1e3 / (wall * hz),
        "samples": len(ts),
        "rows_per_sample": (len(qrows) + len(lrows)) / len(ts),
        "p50_us": statistics.median(late_us),
        "p99_us": pct(late_us, 0.99),
        "max_us": late_us[-1],
        "missed": float(m.group(1)) if m else float("nan"),
        "span_s": ts[-1] - ts[0],
    }


def fork_cost(ns: str, n: int = 40) -> float:
    """CPU seconds (children: tc/ip + their exec) per `tc -s qdisc` + `ip -s link` pair."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n):
        subprocess.run(["tc", "-n", ns, "-s", "qdisc", "show"], capture_output=True, check=True)
        subprocess.run(["ip", "-n", ns, "-s", "link", "show"], capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="measurement window per run")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root")
    exe = build_qdiscstat()
    # Three tbf'd veths from the sampled namespace; no static neighbours (a trickle keeps them warm).
    with QdiscPair(f"{os.getpid() % 100000:05d}", subnets=("10.78.1", "10.78.2", "10.78.3"), quiet=False) as bed:
        ns, devs = bed.a, bed.devs_a
        bed.bed.popen(ns, [PY, "-c", TRICKLE, "10.78.1.2"], "trickle",
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"namespace {ns}: 4 interfaces (lo + {', '.join(devs)}), 3 tbf + lo noqueue; "
              f"window {args.seconds:g} s per run; {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"{'run':<18}{'cpu% stat':>10}{'cpu% sched':>11}{'us/sample':>10}{'samples':>9}"
              f"{'expected':>9}{'missed':>7}{'jit p50':>9}{'p99':>8}{'max':>9}  (jitter us)")
        runs = [("100 Hz", 100, args.seconds, None), ("1 kHz", 1000, args.seconds / 2, None),
                ("1 kHz rt-prio 10", 1000, args.seconds / 4, 10)]
        for label, hz, secs, prio in runs:
            with tempfile.TemporaryDirectory(prefix="hqs-bench-") as d:
                r = measure(exe, ns, hz, secs, prio, Path(d))
            print(f"{label:<18}{r['cpu_stat_pct']:>10.2f}{r['cpu_sched_pct']:>11.2f}"
                  f"{r['us_per_sample']:>10.1f}{r['samples']:>9.0f}{r['span_s'] * hz + 1:>9.0f}"
                  f"{r['missed']:>7.0f}{r['p50_us']:>9.1f}{r['p99_us']:>8.1f}{r['max_us']:>9.1f}")
        print("target: < 1 % of a core at 100 Hz")
        c = fork_cost(ns)
        print(f"for scale: one `tc -s qdisc show` + `ip -s link show` fork pair = {c * 1e3:.2f} ms CPU "
              f"-> {c * 100 * 100:.0f} % of a core at 100 Hz")


if __name__ == "__main__":
    main()
