"""The short check before a run, measured by the kernel, and the arithmetic the whole-run verdict
shares with it (mpvlab/runner/fidelity.py).

Rate: a paced UDP stream from the server fills each path's downlink token bucket's queue (FILL_EXCESS ×
the configured rate for FILL_S) and then keeps it backlogged (HOLD_EXCESS ×) for `rate_seconds`; the
router's qdisc counters, sampled by the C sampler (collectors/qdiscstat) at 1 kHz, give what the tbf
dequeued while it had a backlog. The hold is just above the rate so the queue left to drain at the end
is small (the check's cost is its own length, issue 16), yet a shaper up to HOLD_EXCESS × too fast
stays backlogged and is measured, and a faster one still drains the fill's queue for a while. A token
bucket with a backlog sends at exactly its rate (its tokens never exceed one packet then), so this
ratio is 1 for a sound shaper whatever TCP or the path's BDP would allow — no Python reader, no
congestion control, no receive window in the measurement.
RTT: kernel-stamped ICMP echo (collectors/kping.c, argv in mpvlab/runner/kping.py) answered by the server's kernel, PRE_COUNT samples
per path (`rtt_plan`), one every few ms set by the slowest shaped direction: 98 bytes on the wire at most
MAX_PROBE_LOAD of its rate, so each echo finds the queue empty (it takes a quarter of the gap to
serialise) and the bucket full (the mean is far below the rate), and at least MIN_INTERVAL_MS apart,
each compared with the delay the schedules give AT ITS OWN SEND TIME, through the delay lines' FIFO
(a packet never overtakes the one before it, so after a step down it leaves behind the last one
held at the old delay).
"""

from __future__ import annotations

import csv
import math
import subprocess
import time
from pathlib import Path
from typing import Any, Iterable

from mpvlab.core.paths import checkout_root
from mpvlab.links.schedule import Schedule
from mpvlab.runner import blast, kping
# The sender's pacing (re-exported: the rate check's arithmetic and its verdict use the same numbers)
from mpvlab.runner.blast import FRAME_BITS

PRE_COUNT = 300
MIN_COUNT = 100
MAX_CHECK_S = 3.0
MIN_INTERVAL_MS = 1.0
MAX_PROBE_LOAD = 0.25
ECHO_WIRE_BYTES = 98            # kping's 84-byte IP packet + the 14-byte Ethernet header tbf counts
RATE_MIN_S = 0.3                # backlogged time measured: at least this (MIN_BACKLOGGED_S is 0.2) …
RATE_MAX_S = 0.6                # … and at most this, for paths so slow that one frame is a large share
RATE_HZ = 1000
RATE_MAX_BPS = 300_000_000     # above this a Python sender cannot keep a tbf backlogged
REPO = checkout_root()


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def expected_rtts_ns(sends_rel: list[int], up: Schedule, down: Schedule) -> list[int]:
    """Expected RTT of echo requests sent at `sends_rel` (ns after the delay lines' t0, ascending):
    each direction releases a packet at max(arrival + delay(arrival), previous release) — the
    delay line's own rule (links/delayline/src/main.c), so steps are modelled, not averaged."""
    out: list[int] = []
    last_up = last_down = -(1 << 62)
    for t in sends_rel:
        up_rel = max(t + up.delay_at(t), last_up)
        last_up = up_rel
        down_rel = max(up_rel + down.delay_at(up_rel), last_down)
        last_down = down_rel
        out.append(down_rel - t)
    return out


def judge_rtt(csv_path: Path, up: Schedule, down: Schedule, t0_ns: int, tolerance_ms: float) -> dict[str, Any]:
    """The RTT figures of one path from a kping CSV. `error` = kernel-stamped RTT − expected: what
    the emulator (delay lines, forwarding, the server's kernel answering) adds or lacks. The
    userspace figure beside it is the measurement noise a Python stamp would have added."""
    rows = list(csv.DictReader(csv_path.open()))
    ok_rows = [r for r in rows if int(r["rtt_ns"]) >= 0]
    sends = [int(r["t_send_ns"]) - t0_ns for r in ok_rows]
    exp = expected_rtts_ns(sends, up, down) if sends else []
    err = [(int(r["rtt_ns"]) - e) / 1e6 for r, e in zip(ok_rows, exp)]
    noise = [(int(r["user_rtt_ns"]) - int(r["rtt_ns"])) / 1e6 for r in ok_rows if int(r["user_rtt_ns"]) >= 0]
    res: dict[str, Any] = {"method": "icmp echo answered by the server's kernel, SO_TIMESTAMPING software "
                                     "stamps (send and receive), expected RTT per sample at its send time",
                           "samples": len(err), "lost": len(rows) - len(ok_rows), "tolerance_ms": tolerance_ms}
    if err:
        res.update({"error_ms_p1": round(percentile(err, 1), 4), "error_ms_p50": round(percentile(err, 50), 4),
                    "error_ms_p99": round(percentile(err, 99), 4), "error_ms_max": round(max(err), 4),
                    "error_ms_min": round(min(err), 4),
                    "expected_ms_min": round(min(exp) / 1e6, 3), "expected_ms_max": round(max(exp) / 1e6, 3)})
    if noise:
        res["userspace_noise_ms_p99"] = round(percentile(noise, 99), 4)
    res["ok"] = bool(err) and res["error_ms_p99"] <= tolerance_ms and res["error_ms_p1"] >= -tolerance_ms
    return res


def backlogged_rate(rows: Iterable[dict[str, Any]], dev: str, configured_bps: int) -> dict[str, Any]:
    """What one tbf dequeued while it had a backlog, from qdiscstat rows. A token bucket holding a
    backlog dequeues at exactly its rate once the tokens it had saved are spent (at its first dequeue:
    the rest of a saved bucket leaves at once). So within each stretch of samples that all saw a
    backlog, the bytes dequeued after the stretch's first dequeue over the time from it to the last
    dequeue is the shaper's rate, to one sample period at each end; the stretches' bytes and times are
    summed. Time before a stretch's first dequeue or after its last one is not counted: it held no
    paced dequeue (stop 61: at 0.5 Mbit/s, a frame every 24 ms, three 13–20 ms stretches at the check's
    start with one dequeue each, at their closing edge, read a sound shaper 8 % low when their time
    was counted). A ratio above 1 + tolerance is a shaper too fast, below 1 − tolerance (with enough
    paced time) one too slow. `backlogged_s`: the summed time, first to last dequeue, of the stretches."""
    rs = sorted((r for r in rows if r["dev"] == dev and r["kind"] == "tbf"), key=lambda r: float(r["t_s"]))
    busy_s = 0.0
    busy_bytes = 0
    first: tuple[float, int] | None = None       # (t_s, sent_bytes) at the stretch's first dequeue …
    last: tuple[float, int] | None = None        # … and at its last
    prev: tuple[float, int, int] | None = None   # (t_s, sent_bytes, backlog_bytes) of the sample before
    for r in [*rs, None]:
        now = None if r is None else (float(r["t_s"]), int(r["sent_bytes"]), int(r["backlog_bytes"]))
        if now is not None and prev is not None and prev[2] > 0 and now[2] > 0:
            if now[1] > prev[1]:                  # a dequeue with a backlog at both ends of the interval
                first = first or (now[0], now[1])
                last = (now[0], now[1])
        else:                                     # the stretch ended (or none was open)
            if first is not None and last is not None:
                busy_s += last[0] - first[0]
                busy_bytes += last[1] - first[1]
            first = last = None
        prev = now
    out: dict[str, Any] = {"dev": dev, "configured_bps": configured_bps, "samples": len(rs),
                           "backlogged_s": round(busy_s, 3)}
    if rs:
        out["drops"] = int(rs[-1]["drops"]) - int(rs[0]["drops"])
    if busy_s > 0:
        achieved = busy_bytes * 8 / busy_s
        out["achieved_bps"] = round(achieved)
        out["ratio"] = round(achieved / configured_bps, 4)
    return out


def _tbf_backlog(ns: Any, dev: str) -> int:
    import json
    cp = ns.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], check=False)
    try:
        for q in json.loads(cp.stdout or "[]"):
            if q.get("kind") == "tbf":
                return int(q.get("backlog", 0))
    except ValueError:
        pass
    return 0


def rate_seconds(rate_bps: int, tolerance: float) -> float:
    """How long a tbf at rate_bps is held backlogged: long enough that one frame, the counters'
    granularity, is at most a quarter of the tolerance (the ratio's error is below one frame over
    the backlogged time), within [RATE_MIN_S, RATE_MAX_S]."""
    return round(min(RATE_MAX_S, max(RATE_MIN_S, 4 * FRAME_BITS / (tolerance * rate_bps))), 3)


def rate_check(shapers: list[tuple[str, Any, Any, str, str, int]], workdir: Path,
               tolerance: float) -> dict[str, dict[str, Any]]:
    """`shapers`: (path, router_ns, server_ns, dev, client_addr, rate_bps) of each downlink tbf.
    All paths at once (each has its own router). Returns, per path, backlogged_rate's figures."""
    from mpvlab.collectors import qdiscstat
    import contextlib
    out: dict[str, dict[str, Any]] = {}
    todo = [s for s in shapers if s[5] <= RATE_MAX_BPS]
    for s in shapers:
        if s[5] > RATE_MAX_BPS:
            out[s[0]] = {"dev": s[3], "configured_bps": s[5], "check": f"not measured: above {RATE_MAX_BPS} bit/s"}
    if not todo:
        return out
    held_s = {path: rate_seconds(rate, tolerance) for path, _r, _s, _d, _a, rate in todo}
    t0 = time.monotonic_ns()
    with contextlib.ExitStack() as stack:
        for path, router, _srv, _dev, _addr, _rate in todo:
            stack.enter_context(qdiscstat.sample_queues(router.name, workdir / f"precheck-rate-{path}", t0, RATE_HZ))
        # One sender process per server namespace for all its paths (each path keeps its own
        # schedule in it), started at once: collectors/blast.c, the constants from blast.py.
        by_ns: dict[str, tuple[Any, list[tuple[str, int, float]]]] = {}
        for path, _r, srv, _d, addr, rate in todo:
            by_ns.setdefault(srv.name, (srv, []))[1].append((addr, rate, held_s[path]))
        blasters = [srv.popen(blast.command(targets), cwd=REPO) for srv, targets in by_ns.values()]
        for b in blasters:
            b.wait(timeout=RATE_MAX_S + 20)
    for path, _router, _srv, dev, _addr, rate in todo:
        rows, _ = qdiscstat.load_samples(workdir / f"precheck-rate-{path}", links=False)
        out[path] = backlogged_rate(rows, dev, rate)
        out[path]["held_s"] = held_s[path]
    # The queue the check filled must be empty again before anything else is measured or run.
    deadline = time.monotonic() + 10
    for _path, router, _srv, dev, _addr, _rate in todo:
        while _tbf_backlog(router, dev) > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    return out


def rtt_plan(rates_bps: Iterable[int | None]) -> tuple[float, int]:
    """(interval ms, echo count) for paths whose shaped directions have these rates (None: unshaped):
    98 wire bytes at most MAX_PROBE_LOAD of the slowest rate, at least MIN_INTERVAL_MS apart;
    PRE_COUNT echoes, fewer (not below MIN_COUNT) where that would take longer than MAX_CHECK_S
    (paths below ~260 kbit/s)."""
    slowest = min((r for r in rates_bps if r), default=None)
    ms = MIN_INTERVAL_MS if slowest is None else ECHO_WIRE_BYTES * 8 / (MAX_PROBE_LOAD * slowest) * 1e3
    interval = max(math.ceil(ms * 1000) / 1000, MIN_INTERVAL_MS)    # whole µs, never below the load rule
    count = min(PRE_COUNT, max(MIN_COUNT, int(MAX_CHECK_S * 1e3 / interval)))
    return interval, count


class RttCheck:
    """kping from the client's namespace over every path at once, one echo per path every
    interval_ms. Started (interpreter, imports, sockets) before it is needed and held until `go`, so
    its start-up overlaps the rate check instead of adding to the pre-check's length (issue 16)."""

    def __init__(self, client_ns: Any, pairs: list[tuple[str, str, Path]], tail_s: float, interval_ms: float,
                 count: int = PRE_COUNT) -> None:
        argv = kping.command(pairs, count, interval_ms, tail_s, wait_for_go=True)
        self._budget_s = count * interval_ms / 1e3 + tail_s + 30
        self._proc = client_ns.popen(argv, cwd=REPO, stdin=subprocess.PIPE, stderr=subprocess.PIPE)

    def run(self) -> None:
        """Start the echoes now and wait for them; raises RuntimeError naming kping's error."""
        try:
            _, err = self._proc.communicate(b"go\n", timeout=self._budget_s)
        finally:
            self.cancel()
        if self._proc.returncode != 0:
            raise RuntimeError(f"kernel-stamped RTT check failed: {err.decode(errors='replace')[-1000:]}")

    def cancel(self) -> None:
        """Stop it if it still runs (never begun, or past its budget)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
