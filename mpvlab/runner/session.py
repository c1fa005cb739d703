"""The session around one run, whatever its topology kind: root check, reaping what dead runs left,
the run id, result directory and ledger, signals turned into a clean teardown, the status file, and
provenance. The kind's own steps run inside it (mpvlab/runner/kinds.py: KINDS)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import traceback

from pathlib import Path
from typing import Any, Iterator

from mpvlab.core import ledger, naming, rundir
from pydantic import ValidationError

from mpvlab.runner import provenance
from mpvlab.results import summary as summary_model

from mpvlab.input.scenario import Scenario, dump_yaml, resolved_dict
from mpvlab.core.errors import Interrupted, RunFailed, RunInterrupted, RunNotStarted
from mpvlab.runner.context import RunContext, RunOptions
from mpvlab.runner import timeline, warmup
from mpvlab.runner.kinds import KINDS





@contextlib.contextmanager
def _signals_as_exceptions() -> Iterator[None]:
    """SIGTERM/SIGHUP become an exception in the main thread so `finally` cleanup runs as for Ctrl-C."""
    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(f"interrupted by {signal.Signals(signum).name}")
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_scenario(scenario: Scenario, scenario_file: Path, scenario_text: str, opts: RunOptions) -> Path:
    """Run once; returns the run directory (state complete). Raises RunFailed after marking it failed."""
    if os.geteuid() != 0:
        raise RunFailed("mpvlab run needs root (network namespaces, tc, iptables, BPF)")
    warmup.start(needed=scenario.transport.cc_entry.state is not None)
    try:
        reaped = ledger.reap_stale(opts.log)
    except ledger.LedgerError as e:
        raise RunFailed(str(e)) from None
    for name in reaped:
        opts.log(f"cleaned leftover of an earlier run: {name}")
    run_id = naming.new_run_id()
    run_dir = opts.results_root / scenario.name / run_id
    # The ledger first: from here on a crash leaves nothing that a later run cannot find and remove.
    try:
        led = ledger.Ledger.create(run_id, run_dir)
    except ledger.LedgerError as e:
        raise RunFailed(str(e)) from None
    ctx = _open_run_dir(scenario, scenario_file, scenario_text, opts, run_id, run_dir, led)
    failure: str | None = None
    interrupted = False     # issue 15 hook: an interrupted run raises RunInterrupted (exit 130)
    try:
        with _signals_as_exceptions():
            summary = KINDS[ctx.scenario.topology.kind](ctx)
    except (KeyboardInterrupt, Interrupted) as e:
        failure = str(e) or "interrupted (Ctrl-C)"
        interrupted = True
    except RunFailed as e:
        failure = str(e)
    except Exception as e:  # noqa: BLE001 — any other error still must leave a marked result dir
        failure = f"{type(e).__name__}: {e}"
        try:
            (ctx.logs / "runner-traceback.txt").write_text(traceback.format_exc())
        except OSError as write_error:  # a full disk: the reason still goes to status.json below
            opts.log(f"could not keep the traceback in {ctx.logs}: {write_error.strerror}")
    finally:
        # Cleanup must not be interrupted by a second Ctrl-C half-way.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            ctx.timeline.mark("ledger_cleanup")
            removed = ledger.cleanup_run(led, opts.log, mark=False, log_removed=False)
            ctx.extra_prov["teardown_leftovers_removed_by_ledger"] = removed
        finally:
            signal.signal(signal.SIGINT, old)
    try:
        _write_provenance(ctx)
        if failure is None:
            try:
                summary_model.validated(summary)
            except ValidationError as e:
                # A bug of ours, never the user's: keep what was measured beside the reason.
                rundir.write_json(run_dir / "summary.invalid.json", summary)
                failure = f"the summary does not match its model (mpvlab/results/summary.py): {e}"
        if failure is None:
            rundir.write_json(run_dir / "summary.json", summary)
            rundir.write_status(run_dir, "complete", fidelity_ok=summary.get("fidelity_ok"))
            return run_dir
    except OSError as e:
        # The results folder filled up (or went away) at the end: the run cannot be trusted complete.
        failure = f"{failure + '; ' if failure else ''}cannot write the results in {run_dir}: {e.strerror or e}"
    try:
        rundir.write_status(run_dir, "failed", reason=failure)
    except OSError as e:
        opts.log(f"could not mark {run_dir} failed ({e.strerror}): its status.json may still say running")
    raise (RunInterrupted if interrupted else RunFailed)(
        f"run {run_id} failed: {failure}\n  results kept for inspection in {run_dir}")


def _open_run_dir(scenario: Scenario, scenario_file: Path, scenario_text: str, opts: RunOptions, run_id: str,
                  run_dir: Path, led: ledger.Ledger) -> RunContext:
    """The run's folder with its status `running` and the scenario as given and as resolved. If any of
    it cannot be written (a full or read-only disk), nothing has been started: the ledger goes, so does
    every folder made here, and the error is RunNotStarted (exit 2)."""
    scenario_dir = opts.results_root / scenario.name
    made = rundir.missing_folders(scenario_dir)     # the results root and its parents too, if missing
    try:
        rundir.make_run_dir(opts.results_root, scenario.name, run_id)
        rundir.write_text(run_dir / "scenario.yaml", scenario_text)
        rundir.write_text(run_dir / "resolved.yaml", dump_yaml(resolved_dict(scenario)))
    except OSError as e:
        ledger.cleanup_run(led, opts.log, mark=False, log_removed=False)
        if run_dir.is_dir() and not run_dir.is_symlink():
            shutil.rmtree(run_dir, ignore_errors=True)
        for d in reversed(made):    # only folders this run made, and only when empty
            with contextlib.suppress(OSError):
                d.rmdir()
        raise RunNotStarted(f"cannot create the result directory {run_dir}: {e.strerror or e} (check --results; "
                            "nothing was started)") from None
    return RunContext(scenario, scenario_file, scenario_text, run_id, run_dir, led, opts)


def _write_provenance(ctx: RunContext) -> None:
    steps = timeline.lifecycle(ctx.timeline)
    prov = provenance.collect(ctx.scenario_file, ctx.scenario.seed, ctx.run_id,
                              {**ctx.extra_prov, "lifecycle_s": steps})
    rundir.write_json(ctx.run_dir / "provenance.json", prov)
