"""Benchmarks for the BBR-S BPF congestion control (cc/).

1. cost: per-ACK cost of BBR-S = mean run time of its cong_control program
   (bpf run-time statistics, enabled only for the duration of the measurement)
   during a bulk transfer over a 25 Mbit/s tbf dumbbell, per window size N.
2. bursty: the BBR-S paper's deep-buffer/bursty token bucket (tbf 25 Mbit/s,
   burst 1 MB, limit 10 MB) with on/off traffic (fixed-size "segments" with
   idle gaps, like a DASH player), kernel bbr vs bbr-s: bandwidth estimate over
   time relative to the configured rate, and share of time per BBR mode.

Prints figures as ratios or with the configured value beside them; not a test.
    sudo .venv/bin/python bench/bench_bbrs.py [--quick] [cost|bursty|all]
"""
from __future__ import annotations

import argparse
import csv
import ctypes
import fcntl
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import tempfile
from pathlib import Path
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()

from mpvlab import cc  # noqa: E402
from mpvlab.cc.bbr_modes import bbr_v1_mode  # noqa: E402
from mpvlab.testbed.dumbbell import RECEIVER_ADDR, Dumbbell  # noqa: E402

RATE = 25_000_000
IDEAL = RATE * 1448 / 1514  # payload bit/s a 25 Mbit/s tbf carries
PORT = 5301


# ------------------------------------------------------------ bpf run-time stats

class BpfStats:
    """Enable BPF run-time statistics while held.

    Preferred: the BPF_ENABLE_STATS syscall, which returns an fd and keeps
    stats on only while that fd is open (reference counted, so it cannot
    clobber anyone else's setting).  Fallback: the kernel.bpf_stats_enabled
    sysctl, restored on exit.
    """
    SYS_BPF = 321  # x86_64
    BPF_ENABLE_STATS = 32
    SYSCTL = Path("/proc/sys/kernel/bpf_stats_enabled")

    def __enter__(self) -> BpfStats:
        libc = ctypes.CDLL(None, use_errno=True)
        attr = (ctypes.c_uint32 * 32)()  # attr.enable_stats.type = BPF_STATS_RUN_TIME (0)
        self.fd = libc.syscall(self.SYS_BPF, self.BPF_ENABLE_STATS, ctypes.byref(attr), 4)
        self.old: str | None = None
        if self.fd < 0:
            self.old = self.SYSCTL.read_text().strip()
            self.SYSCTL.write_text("1\n")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        elif self.old is not None:
            self.SYSCTL.write_text(self.old + "\n")


def prog_stats(ids: tuple[int, ...]) -> dict[str, tuple[int, int]]:
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True, check=True)
    res = {}
    for p in json.loads(out.stdout):
        if p["id"] in ids:
            res[p.get("name", str(p["id"]))] = (int(p.get("run_time_ns", 0)), int(p.get("run_cnt", 0)))
    return res


def _cost_once(n: int, seconds: float, workdir: Path) -> dict[str, tuple[int, int]]:
    """Run one bulk transfer under BBR-S (n = 0: passthrough) and return the
    (run_time_ns, run_cnt) deltas of each struct_ops program."""
    with Dumbbell(prefix="hccb") as d:
        with cc.load_bbrs("hccbbrs_bench", max(n, 1), 85.0, 1.0, None, workdir,
                          passthrough=(n == 0)) as h:
            d.set_cc("hccbbrs_bench")
            with BpfStats():
                before = prog_stats(h.prog_ids)
                d.iperf(seconds, omit=0, port=PORT)
                after = prog_stats(h.prog_ids)
            d.set_cc("cubic")
    return {k: (after[k][0] - before.get(k, (0, 0))[0], after[k][1] - before.get(k, (0, 0))[1])
            for k in after}


def bench_cost(seconds: float, windows: list[int], rounds: int, workdir: Path) -> None:
    print(f"== per-ACK cost of BBR-S: mean run time of bbrs_cong_control per call (BPF stats), "
          f"bulk transfer over tbf {RATE/1e6:.0f} Mbit/s, {seconds:.0f} s per run, {rounds} round(s), "
          "configs interleaved; median over rounds")
    print("   'stock' = the same BPF wrappers calling only the kernel's bbr_main (baseline)")
    configs = [0, *windows]
    per: dict[int, list[float]] = {n: [] for n in configs}
    others: dict[str, list[float]] = {}
    for _ in range(rounds):
        for n in configs:
            res = _cost_once(n, seconds, workdir)
            t, c = res.get("bbrs_cong_control", (0, 0))
            if c:
                per[n].append(t / c)
            if n == windows[0]:
                for k, (tt, cc_) in res.items():
                    if cc_ and k != "bbrs_cong_control":
                        others.setdefault(k, []).append(tt / cc_)
    base = statistics.median(per[0])
    print(f"   stock   cong_control {base:7.0f} ns/ACK   (bbr_main alone; runs: "
          f"{', '.join(f'{v:.0f}' for v in per[0])})")
    for n in windows:
        m = statistics.median(per[n])
        verdict = "ok" if m <= 1000 else "MISSED"
        print(f"   N={n:<5d} cong_control {m:7.0f} ns/ACK   added by BBR-S {m - base:+5.0f} ns   "
              f"target total <= 1000 ns: {verdict}   (runs: {', '.join(f'{v:.0f}' for v in per[n])})")
    for k, v in sorted(others.items()):
        print(f"   N={windows[0]:<5d} {k:20s} {statistics.median(v):7.0f} ns/call")


# ------------------------------------------------------------ on/off traffic

def sink(port: int) -> None:
    """Receiver: accept one connection and read until EOF."""
    srv = socket.create_server((RECEIVER_ADDR, port))
    print("ready", flush=True)
    conn, _ = srv.accept()
    buf = bytearray(1 << 20)
    while conn.recv_into(buf):
        pass


def onoff(port: int, seg_bytes: int, gap_s: float, total_s: float, log: str) -> None:
    """Sender: write seg_bytes, wait until the receiver has it all (empty send
    queue, like a player finishing a segment), idle gap_s; repeat."""
    s = socket.create_connection((RECEIVER_ADDR, port))
    chunk = b"\0" * (1 << 16)
    t_end = time.monotonic() + total_s
    rows = []
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        left = seg_bytes
        while left > 0:
            left -= s.send(chunk[: min(len(chunk), left)])
        while True:  # SIOCOUTQ: bytes not yet acknowledged
            outq = struct.unpack("i", fcntl.ioctl(s.fileno(), 0x5411, b"\0\0\0\0"))[0]
            if outq == 0:
                break
            time.sleep(0.001)
        rows.append((t0, time.monotonic()))
        time.sleep(gap_s)
    s.close()
    Path(log).write_text(json.dumps(rows))


def run_onoff(d: Dumbbell, cc_name: str, seg: int, gap: float, total: float, workdir: Path,
              poll_ss: bool) -> tuple[list[tuple[float, float]], list[tuple[float, float, str]]]:
    """Returns segment (start, end) times and (t, bw_bps, mode) samples from ss (kernel bbr)."""
    py = sys.executable
    me = str(Path(__file__).resolve())
    d.set_cc(cc_name)
    srv = subprocess.Popen(["ip", "netns", "exec", d.ns_b, py, me, "_sink", str(PORT)],
                           stdout=subprocess.PIPE, text=True)
    assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
    log = workdir / f"{cc_name}.segments.json"
    samples: list[tuple[float, float, str]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.05):
            for i in cc.read_bbr_info(d.ns_a):
                if i["dport"] == PORT and i["bw_bps"] is not None:
                    samples.append((time.monotonic(), i["bw_bps"],
                                    bbr_v1_mode(i["pacing_gain"], i["cwnd_gain"]) or "?"))
    t = threading.Thread(target=poll)
    if poll_ss:
        t.start()
    try:
        subprocess.run(["ip", "netns", "exec", d.ns_a, py, me, "_onoff", str(PORT), str(seg),
                        str(gap), str(total), str(log)], check=True, timeout=total + 60)
    finally:
        stop.set()
        if poll_ss:
            t.join()
        srv.wait(timeout=10)
    d.set_cc("cubic")
    return [tuple(x) for x in json.loads(log.read_text())], samples


def summarize(label: str, segs: list[tuple[float, float]], seg: int, burst: int,
              est: list[tuple[float, float, str]]) -> None:
    rates = [seg * 8 / (e - s) for s, e in segs]
    # A full bucket passes `burst` wire bytes (burst*1448/1514 payload) at line
    # rate; the rest of the segment goes at the tbf rate.
    expect = seg * 8 / ((seg - burst * 1448 / 1514) * 8 / IDEAL)
    print(f"   {label}: {len(segs)} segments of {seg/1e6:.1f} MB, per-segment goodput / "
          f"ideal {IDEAL/1e6:.2f} Mbit/s: median {statistics.median(rates)/IDEAL:.3f}, "
          f"min {min(rates)/IDEAL:.3f} (full 1 MB bucket per segment predicts {expect/IDEAL:.3f})")
    if not est:
        print("   (no estimate samples)")
        return
    ratios = sorted(b / IDEAL for _, b, _ in est)
    q = lambda p: ratios[min(len(ratios) - 1, int(p * len(ratios)))]  # noqa: E731
    print(f"   {label}: bw estimate / ideal: p5 {q(0.05):.2f}  median {q(0.5):.2f}  "
          f"p95 {q(0.95):.2f}  max {ratios[-1]:.2f}  share > 1.10: "
          f"{sum(r > 1.10 for r in ratios)/len(ratios):.2%}  ({len(ratios)} samples)")
    modes: dict[str, int] = {}
    for _, _, m in est:
        modes[m] = modes.get(m, 0) + 1
    share = "  ".join(f"{m} {modes.get(m, 0)/len(est):.1%}"
                      for m in ("STARTUP", "DRAIN", "PROBE_BW", "PROBE_RTT"))
    print(f"   {label}: share of samples per mode: {share}")


def bench_bursty(total: float, workdir: Path, out: Path | None) -> None:
    seg, gap = 4_000_000, 0.5
    print(f"== deep buffer + bursty tbf: rate {RATE/1e6:.0f} Mbit/s, burst 1 MB, limit 10 MB; "
          f"on/off: {seg/1e6:.0f} MB segments, {gap:.1f} s gaps, {total:.0f} s per CC; veth RTT only")
    with Dumbbell(prefix="hccb", burst_bytes=1_000_000, limit_bytes=10_000_000) as d:
        segs, est = run_onoff(d, "bbr", seg, gap, total, workdir, poll_ss=True)
        summarize("bbr  ", segs, seg, 1_000_000, est)
        with (workdir / "bbr_ss.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "bw_est_bps", "mode"])
            w.writerows(est)
        state = workdir / "bbrs_state.csv"
        with cc.load_bbrs("hccbbrs_bench", 100, 85.0, 1.0, state, workdir, state_hz=20):
            segs, _ = run_onoff(d, "hccbbrs_bench", seg, gap, total, workdir, poll_ss=False)
        rows = list(csv.DictReader(state.open()))
        flows: dict[str, int] = {}
        for r in rows:
            flows[r["flow_id"]] = max(flows.get(r["flow_id"], 0), int(r["acks"]))
        flow = max(flows, key=lambda k: flows[k])
        mine = [r for r in rows if r["flow_id"] == flow and r["closed"] == "0"]
        est_s = [(int(r["t_ns"]) / 1e9, float(r["bw_est_bps"]), r["mode"]) for r in mine]
        summarize("bbr-s", segs, seg, 1_000_000, est_s)
        shadow = [(t, float(r["max_filter_bw_bps"]), r["mode"]) for (t, _, _), r in zip(est_s, mine)]
        ratios = sorted(b / IDEAL for _, b, _ in shadow)
        print(f"   bbr-s: stock max filter on the same samples / ideal: median "
              f"{ratios[len(ratios)//2]:.2f}  max {ratios[-1]:.2f}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name in ("bbr_ss.csv", "bbrs_state.csv", "bbr.segments.json", "hccbbrs_bench.segments.json"):
            if (workdir / name).exists():
                (out / name).write_bytes((workdir / name).read_bytes())
        print(f"   raw series written to {out}/ (t in CLOCK_MONOTONIC seconds)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_sink":
        return sink(int(sys.argv[2]))
    if len(sys.argv) > 1 and sys.argv[1] == "_onoff":
        return onoff(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
                     float(sys.argv[5]), sys.argv[6])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=["cost", "bursty", "all"])
    ap.add_argument("--quick", action="store_true", help="short runs")
    ap.add_argument("--out", type=Path, help="keep the raw time series (CSV) here")
    a = ap.parse_args()
    cc.build()
    with tempfile.TemporaryDirectory(prefix="hcc-bench-") as tmp:
        work = Path(tmp)
        if a.what in ("cost", "all"):
            bench_cost(3 if a.quick else 6, [100] if a.quick else [10, 100, 1000],
                       1 if a.quick else 3, work)
        if a.what in ("bursty", "all"):
            bench_bursty(8 if a.quick else 25, work, a.out)


if __name__ == "__main__":
    main()
