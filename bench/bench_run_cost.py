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
        [--ledger N]      # first N smoke runs per tree under `perf record -e task-clock`: a table of
                          # CPU ms by process (each Python helper by its module) and by life-cycle
                          # step, play split at the first frame: the fixed cost item by item
        [--ledger-long]   # the same table for N runs of the longer video: the fixed columns should
                          # not move, and the video column per second shows whether the per-second
                          # cost is constant (what the intercept assumes)
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
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


# ---- the ledger: CPU by process and by life-cycle step (less noisy than the intercept) ----------

LEDGER_PERIOD_NS = 500_000        # perf samples the task clock every 0.5 ms of CPU a task uses
# Programs that exec another (`ip netns exec NS prog`, Mininet's mnexec and shells): their pids are
# read again at every poll, so a process is named by what it runs, not by how it was started.
LAUNCHERS = frozenset({"ip", "mnexec", "nsenter", "bash", "sh", "env", "mptcpize"})
PERF_LINE = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<pid>\d+)/\d+\s+(?P<time>\d+\.\d+):(?P<rest>.*)$")
PROC_POLL_S = 0.02                # how often /proc is read for the command lines of new processes
# Life-cycle steps grouped into the ledger's columns (in the run's order); `play` is split at the
# player's first frame (summary.json startup_delay_s): its start-up is a fixed cost, the rest is video.
LEDGER_COLUMNS: dict[str, tuple[str, ...]] = {
    "start": ("process_start_to_run_s", "prepare"),
    "bring_up": ("bring_up",),
    "serve": ("serve", "stage"),
    "precheck": ("precheck",),
    "to_t0": ("before_t0", "ready", "wait_t0", "start_collectors", "start"),
    "play_startup": (),
    "video": (),
    "after": ("stop_collectors", "finish", "summarise", "teardown", "judge", "ledger_cleanup", "exit"),
}


def _poll_cmdlines(seen: dict[int, list[str]], stop: threading.Event) -> None:
    """pid → argv of every process alive at some poll (perf records only the 15-byte thread name, and
    every Python helper is `python3`); a process shorter than PROC_POLL_S may be missed: it is then
    named by its thread name, which for everything but Python names the program."""
    forked: set[int] = set()    # the run's own argv (forked, not yet exec'd) or a launcher's: read again
    while not stop.is_set():
        for d in os.scandir("/proc"):
            if d.name.isdigit() and (int(d.name) not in seen or int(d.name) in forked):
                try:
                    raw = Path(d.path, "cmdline").read_bytes()
                except OSError:
                    continue
                if raw:
                    argv = raw.rstrip(b"\0").decode(errors="replace").split("\0")
                    seen[int(d.name)] = argv
                    relaunch = Path(argv[0]).name in LAUNCHERS or any(Path(a).name == "mpvlab" for a in argv[:2])
                    (forked.add if relaunch else forked.discard)(int(d.name))
        stop.wait(PROC_POLL_S)


def process_label(argv: list[str] | None, comm: str) -> str:
    """What a process is, for the ledger: a Python helper by its module or script, else its program."""
    if argv and any(Path(a).name == "mpvlab" for a in argv[:2]):
        return "mpvlab (forked)"     # a child of the run seen only before its exec, or never exec'ing
    if argv and Path(argv[0]).name.startswith("python"):
        if "-m" in argv[:-1]:
            return argv[argv.index("-m") + 1].rsplit(".", 1)[-1]
        scripts = [a for a in argv[1:] if a.endswith(".py")]
        return Path(scripts[0]).stem if scripts else "python"
    return Path(argv[0]).name[:15] if argv else comm


def ledger_run(tree: str, mpvlab: Path, scenario: Path, results: Path) -> tuple[dict[str, dict[str, float]], float]:
    """One run under `perf record -e task-clock` (its whole process tree, CPU of every thread sampled
    every 0.5 ms of its CPU time, stamped on CLOCK_MONOTONIC): CPU ms by process label and column;
    and the CPU seconds wait4 counts for perf and the run together (the samples' cross-check)."""
    before = set(results.glob("*/*")) if results.exists() else set()
    seen: dict[int, list[str]] = {}
    stop = threading.Event()
    poller = threading.Thread(target=_poll_cmdlines, args=(seen, stop), daemon=True)
    poller.start()
    with tempfile.TemporaryDirectory(prefix="bench-run-cost-perf-") as tmp:
        data = Path(tmp) / "perf.data"
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(["perf", "record", "-q", "-k", "mono", "-e", "task-clock", "-c", str(LEDGER_PERIOD_NS),
                            "-o", str(data), "--", str(mpvlab), "run", str(scenario), "--results", str(results)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        stop.set()
        poller.join()
        new = sorted(set(results.glob("*/*")) - before)
        if p.returncode != 0 or len(new) != 1:
            raise SystemExit(f"{tree}: perf record ... mpvlab run {scenario} failed ({p.returncode}): {p.stderr[-1500:]}")
        script = subprocess.run(["perf", "script", "-i", str(data), "--show-task-events", "-F", "pid,tid,comm,time"],
                                capture_output=True, text=True, check=True).stdout
    lifecycle = json.loads((new[0] / "provenance.json").read_text())["lifecycle_s"]
    startup = float(json.loads((new[0] / "summary.json").read_text()).get("startup_delay_s") or 0.0)
    rusage_s = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
    return ledger_from_script(script, lifecycle, startup, seen), rusage_s


def ledger_from_script(script: str, lifecycle: dict[str, float], startup_s: float,
                       argvs: dict[int, list[str]]) -> dict[str, dict[str, float]]:
    samples: list[tuple[int, str, float]] = []
    run_pid, t_exec = None, None
    for line in script.splitlines():
        m = PERF_LINE.match(line)       # a thread's name may hold ':' and spaces (GStreamer's "playout:src")
        if m is None:
            continue
        comm, pid, t, rest = m["comm"], int(m["pid"]), float(m["time"]), m["rest"]
        if "PERF_RECORD_COMM exec" in rest:
            if run_pid is None and rest.strip().startswith("PERF_RECORD_COMM exec: mpvlab"):
                run_pid, t_exec = pid, t
        elif "PERF_RECORD" not in rest:
            samples.append((pid, comm, t))
    if run_pid is None or t_exec is None:
        raise SystemExit("bench_run_cost --ledger: perf recorded no exec of mpvlab")
    # The steps' boundaries on the monotonic clock: they follow each other from the exec (the
    # process's start time, which process_start_to_run_s counts from, is the fork a few ms before).
    bounds: list[tuple[str, float]] = []
    t = t_exec
    for step, secs in lifecycle.items():
        if step == "total":
            continue
        col = next((c for c, steps in LEDGER_COLUMNS.items() if step in steps), None)
        if step == "play":
            bounds += [("play_startup", t), ("video", t + min(startup_s, secs))]
        else:
            bounds.append((col or "after", t))
        t += secs
    bounds.append(("after", t))
    out: dict[str, dict[str, float]] = {}
    starts = [b[1] for b in bounds]
    for pid, comm, ts in samples:
        i = bisect.bisect_right(starts, ts) - 1
        col = bounds[i][0] if i >= 0 else "start"
        label = "mpvlab run" if pid == run_pid else process_label(argvs.get(pid), comm)
        row = out.setdefault(label, {})
        row[col] = row.get(col, 0.0) + LEDGER_PERIOD_NS / 1e6
    return out


def print_ledger(tree: str, runs: list[tuple[dict[str, dict[str, float]], float]], video_s: float) -> dict[str, Any]:
    """Mean CPU ms per run by process (rows) and step (columns); `fixed` = all but `video`."""
    ledgers = [led for led, _ in runs]
    n = len(ledgers)
    cols = list(LEDGER_COLUMNS)
    mean: dict[str, dict[str, float]] = {}
    for led in ledgers:
        for label, row in led.items():
            m = mean.setdefault(label, {})
            for c, v in row.items():
                m[c] = m.get(c, 0.0) + v / n
    fixed = {lb: sum(v for c, v in row.items() if c != "video") for lb, row in mean.items()}
    print(f"\n== ledger, {tree}: CPU ms per run by process and step, mean of {n} runs under perf"
          f" ({video_s:g} s video; fixed = every column but video)")
    print(f"  {'process':22s}" + "".join(f"{c:>13s}" for c in cols) + f"{'fixed':>9s}")
    shown = sorted(mean, key=lambda lb: -fixed[lb])
    for label in shown:
        if fixed[label] < 1.0 and mean[label].get("video", 0.0) < 1.0:
            continue
        print(f"  {label:22s}" + "".join(f"{mean[label].get(c, 0.0):13.0f}" for c in cols) + f"{fixed[label]:9.0f}")
    tot = {c: sum(row.get(c, 0.0) for row in mean.values()) for c in cols}
    total_fixed = sum(fixed.values())
    print(f"  {'all processes':22s}" + "".join(f"{tot[c]:13.0f}" for c in cols) + f"{total_fixed:9.0f}")
    per_run = [sum(sum(r.values()) for r in led.values()) / 1e3 for led in ledgers]
    fixed_runs = [sum(v for r in led.values() for c, v in r.items() if c != "video") / 1e3 for led in ledgers]
    print(f"  fixed CPU per run {mmm(fixed_runs)} CPU-s (goal <= {FIXED_CPU_GOAL_S}); video {tot['video'] / 1e3 / video_s:.3f}"
          f" CPU-s per video second; whole run {mmm(per_run)} CPU-s")
    print(f"  cross-check: wait4 rusage of perf and the run together {mmm([r for _, r in runs])} CPU-s"
          " (perf's own recording included; the samples miss only the last partial period of each thread)")
    return {"tree": tree, "runs": n, "mean_ms": mean, "fixed_cpu_s": fixed_runs, "cpu_s": per_run}


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
    ap.add_argument("--ledger", type=int, default=0, metavar="N",
                    help="first N smoke runs per tree under perf: CPU by process and step (needs perf)")
    ap.add_argument("--ledger-long", action="store_true",
                    help="the ledger also for N runs of the longer video: do the fixed columns stay, and is the"
                         " video's CPU per second the same over the longer video (what the intercept assumes)?")
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
    if a.ledger and shutil.which("perf") is None:
        print("bench_run_cost --ledger: needs perf (Debian: linux-perf; ./setup.sh installs it)", file=sys.stderr)
        return 2
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
    ledgers: list[dict[str, Any]] = []
    videos = [(SMOKE, short_s)] + ([(long_file, float(a.long_duration))] if a.ledger_long else [])
    for scen_file, video_s in videos if a.ledger else []:
        runs: dict[str, list[tuple[dict[str, dict[str, float]], float]]] = {tree: [] for tree in trees}
        for i in range(a.ledger):
            for tree, exe in trees.items():
                runs[tree].append(ledger_run(tree, exe, scen_file, root / f"ledger-{tree}"))
                print(f"  [ledger {i + 1}/{a.ledger}] {tree} {video_s:g} s video", flush=True)
        print(f"after the ledger: {uptime()}")
        ledgers += [print_ledger(tree, runs[tree], video_s) for tree in trees]
    rows: list[RunCost] = []
    plan = [(SMOKE, short_s)] * a.runs + [(long_file, float(a.long_duration))] * a.long_runs
    for i, (f, v) in enumerate(plan):
        for tree, exe in trees.items():     # interleaved, so a change in the host's load hits both trees
            r = one_run(tree, exe, f, v, root / tree)
            rows.append(r)
            print(f"  [{i + 1}/{len(plan)}] {tree} {v:g} s video: {r.cpu_s:.2f} CPU-s, wall {r.wall_s:.2f} s,"
                  f" overhead {r.overhead_s:.2f} s, {r.state}", flush=True)
    if not plan:
        if a.json:
            a.json.write_text(json.dumps({"ledgers": ledgers}, indent=1))
        tmp.cleanup()
        return 0
    print(f"after: {uptime()}")
    reports = [report(tree, [r for r in rows if r.tree == tree], short_s) for tree in trees]
    if len(reports) == 2:
        k_old, k_new = set(reports[0]["summary_keys"]), set(reports[1]["summary_keys"])
        print(f"\nsummary.json keys: {'the same' if k_old == k_new else 'DIFFER'}"
              f" ({len(k_new)} keys; only old: {sorted(k_old - k_new)}, only new: {sorted(k_new - k_old)})")
    if a.json:
        a.json.write_text(json.dumps({"ledgers": ledgers, "reports": reports, "runs": [r.__dict__ for r in rows]}, indent=1))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
