#!/usr/bin/env python3
"""A run's fixed cost (issue 36): CPU and wall time of lone `mpvlab run`s of scenarios/smoke.yaml
(20 s of video) and of the same scenario with a longer video, so the CPU a run costs splits into a
fixed part (the least-squares intercept over video seconds) and a part per second of video (the
slope). Prints each figure beside its goal; not a test (a busy host moves every figure here).

CPU is user + system time of the run's whole process tree: this process makes itself the child
subreaper (prctl PR_SET_CHILD_SUBREAPER), so a descendant that outlives its parent (a daemon that
double-forks, a process the run leaves to the kernel) is re-parented here and reaped with wait4,
and its rusage is counted too; everything else is in the run process's own wait4 rusage (children
its descendants waited for included). Kernel work done in softirq context (packets forwarded through
the veths) is charged to whichever process the CPU was running, so a share of it lands elsewhere.
Wall overhead = wall - (video seconds + the player's start-up as the run records it,
summary.json startup_delay_s). `lifecycle_s` per step is read from each run's provenance.json.

    .venv/bin/python bench/bench_run_cost.py [--runs 10] [--long-runs 3] [--long-duration 60]
        [--old-src DIR]   # also time DIR/.venv/bin/mpvlab (an older checkout, set up), interleaved
        [--results DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "scenarios" / "smoke.yaml"
PR_SET_CHILD_SUBREAPER = 36
FIXED_CPU_GOAL_S = 1.5
WALL_OVERHEAD_GOAL_S = 3.0
ORPHAN_WAIT_S = 15.0


@dataclass
class RunCost:
    tree: str
    video_s: float
    cpu_s: float
    wall_s: float
    startup_s: float
    state: str
    lifecycle: dict[str, float] = field(default_factory=dict)
    summary_keys: list[str] = field(default_factory=list)
    orphans_reaped: int = 0
    orphans_left: list[int] = field(default_factory=list)
    precheck: dict[str, dict[str, float]] = field(default_factory=dict)   # path → the pre-check's verdict numbers

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.video_s - self.startup_s


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_orphans(deadline_s: float) -> tuple[float, int, list[int]]:
    """Wait for every descendant re-parented to us; (their CPU seconds, how many, pids still alive)."""
    cpu, n = 0.0, 0
    end = time.monotonic() + deadline_s
    while True:
        try:
            pid, _status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu, n, []
        if pid:
            cpu += ru.ru_utime + ru.ru_stime
            n += 1
            continue
        if time.monotonic() > end:
            left = [int(p) for p in Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()]
            return cpu, n, left
        time.sleep(0.05)


def one_run(tree: str, mpvlab: Path, scenario: Path, video_s: float, results: Path) -> RunCost:
    before = set(results.glob("*/*")) if results.exists() else set()
    t = time.monotonic()
    with tempfile.TemporaryFile() as errf:    # a file, not a pipe: nobody reads a pipe during wait4
        p = subprocess.Popen([str(mpvlab), "run", str(scenario), "--results", str(results)],
                             stdout=subprocess.DEVNULL, stderr=errf)
        _pid, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        errf.seek(0)
        err = errf.read().decode(errors="replace")
    orphan_cpu, reaped, left = reap_orphans(ORPHAN_WAIT_S)
    cpu = ru.ru_utime + ru.ru_stime + orphan_cpu
    new = sorted(set(results.glob("*/*")) - before)
    if p.returncode != 0 or len(new) != 1:
        raise SystemExit(f"{tree}: mpvlab run {scenario} failed ({p.returncode}): {err[-1500:]}")
    run = new[0]
    summary = json.loads((run / "summary.json").read_text())
    prov = json.loads((run / "provenance.json").read_text())
    status_json = json.loads((run / "status.json").read_text())
    return RunCost(tree=tree, video_s=video_s, cpu_s=cpu, wall_s=wall,
                   startup_s=float(summary.get("startup_delay_s") or 0.0), state=status_json["state"],
                   lifecycle=prov.get("lifecycle_s") or {}, summary_keys=sorted(summary),
                   orphans_reaped=reaped, orphans_left=left, precheck=precheck_numbers(prov))


def precheck_numbers(prov: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per path, what the pre-check's fidelity verdict rests on: the tbf's backlogged rate ratio and
    the RTT error p99 (they must keep their meaning whatever the pre-check's cost, issue 36)."""
    out = {}
    for path, v in ((prov.get("fidelity") or {}).get("paths") or {}).items():
        rate, rtt = v.get("rate_down") or {}, v.get("rtt") or {}
        out[path] = {k: float(x) for k, x in (("rate_ratio", rate.get("ratio")), ("backlogged_s", rate.get("backlogged_s")),
                                              ("rtt_error_ms_p99", rtt.get("error_ms_p99"))) if x is not None}
    return out


def fit(rows: list[RunCost]) -> tuple[float, float, float]:
    """Least squares cpu = fixed + per_s × video seconds; with the half-width of the intercept's 95 %
    confidence interval (Student t, n − 2 degrees of freedom; nan below 3 runs): the intercept is an
    extrapolation to a zero-second video, and run-to-run spread moves it more than the means."""
    xs = [r.video_s for r in rows]
    ys = [r.cpu_s for r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return float("nan"), float("nan"), float("nan")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    fixed = my - slope * mx
    n = len(xs)
    if n < 3:
        return fixed, slope, float("nan")
    from scipy.stats import t
    s2 = sum((y - fixed - slope * x) ** 2 for x, y in zip(xs, ys)) / (n - 2)
    return fixed, slope, float(t.ppf(0.975, n - 2)) * math.sqrt(s2 * (1 / n + mx ** 2 / sxx))


def mmm(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.fmean(values):6.2f} ({min(values):.2f}-{max(values):.2f})"


def _mmm4(values: list[float]) -> str:
    return f"{statistics.fmean(values):.4f} ({min(values):.4f}-{max(values):.4f})" if values else "-"


def report(tree: str, rows: list[RunCost], short_s: float) -> dict[str, Any]:
    smoke = [r for r in rows if r.video_s == short_s]
    fixed, per_s, fixed_ci = fit(rows)
    lc_total_gap = [r.wall_s - r.lifecycle.get("total", float("nan")) for r in smoke]
    out = {"tree": tree, "fixed_cpu_s": fixed, "fixed_cpu_ci95_s": fixed_ci, "cpu_per_video_s": per_s,
           "smoke_cpu_s": [r.cpu_s for r in smoke], "smoke_overhead_s": [r.overhead_s for r in smoke],
           "states": sorted({r.state for r in rows})}
    print(f"\n== {tree}: {len(smoke)} smoke runs ({short_s:g} s video), {len(rows) - len(smoke)} longer")
    verdict = ("n/a: needs runs of two video lengths" if fixed != fixed
               else "reached" if fixed <= FIXED_CPU_GOAL_S else "NOT reached")
    print(f"  fixed CPU (intercept)    {fixed:6.2f} CPU-s ± {fixed_ci:.2f} (95 % CI)   goal <= {FIXED_CPU_GOAL_S} CPU-s"
          f"   {verdict}")
    print(f"  CPU per video second     {per_s:6.3f} CPU-s/s")
    for v in sorted({r.video_s for r in rows}):
        print(f"  CPU per run, {v:4g} s video {mmm([r.cpu_s for r in rows if r.video_s == v])} CPU-s")
    ov = [r.overhead_s for r in smoke]
    print(f"  smoke wall overhead      {mmm(ov)} s   goal <= {WALL_OVERHEAD_GOAL_S} s"
          f"   {'reached' if ov and statistics.fmean(ov) <= WALL_OVERHEAD_GOAL_S else 'NOT reached'}")
    print(f"  smoke wall               {mmm([r.wall_s for r in smoke])} s;"
          f" player start-up {mmm([r.startup_s for r in smoke])} s")
    print(f"  wall - lifecycle total   {mmm(lc_total_gap)} s (what lifecycle_s cannot see: fork and exec"
          f" before the process's start time, the exit after its last stamp)")
    steps: dict[str, list[float]] = {}
    for r in smoke:
        for k, v in r.lifecycle.items():
            steps.setdefault(k, []).append(float(v))
    print("  lifecycle_s per step (smoke): mean (min-max)")
    for k, vs in steps.items():
        print(f"    {k:24s} {mmm(vs)}")
    print("  pre-check verdict numbers (smoke): mean (min-max)")
    for path in sorted({p for r in smoke for p in r.precheck}):
        for k in ("rate_ratio", "backlogged_s", "rtt_error_ms_p99"):
            vals = [r.precheck[path][k] for r in smoke if k in r.precheck.get(path, {})]
            print(f"    {path:8s} {k:18s} {mmm(vals) if k != 'rate_ratio' else _mmm4(vals)}")
    reaped = sum(r.orphans_reaped for r in rows)
    left = [p for r in rows for p in r.orphans_left]
    print(f"  orphaned descendants reaped here: {reaped}; still alive after {ORPHAN_WAIT_S:g} s: {left or 'none'}")
    out["lifecycle_mean_s"] = {k: statistics.fmean(v) for k, v in steps.items()}
    out["summary_keys"] = smoke[0].summary_keys if smoke else []
    return out


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="smoke runs per tree (default 10)")
    ap.add_argument("--long-runs", type=int, default=3, help="runs with the longer video per tree (default 3)")
    ap.add_argument("--long-duration", type=int, default=60, help="the longer video's seconds (default 60)")
    ap.add_argument("--old-src", type=Path, help="an older checkout with its own .venv (./setup.sh run there)")
    ap.add_argument("--results", type=Path, help="results root (default: a temporary folder, removed)")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_run_cost: mpvlab run needs root", file=sys.stderr)
        return 2
    trees = {"new": REPO / ".venv" / "bin" / "mpvlab"}
    if a.old_src:
        old = a.old_src.resolve() / ".venv" / "bin" / "mpvlab"
        if not old.is_file():
            print(f"bench_run_cost: {old} does not exist (run ./setup.sh in {a.old_src})", file=sys.stderr)
            return 2
        trees = {"old": old, **trees}
    become_subreaper()
    tmp = tempfile.TemporaryDirectory(prefix="bench-run-cost-")
    root = a.results.resolve() if a.results else Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    scen = yaml.safe_load(SMOKE.read_text())
    short_s = float(str(scen["video"]["duration"]).rstrip("s"))
    long_file = Path(tmp.name) / "smoke.yaml"
    long_file.write_text(yaml.safe_dump({**scen, "video": {**scen["video"], "duration": f"{a.long_duration}s"}}))
    for exe in trees.values():     # content generation is not a run's cost: cached before timing
        for f in (SMOKE, long_file):
            subprocess.run([str(exe), "prepare", str(f)], check=True, stdout=subprocess.DEVNULL)
    print(f"before: {uptime()}; {os.cpu_count()} CPUs; PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    rows: list[RunCost] = []
    plan = [(SMOKE, short_s)] * a.runs + [(long_file, float(a.long_duration))] * a.long_runs
    for i, (f, v) in enumerate(plan):
        for tree, exe in trees.items():     # interleaved, so a change in the host's load hits both trees
            r = one_run(tree, exe, f, v, root / tree)
            rows.append(r)
            print(f"  [{i + 1}/{len(plan)}] {tree} {v:g} s video: {r.cpu_s:.2f} CPU-s, wall {r.wall_s:.2f} s,"
                  f" overhead {r.overhead_s:.2f} s, {r.state}", flush=True)
    print(f"after: {uptime()}")
    reports = [report(tree, [r for r in rows if r.tree == tree], short_s) for tree in trees]
    if len(reports) == 2:
        k_old, k_new = set(reports[0]["summary_keys"]), set(reports[1]["summary_keys"])
        print(f"\nsummary.json keys: {'the same' if k_old == k_new else 'DIFFER'}"
              f" ({len(k_new)} keys; only old: {sorted(k_old - k_new)}, only new: {sorted(k_new - k_old)})")
    if a.json:
        a.json.write_text(json.dumps({"reports": reports, "runs": [r.__dict__ for r in rows]}, indent=1))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
