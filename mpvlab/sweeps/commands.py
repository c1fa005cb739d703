"""The cluster-facing parts of `mpvlab sweep` (mpvlab/cli.py dispatches here): --list-runs, --run KEY,
--status and --executor slurm. Kept out of cli.py so the command there stays a thin dispatcher."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.text import Text

from mpvlab.sweeps import slurm
from mpvlab.sweeps.records import DERIVED_STATES, RunState, derive
from mpvlab.input.sweep import Plan, SweepError

STYLE = {"complete": "green", "failed": "red", "running": "yellow", "queued": "cyan", "planned": ""}


def roots(args: argparse.Namespace) -> list[Path]:
    return [Path(args.results), *(Path(p) for p in args.results_also or [])]


def derived(plan: Plan, args: argparse.Namespace) -> dict[str, RunState]:
    subs = [s for r in roots(args) for s in slurm.submissions(r / plan.sweep)]
    sched = slurm.task_states if subs or any((r / plan.sweep / slurm.SLURM_DIR).is_dir() for r in roots(args)) \
        else None
    return derive(plan, roots(args), scheduler=sched, submissions=subs)


def todo_keys(plan: Plan, states: dict[str, RunState], retry_failed: bool) -> list[str]:
    """What a resume makes: planned runs, and failed ones with --retry-failed; never complete, queued
    or running ones (the same rule as the local executor's)."""
    return [r.key for r in plan.runs
            if states[r.key].state == "planned" or (retry_failed and states[r.key].state == "failed")]


def cmd_list_runs(plan: Plan, args: argparse.Namespace) -> int:
    """One line per planned run: its key (with --todo: only the runs a resume would make)."""
    keys = [r.key for r in plan.runs]
    if args.todo:
        keys = todo_keys(plan, derived(plan, args), args.retry_failed)
    for k in keys:
        print(k)
    return 0


def cmd_run(plan: Plan, args: argparse.Namespace, console: Console) -> int:
    from mpvlab.sweeps.single import run_one

    if os.geteuid() != 0:
        console.print(Text("mpvlab sweep --run needs root (a run builds network namespaces, tc, BPF)", style="red"))
        return 2
    try:
        out = run_one(plan, Path(args.results), args.run, log=lambda m: console.print(Text(m, style="magenta")))
    except SweepError as e:
        console.print(Text(str(e), style="red"))
        return 2
    except KeyboardInterrupt:     # outside the run itself (its own interruption is an outcome below)
        from mpvlab.core.errors import EXIT_INTERRUPTED
        console.print(Text(f"interrupted {args.run} (recorded in its attempts); run it again to redo it",
                           style="yellow"))
        return EXIT_INTERRUPTED
    console.print(f"{out.state} {out.key} {out.run_dir or ''}" + (f"\n  {out.reason}" if out.reason else ""))
    if out.state == "interrupted":
        from mpvlab.core.errors import EXIT_INTERRUPTED
        return EXIT_INTERRUPTED     # as `mpvlab run` and `mpvlab sweep` (docs/results.md: exit codes)
    return 0 if out.state in ("complete", "already-complete") else 1


def cmd_status(plan: Plan, args: argparse.Namespace, console: Console) -> int:
    try:
        states = derived(plan, args)
    except SweepError as e:
        console.print(Text(str(e), style="red"))
        return 2
    counts = Counter(s.state for s in states.values())
    for r in plan.runs:
        s = states[r.key]
        where = str(s.run_dir) if s.run_dir else ""
        line = Text.assemble((f"{s.state:9s}", STYLE[s.state]), f" {r.key}  seed {r.seed}",
                             f"  host {s.host}" if s.host else "", f"  slurm {s.slurm}" if s.slurm else "",
                             f"  {where}" if where else "")
        if s.reason:
            line.append(f"\n          {s.reason}", style=STYLE[s.state])
        for d in s.duplicates:
            line.append(f"\n          duplicate complete result (not counted twice): {d}", style="yellow")
        console.print(line)
    console.print(f"sweep {plan.sweep}: {len(plan.runs)} planned runs: "
                  + ", ".join(f"{counts.get(k, 0)} {k}" for k in DERIVED_STATES)
                  + f"; duplicates {sum(len(s.duplicates) for s in states.values())}")
    return 0


def cmd_submit(plan: Plan, args: argparse.Namespace, console: Console) -> int:
    opts = slurm.SlurmOptions(args.partition, args.time, args.nodes_exclusive, args.per_node)
    try:
        opts.check()
        states = derived(plan, args)
        keys = todo_keys(plan, states, args.retry_failed)
        c = Counter(s.state for s in states.values())
        console.print(f"{len(keys)} to run, {c['complete']} already complete, {c['failed']} failed earlier"
                      f"{' (redone)' if args.retry_failed else ' (skipped; --retry-failed redoes them)'}, "
                      f"{c['queued'] + c['running']} queued or running")
        if not keys:
            return 0
        rec = slurm.submit(plan, Path(args.spec), Path(args.results), keys, opts, args.quick)
    except SweepError as e:
        console.print(Text(str(e), style="red"))
        return 2
    console.print(f"submitted Slurm job array {rec['job_id']} ({rec['job_name']}): {len(rec['tasks'])} task(s), "
                  f"{opts.per_node} run(s) per task, {'exclusive nodes' if opts.exclusive else 'shared nodes'}; "
                  f"`{status_command(args)}` follows it")
    return 0


def status_command(args: argparse.Namespace) -> str:
    """The `--status` command that reads what this submission writes: the same spec, --quick (another
    sweep name) and results roots — without them --status reads ./results, finds no Slurm record and
    shows every queued run as planned. Shell-quoted, to paste as is."""
    import shlex
    argv = ["mpvlab", "sweep", str(args.spec)] + (["--quick"] if args.quick else [])
    argv += ["--results", str(Path(args.results).resolve())]
    for extra in args.results_also or []:
        argv += ["--results-also", str(Path(extra).resolve())]
    return shlex.join(argv + ["--status"])
