"""Benchmark of the NFQUEUE delay line (links/delayline). Not a test.

Prints, with the configured value beside each figure:
  1. RTT error (mean, p99, max) at 0/10/60/100 ms one-way delay (delay on the
     reply direction only, so RTT = delay + base), against the base RTT of the
     same line without a delay line; the daemon's own release lateness.
  2. Maximum TCP throughput through the line (veth, no tbf, 10 ms delay) and
     the daemon's CPU use from /proc/PID/stat; same flow without the line.
  3. Time error of delay steps: step-log vs schedule, and as seen by a 1 ms
     ICMP probe (first reply showing the new delay vs the scheduled step).
  4. Cost per MTU packet (the line's own user+sys CPU over the packets it
     handled) and release lateness p50/p99/max at 3, 25, 100 Mbit/s (shaped
     by a tbf *before* the line, as in a run, TSO/GSO off so every skb is one
     MTU packet) and at the line's MTU-packet ceiling (no tbf); wake-ups and
     packets per verdict message; for each --batch-tolerance-us given, and for
     an older build (--old BINARY) in the same run, on the same host; with
     --backend xdp (repeatable with --backend nfqueue) also the AF_XDP line
     (links/delayline/xdp) in the same beds: packets per wake-up and per tx kick.

Run as root:  .venv/bin/python bench/bench_delayline.py [--quick]
              .venv/bin/python bench/bench_delayline.py --only cost --old /tmp/old/mpvlab-delayline
              .venv/bin/python bench/bench_delayline.py --only cost --backend nfqueue --backend xdp \
                  --tolerance 150 --profile
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()
from mpvlab.testbed import delayline as H  # noqa: E402
from mpvlab.testbed import xdpline as X  # noqa: E402


def q(xs: list[float], p: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, int(p * len(ys) + 0.999999) - 1))]


def rtts_ms(samples: list[dict[str, Any]]) -> list[float]:
    return [s["rtt_ns"] / 1e6 for s in samples if s["rtt_ns"] is not None]


def bench_rtt(n: int, rt_prio: int) -> None:
    print(f"\n1. RTT error, {n} echoes at 10 ms spacing, delay on reply direction, rt-prio {rt_prio}")
    with H.Line() as ln:
        base = rtts_ms(ln.ping(n, 0.01))
        b = statistics.median(base)
        print(f"   base RTT without delay line: median {b:.3f} ms, p99 {q(base, .99):.3f} ms")
        ln.add_queue("rs", 0)
        print(f"   {'delay (configured)':>20} {'RTT-delay mean':>15} {'p99':>8} {'max':>8} {'min':>8}"
              f" {'late p50/p99/max us':>22} {'lost':>5}")
        for d_ms in (0, 10, 60, 100):
            dl = ln.delayline(H.constant(d_ms * 1000), rt_prio=rt_prio)
            smp = ln.ping(n, 0.01, wait_s=0.3 + d_ms / 1000)
            st = dl.stop()
            r = rtts_ms(smp)
            err = [x - d_ms for x in r]
            late = st["lateness_us"]
            print(f"   {d_ms:>17} ms {statistics.mean(err):>12.3f} ms {q(err, .99):>6.3f} {max(err):>8.3f}"
                  f" {min(err):>8.3f} {late['p50']:>8.0f}/{late['p99']:.0f}/{late['max']:.0f}"
                  f" {n - len(r):>5}")


def iperf(ln: H.Line, seconds: int) -> float:
    srv = ln.spawn(ln.ns_c, ["iperf3", "-s", "-1", "-p", "5202", "-B", ln.client_ip])
    time.sleep(0.3)
    cp = ln.nsx(ln.ns_s, "iperf3", "-c", ln.client_ip, "-p", "5202", "-t", str(seconds), "-O", "1",
                "-J", timeout=seconds + 30)
    srv.wait(timeout=10)
    return float(json.loads(cp.stdout)["end"]["sum_received"]["bits_per_second"])


def bench_throughput(seconds: int) -> None:
    print(f"\n2. Max TCP throughput server->client over veth (no tbf), iperf3 {seconds} s, default CC,"
          " TCP buffers up to 64 MB")
    tck = os.sysconf("SC_CLK_TCK")
    with H.Line() as ln:
        ln.tcp_buffers(64 << 20)  # BDP at 10 Gbit/s x 10 ms = 12.5 MB
        raw = iperf(ln, seconds)
        print(f"   without delay line:          {raw / 1e9:7.2f} Gbit/s")
        ln.add_queue("rs", 0)
        def row(label: str, d_ms: int, maxlen: int) -> None:
            dl = ln.delayline(H.constant(d_ms * 1000), maxlen=maxlen)
            c0, t0 = dl.cpu_ticks(), time.monotonic()
            bps = iperf(ln, seconds)
            c1, t1 = dl.cpu_ticks(), time.monotonic()
            st = dl.stop()
            cpu = (c1 - c0) / tck / (t1 - t0)
            print(f"   {label:<28} delay {d_ms:>2} ms, maxlen {maxlen:>5}: {bps / 1e9:6.2f} Gbit/s,"
                  f" daemon CPU {cpu * 100:5.1f} % of a core, {st['packets'] / (t1 - t0) / 1e3:5.0f} k skb/s"
                  f" (avg {st['bytes'] / max(st['packets'], 1):.0f} B), max held {st['max_queued']},"
                  f" overflow drops {st['drops_overflow']}, lateness p99 {st['lateness_us']['p99']:.0f} us")

        row("GSO skbs:", 10, 65536)
        row("GSO skbs:", 0, 65536)
        # MTU-sized skbs: the per-packet cost of the line is the limit, and
        # the kernel's default maxlen (1024) is too small for rate x delay
        ln.nsx(ln.ns_s, "ethtool", "-K", ln.ifn("s0"), "tso", "off", "gso", "off")
        row("TSO/GSO off (MTU packets):", 10, 65536)
        row("TSO/GSO off (MTU packets):", 10, 1024)
    # CPU at a modest shaped rate, as the video scenarios use (25 Mbit/s)
    with H.Line() as ln:
        ln.add_queue("rs", 0)
        ln.tbf("rc", "25mbit", 25000, 500_000)
        dl = ln.delayline(H.constant(10000))
        c0, t0 = dl.cpu_ticks(), time.monotonic()
        bps = iperf(ln, seconds)
        c1, t1 = dl.cpu_ticks(), time.monotonic()
        dl.stop()
        print(f"   tbf 25 Mbit/s + 10 ms:       {bps / 1e6:7.2f} Mbit/s (ideal {25 * 1448 / 1514:.2f}),"
              f" daemon CPU {(c1 - c0) / tck / (t1 - t0) * 100:5.1f} % of a core")


def bench_steps(periods: int) -> None:
    sched = H.square(0, 60000, 1_000_000)  # 0 ms for 0.5 s, 60 ms for 0.5 s
    print(f"\n3. Delay steps: square 0/60 ms, period 1 s, {periods} periods, 1 ms ICMP probe")
    with H.Line() as ln:
        ln.add_queue("rs", 0)
        t0 = time.monotonic_ns() + 200_000_000
        dl = ln.delayline(sched, t0_ns=t0)
        n = periods * 1000
        smp = ln.ping(n, 0.001, wait_s=0.3)
        st = dl.stop()
        logged = dl.steps()[1:]
        got = [s for s in smp if s["rtt_ns"] is not None]
        arr = [s["send_mono_ns"] - t0 for s in got]
        want = sched.steps_ns(min(arr) - 1, max(arr))
        # step log: time the daemon first applied the new value - scheduled time
        w_by_t = {t: d for t, d in want}
        errs_log = []
        for lt, ld in logged:
            cands = [t for t in w_by_t if t <= lt and w_by_t[t] == ld]
            if cands:
                errs_log.append((lt - max(cands)) / 1e6)
        # probe: first reply after each scheduled up-step whose RTT shows > half the step
        errs_up = []
        for t, d in want:
            if d != 60000:
                continue
            for a, s in zip(arr, got):
                if a >= t - 5_000_000 and s["rtt_ns"] > 30e6:
                    errs_up.append((a - t) / 1e6)
                    break
        # model error everywhere (FIFO model incl. drains after step-downs)
        exp = H.fifo_expected_ns(arr, sched)
        err_all = [(s["rtt_ns"] - e) / 1e6 for s, e in zip(got, exp)]
        print(f"   steps scheduled in probe window {len(want)}, logged by daemon {len(logged)},"
              f" stats delay_steps {st['delay_steps']}, replies {len(got)}/{n}")
        if errs_log:
            print(f"   step-log time - scheduled time: mean {statistics.mean(errs_log):.3f} ms,"
                  f" max {max(errs_log):.3f} ms (read time of the first packet after the step)")
        if errs_up:
            print(f"   probe: first >30 ms reply after an up-step, arrival - step: mean"
                  f" {statistics.mean(errs_up):.3f} ms, min {min(errs_up):.3f}, max {max(errs_up):.3f} ms")
        print(f"   every reply vs FIFO model: mean {statistics.mean(err_all):.3f} ms,"
              f" p99 {q(err_all, .99):.3f} ms, max {max(err_all):.3f} ms, min {min(err_all):.3f} ms")


# Goals of issue 36 for the cost section, printed beside the measured figures.
GOAL_CPU_US_PER_PKT_100M = 12.0
GOAL_CEILING_GBPS = 1.0
GOAL_LATE_P99_US = 200.0


# Kernel and libc symbols whose inclusive share of the daemon's samples says where a packet's
# CPU goes: waiting (ppoll, with the context switch back in), receiving, and the verdict, which
# re-injects the packet and runs the rest of its path (forwarding, veth, the receiver's TCP,
# waking the receiving application) in the daemon's own context.
PROFILE_SYMBOLS = ("__x64_sys_ppoll", "finish_task_switch.isra.0", "__x64_sys_recvmmsg", "__x64_sys_sendto",
                   "nfqnl_reinject", "tcp_v4_rcv", "sock_def_readable")
# The AF_XDP line: waiting, its tx kick (sendto -> copy-mode transmit -> veth -> the receiver's
# softirq, net_rx_action, run in the line's context when the kick re-enables bottom halves), and
# its own user-space work (reading the rx ring, releasing, the TCP/UDP checksum).
PROFILE_SYMBOLS_XDP = ("__x64_sys_ppoll", "finish_task_switch.isra.0", "__x64_sys_sendto", "__dev_direct_xmit",
                       "net_rx_action", "tcp_v4_rcv", "sock_def_readable", "read_arrivals", "release_due",
                       "l4_checksum")
PERF_HZ = 2000


def perf_breakdown(data: Path, packets: int, symbols: tuple[str, ...] = PROFILE_SYMBOLS) -> str:
    """us of the daemon's CPU per packet under each of symbols (inclusive, cpu-clock samples)."""
    n = len(subprocess.run(["perf", "script", "-i", str(data), "-F", "period"], capture_output=True,
                           text=True, timeout=120).stdout.splitlines())
    rep = subprocess.run(["perf", "report", "-i", str(data), "--children", "--sort", "sym", "--stdio"],
                         capture_output=True, text=True, timeout=120).stdout
    share: dict[str, float] = {}
    for line in rep.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0].endswith("%") and f[1].endswith("%") and f[-1] in symbols:
            share.setdefault(f[-1], float(f[0][:-1]) / 100)
    us = n / PERF_HZ * 1e6 / max(packets, 1)
    return (f"      profile: {us:.1f} us/pkt sampled; inclusive us/pkt: "
            + ", ".join(f"{k} {share.get(k, 0.0) * us:.1f}" for k in symbols))


@dataclass
class Flow:
    """One measured bulk flow through a running line: throughput, the line's /proc CPU ticks over
    the flow and wall time; pdata is the perf file when profiled."""

    bps: float
    ticks: int
    seconds: float
    pdata: Path | None


def measured_flow(ln: H.Line, pid: int, cpu_ticks: Callable[[], int], label: str, seconds: int,
                  profile: bool) -> Flow:
    perf = None
    pdata = ln.tmp / f"perf-{label.replace(' ', '_')}.data"
    if profile:
        perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", str(PERF_HZ), "-g", "-o", str(pdata),
                                 "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
    c0, t0 = cpu_ticks(), time.monotonic()
    bps = iperf(ln, seconds)
    c1, t1 = cpu_ticks(), time.monotonic()
    if perf is not None:
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
    return Flow(bps, c1 - c0, t1 - t0, pdata if perf is not None else None)


def cost_row(ln: H.Line, label: str, rate_mbit: int | None, seconds: int,
             binary: Path | None, tol_us: int | None, profile: bool = False) -> None:
    """One bulk TCP flow server->client through a 10 ms line; rate_mbit None
    = no shaping (the line's ceiling). profile: sample the daemon with perf (cpu-clock)."""
    extra = [] if tol_us is None else ["--batch-tolerance-us", str(tol_us)]
    dl = ln.delayline(H.constant(10000), extra=extra, binary=binary)
    assert dl.proc is not None
    fl = measured_flow(ln, dl.proc.pid, dl.cpu_ticks, f"{label}-{rate_mbit}", seconds, profile)
    st = dl.stop()
    tck = os.sysconf("SC_CLK_TCK")
    pk = max(st["packets"], 1)
    # Same method for both builds: /proc ticks over the flow. The new build
    # also reports getrusage over its whole life (cpu_us_per_packet).
    cpu_us = fl.ticks / tck * 1e6 / pk
    own = st.get("cpu_us_per_packet")
    late = st["lateness_us"]
    verdicts = st["verdict_msgs"] + st.get("drop_msgs", 0)
    wake = st.get("wakeups")
    rate = "ceiling" if rate_mbit is None else f"{rate_mbit} Mbit/s"
    print(f"   {label:<14} {rate:>11} {fl.bps / 1e6:8.1f} Mbit/s {st['packets'] / fl.seconds / 1e3:6.1f} kpps"
          f"  CPU {cpu_us:6.1f} us/pkt" + (f" (rusage {own:5.1f})" if own is not None else " (rusage  n/a)")
          + f"  {fl.ticks / tck / fl.seconds * 100:5.1f} % core"
          f"  late p50/p99/max {late['p50']:4.0f}/{late['p99']:5.0f}/{late['max'] / 1e3:6.2f}ms"
          f"  pkts/verdict {st['packets'] / max(verdicts, 1):5.2f}"
          + (f"  wakes/pkt {wake / pk:4.2f}" if wake is not None else "")
          + f"  drops {st['drops_overflow']}/{st['drops_netlink']}")
    if fl.pdata is not None:
        print(perf_breakdown(fl.pdata, st["packets"]))


def xdp_cost_row(ln: H.Line, label: str, rate_mbit: int | None, seconds: int, tol_us: int,
                 profile: bool = False) -> None:
    """The same flow through the AF_XDP line (links/delayline/xdp): constant 10 ms, frames
    entering the router on 'rs' leave on 'rc' (the bed's FORWARD DROP guard is in place)."""
    dl = X.start(ln, 10000, tolerance_us=tol_us)
    fl = measured_flow(ln, dl.proc.pid, dl.cpu_ticks, f"{label}-{rate_mbit}", seconds, profile)
    st = dl.stop()
    tck = os.sysconf("SC_CLK_TCK")
    pk = max(st["packets"], 1)
    late = st["lateness_us"]
    rate = "ceiling" if rate_mbit is None else f"{rate_mbit} Mbit/s"
    drops = (st["xsk_rx_dropped"] + st["xsk_rx_ring_full"] + st["tx_errors"] + st["drops_nostamp"]
             + st["tx_dev_drops"] + st["dropped_at_exit"])
    print(f"   {label:<14} {rate:>11} {fl.bps / 1e6:8.1f} Mbit/s {st['packets'] / fl.seconds / 1e3:6.1f} kpps"
          f"  CPU {fl.ticks / tck * 1e6 / pk:6.1f} us/pkt (rusage {st['cpu_us_per_packet']:5.1f},"
          f" user {st['cpu_user_s'] * 1e6 / pk:4.1f} sys {st['cpu_sys_s'] * 1e6 / pk:5.1f})"
          f"  {fl.ticks / tck / fl.seconds * 100:5.1f} % core"
          f"  late p50/p99/max {late['p50']:4.0f}/{late['p99']:5.0f}/{late['max'] / 1e3:6.2f}ms"
          f"  pkts/wake {st['packets_per_wakeup']:5.2f} pkts/kick {st['packets_per_tx_kick']:5.2f}"
          f"  wakes/pkt {st['wakeups'] / pk:4.2f}  max held {st['max_queued']}  drops {drops}"
          f"  tx stalls {st['tx_stalls']}")
    if fl.pdata is not None:
        print(perf_breakdown(fl.pdata, st["packets"], PROFILE_SYMBOLS_XDP))


def print_wake_floor() -> None:
    """What one timer wake-up costs on this host (links/delayline/xdp/wakecost.c): a line that
    wakes k times per packet pays k times this before it touches a packet."""
    for sleep_us in (121, 242):
        cp = subprocess.run([str(X.WAKECOST), "20000", str(sleep_us)], capture_output=True, text=True,
                            timeout=120, check=True)
        w = json.loads(cp.stdout)
        print(f"   one timer wake-up (ppoll {sleep_us} us, SCHED_FIFO, 20000x): {w['oncpu_us_per_wakeup']:.1f} us"
              f" on-CPU (getrusage {w['cpu_us_per_wakeup']:.1f}), wake-up lateness p50/p99"
              f" {w['lateness_us']['p50']:.0f}/{w['lateness_us']['p99']:.0f} us")


def receiver_napi_thread(ln: H.Line) -> None:
    """Receive the client's veth through a NAPI kernel thread (GRO on makes veth use NAPI, threaded
    moves the poll from softirq to that thread): the receiver's IP/TCP work then no longer runs in
    the context of whatever sent the frame into the veth, i.e. the delay line's release. veth
    takes the NAPI path only for frames it may GRO: with TSO on at the sending end (the router's
    'rc') it hands them to netif_rx and the backlog softirq instead, so TSO goes off there."""
    dev = ln.ifn("c0")
    ln.nsx(ln.ns_r, "ethtool", "-K", ln.ifn("rc"), "tso", "off")
    ln.nsx(ln.ns_c, "ethtool", "-K", dev, "gro", "on")
    ln.nsx(ln.ns_c, "sh", "-c", f"echo 1 > /sys/class/net/{dev}/threaded")


def bench_cost(seconds: int, old: Path | None, tolerances: list[int], profile: bool,
               backends: list[str], napi_thread: bool = False) -> None:
    print(f"\n4. Cost per MTU packet, bulk TCP {seconds} s server->client, 10 ms line, TSO/GSO off;"
          f" shaped by tbf on the server's egress (before the line, as in a run)")
    print(f"   goals: <= {GOAL_CPU_US_PER_PKT_100M:.0f} us CPU/pkt at 100 Mbit/s, >= {GOAL_CEILING_GBPS:.0f}"
          f" Gbit/s of MTU packets at the ceiling, lateness p99 <= {GOAL_LATE_P99_US:.0f} us")
    with open("/proc/loadavg") as f:
        print(f"   host load (1/5/15 min): {' '.join(f.read().split()[:3])} on {os.cpu_count()} CPUs"
              " (CPU-time figures hold under load; kpps and lateness do not)")
    builds: list[tuple[str, Path | None, int | None]] = []
    if old is not None:
        builds.append(("old", old, None))
    if "nfqueue" not in backends:
        builds = []
    else:
        builds += [(f"new tol {t}us", None, t) for t in tolerances]
    print_wake_floor()
    print(f"   backends: {', '.join(backends)} (xdp: links/delayline/xdp, AF_XDP copy mode, arrival stamped by XDP)")
    if napi_thread:
        print("   receiver's veth: GRO on, threaded NAPI, TSO off at the router's end (the receiver's IP/TCP work"
              " runs in a NAPI kernel thread, not in the line)")
    for rate in (3, 25, 100, None):
        with H.Line() as ln:
            ln.tcp_buffers(16 << 20)
            ln.nsx(ln.ns_s, "ethtool", "-K", ln.ifn("s0"), "tso", "off", "gso", "off")
            if rate is not None:
                # burst 2 MTU: the line sees packets spaced at the link rate
                ln.nsx(ln.ns_s, "tc", "qdisc", "replace", "dev", ln.ifn("s0"), "root", "tbf",
                       "rate", f"{rate}mbit", "burst", "3028", "limit", str(max(rate * 12500, 30000)))
            # Both lines in one bed: the NFQUEUE rule serves the nfqueue rows; while the xdp line
            # runs, its XDP program takes every IPv4 frame before the stack, and the guard (DROP
            # after the NFQUEUE rule, which an accepted packet does not traverse again) only
            # matters once no line runs.
            if napi_thread:
                receiver_napi_thread(ln)
            ln.add_queue("rs", 0)
            X.guard(ln)
            for label, binary, tol in builds:
                cost_row(ln, label, rate, seconds, binary, tol, profile=profile and rate == 100)
            if "xdp" in backends:
                for t in tolerances:
                    xdp_cost_row(ln, f"xdp tol {t}us", rate, seconds, t, profile=profile and rate == 100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer samples, shorter flows")
    ap.add_argument("--no-rt", action="store_true", help="also measure RTT error without SCHED_FIFO")
    ap.add_argument("--only", choices=["rtt", "throughput", "steps", "cost"], action="append",
                    help="run only these sections (repeatable)")
    ap.add_argument("--old", type=Path, help="an older build of mpvlab-delayline to compare in section 4")
    ap.add_argument("--tolerance", type=int, action="append",
                    help="--batch-tolerance-us values for section 4 (default: 0 and the build's default 150)")
    ap.add_argument("--backend", choices=["nfqueue", "xdp"], action="append",
                    help="section 4: which delay lines to measure (repeatable; default nfqueue)")
    ap.add_argument("--receiver-napi-thread", action="store_true",
                    help="section 4: receive the client's veth in a threaded NAPI (GRO on), so the receiver's"
                         " TCP is not run in the line's context")
    ap.add_argument("--profile", action="store_true",
                    help="section 4: sample the daemon with perf at 100 Mbit/s and print where its CPU goes")
    a = ap.parse_args()
    H.build()
    n = 200 if a.quick else 500
    want = set(a.only or ["rtt", "throughput", "steps", "cost"])
    if "rtt" in want:
        bench_rtt(n, 50)
        if a.no_rt:
            bench_rtt(n, 0)
    if "throughput" in want:
        bench_throughput(3 if a.quick else 5)
    if "steps" in want:
        bench_steps(2 if a.quick else 4)
    if "cost" in want:
        X.build()  # the xdp line and the wake-up cost probe
        bench_cost(3 if a.quick else 5, a.old, a.tolerance or [0, 150], a.profile, a.backend or ["nfqueue"],
                   a.receiver_napi_thread)
    return 0


if __name__ == "__main__":
    sys.exit(main())
