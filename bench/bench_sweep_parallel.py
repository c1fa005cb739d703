#!/usr/bin/env python3
"""How many runs the machine holds at once without hurting fidelity (`mpvlab sweep --parallel N`).

Runs the same small sweep (default: scenario C of the Wi-Fi/LTE study, 20 s of video, CUBIC/BBR/BBR-S
× 2 trials = 6 runs) once per parallelism level, each level into its own results folder, and prints
per level: wall time of the sweep, runs complete, runs with fidelity warnings, the fidelity probe's RTT
error (p99 over runs of each run's p99, configured tolerance beside it), the delay lines' release
lateness p99 (worst run), picture discards and underflows (the player's own CPU sensitivity).
Other load on the machine shows up in these figures too: run it on a quiet machine.

    .venv/bin/python bench/bench_sweep_parallel.py [--levels 1,2,3] [--trials 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"


def level_figures(root: Path) -> dict[str, float]:
    man = json.loads((root / "sweep.json").read_text())
    rtt_p99, late_p99, warned, disc, under, complete = [], [], 0, 0, 0, 0
    for r in man["runs"]:
        if r["state"] != "complete":
            continue
        complete += 1
        d = root / r["run_dir"]
        s = json.loads((d / "summary.json").read_text())
        p = json.loads((d / "provenance.json").read_text())
        warned += bool(s.get("fidelity_warnings"))
        disc += s["picture_discards"]
        under += s["underflows"]
        for path in (p.get("fidelity") or {}).get("paths", {}).values():
            rtt_p99.append(path["rtt"]["error_ms_p99"])
        for dl in (p.get("delay_lines") or {}).values():
            if isinstance(dl, dict) and "lateness_us" in dl:
                late_p99.append(dl["lateness_us"]["p99"])
    rtt_p99.sort()
    return {"runs": len(man["runs"]), "complete": complete, "warned": warned, "discards": disc,
            "underflows": under, "rtt_p99_ms": rtt_p99[min(len(rtt_p99) - 1, int(0.99 * len(rtt_p99)))]
            if rtt_p99 else float("nan"), "lateness_p99_us_max": max(late_p99, default=float("nan"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--scenario", default=str(REPO / "scenarios" / "wifi-lte-c.yaml"))
    ap.add_argument("--keep", help="keep the results here")
    a = ap.parse_args()
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    base.mkdir(parents=True, exist_ok=True)
    spec = base / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "parallel-bench", "scenarios": [a.scenario],
                                    "grid": {"transport.cc": ["cubic", "bbr", "bbr-s"]}, "trials": a.trials,
                                    "overrides": {"video.duration": "20s"}}))
    try:
        print(f"sweep: {a.scenario} × cubic/bbr/bbr-s × {a.trials} trials, 20 s of video; RTT tolerance 2 ms")
        for n in (int(x) for x in a.levels.split(",")):
            res = base / f"p{n}"
            t = time.monotonic()
            cp = subprocess.run([str(MPVLAB), "sweep", str(spec), "--parallel", str(n), "--no-report",
                                 "--results", str(res)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
            wall = time.monotonic() - t
            f = level_figures(res / "parallel-bench")
            print(f"--parallel {n}: {wall:6.1f} s wall ({wall / f['runs']:.1f} s per run), "
                  f"{f['complete']}/{f['runs']} complete, {f['warned']} with fidelity warnings, RTT error p99 "
                  f"{f['rtt_p99_ms']:.2f} ms (tolerance 2 ms), delay-line lateness p99 ≤ "
                  f"{f['lateness_p99_us_max']:.0f} µs, discards {f['discards']}, underflows {f['underflows']}"
                  + ("" if cp.returncode == 0 else f"  [sweep exit {cp.returncode}]"))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
