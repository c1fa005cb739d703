#!/usr/bin/env python3
"""Runs per hour and fidelity at `mpvlab sweep --parallel 1,2,3,4` (issue 16).

One small sweep per level (a study scenario × CUBIC/BBR/BBR-S, `--per-level` runs per parallel slot,
`--video-s` of video) into its own folder; per level it prints: runs/hour, overhead per run (each run's
wall time in the sweep manifest − its video length), runs with fidelity warnings (and their kinds),
where the overhead went (the runs'
provenance `lifecycle_s`, mean seconds per step), the delay lines' release lateness (worst run's p99 and max), the kernel-stamped pre-check's RTT error
p99 (worst path), each shaper's achieved rate while backlogged over the whole run (min–max over
runs, × the configured rate: a bulk flow's goodput is that × rate × 1448/1514), the CPU time the hypervisor stole during playback (mean over runs), and the
projected time of the full study — 3 scenarios × 3 CCs × 3 schedulers × 10 trials × 180 s — at that
level: 270 × (180 s + overhead) / level. Other load on the machine shows in these figures too.

    .venv/bin/python bench/bench_fidelity_parallel.py [--levels 1,2,3,4] [--video-s 8] [--per-level 2]
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
from typing import Any

import yaml

from mpvlab.runner.fidelity import MIN_BACKLOGGED_S  # noqa: E402
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"
STUDY_RUNS = 3 * 3 * 3 * 10
STUDY_VIDEO_S = 180.0


def level_figures(root: Path, video_s: float) -> dict[str, Any]:
    man = json.loads((root / "sweep.json").read_text())
    over, lat_p99, lat_max, pre_p99, steal, rate_ratio = [], [], [], [], [], []
    steps: dict[str, list[float]] = {}
    warned, kinds, complete = 0, set(), 0
    for r in man["runs"]:
        if r["state"] != "complete":
            continue
        complete += 1
        d = root / r["run_dir"]
        s = json.loads((d / "summary.json").read_text())
        p = json.loads((d / "provenance.json").read_text())
        if r.get("wall_s") is not None:
            over.append(float(r["wall_s"]) - video_s)
        if s.get("fidelity_warnings"):
            warned += 1
            kinds |= {w.split(":", 1)[1].split("(")[0].strip()[:60] for w in s["fidelity_warnings"]}
        fid = p.get("fidelity") or {}
        for e in (fid.get("run") or {}).values():
            if "lateness_ms_p99" in e:
                lat_p99.append(e["lateness_ms_p99"])
                lat_max.append(e["lateness_ms_max"])
        # Each shaper's achieved rate over the run while its queue was backlogged (kernel counters,
        # mpvlab/runner/fidelity.py): a bulk flow's goodput is this × rate × 1448/1514.
        for row in fid.get("table") or []:
            if row.get("rate_ratio") is not None and (row.get("backlogged_s") or 0.0) >= MIN_BACKLOGGED_S:
                rate_ratio.append(row["rate_ratio"])
        for path in (fid.get("paths") or {}).values():
            if path.get("rtt", {}).get("error_ms_p99") is not None:
                pre_p99.append(path["rtt"]["error_ms_p99"])
        steal.append(s["host_steal_during_playback"]["fraction"])
        # Where the overhead went: the life cycle's steps (provenance lifecycle_s) with playback
        # split into the player's start-up (network and buffering) and the rest of it.
        life = dict(p.get("lifecycle_s") or {})
        play, startup = life.pop("play", None), s.get("startup_delay_s")
        life.pop("total", None)
        if play is not None:
            life["play beyond the video"] = play - video_s - (startup or 0.0)
            life["player start-up (buffering)"] = startup or 0.0
        for k, v in life.items():
            steps.setdefault(k, []).append(v)
    nan = float("nan")
    return {"runs": len(man["runs"]), "complete": complete, "warned": warned, "kinds": sorted(kinds),
            "overhead_s": sum(over) / len(over) if over else nan,
            "lat_p99_ms": max(lat_p99, default=nan), "lat_max_ms": max(lat_max, default=nan),
            "pre_p99_ms": max(pre_p99, default=nan),
            "rate_min": min(rate_ratio, default=nan), "rate_max": max(rate_ratio, default=nan), "steal": sum(steal) / len(steal) if steal else nan,
            "steps_s": {k: sum(v) / len(v) for k, v in steps.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,2,3,4")
    ap.add_argument("--video-s", type=float, default=8.0, help="video length of each run (the study: 180)")
    ap.add_argument("--per-level", type=int, default=2, help="runs per parallel slot at each level")
    ap.add_argument("--scenario", default=str(REPO / "scenarios" / "wifi-lte-c.yaml"))
    ap.add_argument("--keep", help="keep the results here")
    a = ap.parse_args()
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="h16b-bench-fid-"))
    base.mkdir(parents=True, exist_ok=True)
    ccs = ["cubic", "bbr", "bbr-s"]
    print(f"{Path(a.scenario).name}, {a.video_s:g} s of video, {a.per_level} runs per slot; "
          f"projection: {STUDY_RUNS} runs × {STUDY_VIDEO_S:g} s")
    try:
        for n in (int(x) for x in a.levels.split(",")):
            runs = n * a.per_level
            spec = base / f"spec-p{n}.yaml"
            # Exactly `runs` runs: as many CCs (of 3) as divide them, the rest as trials.
            k = next(k for k in (3, 2, 1) if runs % k == 0)
            spec.write_text(yaml.safe_dump({   # absolute: the spec's own folder is not the caller's
                "name": "fid-bench", "scenarios": [str(Path(a.scenario).resolve())],
                "grid": {"transport.cc": ccs[:k]}, "trials": runs // k,
                "overrides": {"video.duration": f"{a.video_s:g}s"}}))
            res = base / f"p{n}"
            t = time.monotonic()
            cp = subprocess.run([str(MPVLAB), "sweep", str(spec), "--parallel", str(n), "--no-report",
                                 "--results", str(res)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
            wall = time.monotonic() - t
            if not (res / "fid-bench" / "sweep.json").exists():
                print(f"--parallel {n}: the sweep did not start (exit {cp.returncode}):\n{cp.stdout[-2000:]}{cp.stderr[-2000:]}")
                return 1
            f = level_figures(res / "fid-bench", a.video_s)
            proj_h = STUDY_RUNS * (STUDY_VIDEO_S + f["overhead_s"]) / n / 3600
            print(f"--parallel {n}: {f['complete']}/{f['runs']} runs in {wall:.0f} s = "
                  f"{f['complete'] / wall * 3600:.0f} runs/h, overhead/run {f['overhead_s']:.1f} s, "
                  f"fidelity warnings {f['warned']}, lateness p99 {f['lat_p99_ms']:.3f} ms max "
                  f"{f['lat_max_ms']:.2f} ms, pre-check RTT p99 {f['pre_p99_ms']:.3f} ms, tbf rate while "
                  f"backlogged {f['rate_min']:.4f}–{f['rate_max']:.4f} × configured, steal "
                  f"{f['steal']:.1%}, full study ≈ {proj_h:.1f} h"
                  + (f"  [sweep exit {cp.returncode}: {cp.stderr.strip()[-300:]}]" if cp.returncode else ""))
            for k in f["kinds"]:
                print(f"    warning kind: {k}")
            top = sorted(f["steps_s"].items(), key=lambda kv: -kv[1])
            print("    overhead by step (mean s): " + ", ".join(f"{k} {v:.2f}" for k, v in top if v >= 0.05))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
