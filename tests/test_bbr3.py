"""BBRv3 / BBRv3-S as BPF struct_ops (cc/bbr3.bpf.c) and the generic BPF CC loader (bpfcc-loader):
lifecycle (nothing left behind), load faults named, a user's own object with parameters, and
transfers over a tbf bottleneck with a 20 ms RTT checked against first principles."""
from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from mpvlab.core.paths import checkout_root

# Per test (issue 44): `cpu` on the transfers over a tbf (goodput and RTT bounds); the loader's
# parameters, validation and register/unregister assert states.

ROOT = checkout_root()

from mpvlab import cc  # noqa: E402
from mpvlab.cc import bbr3  # noqa: E402
from mpvlab.testbed.dumbbell import DelayDumbbell  # noqa: E402
from mpvlab.testbed.dumbbell import RECEIVER_ADDR, SENDER_ADDR, Dumbbell  # noqa: E402
from mpvlab.cc.user_bpf import EXAMPLE_OBJECT, BpfCCError, UserBpfCC, load_bpf_cc, resolve_object  # noqa: E402
from hostnoise import least_contended, lowered  # noqa: E402

BUILD = ROOT / "cc" / "build"
RATE = 25_000_000
RTT_MS = 20.0
IDEAL = RATE * 1448 / 1514  # payload bit/s a tbf counting 1514-byte frames carries
BDP = RATE / 8 * RTT_MS / 1000  # bytes



@pytest.fixture(scope="module")
def built() -> None:
    cc.build()


def _ids(kind: str) -> set[int]:
    out = subprocess.run(["bpftool", kind, "show", "-j"], capture_output=True, text=True, check=True).stdout
    return {int(o["id"]) for o in json.loads(out or "[]")}


def _assert_gone(load) -> None:
    deadline = time.monotonic() + 5  # map/prog frees run from RCU callbacks
    while True:
        left = ((set(load.map_ids) & _ids("map")) | (set(load.prog_ids) & _ids("prog"))
                | ({load.link_id} & _ids("link")))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, f"BPF objects left behind: {left}"
    assert load.name not in cc.kernel_available()


# ---------------------------------------------------------------- without a network

def test_loader_params() -> None:
    assert bbr3.loader_params("bbr3") == {"estimator": 0, "ecn": 0}
    assert bbr3.loader_params("bbr3-s", 50, 90.5, 0.85, True) == {
        "estimator": 1, "ecn": 1, "window": 50, "percentile_bp": 9050, "factor_bp": 8500}
    for bad in ({"window": 0}, {"window": 1025}, {"factor": 0.0}, {"percentile": 101.0}):
        with pytest.raises(ValueError):
            bbr3.loader_params("bbr3-s", **bad)
    with pytest.raises(ValueError):
        bbr3.loader_params("bbr4")  # type: ignore[arg-type]


def test_user_spec_validation(tmp_path: Path) -> None:
    assert UserBpfCC(bpf="cc/x.bpf.o", params={"beta_pct": 70}).params == {"beta_pct": 70}
    for bad in ("/etc/x.o", "../x.o", "cc/../../x.o", "x.c", "a b.o"):
        with pytest.raises(ValueError):
            UserBpfCC(bpf=bad)
    for params in ({"a-b": 1}, {"x": 1.5}, {"x": True}, {"x": 2**63}):
        with pytest.raises(ValueError):
            UserBpfCC(bpf="x.o", params=params)
    (tmp_path / "in.o").write_bytes(b"\x7fELF")
    assert resolve_object(tmp_path, "in.o") == (tmp_path / "in.o").resolve()
    (tmp_path / "link.o").symlink_to("/etc/hostname")
    with pytest.raises(BpfCCError, match="outside the scenario's folder"):
        resolve_object(tmp_path, "link.o")


# ---------------------------------------------------------------- loader

@pytest.mark.netns
def test_bbr3_and_bbr3s_register_side_by_side_and_leave_nothing(built: None, tmp_path: Path) -> None:
    with bbr3.load_bbr3("hbb_l3", "bbr3", workdir=tmp_path) as a, \
            bbr3.load_bbr3("hbb_l3s", "bbr3-s", window=10, percentile=50.0, factor=0.9, workdir=tmp_path) as b:
        avail = cc.kernel_available()
        assert "hbb_l3" in avail and "hbb_l3s" in avail
        assert len(a.prog_ids) == 9 and set(a.prog_ids) <= _ids("prog") and set(a.map_ids) <= _ids("map")
        assert a.link_id in _ids("link")
        # the parameters the kernel got, read back from the loader (rodata as loaded)
        assert a.params["estimator"] == 0
        assert (b.params["estimator"], b.params["window"], b.params["percentile_bp"], b.params["factor_bp"]) == \
            (1, 10, 5000, 9000)
    _assert_gone(a)
    _assert_gone(b)


@pytest.mark.netns
def test_loader_faults_name_what_the_kernel_lacks(built: None, tmp_path: Path) -> None:
    before = cc.kernel_available()
    with pytest.raises(BpfCCError, match=r"the kernel lacks kfunc 'mpvlab_no_such_kfunc' \(not in its BTF"):
        with load_bpf_cc(BUILD / "examples/faults/missing_kfunc.bpf.o", "hbb_f1", workdir=tmp_path):
            pass
    with pytest.raises(BpfCCError, match=r"verifier rejected program 'vr_cong_avoid': no write support to tcp_sock"):
        with load_bpf_cc(BUILD / "examples/faults/verifier_reject.bpf.o", "hbb_f2", workdir=tmp_path):
            pass
    with pytest.raises(BpfCCError, match=r"has no parameter 'nope'.*it declares: beta_pct, ai_pkts"):
        with load_bpf_cc(EXAMPLE_OBJECT, "hbb_f3", {"nope": 1}, workdir=tmp_path):
            pass
    with pytest.raises(BpfCCError, match=r"beta_pct=-1 outside \[0, 4294967295\]"):
        with load_bpf_cc(EXAMPLE_OBJECT, "hbb_f4", {"beta_pct": -1}, workdir=tmp_path):
            pass
    with pytest.raises(BpfCCError, match="already registered"):
        with load_bpf_cc(EXAMPLE_OBJECT, "cubic_", workdir=tmp_path) as _a:
            with load_bpf_cc(EXAMPLE_OBJECT, "cubic_", workdir=tmp_path):
                pass
    with pytest.raises(BpfCCError, match="exports no state"):
        with load_bpf_cc(EXAMPLE_OBJECT, "hbb_f5", workdir=tmp_path, state_csv=tmp_path / "s.csv"):
            pass
    assert cc.kernel_available() == before


@pytest.mark.netns
@pytest.mark.cpu   # cpu (not cpu_light, though measured at 0.06 cores): a transfer's time or goodput bound, and the kernel's forwarding work is not in the measured CPU (S4, docs/testing.md); goodput >= 85 % of the tbf's
def test_user_object_runs_a_transfer_with_its_parameters(built: None, tmp_path: Path) -> None:
    """The worked example (cc/examples/reno_mini.bpf.c) carries a bulk transfer over a tbf; `ss`
    shows the run-scoped name on the sender's socket."""
    with Dumbbell(prefix="hbbu", rate_bit=RATE, limit_bytes=150_000) as d, \
            load_bpf_cc(EXAMPLE_OBJECT, "hbb_reno", {"beta_pct": 70}, workdir=tmp_path) as load:
        assert load.params == {"beta_pct": 70, "ai_pkts": 1}
        d.set_cc("hbb_reno")
        seen: list[str] = []
        import threading
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(0.3):
                seen.append(d.ns(d.ns_a, "ss", "-tinH", "dst", RECEIVER_ADDR).stdout)
        t = threading.Thread(target=poll)
        t.start()
        try:
            r = d.iperf(3, omit=0)
        finally:
            stop.set()
            t.join()
        d.set_cc("cubic")
    got = float(r["end"]["sum_received"]["bits_per_second"])
    # Reno fills a 150 KB tail-drop buffer at sub-ms RTT: the link stays busy.
    assert got >= 0.85 * IDEAL, got
    assert any("hbb_reno" in s and f"{SENDER_ADDR}:" in s for s in seen), seen[-1:]
    _assert_gone(load)


# ---------------------------------------------------------------- BBRv3 over a tbf path

def _transfer(tmp_path: Path, variant: bbr3.Variant, seconds: float, limit_bytes: int, **kw) -> dict:
    work = tmp_path / variant
    work.mkdir(exist_ok=True)
    state, events = work / "state.csv", work / "events.csv"
    with DelayDumbbell(prefix="hbbt", rate_bit=RATE, limit_bytes=limit_bytes, rtt_ms=RTT_MS,
                       workdir=work) as d:
        with bbr3.load_bbr3("hbb_t3", variant, workdir=work, state_csv=state, events_csv=events,
                            state_hz=50, **kw):
            d.set_cc("hbb_t3")
            r = d.iperf(seconds, omit=2)
            d.set_cc("cubic")
        assert d.delay_alive()
    rows, ev = bbr3.read_rows(state), bbr3.read_rows(events)
    # iperf3 also opens a small control connection: the data flow is the one with most ACKs.
    acks: dict[str, int] = {}
    for row in rows:
        acks[row["flow_id"]] = max(acks.get(row["flow_id"], 0), int(row["acks"]))
    flow = max(acks, key=lambda k: acks[k])
    return {"goodput": float(r["end"]["sum_received"]["bits_per_second"]),
            "rows": [row for row in rows if row["flow_id"] == flow], "events": ev, "flow": flow}


def _check_common(m: dict) -> list[dict]:
    rows = m["rows"]
    # flow identity in every row: the data connection to the iperf3 server
    assert {(r["saddr"], r["daddr"], r["dport"]) for r in rows} == {(SENDER_ADDR, RECEIVER_ADDR, "5201")}
    assert len({r["sport"] for r in rows}) == 1
    # mode order: STARTUP, DRAIN, then PROBE_BW (PROBE_RTT may follow)
    trans = [e for e in m["events"] if e["flow_id"] == m["flow"] and e["kind"] == "transition"]
    if (trans[0]["from_mode"], trans[0]["to_mode"]) == ("STARTUP", "PROBE_BW"):
        # v3 checks DRAIN's exit in the ACK that enters DRAIN (bbr_check_drain): with inflight
        # already at the target, DRAIN lasts no ACK and the export never sees it (bench_bbr3_matrix:
        # 100 Mbit/s, 100 ms, 0.5 x BDP). It is still STARTUP -> DRAIN -> PROBE_BW.
        first = trans[0]
    else:
        assert [(e["from_mode"], e["to_mode"]) for e in trans[:2]] == [("STARTUP", "DRAIN"), ("DRAIN", "PROBE_BW")]
        first = trans[1]
    # DRAIN hands over to PROBE_BW's DOWN; v3 checks the cycle phase in the same ACK (check_drain,
    # then update_cycle_phase), so when inflight is already at the cruise target - as with bbr3-s,
    # whose estimate is 0.85 of the rate - DOWN ends within that ACK and the export sees CRUISE.
    assert first["to_phase"] in ("DOWN", "CRUISE")
    pbw = bbr3.probe_bw_transitions(m["events"], m["flow"])
    assert pbw, "no PROBE_BW sub-state change"
    assert set(pbw) <= bbr3.PROBE_BW_ORDER, set(pbw) - bbr3.PROBE_BW_ORDER
    # consecutive changes chain: each starts where the previous ended (or left via PROBE_RTT)
    for e0, e1 in zip(trans, trans[1:]):
        assert (e1["from_mode"], e1["from_phase"]) == (e0["to_mode"], e0["to_phase"]), (e0, e1)
    steady = [r for r in rows if r["mode"] == "PROBE_BW"]
    assert len(steady) >= 50
    # min RTT: the delay line never releases early; the veth path and the ACK's own queueing add little
    mrtt = statistics.median(int(r["min_rtt_us"]) for r in steady)
    assert RTT_MS * 1000 <= mrtt <= RTT_MS * 1000 + 3000, mrtt
    # pacing = bw x pacing_gain x 0.99 (v3's 1 % margin); rows are copied while the CC writes: allow a few torn
    ok = [float(r["pacing_rate_bps"]) == pytest.approx(float(r["bw_est_bps"]) * float(r["pacing_gain"]) * 0.99,
                                                       rel=0.01, abs=8 * 1448)
          for r in steady]
    assert sum(ok) >= 0.95 * len(ok)
    # the export's bounds are consistent with the model: bw <= max_bw, bw <= bw_lo when set
    for r in steady:
        assert float(r["bw_est_bps"]) <= float(r["max_bw_bps"]) + 1
        if r["bw_lo_bps"]:
            assert float(r["bw_est_bps"]) <= float(r["bw_lo_bps"]) + 1
    return steady


@pytest.mark.netns
@pytest.mark.cpu   # cpu (not cpu_light, though measured at 0.09 cores): a transfer's time or goodput bound, and the kernel's forwarding work is not in the measured CPU (S4, docs/testing.md)
def test_bbr3_over_tbf_rtt20(built: None, tmp_path: Path) -> None:
    """25 Mbit/s, 20 ms, buffer 2 x BDP, 8 s: goodput, cycle order, estimates by first principles."""
    got = least_contended(lambda: _transfer(tmp_path, "bbr3", 8, int(2 * BDP)), what="bbr3 8 s", attempts=2)
    m, steal = got.value, got.steal
    lo, hi = lowered(0.95 * IDEAL, 0.0, steal.lost)
    assert lo <= m["goodput"] <= IDEAL * 1.01, (m["goodput"] / IDEAL, steal.describe())
    steady = _check_common(m)
    pbw = bbr3.probe_bw_transitions(m["events"], m["flow"])
    # at least one whole cycle: ... REFILL -> UP -> DOWN ...
    assert ("REFILL", "UP") in pbw and ("UP", "DOWN") in pbw
    # bandwidth estimate: the link's payload rate from below; from above, a max filter over
    # delivery-rate samples reads ACK compression (a descheduled receiver acks in bursts) - seen
    # 1.00-1.16 x here on a quiet host - so the bound is loose: no more than half again the link.
    est = statistics.median(float(r["bw_est_bps"]) for r in steady)
    assert 0.90 * IDEAL <= est <= 1.5 * IDEAL, est / IDEAL
    # no loss expected with 2 x BDP of buffer and v3's inflight bounds; the share over 2 % small
    last = steady[-1]
    assert int(last["rounds"]) >= 100
    assert int(last["rounds_over_thresh"]) <= 0.05 * int(last["rounds"])


@pytest.mark.netns
@pytest.mark.cpu   # cpu (not cpu_light, though measured at 0.10 cores): a transfer's time or goodput bound, and the kernel's forwarding work is not in the measured CPU (S4, docs/testing.md)
def test_bbr3s_percentile_times_factor(built: None, tmp_path: Path) -> None:
    """BBRv3-S (N=100, p=85, factor 0.85): max_bw is the percentile x 0.85 on every row, the raw
    percentile is the link's payload rate, and the same cycle order holds."""
    got = least_contended(lambda: _transfer(tmp_path, "bbr3-s", 6, int(2 * BDP), window=100, percentile=85.0,
                                            factor=0.85), what="bbr3-s 6 s", attempts=2)
    m, steal = got.value, got.steal
    steady = _check_common(m)
    full = [r for r in steady if int(r["n_samples"]) == 100]
    assert len(full) >= 30
    for r in full:
        assert float(r["max_bw_bps"]) == pytest.approx(float(r["percentile_bw_bps"]), abs=1)
        assert float(r["percentile_bw_bps"]) == pytest.approx(0.85 * float(r["raw_percentile_bw_bps"]), rel=1e-3, abs=2)
    # The raw percentile measures the path, not our own pacing: samples taken while pacing below it
    # (CRUISE at 0.85 x p x 0.99) are censored (cc/bbr3.bpf.c pct_sample). Before that it fed on
    # its own pacing and fell geometrically to ~0.34 of the link within 6 s. Bounds: from below,
    # the link's payload rate with a margin for the window's spread (samples below the link on
    # ACKs that straddle a pause), lowered by what the host stole; from above, as for bbr3's max
    # filter, ACK compression (a descheduled receiver acks in bursts): no more than half again.
    raw = statistics.median(float(r["raw_percentile_bw_bps"]) for r in full)
    lo, _ = lowered(0.80 * IDEAL, 0.0, steal.lost)
    assert lo <= raw <= 1.5 * IDEAL, (raw / IDEAL, steal.describe())
    # the estimate a late row uses is still the percentile x factor of a live path: no decay
    late = [float(r["raw_percentile_bw_bps"]) for r in full[len(full) // 2:]]
    assert statistics.median(late) >= lo, (statistics.median(late) / IDEAL, steal.describe())
    # pacing below the link most of the time (0.85 x), so goodput cannot exceed the link either
    assert m["goodput"] <= IDEAL * 1.01


@pytest.mark.netns
@pytest.mark.cpu   # cpu (not cpu_light, though measured at 0.10 cores): a transfer's time or goodput bound, and the kernel's forwarding work is not in the measured CPU (S4, docs/testing.md)
def test_bbr3_shallow_buffer_sets_inflight_hi(built: None, tmp_path: Path) -> None:
    """Buffer 0.5 x BDP: probing overflows it; v3 must respond with an inflight_hi bound that is
    finite and within a few BDPs, and count lossy rounds."""
    m = _transfer(tmp_path, "bbr3", 6, int(0.5 * BDP))
    steady = _check_common(m)
    last = steady[-1]
    assert int(last["rounds_lossy"]) >= 1
    his = [int(r["inflight_hi"]) for r in steady if r["inflight_hi"]]
    assert his, "inflight_hi never set despite losses"
    bdp_pkts = BDP / 1514
    assert 1 <= statistics.median(his) <= 4 * bdp_pkts, (statistics.median(his), bdp_pkts)
