#!/usr/bin/env python3
"""How long `mpvlab report` takes on many runs (issue: summarising 1,000 runs takes seconds).

Writes N synthetic result directories in the runner's exact layout (mpvlab/reporting/synthetic.py:
3 scenarios × 3 CCs × 3 schedulers × trials, each with summary — including the CC model the runner
computes once when it summarises a run (`cc_state`) —, resolved scenario, provenance and, optionally,
time series like a 20 s run's), then times, separately: finding and loading the runs and computing
every configuration's statistics (t and BCa bootstrap intervals); the pairwise tests; writing the
tables (CSV + Parquet); the figures (built and rendered in the formats asked); the HTML. Prints the
figures beside issue 36's goal (1,000 runs ≤ 7 s wall; 10,000 runs ≤ 60 s and ≤ 1 GB) and the
figure formats each version wrote; not a test.

With --compare-src OLD (a checkout of an older version, e.g. `git archive main | tar -x -C OLD`),
the same set is reported by both versions, each in its own process (wall, CPU of the process and its
render workers, peak RSS), and their tables are compared byte for byte. Both versions write
--formats (default: the report's default, svg,pdf) — a version before the formats option always
writes SVG, PDF and PNG (300 dpi); --also-formats LIST adds a report by this version in LIST too
(e.g. svg,pdf,png: that old output, like for like).

    .venv/bin/python bench/bench_report.py [--runs 1000] [--series-s 20] [--keep DIR] [--compare-src OLD]
                                           [--formats svg,pdf] [--also-formats svg,pdf,png]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from mpvlab.core.paths import checkout_root

REPO = checkout_root()

SCENARIOS = ["wifi-lte-a", "wifi-lte-b", "wifi-lte-c"]
CCS = ["cubic", "bbr", "bbr-s"]
SCHEDULERS = ["minrtt", "bdp", "default"]
GOALS = {1000: (7.0, None), 10000: (60.0, 1.0)}     # runs → (wall s, peak GB) of issue 36


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def time_report(src: Path, root: Path, out: Path, formats: str) -> dict[str, Any]:
    """The report pipeline of the code under `src` over the runs under `root`; seconds per step."""
    import inspect
    sys.path.insert(0, str(src))
    from mpvlab.reporting import build_report
    if "on_step" in inspect.signature(build_report).parameters:
        return time_build_report(build_report, root, out, formats)
    from mpvlab.core import rundir
    from mpvlab.results.aggregate import aggregate
    from mpvlab.reporting.figures import build_all
    from mpvlab.reporting.html import render
    from mpvlab.reporting.pairwise import pairwise_frame
    from mpvlab.reporting.tables import write_tables
    # a version before the formats option (build_all without `output`) writes SVG, PDF and PNG (300 dpi)
    new = "output" in inspect.signature(build_all).parameters
    if new:
        from mpvlab.reporting.figures import PendingSections
        from mpvlab.reporting.output import output_choice
        output = output_choice(formats)
        described = output.describe()
    else:
        described = "SVG, PDF, PNG (300 dpi) (a version before --formats: always all three)"
    cpu = [_cpu()]
    t0 = time.monotonic()
    c = aggregate(root, exclude=[out])
    t1, _ = time.monotonic(), cpu.append(_cpu())
    # as build_report: a version with PendingSections starts the figures' workers before the tables
    pending = PendingSections(c, output) if new else None
    pw = pairwise_frame(c)
    t1p, _ = time.monotonic(), cpu.append(_cpu())
    write_tables(c, out, pw)
    t2, _ = time.monotonic(), cpu.append(_cpu())
    sections = pending.result(out / "figures") if pending is not None else build_all(c, out / "figures")
    t3, _ = time.monotonic(), cpu.append(_cpu())
    page = (render(c, sections, ["runs.csv"], "bench", pw, html_dir=out, output=output) if new
            else render(c, sections, ["runs.csv"], "bench", pw, html_dir=out))
    rundir.write_text(out / "report.html", page)
    t4, _ = time.monotonic(), cpu.append(_cpu())
    # the workers' CPU counts when they end (at the figures step), whichever step they ran beside
    print("CPU s per step (process + render workers): " + ", ".join(
        f"{name} {b - a:.2f}" for name, a, b in zip(["load+stats", "pairwise", "tables", "figures", "HTML"],
                                                    cpu, cpu[1:])))
    n = len(c.runs) if hasattr(c, "runs") else sum(len(cfg.runs) for cfg in c.configs)
    print(f"load + statistics : {t1 - t0:6.2f} s  ({n} runs, {len(c.configs)} configurations)")
    print(f"pairwise tests     : {t1p - t1:6.2f} s  ({len(pw)} comparisons, {int(pw.significant.sum())} "
          "different after Holm)")
    print(f"tables (CSV+Parquet): {t2 - t1p:6.2f} s")
    print(f"figures            : {t3 - t2:6.2f} s  ({sum(len(f) for _, f in sections)} figures × {described}"
          + ("; built and rendered in workers started before the pairwise tests: this is what is left after "
             "the tables" if new else "") + ")")
    print(f"HTML               : {t4 - t3:6.2f} s  ({len(page) / 1e6:.1f} MB)")
    print(f"total              : {t4 - t0:6.2f} s")
    return {"total_s": t4 - t0, "formats": described}


def time_build_report(build_report: Any, root: Path, out: Path, formats: str) -> dict[str, Any]:
    """A version whose build_report reports its steps (on_step): the report exactly as `mpvlab report`
    makes it (its figure workers fork before loading, workers.py), timed per step."""
    from mpvlab.reporting.output import output_choice
    output = output_choice(formats)
    marks: list[tuple[str, float, float]] = [("start", time.monotonic(), _cpu())]
    rep = build_report(root, out, title="bench", output=output,
                       on_step=lambda name: marks.append((name, time.monotonic(), _cpu())))
    # the workers' CPU counts when they end (at the figures step), whichever step they ran beside
    print("CPU s per step (process + figure workers): " + ", ".join(
        f"{name} {b[2] - a[2]:.2f}" for a, b in zip(marks, marks[1:]) for name in [b[0]]))
    notes = {"load": f"({rep.n_complete} runs, {rep.n_configs} configurations; the figure workers forked "
                     "before it, and given the runs after it)",
             "stats": "(t and BCa intervals, BBR models; then given to the workers)",
             "figures": f"({sum(p.suffix == '.svg' for p in rep.figures)} figures × {output.describe()}; "
                        "what is left after the tables: the workers started after loading)"}
    for a, b in zip(marks, marks[1:]):
        print(f"{b[0]:19s}: {b[1] - a[1]:6.2f} s  {notes.get(b[0], '')}")
    print(f"total              : {marks[-1][1] - marks[0][1]:6.2f} s")
    return {"total_s": marks[-1][1] - marks[0][1], "formats": output.describe()}


def _tree_pss_kb(pid: int) -> int:
    """Proportional set size of a process and all its descendants (kB): pages shared between the
    report's process and its forked workers counted once in total, which the sum of RSS is not."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue                          # a process that ended between two reads
    return total


def measured(src: Path, root: Path, out: Path, formats: str) -> dict[str, Any]:
    """time_report in a fresh interpreter (imports, render workers and peak memory included); the
    memory of the whole process tree sampled every 50 ms (PSS), beside getrusage's per-process peaks."""
    t = time.monotonic()
    with subprocess.Popen([sys.executable, __file__, "--time-report", str(src), str(root), str(out), formats],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        peak_pss_kb = 0
        sampler_done = threading.Event()

        def sample() -> None:
            nonlocal peak_pss_kb
            while not sampler_done.wait(0.05):
                peak_pss_kb = max(peak_pss_kb, _tree_pss_kb(child.pid))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        stdout, stderr = child.communicate(timeout=7200)
        sampler_done.set()
        sampler.join()
    wall = time.monotonic() - t
    if child.returncode != 0:
        raise RuntimeError(f"report by {src} failed: {stderr[-2000:]}")
    res = json.loads(stdout.strip().splitlines()[-1])
    res["wall_s"] = wall
    res["tree_pss_gb"] = peak_pss_kb / 1e6
    res["log"] = "\n".join(stdout.strip().splitlines()[:-1])
    return res


def tables_identical(a: Path, b: Path) -> list[str]:
    """Table files (CSV) that differ between two report folders, or exist in one only."""
    names = sorted({p.name for p in a.glob("*.csv")} | {p.name for p in b.glob("*.csv")})
    return [n for n in names if not ((a / n).exists() and (b / n).exists()
                                     and filecmp.cmp(a / n, b / n, shallow=False))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--series-s", type=int, default=20, help="seconds of links/subflows CSV per run (0: none)")
    ap.add_argument("--keep", help="write the synthetic runs here and keep them")
    ap.add_argument("--compare-src", help="an older checkout: report the same set with it too, diff the tables")
    ap.add_argument("--formats", default="svg,pdf", help="this version's figure formats (default: the report's)")
    ap.add_argument("--also-formats", help="also report by this version in these formats, e.g. svg,pdf,png")
    ap.add_argument("--cli-repeats", type=int, default=3,
                    help="then time the installed `mpvlab report` itself this many times on the same set")
    ap.add_argument("--time-report", nargs=4, metavar=("SRC", "ROOT", "OUT", "FORMATS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.time_report:
        src, root, out = (Path(x) for x in args.time_report[:3])
        res = time_report(src, root, out, args.time_report[3])
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        res["cpu_s"] = _cpu()
        res["peak_rss_gb"] = max(me.ru_maxrss, kids.ru_maxrss) / 1e6     # kB → GB
        # the report's process and its largest worker apart: since the workers fork before loading
        # (workers.py) each holds its own copy of the runs, no longer pages shared with the parent
        res["rss_gb"] = (me.ru_maxrss / 1e6, kids.ru_maxrss / 1e6)
        print(json.dumps(res))
        return 0
    sys.path.insert(0, str(REPO))
    from mpvlab.reporting.synthetic import make_set
    trials = max(1, round(args.runs / 27))
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        t = time.monotonic()
        make_set(base / "src", SCENARIOS, CCS, SCHEDULERS, trials, series_s=args.series_s, n_failed=3)
        n = 27 * trials
        print(f"wrote {n} synthetic runs (+3 failed), {args.series_s} s of time series each, "
              f"in {time.monotonic() - t:.1f} s (summaries include the runner's once-per-run CC model)")
        with open("/proc/loadavg") as f:
            print(f"host load (1/5/15 min): {' '.join(f.read().split()[:3])} on {os.cpu_count()} CPUs"
                  " — wall figures follow the load, CPU figures much less")
        goal = GOALS.get(min(GOALS, key=lambda k: abs(k - n)))
        versions = (([("before", Path(args.compare_src), args.formats)] if args.compare_src else [])
                    + [("after", REPO, args.formats)]
                    + ([(f"after {args.also_formats}", REPO, args.also_formats)] if args.also_formats else []))
        outs = {}
        rows = []
        for label, src, formats in versions:
            outs[label] = base / f"report-{len(outs)}"
            r = measured(src, base / "src", outs[label], formats)
            print(f"\n[{label}] {src}\n{r['log']}")
            line = (f"wall {r['wall_s']:.1f} s (goal {goal[0]:.0f} s), CPU {r['cpu_s']:.1f} s, peak RSS "
                    f"{r['peak_rss_gb']:.2f} GB" + (f" (goal {goal[1]:.0f} GB)" if goal[1] else "")
                    + (f" (process {r['rss_gb'][0]:.2f}, largest worker {r['rss_gb'][1]:.2f})" if "rss_gb" in r else "")
                    + f", all processes together {r['tree_pss_gb']:.2f} GB (PSS, sampled every 50 ms)"
                    + f"; figures: {r['formats']}")
            print(f"[{label}] {line}")
            rows.append(f"  {label:28s} {line}")
        # the command a user runs, as a user runs it (no bench harness, no memory sampler around it)
        cli = Path(sys.executable).with_name("mpvlab")
        for k in range(args.cli_repeats):
            t = time.monotonic()
            subprocess.run([str(cli), "report", str(base / "src"), "--out", str(base / f"report-cli-{k}"),
                            "--formats", args.formats], check=True, capture_output=True, timeout=7200)
            rows.append(f"  {'`mpvlab report`, try ' + str(k + 1):28s} wall {time.monotonic() - t:.2f} s "
                        f"(goal {goal[0]:.0f} s); figures: {args.formats}")
        with open("/proc/loadavg") as f:
            print(f"\nhost load at the end (1/5/15 min): {' '.join(f.read().split()[:3])}")
        print(f"{n} runs:\n" + "\n".join(rows))
        for label in [v[0] for v in versions[1:]] if args.compare_src else []:
            diff = tables_identical(outs["before"], outs[label])
            print(f"tables before vs {label}: " + ("identical (" + ", ".join(
                sorted(p.name for p in outs[label].glob("*.csv"))) + ")" if not diff else f"DIFFER: {diff}"))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
