"""The Wi-Fi/LTE study's quick reproduction (docs/studies.md §1; sweeps/wifi-lte-study.yaml --quick):
scenarios A, B, C × CUBIC, BBR, BBR-S × minRTT, BDP, default, one trial of 20 s video each — 27 real
runs, two at a time — then the report, opened in headless chromium. About 6 minutes: the longest test
in the suite, and the one that shows the whole product works together."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mpvlab.reporting import browser
from mpvlab.core.paths import checkout_root

pytestmark = pytest.mark.cpu   # cpu: CPU-bound (27 runs, two at once)

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"


@pytest.mark.netns
@pytest.mark.chromium
@pytest.mark.e2e
@pytest.mark.slow
def test_quick_wifi_lte_study_and_report(tmp_path: Path) -> None:
    res = tmp_path / "results"
    # Two at once on CI's two cores: half the time, and the sweep's parallel path exercised. Nothing
    # below is moved by the contention (counts, shares, a rate bound; fidelity warnings are recorded,
    # not asserted — bench/bench_fidelity_parallel.py measures them per level).
    cp = subprocess.run([str(MPVLAB), "sweep", str(REPO / "sweeps" / "wifi-lte-study.yaml"), "--quick",
                         "--parallel", "2", "--results", str(res), "--include-warned"], capture_output=True, text=True, timeout=2400,
                        stdin=subprocess.DEVNULL)
    root = res / "wifi-lte-study-quick"
    man = json.loads((root / "sweep.json").read_text())
    states = {r["key"]: (r["state"], r["reason"]) for r in man["runs"]}
    assert len(states) == 27
    failed = {k: v for k, v in states.items() if v[0] != "complete"}
    assert not failed and cp.returncode == 0, f"{failed}\n{cp.stdout[-3000:]}\n{cp.stderr[-2000:]}"
    for r in man["runs"]:
        s = json.loads((root / r["run_dir"] / "summary.json").read_text())
        p = r["params"]
        assert (s["cc"], s["scheduler"]) == (p["transport.cc"], p["transport.scheduler"])
        assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == 600
        # Two 3 Mbit/s paths carry a 5.24 Mbit/s video: both must carry data, and together they cannot
        # deliver more than 2 × 3 Mbit/s × 1448/1514 of payload over the playback time (+ 10 % for the
        # startup burst the 100 KB queues and the lead-in allow).
        assert all(v["share"] >= 0.05 for v in s["paths"].values()), s["paths"]
        wire_bps = sum(v["mean_throughput_bps"] for v in s["paths"].values())
        assert wire_bps <= 2 * 3e6 * 1.10, wire_bps
    # One command: the sweep ends by building the report.
    assert "report of 27 complete run(s) in 27 configuration(s)" in cp.stdout, cp.stdout[-2000:]
    html = root / "report" / "report.html"
    page = html.read_text()
    # 4 bar figures (underflows, switches, discards by the network and with data buffered) + cwnd and throughput for each of the 3 scenarios + BBR's model over time, its modes
    # and its estimate per scenario (bbr and bbr-s ran in each: mpvlab/reporting/bbr.py)
    assert page.count('src="data:image/svg+xml;base64,') == 10 + 3 * 3
    figs = {f.stem for f in (root / "report" / "figures").glob("*.svg")}
    assert sum(f.startswith(("bbr-model-", "bbr-modes-", "bbr-estimate-")) for f in figs) == 9, figs
    for sc in ("wifi-lte-a", "wifi-lte-b", "wifi-lte-c"):
        for cc in ("cubic", "bbr", "bbr-s"):
            for sched in ("minrtt", "bdp", "default"):
                assert f"{sc} · {cc} · {sched}" in page
    shot = browser.screenshot(html, root / "report" / "report.png")
    assert browser.ink_fraction(shot) > 0.03, "the report renders nearly blank"
