#!/usr/bin/env python3
"""GCC's reaction to a step down of its bottleneck (scenarios/rtp-gcc-step.yaml: 2 → 0.5 Mbit/s):
per run, how long after the step the controller's target first fell below the post-step link rate,
when it first cut at all, which signal it acted on (the delay-based detector's `usage`, the
loss-based `averageLoss`), the target in force at the step and the host's steal. The test
(tests/test_rtp_run.py) asserts only a bound; these are the measured times.

Usage (root): .venv/bin/python bench/bench_rtp_step.py [SCENARIO] [--runs N]
(results kept under --results, /tmp/mpvlab-bench-rtp-step)
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path
from typing import Any
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
sys.path.insert(0, str(REPO / "bench"))

from bench_rtp import run_once  # noqa: E402
from mpvlab.input.scenario import load_scenario  # noqa: E402


def step_of(scenario: Path) -> tuple[float, int, int]:
    """(step time s, rate before, rate after) from the scenario's two-point piecewise schedule."""
    sc, _ = load_scenario(scenario)
    (path,) = sc.paths.values()
    cap = path.down.capacity
    points = getattr(cap.rate, "points", None) if cap is not None else None
    if not points or len(points) != 2:
        raise SystemExit(f"{scenario}: want a down capacity with a two-point piecewise rate (a step)")
    (_, before), (t_ns, after) = points
    return t_ns / 1e9, before, after


def reaction(run_dir: Path, step_s: float, after_bps: int) -> dict[str, Any]:
    with (run_dir / "logs/rtp/sender/targets.csv").open() as f:
        rows = [(float(r["t_s"]), int(r["target_bps"]), json.loads(r["controller_stats"] or "null") or {})
                for r in csv.DictReader(f)]
    at_step = [bps for t, bps, _ in rows if t < step_s][-1]
    post = [(t, bps, st) for t, bps, st in rows if t >= step_s]
    first_cut = next(((t, st) for (t, bps, st), prev in zip(post, [at_step] + [b for _, b, _ in post]) if bps < prev),
                     None)
    below = next(((t, st) for t, bps, st in post if bps < after_bps), None)
    return {"at_step_bps": at_step,
            "first_cut_s": round(first_cut[0] - step_s, 3) if first_cut else None,
            "first_cut_usage": first_cut[1].get("usage") if first_cut else None,
            "below_s": round(below[0] - step_s, 3) if below else None,
            "below_usage": below[1].get("usage") if below else None,
            "below_loss": round(below[1].get("averageLoss", 0.0), 3) if below else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default=str(REPO / "scenarios" / "rtp-gcc-step.yaml"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--results", default="/tmp/mpvlab-bench-rtp-step", help="kept, to look into")
    args = ap.parse_args()
    step_s, before, after = step_of(Path(args.scenario))
    print(f"step at {step_s:g} s: {before / 1e6:g} → {after / 1e6:g} Mbit/s; time from the step until the "
          f"target < {after / 1e6:g} Mbit/s")
    times = []
    for i in range(args.runs):
        s = run_once(Path(args.scenario), Path(args.results))
        r = reaction(Path(s["_dir"]), step_s, after)
        times += [r["below_s"]] if r["below_s"] is not None else []
        print(f"  run {i + 1}: below after {r['below_s']} s (usage {r['below_usage']}, average loss "
              f"{r['below_loss']}); first cut after {r['first_cut_s']} s ({r['first_cut_usage']}); target at the "
              f"step {r['at_step_bps']} bit/s; frames lost {s['rtp']['frames_lost']}/{s['rtp']['frames_captured']}; "
              f"steal {s['host_steal_during_playback']['fraction']:.3f}   {s['_dir']}")
    if times:
        print(f"reaction time over {len(times)}/{args.runs} runs: min {min(times):.3f} s, median "
              f"{statistics.median(times):.3f} s, max {max(times):.3f} s")
    return 0 if len(times) == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
