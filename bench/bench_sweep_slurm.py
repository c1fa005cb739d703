"""Per-run overhead of a sweep through Slurm, on a real one-node Slurm (tests/slurmlab.py).

Submits a sweep of N short real runs (scenarios/smoke.yaml, video.duration D) as one job array on a
node held exclusively (one run at a time, as a timing-sensitive study would), waits, and prints per
run: the video length, the run's wall time inside `mpvlab sweep --run` (its attempt record), the
Slurm task's elapsed time (StartTime..EndTime, 1 s resolution) and the gap between one task's end
and the next one's start — then the overhead per run and the on-paper wall time of the two big
studies on 1, 4 and 16 nodes.

    sudo .venv/bin/python bench/bench_sweep_slurm.py [--runs 4] [--video 3] [--per-node 1]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
sys.path.insert(0, str(REPO / "tests"))
from slurmlab import SlurmLab  # noqa: E402

STUDIES = {  # name: (runs, video seconds)
    "Wi-Fi/LTE reproduction (sweeps/wifi-lte-study.yaml: 3x3x3 configs x 5 trials, 180 s)": (3 * 3 * 3 * 5, 180),
    "BBR-S DASH grid (7x2x5x4 configs x 10 trials, 10 min)": (7 * 2 * 5 * 4 * 10, 600),
}


def _t(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--video", type=int, default=3)
    ap.add_argument("--per-node", type=int, default=1)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hsl-bench-"))
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "hsl-bench", "scenarios": [str(REPO / "scenarios" / "smoke.yaml")],
                                    "overrides": {"video.duration": f"{a.video}s"}, "trials": a.runs,
                                    "base_seed": 3}))
    res = tmp / "res"
    lab = SlurmLab.start()
    try:
        t_submit = time.time()
        cp = subprocess.run([str(REPO / ".venv/bin/mpvlab"), "sweep", str(spec), "--executor", "slurm",
                             "--per-node", str(a.per_node), "--results", str(res)],
                            env=lab.env, capture_output=True, text=True, timeout=120)
        print(cp.stdout.strip())
        if cp.returncode:
            print(cp.stderr)
            return 1
        sub = json.loads(next((res / "hsl-bench" / ".slurm").glob("[0-9]*.json")).read_text())
        while lab.cmd("squeue", "--noheader").stdout.strip():
            time.sleep(1)
        t_end = time.time()
        tasks = {}
        for line in lab.cmd("scontrol", "--oneliner", "show", "job", sub["job_id"]).stdout.splitlines():
            f = dict(x.split("=", 1) for x in line.split() if "=" in x)
            tasks[int(f["ArrayTaskId"])] = (f["JobState"], _t(f["StartTime"]), _t(f["EndTime"]))
    finally:
        lab.stop()
    recs = [json.loads(p.read_text()) for p in (res / "hsl-bench" / ".runs").glob("*/*.json")]
    shutil.rmtree(tmp)
    walls = [r["wall_s"] for r in recs if r["state"] == "complete"]
    print(f"\n{len(walls)}/{a.runs} runs complete; video {a.video} s each; {a.per_node} run(s) per task")
    print("task  state      elapsed_s  gap_to_next_s")
    order = sorted(tasks)
    for i in order:
        st, t0, t1 = tasks[i]
        gap = tasks[i + 1][1] - t1 if i + 1 in tasks else float("nan")
        print(f"{i:4d}  {st:9s}  {t1 - t0:9.0f}  {gap:13.0f}")
    mean_wall = sum(walls) / len(walls)
    per_task = (tasks[order[-1]][2] - tasks[order[0]][1]) / len(order)
    makespan = t_end - t_submit
    over_run = mean_wall - a.video
    over_task = per_task - a.video   # one task = per_node runs at once, so per run: per_task / per_node
    print(f"run wall inside --run: mean {mean_wall:.1f} s -> overhead {over_run:.1f} s per run beyond the video")
    print(f"Slurm task start-to-start: {per_task:.1f} s -> overhead {over_task:.1f} s per task incl. scheduling, "
          f"python start, plan expansion; submit-to-last-end {makespan:.1f} s for {a.runs} runs")
    print("\non paper (one run per exclusive node at a time; per run = video + measured overhead):")
    for name, (n, video) in STUDIES.items():
        per = video + over_task
        cells = []
        for nodes in (1, 4, 16):
            waves = math.ceil(n / (nodes * a.per_node))
            cells.append(f"{nodes:2d} node(s): {waves * per / 3600:6.1f} h")
        print(f"  {name}: {n} runs x {per:.0f} s -> " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
