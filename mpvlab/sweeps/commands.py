"""The parts of `mpvlab sweep` (mpvlab/cli.py dispatches here): --list-runs, --run KEY, --status, and
making the planned runs (cmd_make), here or with --executor slurm. Kept out of cli.py so the command
there stays a thin dispatcher."""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from mpvlab.sweeps import slurm
from mpvlab.sweeps.records import DERIVED_STATES, RunState, derive
from mpvlab.input.sweep import Plan, SweepError
from mpvlab.core.rundir import results_root_problem
from mpvlab.runner.context import CPUS_PER_RUN, MAX_PARALLEL, default_parallel

if TYPE_CHECKING:
    from mpvlab.reporting.output import Output

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


def cmd_make(plan: Plan, args: argparse.Namespace, console: Console, output: Output) -> int:
    """Make the planned runs (cli.py's cmd_sweep has dispatched --list-runs, --status and --run): the
    plan said, then the runs made here (`args.parallel` at once, the report at the end) or submitted
    to Slurm (--executor slurm)."""
    from mpvlab.runner.steps import ensure_contents

    if (parallel_note := _parallel_choice(args, console)) is None:
        return 2
    console.print(f"sweep [cyan]{plan.sweep}[/cyan]: {len(plan.configs)} configuration(s) × {plan.trials} "
                  f"trial(s) = {len(plan.runs)} runs → {Path(args.results) / plan.sweep}; {parallel_note}")
    if args.dry_run:
        for r in plan.runs:
            console.print(f"  {r.key}  seed {r.seed}  ({r.scenario.workload.kind} {r.scenario.media_s:g} s)")
        return 0
    if not _can_run(args, console):
        return 2
    ensure_contents(r.scenario for r in plan.runs)
    if args.executor == "slurm":
        return cmd_submit(plan, args, console)
    return _run_here(plan, args, console, output)


def _parallel_choice(args: argparse.Namespace, console: Console) -> str | None:
    """Sets args.parallel (the machine's default when not given) and says how it was chosen; None (the
    error printed) when --parallel is out of range."""
    if args.parallel is None:
        args.parallel = default_parallel(os.cpu_count() or 1)
        parallel_note = (f"{args.parallel} at once: the default for {os.cpu_count()} CPUs (one run per "
                         f"{CPUS_PER_RUN} CPUs; --parallel N to choose, docs/sweeps.md \"How many at once\")")
    elif not 1 <= args.parallel <= MAX_PARALLEL:
        console.print(Text(f"--parallel: allowed 1..{MAX_PARALLEL} (docs/sweeps.md \"How many at once\" says what a "
                           "machine holds)", style="red"))
        return None
    else:
        parallel_note = f"{args.parallel} at once"
    return parallel_note


def _can_run(args: argparse.Namespace, console: Console) -> bool:
    """Whether runs can be made here: root, the system's parts and a usable results root (the reason
    printed when not), checked before hours of runs that would each fail."""
    if os.geteuid() != 0:
        console.print(Text("mpvlab sweep needs root (each run builds network namespaces, tc, BPF)", style="red"))
        return False
    from mpvlab.runner import system_parts
    if (missing := system_parts.problem("sweep")) is not None:   # before hours of runs that would each fail
        console.print(Text(missing, style="red"))
        return False
    if (bad_root := results_root_problem(Path(args.results))) is not None:   # before any run starts
        console.print(Text(bad_root, style="red"))
        return False
    return True


def _run_here(plan: Plan, args: argparse.Namespace, console: Console, output: Output) -> int:
    """Make the runs on this machine, `args.parallel` at once, under the live display; then the report."""
    from mpvlab.core.errors import EXIT_INTERRUPTED
    from mpvlab.sweeps.execute import Sweeper, estimate_run_s
    from mpvlab.sweeps.display import SweepDisplay

    display = SweepDisplay(console, len(plan.runs), args.parallel,
                           {r.key: estimate_run_s(r.scenario) for r in plan.runs})
    sweeper = Sweeper(plan, Path(args.results), parallel=args.parallel, retry_failed=args.retry_failed,
                      on_event=display.event)
    try:
        with display.live():
            counts = sweeper.run()
    except SweepError as e:
        console.print(Text(str(e), style="red"))
        return 2
    except KeyboardInterrupt as e:
        console.print(Text(f"sweep stopped ({e}); run the same command again to resume", style="yellow"))
        return EXIT_INTERRUPTED     # as an interrupted `mpvlab run` (docs/results.md: exit codes)
    console.print(f"sweep {plan.sweep}: {counts['complete']} complete, {counts['failed']} failed"
                  f"{'' if not counts['failed'] else ' (listed in sweep.json; --retry-failed redoes them)'}; "
                  f"manifest {sweeper.manifest_path}")
    if (failed := _report_at_end(sweeper.root, args, console, output, counts)) is not None:
        return failed
    return 0 if counts["failed"] == 0 and counts["complete"] == len(plan.runs) else 1


def _report_at_end(root: Path, args: argparse.Namespace, console: Console, output: Output,
                   counts: dict[str, int]) -> int | None:
    """The report of a finished sweep (or the command that makes it, with --no-report or no complete
    run); the exit code when it could not be built, None when it was (or was not asked for)."""
    if args.no_report or not counts["complete"]:
        opts = "" if output.formats == ("svg", "pdf") else f" --formats {','.join(output.formats)}" + (
            f" --png-dpi {output.png_dpi}" if "png" in output.formats else "")
        console.print(f"report: mpvlab report {root}{opts}")
    else:
        from mpvlab.reporting import ReportFolderError, build_report
        t = time.monotonic()
        try:
            rep = build_report(root, root / "report", output=output,
                               include_warned=args.include_warned)
        except ReportFolderError as e:      # the runs are made; only the report's folder is in the way
            console.print(Text(f"report not built: {e}", style="red"))
            return 1
        console.print(f"report of {rep.n_complete} complete run(s) in {rep.n_configs} configuration(s) "
                      f"({time.monotonic() - t:.1f} s): {rep.html}")
    return None
