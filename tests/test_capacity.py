"""Capacity (Mahimahi traces, rate schedules), drop-tail queue, outages and loss models of the C
delay line (links/delayline) and their Python side (mpvlab/links/capacity.py).

netns tests: client -- router -- server namespaces (mpvlab/testbed/delayline.py), the line on the router's
server->client direction, data = an iperf3 bulk flow server->client. The line's --release-log
gives every packet's arrival, departure from the link (its opportunity), target and release time,
and the queue it found; the checks are made against Mahimahi's semantics recomputed independently
by links.capacity.mahimahi_departures (Mahimahi's own loop, event by event).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()
from mpvlab.testbed import delayline as H  # noqa: E402
from mpvlab.links import capacity as C  # noqa: E402
from mpvlab.core.errors import InputError  # noqa: E402

TRACES = ROOT / "links" / "traces" / "mahimahi"
SHIPPED = ["ATT-LTE-driving-2016.down", "ATT-LTE-driving-2016.up", "TMobile-LTE-short.down",
           "TMobile-LTE-short.up", "Verizon-LTE-short.down", "Verizon-LTE-short.up"]


@pytest.fixture(scope="session")
def delayline_bin() -> Path:
    return H.build()


@pytest.fixture
def line(delayline_bin: Path) -> Any:
    with H.Line() as ln:
        yield ln


def _run(delayline_bin: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(delayline_bin), *args], capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------------------ loss models (no root)

GE_CASES = [
    # p, r, loss_in_bad, loss_in_good: Gilbert (1, 0), a lossy Good state, a leaky Bad state
    (0.01, 0.3, 1.0, 0.0),
    (0.02, 0.25, 0.8, 0.002),
    (0.005, 0.1, 0.5, 0.0),
]


@pytest.mark.parametrize("p, r, lb, lg", GE_CASES)
def test_gilbert_elliott_rate_and_bursts(delayline_bin: Path, p: float, r: float, lb: float, lg: float) -> None:
    """The packet path's own loss code (--loss-selftest) over 10^6 packets: achieved loss rate and
    mean burst length within 5 % of the model (the C and Python formulas agree). 10^6 packets put
    the sampling error of both near 1-2 % (bursts number >= 5000 in every case)."""
    cp = _run(delayline_bin, "--loss-selftest", "1000000", "--ge-p", str(p), "--ge-r", str(r),
              "--ge-loss-bad", str(lb), "--ge-loss-good", str(lg), "--seed", "42")
    assert cp.returncode == 0, cp.stderr
    st = json.loads(cp.stdout)
    spec = C.GilbertElliottLoss(kind="gilbert-elliott", p_good_to_bad=p, p_bad_to_good=r,
                                loss_in_bad=lb, loss_in_good=lg)
    rate, burst = C.ge_model(spec)
    assert st["model_loss_rate"] == pytest.approx(rate, rel=1e-6)
    assert st["model_burst_mean"] == pytest.approx(burst, rel=1e-5)
    assert st["packets"] == 1_000_000 and st["bursts"] >= 5000
    assert abs(st["loss_rate"] / rate - 1) < 0.05, (st["loss_rate"], rate)
    assert abs(st["burst_mean"] / burst - 1) < 0.05, (st["burst_mean"], burst)
    # bookkeeping adds up: bursts x lengths = lost packets
    hist = st["burst_hist"]
    assert sum((i + 1) * n for i, n in enumerate(hist[:-1])) <= st["lost"]
    assert sum(hist) == st["bursts"]
    # stationary share of Bad packets
    assert abs(st["packets_in_bad"] / 1e6 - p / (p + r)) < 0.05 * p / (p + r)


def test_loss_is_seeded(delayline_bin: Path) -> None:
    a = _run(delayline_bin, "--loss-selftest", "100000", "--ge-p", "0.01", "--ge-r", "0.2",
             "--ge-loss-bad", "1", "--ge-loss-good", "0", "--seed", "7").stdout
    b = _run(delayline_bin, "--loss-selftest", "100000", "--ge-p", "0.01", "--ge-r", "0.2",
             "--ge-loss-bad", "1", "--ge-loss-good", "0", "--seed", "7").stdout
    c = _run(delayline_bin, "--loss-selftest", "100000", "--ge-p", "0.01", "--ge-r", "0.2",
             "--ge-loss-bad", "1", "--ge-loss-good", "0", "--seed", "8").stdout
    assert a == b and a != c


def test_independent_loss_bursts(delayline_bin: Path) -> None:
    """Bernoulli p: mean burst 1/(1-p)."""
    st = json.loads(_run(delayline_bin, "--loss-selftest", "1000000", "--loss", "0.2", "--seed", "3").stdout)
    assert abs(st["loss_rate"] - 0.2) < 0.002
    assert abs(st["burst_mean"] - 1.25) < 0.02


@pytest.mark.parametrize("args, needle", [
    (["--ge-p", "0.1"], "Gilbert-Elliott needs all of"),
    (["--ge-p", "0", "--ge-r", "0.1", "--ge-loss-bad", "1", "--ge-loss-good", "0"], "must be > 0"),
    (["--loss", "0.1", "--ge-p", "0.1", "--ge-r", "0.1", "--ge-loss-bad", "1", "--ge-loss-good", "0"],
     "and no --loss"),
    (["--ge-p", "1.5"], "--ge-p: invalid probability"),
    (["--outage", "5:5"], "--outage: invalid interval"),
    (["--outage", "100:200", "--outage", "150:300"], "starts before the previous one ends"),
    (["--queue-packets", "10"], "need a capacity"),
])
def test_cli_errors(delayline_bin: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    s = tmp_path / "s"
    s.write_text("0 0\n")
    cp = _run(delayline_bin, "--queue", "0", "--schedule", str(s), *args)
    assert cp.returncode == 2 and needle in cp.stderr, cp.stderr


# ------------------------------------------------------------------------------ trace files (no root)

@pytest.mark.parametrize("text, needle", [
    (b"0\n5\n3\n", "line 3: timestamp 3 ms is smaller than the previous one"),
    (b"0\n\n5\n", "line 2: empty line"),
    (b"0\n1.5\n", "line 2:"),
    (b"0\n0\n", "the last timestamp must be > 0"),
    (b"", "no timestamps"),
    (b"1\n-2\n", "line 2:"),
])
def test_mahimahi_trace_errors(delayline_bin: Path, tmp_path: Path, text: bytes, needle: str) -> None:
    """Python and C refuse the same files, naming the file and the line."""
    f = tmp_path / "t.trace"
    f.write_bytes(text)
    with pytest.raises(C.TraceError) as e:
        C.read_mahimahi_trace(f)
    assert str(f) in str(e.value) and needle in str(e.value), str(e.value)
    s = tmp_path / "s"
    s.write_text("0 0\n")
    cp = _run(delayline_bin, "--queue", "0", "--schedule", str(s), "--capacity-trace", str(f))
    assert cp.returncode == 2 and str(f) in cp.stderr and needle in cp.stderr, cp.stderr


def test_trace_error_does_not_echo_contents(tmp_path: Path) -> None:
    f = tmp_path / "t.trace"
    f.write_bytes(b"0\n" + b"A" * 5000 + b"\n")
    with pytest.raises(C.TraceError) as e:
        C.read_mahimahi_trace(f)
    assert len(str(e.value)) < 300 and "A" * 30 not in str(e.value)


def test_trace_size_limits(tmp_path: Path) -> None:
    f = tmp_path / "t.trace"
    f.write_bytes(b"1\n" * 2000)
    with pytest.raises(C.TraceError, match="more than the limit of 1000 bytes"):
        C.read_mahimahi_trace(f, max_bytes=1000)
    with pytest.raises(C.TraceError, match="more than the limit of 100"):
        C.read_mahimahi_trace(f, max_lines=100)


def test_time_rate_trace(tmp_path: Path) -> None:
    f = tmp_path / "r.trace"
    f.write_text("# time_ms rate_mbit\n0 10\n500 2.5\n1000 0\n1500 10\n")
    assert C.read_time_rate_trace(f) == [(0, 10_000_000), (500_000_000, 2_500_000),
                                         (1_000_000_000, 0), (1_500_000_000, 10_000_000)]
    f.write_text("0 10\n500 2.5\n400 1\n")
    with pytest.raises(C.TraceError, match="line 3: time 400 ms is not after"):
        C.read_time_rate_trace(f)
    f.write_text("0 10 mbit\n")
    with pytest.raises(C.TraceError, match="line 1: .* is not 'time_ms rate_mbit'"):
        C.read_time_rate_trace(f)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_traces_read(name: str) -> None:
    """The six shipped traces are valid and match the numbers in their README."""
    t = C.read_mahimahi_trace(TRACES / name)
    readme = (TRACES / "README.md").read_text()
    assert f"{len(t.opportunities_ms):,}" in readme
    assert t.period_ms in (120002, 139986, 140000)


def test_spec_to_args(tmp_path: Path) -> None:
    imp = C.Impairments.model_validate({
        "capacity": {"rate": {"kind": "trace", "file": "mahimahi/Verizon-LTE-short.down"}, "queue": "100pkt"},
        "loss_model": {"kind": "gilbert-elliott", "p_good_to_bad": 0.01, "p_bad_to_good": 0.3},
        "outages": [["5s", "10s"]]})
    args = C.delayline_args(imp, workdir=tmp_path, label="wifi-down", seed=9, base_dir=tmp_path)
    assert args == ["--capacity-trace", str(TRACES / "Verizon-LTE-short.down"), "--packet-overhead", "4",
                    "--queue-packets", "100", "--ge-p", "0.01", "--ge-r", "0.3", "--ge-loss-bad", "1.0",
                    "--ge-loss-good", "0.0", "--seed", "9", "--outage", "5000000:10000000"]
    imp = C.Impairments.model_validate({"capacity": {"rate": {
        "kind": "square", "high": "20mbit", "low": "2mbit", "period": "20s", "duty": 0.25}, "queue": "150KB"}})
    args = C.delayline_args(imp, workdir=tmp_path, label="w", seed=1, base_dir=tmp_path)
    assert args == ["--rate-schedule", str(tmp_path / "capacity-w.rate"), "--packet-overhead", "0",
                    "--queue-bytes", "150000"]
    assert (tmp_path / "capacity-w.rate").read_text().splitlines()[1:] == [
        "period_us 20000000", "0 2000000", "5000000 20000000"]


@pytest.mark.parametrize("doc, needle", [
    ({"outages": [["5s", "4s"]]}, "start must be before end"),
    ({"outages": [["1s", "5s"], ["4s", "6s"]]}, "must not overlap"),
    ({"capacity": {"rate": {"kind": "trace", "file": "x/../../etc/passwd"}}}, "must not contain"),
    ({"capacity": {"rate": {"kind": "trace", "file": "/etc/passwd"}}}, "pattern"),
    ({"capacity": {"rate": {"kind": "trace", "file": "x", "repeat": "1s"}}}, "'repeat' is for time-rate"),
    ({"capacity": {"rate": {"kind": "constant", "value": "10mbit"}, "queue": {}}}, "needs a limit"),
    ({"loss_model": {"kind": "gilbert-elliott", "p_good_to_bad": 0, "p_bad_to_good": 0.1}}, "greater than 0"),
])
def test_spec_errors(doc: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        C.Impairments.model_validate(doc)


def test_missing_trace_named(tmp_path: Path) -> None:
    imp = C.Impairments.model_validate({"capacity": {"rate": {"kind": "trace", "file": "nope.trace"}}})
    with pytest.raises(InputError, match="trace file 'nope.trace' not found"):
        C.delayline_args(imp, workdir=tmp_path, label="x", seed=1, base_dir=tmp_path)


def test_reference_model_basics() -> None:
    """The Python reference of Mahimahi's loop on hand-made cases: one opportunity per ms."""
    t = C.MahimahiTrace(Path("x"), (1,))  # one opportunity at 1, 2, 3, ... ms
    ms = 1_000_000
    # three MTU packets at 0.5 ms leave at 1, 2, 3 ms; a small one arriving at 3.5 ms leaves at 4 ms
    assert C.mahimahi_departures(t, [ms // 2] * 3 + [3 * ms + ms // 2], [1500, 1500, 1500, 100]) == \
        [ms, 2 * ms, 3 * ms, 4 * ms]
    # small packets share an opportunity: 1504 / (96 + 4) = 15 per opportunity, the 16th's bytes
    # carry into the next one
    dep = C.mahimahi_departures(t, [0] * 20, [96] * 20)
    assert dep == [ms] * 15 + [2 * ms] * 5
    # an arrival exactly at an opportunity cannot use it (Mahimahi burns opportunities <= now first)
    assert C.mahimahi_departures(t, [ms], [1500]) == [2 * ms]
    # drop-tail: the packet in transit is not in the queue
    dep = C.mahimahi_departures(t, [0] * 5, [1500] * 5, limit_packets=3)
    assert dep == [ms, 2 * ms, 3 * ms, None, None]


# ------------------------------------------------------------------------------ netns: traces

def _trace_run(line: H.Line, trace: Path, seconds: float, extra: list[str]) -> tuple[list[H.Rel], dict[str, Any]]:
    line.tcp_buffers(16 << 20)
    line.add_queue("rs", 0)
    rlog = line.tmp / "rel.csv"
    t0 = time.monotonic_ns() + 200_000_000
    d = line.delayline(H.constant(0), t0_ns=t0, extra=["--capacity-trace", str(trace), "--release-log", str(rlog),
                                                       *extra])
    H.bulk_tcp(line, seconds)
    st = d.stop()
    return H.read_release_log(rlog), st


def _check_against_reference(tr: C.MahimahiTrace, rels: list[H.Rel], **limits: int) -> None:
    """Every packet's departure (or drop) equals Mahimahi's, recomputed from the logged arrivals;
    no packet is released before its opportunity or its target."""
    queued = [r for r in rels if r.fate in "AQS"]
    ref = C.mahimahi_departures(tr, [r.arrival_ns for r in queued], [r.len for r in queued], **limits)
    got = [r.depart_ns if r.fate in "AS" else None for r in queued]
    bad = [(r, x) for r, x in zip(queued, ref) if (r.depart_ns if r.fate in "AS" else None) != x]
    assert not bad, (len(bad), bad[:3])
    assert got == ref
    released = [r for r in rels if r.fate == "A"]
    assert all(r.release_ns >= r.target_ns >= r.depart_ns > r.arrival_ns for r in released)


@pytest.mark.netns
def test_trace_bulk_tcp_matches_mahimahi(line: H.Line) -> None:
    """Verizon LTE down, 8 s of bulk TCP, no queue limit (Mahimahi's default), no delay.
    - every departure equals Mahimahi's (reference model, packet for packet);
    - no packet leaves before its opportunity (release >= target = opportunity);
    - delivered IP bytes per 100 ms window vs opportunities x 1500 B, from 1 s after the start
      (slow start) to the end: total within 1 % (the flow keeps the queue non-empty, so every
      opportunity carries an MTU packet; the error is the ACK/FIN packets and the partial window
      at the edges), and no window may exceed its opportunities by more than one MTU packet."""
    tr = C.read_mahimahi_trace(TRACES / "Verizon-LTE-short.down")
    rels, st = _trace_run(line, tr.path, 8, [])
    _check_against_reference(tr, rels)
    w = H.window_errors(rels, tr.count_between)
    assert w["windows"] >= 60, w
    assert abs(w["total_error"]) < 0.01, w
    assert w["window_error_bytes"]["max"] <= 1500, w
    assert st["drops_queue"] == 0 and st["drops_overflow"] == 0 and st["drops_netlink"] == 0
    assert st["capacity"]["served_packets"] == sum(1 for r in rels if r.fate in "AS")
    print("verizon-down 8 s:", json.dumps(w), "lateness", st["lateness_us"])


@pytest.mark.netns
@pytest.mark.parametrize("limit", [["--queue-packets", "40"], ["--queue-bytes", "45000"]])
def test_droptail_drops_exactly_when_full(line: H.Line, limit: list[str]) -> None:
    """T-Mobile LTE down (up to ~70 Mbit/s), 5 s of bulk TCP into a 40-packet / 45000-byte queue:
    every refused packet found the queue full (packets: 40 queued; bytes: queued + its IP length
    + 4 > 45000) and every accepted one found room; the drops and departures equal Mahimahi's."""
    tr = C.read_mahimahi_trace(TRACES / "TMobile-LTE-short.down")
    rels, st = _trace_run(line, tr.path, 5, limit)
    drops = [r for r in rels if r.fate == "Q"]
    acc = [r for r in rels if r.fate in "AS"]
    assert len(drops) >= 1 and st["drops_queue"] == len(drops) == st["capacity"]["queue_drops"]
    if limit[0] == "--queue-packets":
        assert all(r.q_packets == 40 for r in drops)
        assert all(r.q_packets < 40 for r in acc)
        _check_against_reference(tr, rels, limit_packets=40)
    else:
        assert all(r.q_bytes + r.len + 4 > 45000 for r in drops)
        assert all(r.q_bytes + r.len + 4 <= 45000 for r in acc)
        _check_against_reference(tr, rels, limit_bytes=45000)
    assert st["capacity"]["max_queue_packets"] <= 40 or limit[0] == "--queue-bytes"


@pytest.mark.netns
def test_outage_and_rate_schedule(line: H.Line) -> None:
    """Constant 20 Mbit/s (fluid serialiser, IP bytes) with an outage [2 s, 3 s) and 15 ms delay,
    bulk TCP for 5 s: nothing departs the link inside the outage; packets arriving in it are dropped
    (O); packets waiting for the link at its start are dropped (F, their departure lay after the
    start); propagating packets (departed before the start) are delivered; data flows again after
    the outage; departures follow the serialiser: consecutive back-to-back departures are spaced by
    exactly len x 8 / 20e6 (to the ns, rounded up)."""
    rate = line.tmp / "r.rate"
    rate.write_text("period_us 0\n0 20000000\n")
    line.tcp_buffers(16 << 20)
    line.add_queue("rs", 0)
    rlog = line.tmp / "rel.csv"
    t0 = time.monotonic_ns() + 200_000_000
    d = line.delayline(H.constant(15000), t0_ns=t0, extra=[
        "--rate-schedule", str(rate), "--queue-packets", "200", "--outage", "2000000:3000000",
        "--release-log", str(rlog)])
    H.bulk_tcp(line, 5)
    st = d.stop()
    rels = H.read_release_log(rlog)
    s, e = 2_000_000_000, 3_000_000_000
    acc = [r for r in rels if r.fate == "A"]
    assert not [r for r in acc if s < r.depart_ns < e]
    outs = [r for r in rels if r.fate == "O"]
    assert outs and all(s <= r.arrival_ns < e for r in outs)
    assert not [r for r in rels if r.fate != "O" and s <= r.arrival_ns < e]
    flushed = [r for r in rels if r.fate == "F"]
    assert flushed and all(r.depart_ns > s and r.arrival_ns < s for r in flushed)
    assert st["drops_outage"] == len(outs) and st["drops_outage_flushed"] == len(flushed)
    # propagating packets at the outage start are delivered after it began
    assert [r for r in acc if r.depart_ns <= s < r.release_ns]
    after = [r for r in acc if r.depart_ns >= e]
    assert sum(r.len for r in after) > 1_000_000, "TCP did not resume after the outage"
    assert all(r.release_ns >= r.target_ns == r.depart_ns + 15_000_000 for r in acc)
    # fluid serialiser: a packet that was queued starts when the previous one finished
    busy = 0
    for prev, cur in zip(acc, acc[1:]):
        if cur.q_packets > 0 and prev.depart_ns > cur.arrival_ns:
            assert cur.depart_ns - prev.depart_ns == -(-cur.len * 8 * 10**9 // 20_000_000), (prev, cur)
            busy += 1
    assert busy > 1000


def test_capacity_series_counts_opportunities_and_cuts_outages(tmp_path: Path) -> None:
    """The figures' configured capacity: a trace's bins hold exactly its opportunities × 1500 B over
    whole periods; a rate schedule's bins its mean rate; an outage's share of a bin carries nothing."""
    spec = C.CapacitySpec.model_validate({"rate": {"kind": "trace", "file": "mahimahi/Verizon-LTE-short.down"}})
    trace = C.validate_capacity(spec, tmp_path)
    assert isinstance(trace, C.MahimahiTrace)
    period_ns = trace.period_ms * 1_000_000
    series = C.capacity_series(spec, [], tmp_path, bin_ns=period_ns // 4, end_ns=2 * period_ns)
    bits = sum(bps * (period_ns // 4) / 1e9 for _t, bps in series)
    assert round(bits) == 2 * len(trace.opportunities_ms) * 1500 * 8
    square = C.CapacitySpec.model_validate(
        {"rate": {"kind": "square", "high": "4mbit", "low": "2mbit", "period": "2s", "duty": 0.5}})
    s = C.capacity_series(square, [(2_500_000_000, 3_000_000_000)], tmp_path, bin_ns=1_000_000_000,
                          end_ns=4_000_000_000)
    # low (the dip) first: 2, 4, 2 with its second half cut, 4
    assert [round(b) for _t, b in s] == [2_000_000, 4_000_000, 1_000_000, 4_000_000]
