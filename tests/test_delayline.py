"""Tests of the NFQUEUE delay line (links/delayline).

Topology per test: client ns -- router ns -- server ns (veths), the daemon in
the router behind `iptables -A FORWARD -i <dev> -j NFQUEUE --queue-num 0`
(no --queue-bypass). Bounds are derived in each test's docstring.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from mpvlab.core.paths import checkout_root

# Per test (issue 44): `alone` on the sub-millisecond RTT/lateness bounds and the 40 kpps blast, which
# any neighbour could move; `cpu` on the looser bounds (echo timeouts, rates with steal, a flood);
# schedule parsing and argument checks start no line.

ROOT = checkout_root()
from mpvlab.testbed import delayline as H  # noqa: E402
from hostnoise import Measured, least_contended, longest_stall_s, lowered, measured, tail_quantile  # noqa: E402
from mpvlab.runner.sampling import parse_counter_group  # noqa: E402


# Bounds. Base RTT of the veth line without a delay line: median ~0.05 ms,
# p99 ~0.12 ms. The daemon adds its wake-up lateness: median ~0.03 ms, p99
# 0.1-0.3 ms on a quiet machine (SCHED_FIFO, 1 ns timer slack). This kernel is
# PREEMPT_NONE and 2 cores are shared with other runs: softirq work and
# non-preemptible kernel sections delay even a real-time task, and p99 was
# measured up to 1.4 ms (single samples up to 8 ms) while other engineers ran
# Gbit/s flows. So: the median is held tight, the p99 gets 2 ms, and "never
# early" is exact (target = read time + delay >= arrival + delay).
MEDIAN_SLACK_MS = 0.5
P99_SLACK_MS = 2.0


@pytest.fixture(scope="session")
def delayline_bin() -> Path:
    return H.build()


@pytest.fixture
def line(delayline_bin: Path) -> Iterator[H.Line]:
    with H.Line() as ln:
        yield ln


def rtts_ms(samples: list[dict[str, Any]]) -> list[float]:
    return [s["rtt_ns"] / 1e6 for s in samples if s["rtt_ns"] is not None]


def quantile(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, math.ceil(q * len(ys)) - 1))]


# --------------------------------------------------------------------- no root


@pytest.mark.parametrize(
    "text, needle",
    [
        ("5 1000\n", "line 1: first point must have t_us 0"),
        ("0 1000\n0 2000\n", "line 2: t_us 0 is not greater than the previous point"),
        ("period_us 1000\n0 10\n1000 20\n", "line 3: t_us 1000 is not inside the period"),
        ("0 -5\n", "line 1: delay_us '-5' is not an integer"),
        ("0 10 20\n", "line 1: expected 2 fields"),
        ("# only a comment\n\n", "no points"),
        ("0 10\nperiod_us 100\n", "line 2: period_us must appear once, before the points"),
        ("0 99999999999\n", "line 1: delay_us '99999999999' is not an integer in [0, 60000000]"),
        ("zero 10\n", "line 1: t_us 'zero' is not a non-negative integer"),
    ],
)
def test_schedule_parse_errors(delayline_bin: Path, tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "s.txt"
    f.write_text(text)
    cp = subprocess.run([str(delayline_bin), "--queue", "0", "--schedule", str(f)],
                        capture_output=True, text=True, timeout=10)
    assert cp.returncode == 2
    assert str(f) in cp.stderr and needle in cp.stderr, cp.stderr


def test_schedule_check_accepts_comments(delayline_bin: Path, tmp_path: Path) -> None:
    f = tmp_path / "s.txt"
    f.write_text("# scenario B\nperiod_us 20000000   # 20 s\n0 60000\n10000000 0  # off\n")
    cp = subprocess.run([str(delayline_bin), "--check", "--schedule", str(f)],
                        capture_output=True, text=True, timeout=10, check=True)
    assert json.loads(cp.stdout) == {"period_us": 20000000, "max_delay_us": 60000,
                                     "points": [[0, 60000], [10000000, 0]]}


def test_missing_schedule_file(delayline_bin: Path, tmp_path: Path) -> None:
    cp = subprocess.run([str(delayline_bin), "--queue", "0", "--schedule", str(tmp_path / "nope")],
                        capture_output=True, text=True, timeout=10)
    assert cp.returncode == 2 and "cannot open" in cp.stderr


# ------------------------------------------------------------------ netns tests


@pytest.mark.netns
@pytest.mark.alone   # alone: RTT median and p99 within a few ms of the schedule, lateness p50 <= 0.5 ms
def test_constant_delay_rtt(line: H.Line) -> None:
    """Delay only on server->client, so RTT = D + base. Every sample must be
    >= D (never early), median <= D + 0.5 ms (see the bounds above), and the
    daemon must have seen every reply (300 packets, no drops). The RTT's p99 is a
    figure a busy host moves (it failed once at 42.18 ms against 42 ms, steal 0.2 %,
    no other test running): bench/bench_delayline.py prints it beside the delay."""
    d_ms = 40.0
    line.add_queue("rs", 0)

    def once() -> Measured[tuple[list[dict[str, Any]], dict[str, Any]]]:
        dl = line.delayline(H.constant(int(d_ms * 1000)))
        pings = measured(lambda: line.ping(300, 0.01))   # the stolen share of the pings' own span
        return Measured((pings.value, dl.stop()), pings.steal)

    m = least_contended(once, what="constant 40 ms delay")
    smp, st = m.value
    r = rtts_ms(smp)
    assert len(r) == 300
    assert min(r) >= d_ms, min(r)
    assert quantile(r, 0.5) <= d_ms + MEDIAN_SLACK_MS, quantile(r, 0.5)
    assert st["packets"] == 300 and st["accepted"] == 300
    assert st["drops_overflow"] == 0 and st["drops_local"] == 0
    assert st["lateness_us"]["p50"] <= 500      # the daemon's own p99 is the bench's too


@pytest.mark.netns
@pytest.mark.alone   # alone: every reply within P99_SLACK_MS of the schedule
def test_square_wave_follows_schedule(line: H.Line) -> None:
    """0/40 ms square wave, period 2 s (low first), t0 given by us; replies
    (server->client) are delayed, so RTT = d(a) + base with a = the reply's
    arrival at the router, a few tens of us after the probe's send time.

    Steady phases: samples sent >= 2 ms from any step and outside the drain
    after a step down must show RTT - d(a) >= -0.1 ms (never early; 0.1 ms
    covers send->router time), median <= 0.5 ms, p99 <= 2 ms (bounds above).
    Drains (40 ms after each step down): the line is FIFO, so a reply is held
    at least until the previous one leaves: rtt_i >= rtt_{i-1} - (a_i -
    a_{i-1}) - 0.1 ms, and no longer than needed: rtt_i <= max(d(a_i),
    rtt_{i-1} - (a_i - a_{i-1})) + 2 ms. Both phases must have >= 150 samples,
    and the daemon's step log must show each step at the first reply after it
    (within one probe interval + 2 ms read latency + 1 ms = 13 ms)."""
    sched = H.square(0, 40000, 2_000_000)
    high_ns = 40_000_000
    line.add_queue("rs", 0)

    def once() -> Measured[tuple[int, list[dict[str, Any]], dict[str, Any], list[tuple[int, int]]]]:
        t0 = time.monotonic_ns() + 200_000_000
        dl = line.delayline(sched, t0_ns=t0)
        pings = measured(lambda: line.ping(420, 0.01))
        return Measured((t0, pings.value, dl.stop(), dl.steps()), pings.steal)

    m = least_contended(once, what="0/40 ms square wave")
    t0, smp, st, steps = m.value
    got = [s for s in smp if s["rtt_ns"] is not None]
    assert len(got) == 420
    arr = [s["send_mono_ns"] - t0 for s in got]
    rtt = [s["rtt_ns"] for s in got]
    changes = sched.steps_ns(min(arr) - 10**9, max(arr) + 10**9)
    downs = [t for t, d in changes if d == 0]
    steady: list[float] = []
    high = low = 0
    for k, (a, r) in enumerate(zip(arr, rtt)):
        if any(abs(a - t) < 2_000_000 for t, _ in changes):
            continue
        d_ns = sched.delay_us(a) * 1000
        if any(0 <= a - t < high_ns + 2_000_000 for t in downs):
            if k == 0:
                continue
            gap = a - arr[k - 1]
            floor = rtt[k - 1] - gap
            assert r >= floor - 100_000, ("overtook previous reply", a, r, rtt[k - 1])
            assert r <= max(d_ns, floor) + P99_SLACK_MS * 1e6, ("held too long", a, r, rtt[k - 1])
            continue
        steady.append((r - d_ns) / 1e6)
        if d_ns == high_ns:
            high += 1
        else:
            low += 1
    assert min(steady) >= -0.1, min(steady)
    assert quantile(steady, 0.5) <= MEDIAN_SLACK_MS, quantile(steady, 0.5)
    q = tail_quantile(0.99, m.steal)   # 0.99 on a quiet host (hostnoise.py)
    assert quantile(steady, q) <= P99_SLACK_MS, (q, quantile(steady, q), m.steal.describe())
    assert high >= 150 and low >= 150, (high, low)
    logged = steps[1:]
    want = sched.steps_ns(logged[0][0] - 20_000_000, logged[-1][0]) if logged else []
    assert len(logged) == len(want) == st["delay_steps"] >= 3
    # A step is logged when the first reply after it is read; a host stall at that moment delays the
    # read by as long as the stall (hostnoise.longest_stall_s).
    stall_ns = int(longest_stall_s(m.steal) * 1e9)
    for (lt, ld), (wt, wd) in zip(logged, want):
        assert ld == wd and 0 <= lt - wt <= 13_000_000 + stall_ns, (lt, wt, m.steal.describe())


@pytest.mark.netns
@pytest.mark.cpu   # cpu: an echo later than 0.5 s counts as lost
def test_random_loss_binomial(line: H.Line) -> None:
    """p = 0.1 i.i.d. on the reply direction, N = 3000 echoes: the observed
    loss must be within 4 sigma = 4*sqrt(p(1-p)/N) = 0.022 of p, for both the
    end-to-end count and the daemon's own count; they must agree exactly
    (nothing else drops on this line)."""
    p, n = 0.1, 3000
    line.add_queue("rs", 0)
    dl = line.delayline(H.constant(0), loss=p, seed=12345)
    smp = line.ping(n, 0.001, wait_s=0.5)
    st = dl.stop()
    lost = sum(1 for s in smp if s["rtt_ns"] is None)
    bound = 4 * math.sqrt(p * (1 - p) / n)
    assert abs(lost / n - p) < bound, lost / n
    assert st["packets"] == n and st["drops_loss"] == lost


@pytest.mark.netns
@pytest.mark.cpu   # cpu: an echo later than its wait counts as lost
def test_seeded_loss_is_reproducible(line: H.Line) -> None:
    """Same seed, same packet sequence => the same packets are dropped."""
    line.add_queue("rs", 0)
    lost_sets = []
    for _ in range(2):
        dl = line.delayline(H.constant(0), loss=0.2, seed=7)
        smp = line.ping(300, 0.002, wait_s=0.3)
        dl.stop()
        lost_sets.append([s["seq"] for s in smp if s["rtt_ns"] is None])
    assert lost_sets[0] == lost_sets[1] and len(lost_sets[0]) > 20


@pytest.mark.netns
@pytest.mark.cpu   # cpu: 20 of 20 echoes answered before the kill
def test_dead_daemon_means_total_loss(line: H.Line) -> None:
    """After SIGKILL the rule still points at an unbound queue: the kernel
    drops every packet (0 of 100 echoes come back), nothing passes undelayed."""
    line.add_queue("rs", 0)
    dl = line.delayline(H.constant(20000))
    before = rtts_ms(line.ping(20, 0.01))
    assert len(before) == 20 and min(before) >= 20.0
    assert dl.proc is not None
    os.kill(dl.proc.pid, signal.SIGKILL)
    dl.proc.wait(timeout=5)
    after = line.ping(100, 0.01, wait_s=0.5)
    assert all(s["rtt_ns"] is None for s in after)


def _icmp_counter(line: H.Line, ns: str, name: str) -> int:
    """One `Icmp:` counter of /proc/net/snmp in namespace `ns`."""
    return parse_counter_group(line.nsx(ns, "cat", "/proc/net/snmp").stdout, "Icmp")[name]


@pytest.mark.netns
@pytest.mark.cpu   # cpu: echoes < 1.5 s, exit < 2 s after SIGTERM
def test_sigterm_releases_held_packets(line: H.Line) -> None:
    """SIGTERM while packets are held 2 s: they are accepted at once (arrive
    long before 2 s), stats are written, exit code 0."""
    line.add_queue("rs", 0)
    dl = line.delayline(H.constant(2_000_000))
    p = line.spawn(line.ns_c, [H.PYTHON, str(Path(H.__file__)), "probe", "ping", "--dst",
                               line.server_ip, "--count", "5", "--interval", "0.01", "--wait", "1.5"])
    # All 5 replies must be held before the SIGTERM: wait for the server to have sent them (not a
    # fixed sleep: a contended host can take longer than that to start the probe), then for them
    # to cross one veth into the router's queue.
    deadline = time.monotonic() + 10
    while _icmp_counter(line, line.ns_s, "OutEchoReps") < 5:
        assert time.monotonic() < deadline, "the server did not answer 5 echoes within 10 s"
        time.sleep(0.02)
    time.sleep(0.05)
    t_stop = time.monotonic()
    st = dl.stop()
    out, _ = p.communicate(timeout=10)
    smp = json.loads(out)
    assert st["packets"] == 5 and st["accepted"] == 5
    assert st["lateness_us"]["n"] == 0  # none reached its target
    r = rtts_ms(smp)
    assert len(r) == 5 and max(r) < 1500, r
    assert time.monotonic() - t_stop < 2.0


@pytest.mark.netns
def test_bind_conflict_is_reported(line: H.Line) -> None:
    line.add_queue("rs", 0)
    dl = line.delayline(H.constant(1000))
    sfile = line.tmp / "dl.sched"
    cp = line.nsx(line.ns_r, str(H.BINARY), "--queue", "0", "--schedule", str(sfile),
                  "--rt-prio", "0", check=False, timeout=10)
    dl.stop()
    assert cp.returncode == 1 and "cannot bind NFQUEUE 0" in cp.stderr, cp.stderr


@pytest.mark.netns
@pytest.mark.alone   # alone: a 40 kpps blast received by Python, >= 95 % of it
def test_no_reordering_under_load(line: H.Line) -> None:
    """20000 UDP datagrams sent server->client at 40 kpps (320 Mbit/s, 0.5 s) while the delay
    alternates 0/5 ms every 50 ms: at least 10 step-downs, each releasing a 5 ms burst of 200
    datagrams. FIFO clamp => zero reorderings; and the daemon loses nothing (maxlen 65536).
    The rate is fixed rather than "as fast as Python can" so that the blast spans the schedule's
    steps on a fast machine too (an unpaced blast once fitted inside one 50 ms half-period)."""
    line.add_queue("rs", 0)
    dl = line.delayline(H.square(0, 5000, 100_000))
    tx, res = line.udp_blast(20_000, 40_000, listen_s=12)
    st = dl.stop()
    assert tx["sent"] == 20000
    assert res["reorders"] == 0 and res["duplicates"] == 0
    assert st["drops_overflow"] == 0 and st["drops_local"] == 0 and st["drops_netlink"] == 0
    # 0.5 s of sending crosses >= 9 half-period boundaries; a slower sender crosses more
    assert st["delay_steps"] >= 9, (st, tx)
    # whatever the receiver socket kept arrived in order; most must arrive
    assert res["received"] >= 19000, res


def _tcp_goodput(line: H.Line, seconds: int, omit: int) -> float:
    srv = line.spawn(line.ns_c, ["iperf3", "-s", "-1", "-p", "5201", "-B", line.client_ip])
    time.sleep(0.3)
    cp = line.nsx(line.ns_s, "iperf3", "-c", line.client_ip, "-p", "5201", "-t", str(seconds),
                  "-O", str(omit), "-C", "cubic", "-J", timeout=seconds + omit + 20)
    srv.wait(timeout=10)
    res = json.loads(cp.stdout)
    return float(res["end"]["sum_received"]["bits_per_second"])


@pytest.mark.netns
@pytest.mark.cpu   # cpu: goodput bounds (tests/hostnoise.py)
def test_tcp_bulk_over_tbf_and_delay(line: H.Line) -> None:
    """tbf 3 Mbit/s on the router's client-facing veth, 20 ms delay line on the
    same direction (data server->client). A TCP bulk flow keeps the tbf queue
    non-empty, so payload goodput = rate * 1448/1514 (MSS 1448 with
    timestamps per 1514-byte frame on veth) = 2.8692 Mbit/s, +-3 %."""
    line.add_queue("rs", 0)
    line.tbf("rc", "3mbit", 3028, 100_000)

    def once() -> tuple[float, dict[str, Any]]:
        dl = line.delayline(H.constant(20000))
        bps = _tcp_goodput(line, seconds=8, omit=2)
        return bps, dl.stop()

    m = least_contended(once, what="TCP bulk over tbf and delay")
    bps, st = m.value
    ideal = 3e6 * 1448 / 1514
    lo, hi = lowered(ideal, 0.03, m.steal.lost)   # a stall loses tbf tokens, never adds any
    assert lo <= bps <= hi, (bps, ideal, m.steal.describe())
    assert st["drops_overflow"] == 0 and st["drops_netlink"] == 0


def test_batch_tolerance_is_validated(delayline_bin: Path, tmp_path: Path) -> None:
    """--batch-tolerance-us is bounded (10 ms): a larger or non-numeric value is a usage error
    that names the option, before anything is bound."""
    sched = tmp_path / "c.sched"
    sched.write_text("0 1000\n")
    for bad in ("20000", "-1", "1.5", "x"):
        cp = subprocess.run([str(delayline_bin), "--check", "--schedule", str(sched),
                             "--batch-tolerance-us", bad], capture_output=True, text=True, timeout=10)
        assert cp.returncode == 2 and "--batch-tolerance-us" in cp.stderr, (bad, cp.stderr)


@pytest.mark.netns
@pytest.mark.parametrize("tol_us", [0, 150])
@pytest.mark.cpu   # cpu: a flood through the line (sender and line each take a core)
def test_batched_release_keeps_fifo_and_reports_cost(line: H.Line, tol_us: int) -> None:
    """5000 UDP datagrams at 10 kpps (one every 100 us, closer than the 150 us tolerance, so
    arrivals carry releases) through a 5 ms line, with and without wake-up batching. Whatever the
    batching: no packet leaves before its target, releases follow arrival order, every packet is
    accepted by exactly one verdict; and the stats carry the line's own cost (getrusage) beside
    the counts it is divided by, consistently."""
    line.add_queue("rs", 0)
    rlog = line.tmp / f"rel-{tol_us}.csv"
    dl = line.delayline(H.constant(5000), extra=["--batch-tolerance-us", str(tol_us),
                                                 "--release-log", str(rlog)])
    tx, res = line.udp_blast(5_000, 10_000, listen_s=8)
    st = dl.stop()
    assert tx["sent"] == 5000 and res["reorders"] == 0 and res["duplicates"] == 0
    rels = [r for r in H.read_release_log(rlog) if r.fate in ("A", "S")]
    assert len(rels) == st["packets"] == st["accepted"] >= 5000   # + any stray packet on the path
    assert all(r.release_ns >= r.target_ns for r in rels if r.fate == "A")   # never early
    assert all(a.release_ns <= b.release_ns for a, b in zip(rels, rels[1:]))  # FIFO
    assert st["batch_tolerance_us"] == tol_us
    assert st["drop_msgs"] == 0 and 1 <= st["verdict_msgs"] <= st["packets"]
    assert st["recv_calls"] >= 1 and st["wakeups"] >= st["verdict_msgs"] - 1  # one release per wake-up
    assert st["packets_per_verdict_msg"] == pytest.approx(st["packets"] / st["verdict_msgs"], abs=1e-3)
    cpu = st["cpu_user_s"] + st["cpu_sys_s"]
    assert cpu > 0
    assert st["cpu_us_per_packet"] == pytest.approx(cpu * 1e6 / st["packets"], rel=1e-3, abs=1e-3)


@pytest.mark.netns
@pytest.mark.alone   # alone: lateness max < 20 ms
def test_a_stopped_line_is_late_from_the_kernel_arrival_stamp(line: H.Line) -> None:
    """Issue 43 item 6: the line counted lateness from when it read a packet, so packets that waited in
    its socket while it was stopped (a host stall) looked on time. With no delay (0 ms: nothing is held
    when the line stops), pings every 50 ms, and the line SIGSTOPped for 1 s: the replies that arrived
    meanwhile are read up to 1 s late and released at once, so the read-time lateness stays within the
    fidelity bound (20 ms) while the lateness from the kernel's arrival stamp is ≈ 1 s (≥ 1 s less one
    ping interval)."""
    import threading
    line.add_queue("rs", 0)
    dl = line.delayline(H.constant(0))
    assert dl.proc is not None
    out: list[list[dict[str, Any]]] = []
    pinger = threading.Thread(target=lambda: out.append(line.ping(40, 0.05, wait_s=2.0)))
    pinger.start()
    time.sleep(0.5)
    os.kill(dl.proc.pid, signal.SIGSTOP)
    t = time.monotonic()
    time.sleep(1.0)
    os.kill(dl.proc.pid, signal.SIGCONT)
    stopped_s = time.monotonic() - t
    pinger.join()
    st = dl.stop()
    print(f"\nstopped {stopped_s:.3f} s; packets {st['packets']}, stamped {st['arrival_stamped']}, unstamped "
          f"{st['arrival_unstamped']}; lateness {st['lateness_us']}; from arrival {st['lateness_from_arrival_us']}; "
          f"read wait max {st['read_wait_us_max']} us")
    assert st["packets"] == 40 and st["accepted"] == 40
    # every packet carried the kernel's stamp (the line turned the kernel's receive stamping on)
    assert st["arrival_stamped"] == 40 and st["arrival_unstamped"] == 0
    assert st["lateness_us"]["max"] < 20_000
    assert st["lateness_from_arrival_us"]["max"] >= (1.0 - 0.05) * 1e6
    assert st["read_wait_us_max"] >= (1.0 - 0.05) * 1e6
    # nothing waits longer than the line was stopped, plus a scheduler tick of margin for the wake-up
    assert st["lateness_from_arrival_us"]["max"] <= (stopped_s + 0.1) * 1e6
