"""Tests for cc/: the BBR-S percentile routine, the loader's lifecycle and
BBR-S against the kernel's BBR over an emulated 25 Mbit/s tbf bottleneck."""
from __future__ import annotations

import csv
import json
import math
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from mpvlab.core.paths import checkout_root

# Per test (issue 44): only the tbf comparisons assert goodput bounds (tests/hostnoise.py); the
# percentile, registry and loader tests assert values, states and 5-30 s deadlines.

ROOT = checkout_root()

from mpvlab import cc  # noqa: E402
from mpvlab.testbed.dumbbell import Dumbbell  # noqa: E402
from hostnoise import StealWindow, least_contended, lowered  # noqa: E402

RATE = 25_000_000
# Payload goodput of a tbf that counts whole 1514-byte frames carrying 1448-byte segments.
IDEAL_GOODPUT = RATE * 1448 / 1514


@pytest.fixture(scope="session")
def built() -> None:
    cc.build()




# ---------------------------------------------------------------- percentile

def run_pct(values: list[int], window: int, p_bp: int) -> list[int]:
    p = subprocess.run([str(cc.PCT_TEST), str(window), str(p_bp)],
                       input="\n".join(map(str, values)) + "\n",
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines()]
    assert [int(r[1]) for r in rows] == [min(i + 1, window) for i in range(len(values))]
    return [int(r[0]) for r in rows]


def numpy_reference(values: list[int], window: int, p_bp: int) -> list[float]:
    arr = np.asarray(values, dtype=np.float64)
    return [float(np.percentile(arr[max(0, i - window + 1): i + 1], p_bp / 100.0))
            for i in range(len(values))]


def _streams() -> dict[str, list[int]]:
    rng = np.random.default_rng(20261122)
    bursty = []
    for _ in range(30):  # steady around 36k (25 Mbit/s in BBR units) with short bursts
        bursty += list(rng.normal(36_000, 800, 25).astype(int))
        bursty += list(rng.integers(300_000, 2_000_000, 4))
    return {
        "random": list(rng.integers(0, 2**32, 700)),
        "increasing": list(range(1000, 1600)),
        "decreasing": list(range(900_000, 899_400, -1)),
        "bursty": [max(0, int(v)) for v in bursty],
        "fewer_than_n": list(rng.integers(0, 50_000, 37)),
        "duplicates": list(rng.choice([5, 7, 7, 9, 2**32 - 1], 500)),
        "constant": [123_456] * 300,
    }


@pytest.mark.parametrize("name", list(_streams()))
@pytest.mark.parametrize("window,p_bp", [(100, 8500), (100, 5000), (7, 8500), (1, 8500),
                                         (100, 0), (100, 10000), (64, 3333), (1024, 9000)])
def test_percentile_matches_numpy(built: None, name: str, window: int, p_bp: int) -> None:
    values = [int(v) for v in _streams()[name]]
    got = run_pct(values, window, p_bp)
    ref = numpy_reference(values, window, p_bp)
    for i, (g, r) in enumerate(zip(got, ref)):
        # The C routine rounds the interpolated value down; numpy keeps the fraction.
        assert r - 1 < g <= r + 1e-6 * max(1.0, r), (name, i, g, r)


def test_percentile_rejects_bad_args(built: None) -> None:
    for args in (["0", "8500"], ["1025", "8500"], ["100", "10001"], ["x", "1"]):
        p = subprocess.run([str(cc.PCT_TEST), *args], input="", capture_output=True, text=True)
        assert p.returncode != 0


# ---------------------------------------------------------------- registry

def test_registry() -> None:
    reg = cc.available()
    assert set(reg) == {"cubic", "bbr", "bbr-s"}
    assert reg["cubic"].kind == "builtin" and reg["bbr"].kind == "builtin"
    bbrs = reg["bbr-s"]
    assert bbrs.kind == "bpf"
    params = {p.name: p for p in bbrs.params}
    assert (params["window"].default, params["percentile"].default, params["factor"].default) == (100, 85.0, 1.0)
    params["window"].check(100)
    for bad in (0, 1025, 10.5):
        with pytest.raises(ValueError):
            params["window"].check(bad)
    with pytest.raises(ValueError):
        params["percentile"].check(101)


def test_parse_ss_bbr() -> None:
    text = ("ESTAB 0      940288 10.201.1.1:58250 10.201.2.2:5201\n"
            "\t bbr wscale:10,10 rto:208 rtt:4.553/0.39 mss:1448 cwnd:12 bytes_acked:3020030 "
            "bbr:(bw:24024560bps,mrtt:0.009,pacing_gain:1.25,cwnd_gain:2) send 30531078bps "
            "pacing_rate 23.7Mbps delivery_rate 1.2Gbps\n"
            "ESTAB 0 0 10.201.1.1:22 10.201.2.2:4000\n\t cubic wscale:7,7 cwnd:10\n")
    rows = cc.parse_ss_bbr(text)
    assert len(rows) == 1
    r = rows[0]
    assert (r["sport"], r["dport"], r["cwnd"], r["mss"]) == (58250, 5201, 12, 1448)
    assert r["bw_bps"] == 24024560 and r["pacing_gain"] == 1.25 and r["cwnd_gain"] == 2
    assert math.isclose(r["min_rtt_us"], 9.0)
    assert r["pacing_rate_bps"] == 23.7e6 and r["delivery_rate_bps"] == 1.2e9


# ---------------------------------------------------------------- loader

def _bpf_ids(kind: str) -> set[int]:
    out = subprocess.run(["bpftool", kind, "show", "-j"], capture_output=True, text=True, check=True)
    return {int(o["id"]) for o in json.loads(out.stdout or "[]")}


def _struct_ops_ids() -> set[int]:
    out = subprocess.run(["bpftool", "struct_ops", "list", "-j"], capture_output=True, text=True,
                         check=True).stdout
    return {int(o["id"]) for o in json.loads(out or "[]")}


def _assert_gone(load: cc.BbrsLoad) -> None:
    deadline = time.monotonic() + 5  # map/prog frees run from RCU callbacks
    while True:
        left = ((set(load.map_ids) & _bpf_ids("map")) | (set(load.prog_ids) & _bpf_ids("prog"))
                | ({load.link_id} & _bpf_ids("link")))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, f"BPF objects left behind: {left}"
    assert not set(load.map_ids) & _struct_ops_ids()
    assert load.name not in cc.kernel_available()


@pytest.mark.netns
def test_loader_registers_and_unregisters(built: None, tmp_path: Path) -> None:
    with cc.load_bbrs("hcctst_a", 10, 50.0, 1.0, None, tmp_path) as a, \
            cc.load_bbrs("hcctst_b", 100, 85.0, 0.85, None, tmp_path) as b:
        avail = cc.kernel_available()
        assert "hcctst_a" in avail and "hcctst_b" in avail
        assert len(a.prog_ids) == 9 and len(a.map_ids) >= 4
        assert set(a.map_ids) <= _bpf_ids("map") and set(a.prog_ids) <= _bpf_ids("prog")
        # Each load owns exactly one registered tcp_congestion_ops struct_ops map.
        assert len(set(a.map_ids) & _struct_ops_ids()) == 1
        assert len(set(b.map_ids) & _struct_ops_ids()) == 1
    _assert_gone(a)
    _assert_gone(b)


@pytest.mark.netns
def test_loader_sigkill_leaves_nothing(built: None, tmp_path: Path) -> None:
    """The CC is owned by a struct_ops link fd: even SIGKILL unregisters it."""
    ready = tmp_path / "r.json"
    proc = subprocess.Popen([str(cc.LOADER), "--name", "hcctst_k", "--window", "100",
                             "--percentile", "85", "--ready-file", str(ready)],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    info = json.loads(ready.read_text())
    assert "hcctst_k" in cc.kernel_available()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _assert_gone(cc.BbrsLoad("hcctst_k", proc.pid, info["link_id"], tuple(info["map_ids"]),
                             tuple(info["prog_ids"]), None, ready))


@pytest.mark.netns
@pytest.mark.parametrize("args,msg", [
    (["--name", "x" * 16, "--window", "100", "--percentile", "85"], "--name"),
    (["--name", "hcc;rm", "--window", "100", "--percentile", "85"], "--name"),
    (["--name", "hcctst_e", "--window", "0", "--percentile", "85"], "--window"),
    (["--name", "hcctst_e", "--window", "100", "--percentile", "101"], "--percentile"),
    (["--name", "hcctst_e", "--window", "100", "--percentile", "85", "--factor", "0"], "--factor"),
    (["--name", "bbr", "--window", "100", "--percentile", "85"], "already registered"),
])
def test_loader_rejects_bad_args(built: None, args: list[str], msg: str) -> None:
    before = cc.kernel_available()
    p = subprocess.run([str(cc.LOADER), *args], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and msg in p.stderr, p.stderr
    assert cc.kernel_available() == before


def test_load_bbrs_validates(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        with cc.load_bbrs("bad name", 100, 85.0, 1.0, None, tmp_path):
            pass
    with pytest.raises(ValueError):
        with cc.load_bbrs("hcctst_v", 2000, 85.0, 1.0, None, tmp_path):
            pass


# ---------------------------------------------------------------- over a tbf path

def _goodput(result: dict) -> float:
    return float(result["end"]["sum_received"]["bits_per_second"])


def _data_rows(path: Path) -> list[dict]:
    rows = list(csv.DictReader(path.open()))
    assert rows, "state CSV is empty"
    # iperf3 opens a small control connection too; the data flow has the most ACKs.
    acks: dict[str, int] = {}
    for r in rows:
        acks[r["flow_id"]] = max(acks.get(r["flow_id"], 0), int(r["acks"]))
    flow = max(acks, key=lambda k: acks[k])
    return [r for r in rows if r["flow_id"] == flow]


def _run_pair(tmp_path: Path, seconds: float, offloads: bool, window: int = 100,
              percentile: float = 85.0) -> dict:
    """Kernel bbr then bbr-s over the same dumbbell; returns the measurements."""
    out: dict = {}
    with Dumbbell(prefix="hcc", offloads=offloads) as d:
        d.set_cc("bbr")
        bbr_infos: list[dict] = []
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(0.25):
                bbr_infos.extend(i for i in cc.read_bbr_info(d.ns_a) if i["dport"] == 5201)
        t = threading.Thread(target=poll)
        t.start()
        try:
            out["bbr_goodput"] = _goodput(d.iperf(seconds))
        finally:
            stop.set()
            t.join()
        data = [i for i in bbr_infos if (i["bytes_acked"] or 0) > 1_000_000]
        out["bbr_bw"] = [i["bw_bps"] for i in data]

        state = tmp_path / "state.csv"
        with cc.load_bbrs("hccbbrs_t", window, percentile, 1.0, state, tmp_path, state_hz=50):
            d.set_cc("hccbbrs_t")
            out["bbrs_goodput"] = _goodput(d.iperf(seconds))
            d.set_cc("cubic")
        out["rows"] = _data_rows(state)
    return out


def _measure_pair(tmp_path: Path, seconds: float, offloads: bool) -> tuple[dict, StealWindow]:
    """The pair on the least contended of up to 2 attempts (tests/hostnoise.py)."""
    m = least_contended(lambda: _run_pair(tmp_path, seconds=seconds, offloads=offloads),
                        what=f"bbr vs bbr-s {seconds:g} s", attempts=2)
    return m.value, m.steal


def _check_pair(measured: tuple[dict, StealWindow], window: int) -> None:
    m, steal = measured
    # A stall of the host loses tbf tokens: lower bounds give way by the stolen share f, and
    # the two runs (one after the other) may differ by it too.
    lo, hi = lowered(IDEAL_GOODPUT, 0.03, steal.lost)
    assert lo <= m["bbr_goodput"] <= hi, (m["bbr_goodput"], steal.describe())
    assert lo <= m["bbrs_goodput"] <= hi, (m["bbrs_goodput"], steal.describe())
    assert abs(m["bbrs_goodput"] / m["bbr_goodput"] - 1) <= 0.03 + steal.lost
    # The kernel BBR's own estimate (ss) is sane with these settings.
    assert m["bbr_bw"], "no bbr samples from ss"
    assert np.median(m["bbr_bw"]) == pytest.approx(IDEAL_GOODPUT, rel=0.10)

    rows = m["rows"]
    probe = [r for r in rows if r["mode"] == "PROBE_BW" and int(r["n_samples"]) == window]
    assert len(probe) >= 10, f"only {len(probe)} PROBE_BW rows"
    last = rows[-1]
    # The CC used the percentile on every ACK: bbr_main's filter never differed.
    assert int(last["mismatch"]) == 0
    # Samples above the percentile exist and were clipped (the interesting path ran).
    assert 0 < int(last["clipped"]) < int(last["acks"])
    for r in probe:
        assert r["lt_use_bw"] == "0"
        assert float(r["bw_est_bps"]) == pytest.approx(float(r["percentile_bw_bps"]), abs=1)
    est = np.array([float(r["bw_est_bps"]) for r in probe])
    assert np.median(est) == pytest.approx(IDEAL_GOODPUT, rel=0.03)
    # Near the link rate, allowing for rare host hiccups on this shared 2-core
    # machine: a stall followed by an ACK burst yields Gbit/s samples; BBR-S
    # then overestimates for about one window (~100 ms), stock BBR for 10 rounds.
    within = np.abs(est / IDEAL_GOODPUT - 1) <= 0.10
    assert within.mean() >= 0.90, f"{(~within).sum()} of {len(est)} rows off by > 10 %"
    # BBR-S's pacing follows its estimate x gain (1 % pacing margin), not the max filter.
    # (A row is copied while the CC may be writing it: tolerate a few torn rows.)
    ok = [float(r["pacing_rate_bps"]) == pytest.approx(
        float(r["bw_est_bps"]) * float(r["pacing_gain"]) * 0.99, rel=0.01) for r in probe]
    assert sum(ok) >= 0.98 * len(ok)


@pytest.mark.netns
@pytest.mark.cpu   # cpu (not cpu_light, though measured at 0.08 cores): a transfer's time or goodput bound, and the kernel's forwarding work is not in the measured CPU (S4, docs/testing.md); goodput bounds over a tbf (tests/hostnoise.py)
@pytest.mark.parametrize("offloads", [False, True])
def test_bbrs_vs_bbr_tbf_short(built: None, tmp_path: Path, offloads: bool) -> None:
    """4 s of each CC, with and without GSO/GRO/TSO on the dumbbell's interfaces: every bound of the
    15 s `_long` variant (run with MPVLAB_SLOW_TESTS=1)."""
    _check_pair(_measure_pair(tmp_path, seconds=4, offloads=offloads), window=100)


@pytest.mark.netns
@pytest.mark.slow(short="test_bbrs_vs_bbr_tbf_short")
@pytest.mark.cpu   # cpu: goodput bounds over a tbf (tests/hostnoise.py)
@pytest.mark.parametrize("offloads", [False, True])
def test_bbrs_vs_bbr_tbf_long(built: None, tmp_path: Path, offloads: bool) -> None:
    _check_pair(_measure_pair(tmp_path, seconds=15, offloads=offloads), window=100)
