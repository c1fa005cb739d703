"""The `mpvlab` command: validate, run, prepare, shell, cleanup."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

from mpvlab import ledger
from mpvlab.scenario import ScenarioError, load_scenario


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    bad = 0
    for f in args.files:
        try:
            sc, _ = load_scenario(Path(f))
        except ScenarioError as e:
            console.print(Text(str(e), style="red"))
            bad += 1
            continue
        console.print(f"{f}: ok (scenario {sc.name!r}, {len(sc.paths)} paths, cc {sc.transport.cc}, "
                      f"scheduler {sc.transport.scheduler}, video {sc.video.duration / 1e9:g} s)")
    return 1 if bad else 0


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from mpvlab.runner import RunFailed, RunOptions, run_scenario

    path = Path(args.scenario)
    try:
        sc, text = load_scenario(path)
    except ScenarioError as e:
        console.print(Text(str(e), style="red"))
        return 2
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
        except RunFailed as e:
            live.update(status)
            console.print(Text(str(e), style="red"))
            return 1
    _print_summary(console, run_dir)
    return 0


def _print_summary(console: Console, run_dir: Path) -> None:
    import json
    s = json.loads((run_dir / "summary.json").read_text())
    console.print(f"[green]complete[/green]: {run_dir}")
    paths = ", ".join(f"{n} {v['rx_bytes'] / 1e6:.2f} MB ({v['share']:.0%})" for n, v in s["paths"].items())
    console.print(f"  bytes per path: {paths}")
    console.print(f"  underflows {s['underflows']} ({s['underflow_total_s']} s), picture discards "
                  f"{s['picture_discards']}, startup {s['startup_delay_s']} s, playback {s['duration_s']} s")
    if s.get("fidelity_warnings"):
        console.print("[yellow]  fidelity warnings:[/yellow] " + "; ".join(s["fidelity_warnings"]))


def cmd_prepare(args: argparse.Namespace, console: Console) -> int:
    """Generate (or find cached) the video each scenario needs, so a run never waits on an encode."""
    from mpvlab.runner import ensure_content

    seen: set[str] = set()
    for f in args.files:
        try:
            sc, _ = load_scenario(Path(f))
        except ScenarioError as e:
            console.print(Text(str(e), style="red"))
            return 2
        key = sc.video.model_dump_json()
        if key in seen:
            continue
        seen.add(key)
        t = time.monotonic()
        info = ensure_content(sc)
        how = "cached" if info.cached else f"encoded in {time.monotonic() - t:.1f} s"
        if hasattr(info, "mpd"):
            console.print(f"{f}: DASH {info.dir.name} ({info.total_bytes / 1e6:.1f} MB, "
                          f"{len(info.bitrates_bps)} levels, {info.n_segments} segments, {how})")
        else:
            console.print(f"{f}: {info.path.name} ({info.size_bytes / 1e6:.1f} MB, {info.frames} frames, {how})")
    return 0


def cmd_shell(args: argparse.Namespace, console: Console) -> int:
    """The scenario's network, up, in Mininet's CLI (mpvlab/shell.py)."""
    import os

    from mpvlab.shell import open_shell

    if os.geteuid() != 0:
        console.print(Text("mpvlab shell needs root (network namespaces, tc, iptables)", style="red"))
        return 2
    path = Path(args.scenario)
    try:
        sc, text = load_scenario(path)
    except ScenarioError as e:
        console.print(Text(str(e), style="red"))
        return 2
    if sc.topology.kind == "physical":
        console.print(Text(f"{path}: topology.kind physical has no emulated network to open a shell on "
                           "(log in to its hosts instead)", style="red"))
        return 2
    commands = Path(args.commands).read_text() if args.commands else None
    open_shell(sc, path, text, commands=commands, log=lambda m: console.print(m))
    return 0


def cmd_plot(args: argparse.Namespace, console: Console) -> int:
    from mpvlab.plots import plot_run

    run_dir = Path(args.run_dir)
    if not (run_dir / "summary.json").exists():
        console.print(Text(f"{run_dir}: not a complete run directory (no summary.json)", style="red"))
        return 2
    console.print(f"wrote {plot_run(run_dir)}")
    return 0


def cmd_cleanup(_args: argparse.Namespace, console: Console) -> int:
    removed = ledger.reap_stale(lambda m: console.print(m))
    console.print(f"removed {len(removed)} leftover object(s) of dead runs" if removed else "nothing to clean")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mpvlab", description="MPTCP video streaming evaluation platform")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="check scenario files against the schema (touches nothing)")
    v.add_argument("files", nargs="+")
    r = sub.add_parser("run", help="run one scenario end to end (root)")
    r.add_argument("scenario")
    r.add_argument("--results", default=str(Path(__file__).resolve().parent.parent / "results"),
                   help="results root (default: ./results)")
    r.add_argument("--key-dir", help="topology physical: the only folder SSH identity/known_hosts files may be "
                                     "in (default: $MPVLAB_KEY_DIR or /etc/mpvlab/keys)")
    pr = sub.add_parser("prepare", help="generate the video content scenarios need (cached)")
    pr.add_argument("files", nargs="+")
    sh = sub.add_parser("shell", help="bring a scenario's network up and open Mininet's CLI on it (root)")
    sh.add_argument("scenario")
    sh.add_argument("--commands", help="run the Mininet CLI commands in this file instead of interactively")
    pl = sub.add_parser("plot", help="cwnd and throughput per path over time for one run (RUN_DIR/plots/)")
    pl.add_argument("run_dir")
    sub.add_parser("cleanup", help="remove what killed runs left behind (only runs whose runner is dead)")
    args = ap.parse_args(argv)
    console = Console(soft_wrap=True)  # never fold an error message mid-path
    handler = {"validate": cmd_validate, "run": cmd_run, "prepare": cmd_prepare, "shell": cmd_shell,
               "plot": cmd_plot, "cleanup": cmd_cleanup}[args.cmd]
    return handler(args, console)


if __name__ == "__main__":
    sys.exit(main())
