"""A planted host stall is flagged and the report leaves the run out (issue 43 item 6).

A real run of scenarios/sabre-own-short.yaml (two own-DASH players and the VoIP probe on one
6 Mbit/s, 256-packet, 100 ms RTT bottleneck; 20 s of video) in which the test, once playback has
begun, SIGSTOPs the run's delay lines for STALL_S seconds and then SIGCONTs them: for those seconds
nothing crosses the bottleneck, as in the issue's host stall. The run must come out
`fidelity_ok: false` with the named checks that see a stall in its fidelity warnings:

- no_simultaneous_silence: the probe sends every 15 ms, and neither it nor any client interface
  receives anything for ≈ STALL_S ≥ the 1 s threshold;
- probe_delay_within_queue_bound: a probe packet that waited out the stall took ≈ STALL_S one way,
  more than the 666.8 ms the path can hold (516.8 ms queue + 50 ms + 100 ms margin);
- the delay line's lateness from the kernel's arrival stamp: packets that arrived while the line
  was stopped waited ≈ STALL_S in its socket, far above the 20 ms bound.

A second, unstalled run of the same scenario goes into the same results folder; `mpvlab report`
over the folder leaves the stalled run out and names it with its warning. The delay lines are found
as descendants of the `mpvlab run` process the test started (/proc), so nothing else is signalled.
The same stall, printed beside its bounds: bench/bench_host_stall.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpvlab.core.paths import checkout_root
from mpvlab.testbed.hoststall import delay_lines

REPO = checkout_root()
SCEN = "scenarios/sabre-own-short.yaml"
STALL_S = 5.0
AFTER_S = 4.0            # seconds of playback before the stall (the 20 s video is still playing)
pytestmark = [pytest.mark.netns, pytest.mark.e2e]


def _run(results: Path, log: Path, stall_s: float) -> tuple[int, list[int], float]:
    """`mpvlab run` of SCEN into `results`; with stall_s > 0 the run's delay lines are stopped for
    stall_s seconds AFTER_S seconds into playback. Returns (exit code, the pids stopped, the stall's
    measured length)."""
    with log.open("w") as fh:
        run = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", SCEN, "--results", str(results)],
                               stdout=fh, stderr=subprocess.STDOUT, cwd=REPO)
    stopped: list[int] = []
    took = 0.0
    try:
        deadline = time.monotonic() + 120
        while run.poll() is None and "] playing (" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)         # the workload's progress line: playback has begun
        time.sleep(AFTER_S)
        if stall_s > 0 and run.poll() is None:
            stopped = delay_lines(run.pid)
            t = time.monotonic()
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(stall_s)
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
            took = time.monotonic() - t
        run.wait(timeout=240)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if run.poll() is None:
            run.terminate()
            run.wait(timeout=60)
    return run.returncode, stopped, took


def test_a_planted_host_stall_is_flagged_and_left_out_of_the_report(tmp_path: Path) -> None:
    res = tmp_path / "res"
    rc, stopped, took = _run(res, tmp_path / "stalled.log", STALL_S)
    assert rc == 0, (tmp_path / "stalled.log").read_text()[-3000:]
    # both directions of the one bottleneck have a delay line (50 ms each way)
    assert len(stopped) == 2 and took >= STALL_S
    (stalled,) = [d for d in (res / "sabre-own-short").iterdir() if d.is_dir()]
    s = json.loads((stalled / "summary.json").read_text())
    print(f"\nstalled {took:.2f} s; fidelity_ok {s['fidelity_ok']}; warnings:\n  " + "\n  ".join(s["fidelity_warnings"])
          + f"\nchecks: {json.dumps(s['fidelity_checks'])}\ntable: {json.dumps(s['fidelity_table'])}")
    assert s["fidelity_ok"] is False
    named = {w.split(":", 1)[0] for w in s["fidelity_warnings"]}
    assert {"no_simultaneous_silence", "probe_delay_within_queue_bound"} <= named
    silence = s["fidelity_checks"]["no_simultaneous_silence"]
    # the stall's length, less the probe's 15 ms interval and a links.csv sample period on each side
    assert silence["ok"] is False and silence["longest_silence_s"] >= STALL_S - 0.5
    assert s["fidelity_checks"]["probe_delay_within_queue_bound"]["probe_owd_max_ms"] >= (STALL_S - 0.5) * 1e3
    # the delay line's lateness from the kernel's arrival stamp sees the stall on the direction the
    # data flowed (packets sat in the stopped line's socket)
    down = [r for r in s["fidelity_table"] if r["link"].endswith("-down")]
    assert down and max(r["lateness_from_arrival_ms_max"] or 0.0 for r in down) >= (STALL_S - 0.5) * 1e3
    assert any("ms counted from its kernel arrival stamp" in w for w in s["fidelity_warnings"])

    # an unstalled run beside it; the report keeps the runs without fidelity warnings only
    rc, _, _ = _run(res, tmp_path / "clean.log", 0.0)
    assert rc == 0, (tmp_path / "clean.log").read_text()[-3000:]
    (clean,) = [d for d in (res / "sabre-own-short").iterdir() if d.is_dir() and d != stalled]
    clean_ok = json.loads((clean / "summary.json").read_text())["fidelity_ok"]
    print(f"clean run fidelity_ok {clean_ok}")
    from mpvlab.reporting import build_report
    rep = build_report(res, tmp_path / "rep", figures=False)
    kept = [r.run_dir for cfg in rep.collection.configs for r in cfg.runs]
    assert stalled not in kept and (clean in kept) == (clean_ok is True)
    left = [line for _label, _n_kept, _n_left, lines in rep.collection.kept_and_left_out() for line in lines]
    # the reason is the run's fidelity warnings, cut at 600 characters (mpvlab/results/aggregate.py)
    assert any(stalled.name in line and "fidelity_ok false: " in line for line in left), left
    assert stalled.name in (tmp_path / "rep" / "left_out.csv").read_text()
    assert "with fidelity_ok false left out" in rep.html.read_text()
