#!/usr/bin/env python3
"""A planted host stall is flagged (issue 43 item 6).

Runs a scenario (default scenarios/sabre-own-short.yaml: 6 Mbit/s, 256-packet queue, VoIP probe) with
`mpvlab run`; once the run has been playing for --after-s seconds, SIGSTOPs every delay line of this
run (the descendants of the `mpvlab run` it started, nothing else) for --stall-s seconds, then SIGCONT.
Prints the summary's fidelity_ok, its warnings and the named checks (mpvlab/runner/runchecks.py) beside
their bounds. With --stall-s 0 it is the control: the same run, unstalled, must stay green.

    .venv/bin/python bench/bench_host_stall.py [--stall-s 5] [--after-s 6] [--scenario FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from mpvlab.core.paths import checkout_root
from mpvlab.testbed.hoststall import delay_lines

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "sabre-own-short.yaml")
    ap.add_argument("--stall-s", type=float, default=5.0)
    ap.add_argument("--after-s", type=float, default=6.0, help="seconds of playback before the stall")
    ap.add_argument("--results", type=Path, default=None)
    a = ap.parse_args()
    results = a.results or Path(tempfile.mkdtemp(prefix="bench-host-stall-"))
    log = results / "run.log"
    results.mkdir(parents=True, exist_ok=True)
    with log.open("w") as fh:
        run = subprocess.Popen([str(MPVLAB), "run", str(a.scenario), "--results", str(results)],
                               stdout=fh, stderr=subprocess.STDOUT)
    stalled: list[int] = []
    try:
        while run.poll() is None and "] playing (" not in log.read_text():
            time.sleep(0.2)        # the workload's progress line: playback has begun
        time.sleep(a.after_s)
        if a.stall_s > 0 and run.poll() is None:
            stalled = delay_lines(run.pid)
            t = time.monotonic()
            for pid in stalled:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(a.stall_s)
            for pid in stalled:
                os.kill(pid, signal.SIGCONT)
            print(f"stalled delay lines {stalled} for {time.monotonic() - t:.2f} s")
        run.wait()
    finally:
        for pid in stalled:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if run.poll() is None:
            run.terminate()
            run.wait()
    summaries = sorted(results.glob("*/*/summary.json"))
    if not summaries:
        print(f"no summary.json (exit {run.returncode}); log: {log}")
        return 1
    s = json.loads(summaries[-1].read_text())
    print(f"run {summaries[-1].parent}: fidelity_ok = {s.get('fidelity_ok')}")
    for w in s.get("fidelity_warnings", []):
        print(f"  warning: {w}")
    for name, rec in (s.get("fidelity_checks") or {}).items():
        print(f"  check {name}: {json.dumps(rec)}")
    for row in s.get("fidelity_table") or []:
        print(f"  {row['link']}: delay-line lateness p99 {row['lateness_ms_p99']} ms, max {row['lateness_ms_max']} ms; "
              f"from the kernel arrival stamp max {row.get('lateness_from_arrival_ms_max')} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
