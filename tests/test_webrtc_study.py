"""The WebRTC study's sweep and figures (issue 18; docs/studies.md §3, sweeps/webrtc-study.yaml).

- The full spec expands (nothing runs) to RTT {20, 50, 100} ms × rate {0.5, 1, 2, 5} Mbit/s × the
  shallow and the deep buffer of the spec's named rule (shallow = max(1 × BDP, 6000 B), deep =
  5 × shallow) × {gcc, webrtc-bbr}, 5-minute streams: the listed cells are checked against the rule.
- `mpvlab sweep sweeps/webrtc-study.yaml --quick` through the CLI (root: it runs namespaces), then its
  report: every run complete, one per cell × controller, every frame and packet accounted, the three
  figures present, and the GCC − BBR difference the report wrote equal to what the summaries give.
- The figure helpers' arithmetic (step-series mean, buffer classes, competition keying) on hand data.
Correctness only: timings are printed, not asserted.
"""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mpvlab.core import units
from mpvlab.results.aggregate import Run
from mpvlab.reporting.rtp import Condition, buffer_classes, competing, second_half_mean
from mpvlab.input.sweep import expand, load_spec
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"
SPEC = REPO / "sweeps" / "webrtc-study.yaml"
FLOOR_B = 6000                      # the rule's floor: 4 full-size packets
FIGS = {"rtp-bitrate-per-controller", "rtp-bitrate-diff-gcc-bbr", "rtp-estimates-vs-bitrate"}


def _link(sc: Any) -> tuple[float, int, int]:
    """(RTT ms, rate bit/s, buffer bytes) of a scenario's one path."""
    p = sc.paths["link"]            # the model holds parsed values: ns, bit/s, a QueueLimit
    return (p.down.delay.value + p.up.delay.value) / 1e6, p.down.rate, p.down.buffer.bytes


def _rule(rtt_ms: float, rate: int) -> tuple[int, int]:
    shallow = max(rate / 8 * rtt_ms / 1e3, FLOOR_B)
    return round(shallow), round(5 * shallow)


def test_full_spec_is_the_study_grid_with_the_named_buffer_rule() -> None:
    plan = expand(load_spec(SPEC), SPEC)
    assert plan.trials == 5 and len(plan.runs) == 3 * 4 * 2 * 2 * 5
    cells: dict[tuple[float, int], set[int]] = {}
    for r in plan.runs:
        wl = r.scenario.workload
        assert wl.duration == 300 * 10**9 and wl.max_bitrate == 1_300_000
        rtt, rate, buf = _link(r.scenario)
        assert buf in _rule(rtt, rate), (r.key, buf, _rule(rtt, rate))
        cells.setdefault((rtt, rate), set()).add(buf)
    assert sorted(cells) == [(rtt, rate) for rtt in (20.0, 50.0, 100.0)
                             for rate in (500_000, 1_000_000, 2_000_000, 5_000_000)]
    assert all(bufs == set(_rule(*k)) for k, bufs in cells.items()), cells
    assert {r.params["workload.controller"] for r in plan.runs} == {"gcc", "webrtc-bbr"}


def test_variants_spec_is_each_variant_alone_at_rtt_50_with_the_same_buffer_rule() -> None:
    """sweeps/webrtc-bbr-variants.yaml: webrtc-bbr only, WebRTC's own and each study variant alone, at
    RTT 50 ms × the four rates × both buffers of the study's rule, 5 trials: 5 × 8 × 5 = 200 runs."""
    spec = REPO / "sweeps" / "webrtc-bbr-variants.yaml"
    plan = expand(load_spec(spec), spec)
    assert len(plan.runs) == 5 * 8 * 5
    variants = set()
    for r in plan.runs:
        wl = r.scenario.workload
        assert wl.controller == "webrtc-bbr" and wl.bbr is not None and wl.duration == 300 * 10**9
        flags = tuple(wl.bbr.sender_flags())
        assert len(flags) <= 1                  # each variant alone
        variants.add(flags)
        rtt, rate, buf = _link(r.scenario)
        assert rtt == 50.0 and buf in _rule(rtt, rate), (r.key, buf)
    assert variants == {(), ("--bbr-probe-rtt-v2",), ("--bbr-third-best",), ("--bbr-non-replacing-filter",),
                        ("--bbr-no-recovery",)}


def _run(summary: dict[str, Any]) -> Run:
    return Run(Path("/nonexistent"), "x", summary, {}, {}, None)


def test_figure_helpers_on_hand_data() -> None:
    # 0 … 10 s stream, second half 5 … 10 s: 100 holds until 6, 200 from 6 → (1 × 100 + 4 × 200) / 5
    series = [(0.0, {"k": 50.0}), (4.0, {"k": 100.0}), (6.0, {"k": 200.0}), (7.0, {"other": 1.0})]
    assert second_half_mean(series, "k", 0.0, 10.0) == pytest.approx(180.0)
    # a key first seen after the midpoint is averaged over the time it has a value only
    assert second_half_mean([(8.0, {"k": 3.0})], "k", 0.0, 10.0) == pytest.approx(3.0)
    assert second_half_mean(series, "absent", 0.0, 10.0) is None
    a, b, c = Condition(50, 10**6, "6250B", 6250), Condition(50, 10**6, "31250B", 31250), Condition(20, 10**6, "6000B", 6000)
    assert buffer_classes([a, b, c]) == {a: "shallow", b: "deep", c: "buffer"}
    assert not competing(_run({"rtp": {}}))
    assert not competing(_run({"cross_traffic": {"voip": {"sent": 10}, "bulk": None}}))
    assert competing(_run({"cross_traffic": {"bulk": {"cc_requested": "cubic"}}}))
    # a webrtc-bbr variant is its own label (what differs from WebRTC's own); WebRTC's own keeps the name
    from mpvlab.reporting.rtp import _ctrl
    own = {"filter": "replacing", "estimate": "best", "recovery": True, "probe_rtt": "webrtc"}
    assert _ctrl(_run({"rtp": {"controller": "webrtc-bbr", "bbr_variant": None}})) == "webrtc-bbr"
    assert _ctrl(_run({"rtp": {"controller": "webrtc-bbr", "bbr_variant": own}})) == "webrtc-bbr"
    assert _ctrl(_run({"rtp": {"controller": "webrtc-bbr", "bbr_variant": {**own, "estimate": "third-best",
                                                                            "recovery": False}}})) \
        == "webrtc-bbr (estimate third-best, recovery off)"
    assert _ctrl(_run({"rtp": {"controller": "gcc"}})) == "gcc"


def _rows(p: Path) -> list[dict[str, str]]:
    with p.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.netns
@pytest.mark.e2e
def test_webrtc_study_quick_sweep_and_report(tmp_path: Path) -> None:
    quick = expand(load_spec(SPEC), SPEC, quick=True)
    n_cells = len(quick.grid["paths.link"])
    ctrls = quick.grid["workload.controller"]
    t = time.monotonic()
    cp = subprocess.run([str(MPVLAB), "sweep", str(SPEC), "--quick", "--results", str(tmp_path), "--include-warned"],
                        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, cwd=REPO)
    print(f"\nsweep wall {time.monotonic() - t:.1f} s")
    root = tmp_path / "webrtc-study-quick"
    man = json.loads((root / "sweep.json").read_text())
    failed = {r["key"]: r["reason"] for r in man["runs"] if r["state"] != "complete"}
    assert not failed and cp.returncode == 0, f"{failed}\n{cp.stdout[-3000:]}\n{cp.stderr[-2000:]}"
    assert len(man["runs"]) == n_cells * len(ctrls) == 4
    assert len({(r["params"]["workload.controller"], json.dumps(r["params"]["paths.link"], sort_keys=True))
                for r in man["runs"]}) == 4

    got: dict[tuple[int, str], float] = {}          # (buffer bytes, controller) → achieved bit/s
    for r in man["runs"]:
        d = root / r["run_dir"]
        s = json.loads((d / "summary.json").read_text())
        x = s["rtp"]
        ctrl = r["params"]["workload.controller"]
        assert x["controller"] == ctrl
        # 10 s of media at 30 fps, each frame accounted once at the viewer; each packet received or lost
        assert x["frames_captured"] == 300
        assert x["frames_on_time"] + x["frames_late"] + x["frames_lost"] == x["frames_captured"]
        assert x["packets_received"] + x["packets_lost"] == x["packets_sent"]
        buf = units.parse_size(r["params"]["paths.link"]["down"]["buffer"])
        got[(buf, ctrl)] = 8 * x["rtp_bytes_received"] / s["duration_s"]
        # the viewer cannot receive more than the bottleneck passes (1 Mbit/s, plus the tbf's burst)
        assert got[(buf, ctrl)] <= 1_000_000 * 1.05, got
        if ctrl == "webrtc-bbr":
            # BBR's min RTT is from feedback: never below the path's 50 ms base RTT (delay lines only add)
            mins = [json.loads(row["controller_stats"])["minRTTms"]
                    for row in _rows(d / "logs" / "rtp" / "sender" / "targets.csv")]
            assert any(m > 0 for m in mins) and all(m == 0 or m >= 49.5 for m in mins), mins
        print(f"{ctrl:10} buffer {buf:6} B: {got[(buf, ctrl)] / 1e3:.0f} kbit/s, frames on time/late/lost "
              f"{x['frames_on_time']}/{x['frames_late']}/{x['frames_lost']}, p50 latency "
              f"{x['latency_ms']['p50']:.0f} ms, packets lost {x['packets_lost']}/{x['packets_sent']}")

    figs = root / "report" / "figures"
    assert FIGS <= {f.stem for f in figs.glob("*.svg")}
    page = (root / "report" / "report.html").read_text()
    for title in ("RTP: average received bitrate per controller",
                  "RTP: bitrate difference GCC − webrtc-bbr over the condition grid",
                  "RTP: estimated bandwidth and min RTT against achieved bitrate"):
        assert title in page
    # no run here has cross traffic: the competition panel says so rather than drawing nothing
    assert "no competition runs" in (figs / "rtp-bitrate-per-controller.svg").read_text()
    rows = _rows(figs / "rtp-bitrate-diff-gcc-bbr.csv")
    assert len(rows) == n_cells
    for row in rows:
        buf = int(row["buffer_bytes"])
        g, b = got[(buf, "gcc")], got[(buf, "webrtc-bbr")]
        assert float(row["gcc_bps"]) == pytest.approx(g, abs=0.06)
        assert float(row["webrtc_bbr_bps"]) == pytest.approx(b, abs=0.06)
        assert float(row["diff_bps"]) == pytest.approx(g - b, abs=0.11)
        assert row["buffer_class"] == ("shallow" if buf == min(k for k, _ in got) else "deep")
        assert float(row["rtt_ms"]) == 50.0 and int(row["rate_bps"]) == 1_000_000
