"""The `mpvlab` command: validate, run, prepare, shell, plot, cleanup, sweep, report."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.text import Text

from mpvlab.core.paths import checkout_root
from mpvlab.core.rundir import results_root_problem
# The scenario's models (pydantic, ~0.2 CPU-s to build), the ledger and rich's live display are
# imported by the commands that use them, so `mpvlab --version` does not pay for them (issue 36).
# default_parallel: re-exported, the tests reach it as mpvlab.cli.default_parallel.
from mpvlab.runner.context import CPUS_PER_RUN, MAX_PARALLEL, default_parallel  # noqa: F401

if TYPE_CHECKING:
    from mpvlab.reporting.output import Output


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    from mpvlab.input.validation import validate_file   # issue 15: scenario or sweep spec, all the run's checks

    bad = 0
    for f in args.files:
        verdict = validate_file(Path(f), Path(args.key_dir) if args.key_dir else None)
        console.print(Text(verdict.text, style="" if verdict.ok else "red"))
        bad += not verdict.ok
    # 2, as `mpvlab run` and `mpvlab sweep` exit on input they refuse (docs/results.md: exit codes)
    return 2 if bad else 0


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from rich.live import Live

    from mpvlab.core.errors import EXIT_INTERRUPTED, RunFailed, RunInterrupted, RunNotStarted
    from mpvlab.input.scenario import ScenarioError, load_scenario
    from mpvlab.core.errors import InputError
    from mpvlab.input.limits import key_file_problems
    from mpvlab.runner import system_parts

    path = Path(args.scenario)
    try:
        sc, text = load_scenario(path)
        problems = key_file_problems(sc, Path(args.key_dir) if args.key_dir else None)  # issue 15: before any run
        if problems:
            raise ScenarioError("\n".join([f"{path}: invalid scenario", *(f"  {p}" for p in problems)]))
    except InputError as e:
        console.print(Text(str(e), style="red"))
        return 2
    if os.geteuid() != 0:   # said before anything is created (the result folder included)
        console.print(Text("mpvlab run needs root (network namespaces, tc, iptables, BPF)", style="red"))
        return 2
    if (missing := system_parts.problem("run")) is not None:   # e.g. after `pip install .` alone
        console.print(Text(missing, style="red"))
        return 2
    if (bad_root := results_root_problem(Path(args.results))) is not None:   # before any ledger or namespace
        console.print(Text(bad_root, style="red"))
        return 2
    from mpvlab.runner.context import RunOptions
    from mpvlab.runner.session import run_scenario   # after the check above: it imports Mininet's modules
    start = time.monotonic()
    state = {"phase": "starting"}
    status = Text()

    def render() -> Text:
        return Text.assemble(("mpvlab run ", "bold"), (f"{sc.name} ", "cyan"),
                             f"[{time.monotonic() - start:6.1f} s] ", (state["phase"], "yellow"))

    with Live(render(), console=console, refresh_per_second=4, transient=not console.is_terminal) as live:
        def progress(phase: str) -> None:
            if phase.split(" (")[0] != state["phase"].split(" (")[0] and not console.is_terminal:
                console.print(f"[{time.monotonic() - start:6.1f} s] {phase}")
            state["phase"] = phase
            live.update(render())

        def log(msg: str) -> None:
            console.print(Text(msg, style="magenta"))

        try:
            run_dir = run_scenario(sc, path, text, RunOptions(results_root=Path(args.results), progress=progress,
                                                              log=log, key_dir=Path(args.key_dir) if args.key_dir
                                                              else None))
        except RunInterrupted as e:
            live.update(status)
            console.print(Text(str(e), style="yellow"))
            return EXIT_INTERRUPTED
        except RunNotStarted as e:    # nothing was started: exit 2, as for a refused input (README)
            live.update(status)
            console.print(Text(str(e), style="red"))
            return 2
        except RunFailed as e:
            live.update(status)
            console.print(Text(str(e), style="red"))
            return 1
        except KeyboardInterrupt:
            # Ctrl-C before the run had its ledger (reaping, the run id): nothing of it to clean.
            live.update(status)
            console.print(Text("interrupted before the run started; nothing was created", style="yellow"))
            return EXIT_INTERRUPTED
    _print_summary(console, run_dir)
    return 0


def _print_summary(console: Console, run_dir: Path) -> None:
    import json
    s = json.loads((run_dir / "summary.json").read_text())
    console.print(f"[green]complete[/green]: {run_dir}")
    for line in summary_lines(s):
        console.print(line)


def summary_lines(s: dict[str, Any]) -> list[str]:
    """The console's summary of a run: the topology kind's lines around the workload's (each from
    its registry entry: mpvlab/topologies/registry.py, mpvlab/workloads/), then any fidelity warnings."""
    from mpvlab.topologies import registry as topologies
    from mpvlab.workloads import registry as workloads

    kind, work = topologies.get(s["topology"]), workloads.get(s.get("workload") or workloads.VIDEO.name)
    lines = kind.console_lines(s, work.console_lines(s, kind.several_clients))
    return lines + warning_lines(s)


def warning_lines(s: dict[str, Any]) -> list[str]:
    """Every warning of the run, one line each with its reason (mpvlab/results/checks.py all_warnings),
    under a count; a run with fidelity_ok false is left out of the report's statistics by default."""
    from rich.markup import escape

    from mpvlab.results.checks import all_warnings
    found = all_warnings(s)
    if not found:
        return []
    left_out = " (fidelity_ok is false: `mpvlab report` leaves this run out unless --include-warned)" \
        if s.get("fidelity_ok") is False else ""
    return [f"[yellow]  {len(found)} warning(s){left_out}:[/yellow]", *(f"[yellow]  - {escape(w)}[/yellow]" for w in found)]


def _prepare_targets(f: str, quick: bool) -> list[Any]:
    """The scenarios whose video `mpvlab prepare F` makes: F's own, or, for a sweep spec (a mapping
    with `scenarios:`), every planned run's (the --quick variant's with quick). Raises InputError."""
    from mpvlab.input import files as inputs
    from mpvlab.input.scenario import load_scenario
    from mpvlab.input.sweep import expand, load_spec

    # read under the sweep spec's limit (the larger); a scenario is then read again under its own
    data, _ = inputs.load_yaml_file(Path(f), "sweep spec")
    if isinstance(data, dict) and "scenarios" in data:
        return [r.scenario for r in expand(load_spec(Path(f)), Path(f), quick=quick).runs]
    return [load_scenario(Path(f))[0]]


def cmd_prepare(args: argparse.Namespace, console: Console) -> int:
    """Generate (or find cached) the video each scenario needs, so a run never waits on an encode.
    A sweep spec prepares the video of every run it plans."""
    from mpvlab.content import DashInfo
    from mpvlab.core.errors import InputError
    from mpvlab.runner.steps import ensure_content

    seen: set[str] = set()
    for f in args.files:
        try:
            scenarios = _prepare_targets(f, args.quick)
        except InputError as e:
            console.print(Text(str(e), style="red"))
            return 2
        for sc in scenarios:
            if not sc.workload_kind.plays_video_section:
                console.print(f"{f}: nothing to prepare (workload {sc.workload_kind.name} plays no video file)")
                continue
            key = sc.video.model_dump_json()
            if key in seen:
                continue
            seen.add(key)
            t = time.monotonic()
            info = ensure_content(sc)
            how = "cached" if info.cached else f"encoded in {time.monotonic() - t:.1f} s"
            if isinstance(info, DashInfo):
                console.print(f"{f}: DASH {info.dir.name} ({info.total_bytes / 1e6:.1f} MB, "
                              f"{len(info.bitrates_bps)} levels, {info.n_segments} segments, {how})")
            else:
                console.print(f"{f}: {info.path.name} ({info.size_bytes / 1e6:.1f} MB, {info.frames} frames, {how})")
    return 0


def cmd_shell(args: argparse.Namespace, console: Console) -> int:
    """The scenario's network, up, in Mininet's CLI (mpvlab/runner/shell.py)."""
    import os

    from mpvlab.input.scenario import ScenarioError, load_scenario
    from mpvlab.runner import system_parts

    if os.geteuid() != 0:
        console.print(Text("mpvlab shell needs root (network namespaces, tc, iptables)", style="red"))
        return 2
    if (missing := system_parts.problem("shell")) is not None:
        console.print(Text(missing, style="red"))
        return 2
    from mpvlab.runner.shell import open_shell   # after the check: it imports Mininet's modules
    path = Path(args.scenario)
    try:
        sc, text = load_scenario(path)
    except ScenarioError as e:
        console.print(Text(str(e), style="red"))
        return 2
    refusal = sc.topology_kind.shell_refusal()
    if refusal is not None:
        console.print(Text(f"{path}: {refusal}", style="red"))
        return 2
    commands = None
    if args.commands:
        from mpvlab.input.files import InputFileError, read_shell_commands
        try:      # before anything is built: untrusted input, like every file (issue 45)
            commands = read_shell_commands(Path(args.commands))
        except InputFileError as e:
            console.print(Text(str(e), style="red"))
            return 2
    open_shell(sc, path, text, commands=commands, log=lambda m: console.print(m))
    return 0


def cmd_plot(args: argparse.Namespace, console: Console) -> int:
    from mpvlab.reporting.plots import plot_run

    run_dir = Path(args.run_dir)
    if not (run_dir / "summary.json").exists():
        console.print(Text(f"{run_dir}: not a complete run directory (no summary.json)", style="red"))
        return 2
    import json

    from mpvlab.topologies import registry as topologies
    kind = topologies.REGISTRY.get(json.loads((run_dir / "summary.json").read_text()).get("topology") or "")
    refusal = kind.plot_refusal() if kind is not None else None
    if refusal is not None:
        console.print(Text(f"{run_dir}: {refusal}", style="red"))
        return 2
    console.print(f"wrote {plot_run(run_dir)}")
    return 0


def cmd_cleanup(_args: argparse.Namespace, console: Console) -> int:
    import os

    from mpvlab.core import ledger
    if os.geteuid() != 0:
        console.print(Text("mpvlab cleanup needs root (it removes network namespaces, qdiscs and BPF objects of "
                           "dead runs)", style="red"))
        return 2
    try:
        removed = ledger.reap_stale(lambda m: console.print(m), by="`mpvlab cleanup`")
    except ledger.LedgerError as e:
        console.print(Text(str(e), style="red"))
        return 1
    console.print(f"removed {len(removed)} leftover object(s) of dead runs" if removed else "nothing to clean")
    return 0


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    """Expand a sweep spec into runs and make them (resumable; see mpvlab/sweeps/)."""
    from mpvlab.sweeps import SweepError, expand, load_spec

    try:
        plan = expand(load_spec(Path(args.spec)), Path(args.spec), quick=args.quick)
    except SweepError as e:
        console.print(Text(str(e), style="red"))
        return 2
    if (output := _report_output(args, console)) is None:      # before any run: not after hours of runs
        return 2
    from mpvlab.sweeps import commands as cluster
    if args.list_runs:
        return cluster.cmd_list_runs(plan, args)
    if args.status:
        return cluster.cmd_status(plan, args, console)
    if args.run is not None:
        if (bad_root := results_root_problem(Path(args.results))) is not None:   # before the run starts
            console.print(Text(bad_root, style="red"))
            return 2
        return cluster.cmd_run(plan, args, console)
    return cluster.cmd_make(plan, args, console, output)


def _report_output(args: argparse.Namespace, console: Console) -> Output | None:
    """The report's figure formats and PNG dpi from --formats / --png-dpi, or None (the error printed)."""
    from mpvlab.core.errors import InputError
    from mpvlab.reporting.output import output_choice
    try:
        return output_choice(args.formats, args.png_dpi)
    except InputError as e:
        console.print(Text(str(e), style="red"))
        return None


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from mpvlab.reporting import ReportFolderError, build_report

    src = Path(args.results_dir)
    if not src.is_dir():
        console.print(Text(f"{src}: no such results directory", style="red"))
        return 2
    if (output := _report_output(args, console)) is None:
        return 2
    out = Path(args.out) if args.out else src / "report"
    t = time.monotonic()
    try:
        rep = build_report(src, out, output=output, include_warned=args.include_warned)
    except ReportFolderError as e:
        console.print(Text(str(e), style="red"))
        return 2
    console.print(f"report of {rep.n_complete} complete run(s) in {rep.n_configs} configuration(s), "
                  f"{rep.n_failed} failed/incomplete run(s) listed, in {time.monotonic() - t:.1f} s")
    if rep.collection.left_out:
        console.print(Text(f"  {len(rep.collection.left_out)} complete run(s) with fidelity_ok false left out of every "
                           "statistic and figure (listed in the report; --include-warned keeps them)", style="yellow"))
    console.print(f"  {rep.html}")
    for f in rep.tables:
        console.print(f"  {f}")
    if args.screenshot:
        from mpvlab.reporting import browser
        try:
            shot = browser.screenshot(rep.html, rep.html.with_suffix(".png"))
        except browser.BrowserError as e:
            console.print(Text(f"screenshot: {e}", style="red"))
            return 1
        console.print(f"  {shot} (headless chromium, {browser.ink_fraction(shot):.1%} of the top 3000 px inked)")
    return 0 if rep.n_complete else 1


def _add_report_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--formats", default="svg,pdf", metavar="LIST",
                   help="the report's figure files: a comma list of svg, pdf, png holding svg (report.html inlines "
                        "the SVG); default svg,pdf (PNG is the dearest to render: add it for slides or a README)")
    p.add_argument("--png-dpi", type=int, default=None, metavar="DPI",
                   help="the PNG figures' resolution, 72..600 (default 300); only with png in --formats")


class _VersionAction(argparse.Action):
    """--version: asks git only when given (argparse's own "version" action would build the string, two
    git calls, on every command)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from mpvlab.version import describe
        print(describe())
        parser.exit(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mpvlab", description="MPTCP video streaming evaluation platform")
    ap.add_argument("--version", action=_VersionAction,
                    help="print the version and the git commit of this checkout, and exit")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="check scenario files or sweep specs as run/sweep would (touches nothing)")
    v.add_argument("files", nargs="+")
    v.add_argument("--key-dir", help="topology physical: the key folder the run would use (as for run)")
    r = sub.add_parser("run", help="run one scenario end to end (root)")
    r.add_argument("scenario")
    r.add_argument("--results", default=str(checkout_root() / "results"),
                   help="results root (default: ./results)")
    r.add_argument("--key-dir", help="topology physical: the only folder SSH identity/known_hosts files may be "
                                     "in (default: $MPVLAB_KEY_DIR or /etc/mpvlab/keys)")
    pr = sub.add_parser("prepare", help="generate the video content scenarios (or every run of a sweep spec) "
                                        "need (cached)")
    pr.add_argument("files", nargs="+", help="scenario files or sweep specs")
    pr.add_argument("--quick", action="store_true", help="a sweep spec's short variant (quick: block)")
    sh = sub.add_parser("shell", help="bring a scenario's network up and open Mininet's CLI on it (root)")
    sh.add_argument("scenario")
    sh.add_argument("--commands", help="run the Mininet CLI commands in this file instead of interactively")
    pl = sub.add_parser("plot", help="cwnd and throughput per path over time for one run (RUN_DIR/plots/)")
    pl.add_argument("run_dir")
    sub.add_parser("cleanup", help="remove what killed runs left behind (only runs whose runner is dead)")
    sw = sub.add_parser("sweep", help="run a sweep spec: scenarios × parameter grid × trials (root; resumable)")
    sw.add_argument("spec")
    sw.add_argument("--quick", action="store_true", help="the spec's short variant (quick: block), for CI")
    sw.add_argument("--results", default=str(checkout_root() / "results"),
                    help="results root; the sweep writes <results>/<sweep-name>/ (default: ./results)")
    sw.add_argument("--parallel", type=int, default=None,
                    help=f"runs at once, 1..{MAX_PARALLEL} (default: one per {CPUS_PER_RUN} CPUs of this machine, at least 1)")
    sw.add_argument("--retry-failed", action="store_true", help="redo runs that failed in an earlier invocation")
    sw.add_argument("--dry-run", action="store_true", help="list the planned runs and seeds, run nothing")
    sw.add_argument("--no-report", action="store_true", help="do not build RESULTS/<sweep>/report/ at the end")
    sw.add_argument("--include-warned", action="store_true",
                    help="the report at the end keeps runs whose fidelity_ok is false (as `mpvlab report --include-warned`)")
    sw.add_argument("--executor", choices=("local", "slurm"), default="local",
                    help="local: make the runs here (default); slurm: submit them as one Slurm job array and return")
    sw.add_argument("--partition", help="slurm: the partition to submit to (default: the site's)")
    sw.add_argument("--time", help="slurm: time limit per array task (sbatch --time, e.g. 30:00)")
    sw.add_argument("--nodes-exclusive", action=argparse.BooleanOptionalAction, default=True,
                    help="slurm: a whole node per array task (default; runs are timing-sensitive)")
    sw.add_argument("--per-node", type=int, default=1, help="slurm: runs one array task makes at once on its node")
    sw.add_argument("--status", action="store_true", help="state of every planned run, from the result directories "
                                                          "and the scheduler; changes nothing")
    sw.add_argument("--list-runs", action="store_true", help="print one planned run key per line")
    sw.add_argument("--todo", action="store_true", help="with --list-runs: only the runs a resume would make")
    sw.add_argument("--run", metavar="KEY", help="make exactly this one planned run (resumable; what a Slurm array "
                                                 "task, GNU parallel, HTCondor or Ray calls)")
    sw.add_argument("--results-also", action="append", metavar="DIR",
                    help="another results root holding runs of this sweep (--status and resume read all roots)")
    rp = sub.add_parser("report", help="statistics, tables, figures and an HTML report from result directories")
    rp.add_argument("results_dir")
    rp.add_argument("--out", help="output folder (default: RESULTS_DIR/report)")
    rp.add_argument("--include-warned", action="store_true",
                    help="keep complete runs whose fidelity_ok is false in the statistics and figures (by default "
                         "they are left out, counted per configuration with why)")
    rp.add_argument("--screenshot", action="store_true", help="also render report.png in headless chromium")
    for p in (sw, rp):
        _add_report_output_options(p)
    args = ap.parse_args(argv)
    if getattr(args, "results", None) is not None:
        # a relative results root would reach programs that resolve paths from elsewhere (apache2 -f)
        args.results = str(Path(args.results).absolute())
    console = Console(soft_wrap=True)  # never fold an error message mid-path
    handler = {"validate": cmd_validate, "run": cmd_run, "prepare": cmd_prepare, "shell": cmd_shell,
               "plot": cmd_plot, "cleanup": cmd_cleanup, "sweep": cmd_sweep, "report": cmd_report}[args.cmd]
    return handler(args, console)


def entry() -> NoReturn:
    """The `mpvlab` command (and `python -m mpvlab`). It leaves without the interpreter's teardown of
    the modules a run loads (pandas, numpy, pydantic: ~0.2 s of every run's wall time, issue 16):
    every result file is written and closed by then, and nothing registers exit handlers; only the
    standard streams are still buffered. An exception leaves the ordinary way, with its traceback."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    entry()
