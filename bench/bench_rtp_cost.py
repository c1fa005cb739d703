#!/usr/bin/env python3
"""Per-packet cost of the rtp sender's rate controllers and of TWCC feedback at 5 Mbit/s (issue 18):
runs the Go benchmarks in rtp/cmd/mpvlab-rtp/cost_test.go (their comment says what each measures)
and prints, per controller, the CPU time per packet beside the packet rate it ran at, less the
"none" baseline (the same stream and feedback with no controller), and the viewer's / sender's
TWCC work per packet; and webrtc-bbr's controller alone on a virtual clock (its window keeps the
live stream far below 5 Mbit/s, rtp/README.md). Offline, like rtp/Makefile: the machine's Go
(GOTOOLCHAIN=local), the module cache setup.sh filled (GOFLAGS=-mod=readonly, GOPROXY=off).

Usage: .venv/bin/python bench/bench_rtp_cost.py [--count N] [--packets P]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
RTP = REPO / "rtp"
LINE = re.compile(r"^Benchmark(\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$")


def go_binary() -> str:
    """As rtp/Makefile: the Go on PATH, else /usr/local/go/bin/go."""
    return shutil.which("go") or "/usr/local/go/bin/go"


def run_benchmarks(count: int, packets: int) -> dict[str, dict[str, list[float]]]:
    """{benchmark: {unit: [value per count]}} from `go test -bench`."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "GOPROXY": "off"}
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    # The stream runs in real time (packets / ~510 pkt/s each); the feedback loops are fast.
    for pattern, benchtime in (("^BenchmarkStream5Mbit$", f"{packets}x"), ("^Benchmark(Feedback|BBRController)", "1s")):
        cp = subprocess.run([go_binary(), "test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime,
                             "-count", str(count), "./cmd/mpvlab-rtp"], cwd=RTP, env=env, capture_output=True,
                            text=True, timeout=600)
        if cp.returncode != 0:
            raise SystemExit(cp.stdout + cp.stderr)
        for line in cp.stdout.splitlines():
            m = LINE.match(line)
            if not m:
                continue
            fields = m.group(3).split()
            for value, unit in zip(fields[::2], fields[1::2]):
                out[m.group(1)][unit].append(float(value))
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3, help="repetitions of each benchmark (medians printed)")
    ap.add_argument("--packets", type=int, default=1500, help="packets per stream run (~3 s of real time)")
    args = ap.parse_args()
    r = run_benchmarks(args.count, args.packets)
    base = med(r["Stream5Mbit/none"]["cpu-ns/pkt"])
    print(f"5 Mbit/s stream, 1220-byte RTP packets, 30 fps, TWCC feedback every 100 ms; medians of {args.count}")
    print(f"{'controller':<12} {'pkt/s':>7} {'Mbit/s':>7} {'cpu-ns/pkt':>11} {'less none':>10} {'cpu-%':>6} "
          f"{'target Mbit/s':>14}")
    for name in ("none", "gcc", "webrtc-bbr"):
        m = r[f"Stream5Mbit/{name}"]
        ns = med(m["cpu-ns/pkt"])
        print(f"{name:<12} {med(m['pkt/s']):7.0f} {med(m['Mbit/s']):7.2f} {ns:11.0f} "
              f"{ns - base if name != 'none' else 0:10.0f} {med(m['cpu-%']):6.2f} {med(m['target-Mbit/s']):14.2f}")
    print(f"webrtc-bbr's controller alone, virtual clock at 5 Mbit/s (no pacer; feedback build included): "
          f"{med(r['BBRControllerVirtualTime']['ns/op']):.0f} ns/packet")
    for name, what in (("FeedbackBuild", "viewer: record arrival + build/marshal feedback"),
                       ("FeedbackParse", "sender: ledger + unmarshal + account + decode to acks")):
        print(f"TWCC {what}: {med(r[name]['ns/op']):.0f} ns/packet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
