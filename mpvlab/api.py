"""The Python API: what `mpvlab run`, `mpvlab sweep` and `mpvlab report` do, as functions.

    import mpvlab
    r = mpvlab.run("scenarios/smoke.yaml")                 # RunResult
    r.summary["underflows"], r.run_dir
    s = mpvlab.sweep("sweeps/smoke-sweep.yaml", quick=True) # SweepResult (report built at the end)
    rep = mpvlab.report(s.root)                            # Report: html, tables, figures
    df = mpvlab.results.load(s.root).runs                  # pandas

The same checks as the command line, in the same order: the input is validated completely (raising
ScenarioError / SweepError, both core.errors.InputError, with every problem listed) before anything
touches the kernel; a run that fails raises RunFailed (RunInterrupted on Ctrl-C) after its own
cleanup. Runs need root, as on the command line. A sweep makes each run in a spawned process, so a
script calling `mpvlab.sweep` must guard its top level with `if __name__ == "__main__":`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import yaml

from mpvlab.core.errors import InputError, RunFailed

if TYPE_CHECKING:
    from mpvlab.reporting import Report
    from mpvlab.results.tidy import Results



@dataclass(frozen=True)
class RunResult:
    """One complete run: its directory (mpvlab/core/rundir.py layout) and its summary.json, parsed."""
    run_dir: Path
    run_id: str
    summary: dict[str, Any]

    def results(self) -> Results:
        """The run's tables as DataFrames (mpvlab.results.load on this run directory)."""
        from mpvlab.results.tidy import load
        return load(self.run_dir)


@dataclass(frozen=True)
class SweepResult:
    """A sweep after `mpvlab.sweep`: where it is, how its runs ended, and its report if built."""
    root: Path
    manifest: Path
    counts: dict[str, int]       # runs by final state: complete, failed, …
    n_planned: int
    report: Report | None

    @property
    def ok(self) -> bool:
        """Every planned run complete (what makes `mpvlab sweep` exit 0)."""
        return self.counts.get("complete", 0) == self.n_planned and not self.counts.get("failed", 0)

    def results(self) -> Results:
        from mpvlab.results.tidy import load
        return load(self.root)


def _default_results() -> Path:
    from mpvlab.runner.context import DEFAULT_RESULTS
    return DEFAULT_RESULTS


def _results_root(results: str | Path | None, where: str) -> Path:
    from mpvlab.core.rundir import results_root_problem
    from mpvlab.input.apiargs import path_arg
    root = path_arg(results, f"{where}: results", optional=True) or _default_results()
    if (problem := results_root_problem(root)) is not None:
        raise InputError(problem)
    return root


def _scenario_source(scenario: str | Path | dict[str, Any]) -> tuple[Any, Path, str]:
    """(validated Scenario, the file it counts as coming from, its text as stored with the run).

    A dict is checked exactly as a file would be: it is written as YAML to a private temporary file
    and read back through load_scenario (size limit, strict YAML, every limit). Relative trace paths
    in a dict are found from the current directory, so the run records `<cwd>/<name>.yaml` as its
    scenario file (a name, not a file that exists afterwards)."""
    from mpvlab.input.scenario import ScenarioError, load_scenario

    from mpvlab.input.apiargs import check_scenario_dict, path_arg

    if isinstance(scenario, dict):
        check_scenario_dict(scenario)     # the limits of a file, before YAML is written (issue 45)
        text = yaml.safe_dump(scenario, sort_keys=False)
        with tempfile.TemporaryDirectory(prefix="mpvlab-api-") as tmp:
            probe = Path(tmp) / "scenario.yaml"
            probe.write_text(text)
            try:
                sc, text = load_scenario(probe)
            except ScenarioError as e:
                raise ScenarioError(str(e).replace(str(probe), "<scenario dict>")) from None
        from mpvlab.input.limits import file_problems
        as_file = Path.cwd() / f"{sc.name}.yaml"
        if problems := file_problems(sc, as_file):     # trace files, found from the current directory
            raise ScenarioError("\n".join(["<scenario dict>: invalid scenario", *(f"  {p}" for p in problems)]))
        return sc, as_file, text
    path = path_arg(scenario, "mpvlab.run: scenario (a path or a dict)")
    assert path is not None
    sc, text = load_scenario(path)
    return sc, path, text


def run(scenario: str | Path | dict[str, Any], results: str | Path | None = None, *,
        key_dir: str | Path | None = None, progress: Callable[[str], None] | None = None,
        log: Callable[[str], None] | None = None) -> RunResult:
    """Run one scenario end to end, as `mpvlab run SCENARIO --results RESULTS` (root).

    scenario: a scenario file, or the same content as a dict. results: the results root (default
    ./results of the checkout); the run directory is RESULTS/<scenario name>/<run id>/.
    progress/log: called with each phase name / each message the command line would print."""
    from mpvlab.input.limits import key_file_problems
    from mpvlab.runner.context import RunOptions
    from mpvlab.runner.session import run_scenario
    from mpvlab.input.apiargs import path_arg
    from mpvlab.input.scenario import ScenarioError

    sc, path, text = _scenario_source(scenario)
    keys = path_arg(key_dir, "mpvlab.run: key_dir", optional=True)
    for name, fn in (("progress", progress), ("log", log)):
        if fn is not None and not callable(fn):
            raise InputError(f"mpvlab.run: {name}: a {type(fn).__name__} given; allowed: a function of one str, or None")
    if problems := key_file_problems(sc, keys):
        raise ScenarioError("\n".join([f"{path}: invalid scenario", *(f"  {p}" for p in problems)]))
    if os.geteuid() != 0:      # before the result folder is created, as on the command line
        raise RunFailed("mpvlab.run needs root (network namespaces, tc, iptables, BPF)")
    root = _results_root(results, "mpvlab.run")
    run_dir = run_scenario(sc, path, text, RunOptions(results_root=root, progress=progress or (lambda _p: None),
                                                      log=log or (lambda _m: None), key_dir=keys))
    return RunResult(run_dir, run_dir.name, json.loads((run_dir / "summary.json").read_text()))


def sweep(spec: str | Path, results: str | Path | None = None, *, quick: bool = False,
          parallel: int | None = None, retry_failed: bool = False, report: bool = True,
          formats: str | Sequence[str] = "svg,pdf", png_dpi: int | None = None) -> SweepResult:
    """Make (or resume) every run of a sweep spec, as `mpvlab sweep SPEC` (root), then build its report
    (figure files: formats and png_dpi as in report() below, checked before the first run).

    parallel: runs at once, 1..8 (default: one per 2 CPUs, as the command line). The call returns
    when every run has ended; failed runs are in `counts` and the manifest, not raised."""
    from mpvlab.reporting.output import output_choice
    from mpvlab.runner.context import MAX_PARALLEL, default_parallel
    from mpvlab.runner.steps import ensure_contents
    from mpvlab.input.apiargs import path_arg
    from mpvlab.sweeps import Sweeper, expand, load_spec

    output = output_choice(formats, png_dpi, formats_name="mpvlab.sweep: formats", dpi_name="mpvlab.sweep: png_dpi")
    path = path_arg(spec, "mpvlab.sweep: spec")
    assert path is not None
    for name, flag in (("quick", quick), ("retry_failed", retry_failed), ("report", report)):
        if not isinstance(flag, bool):
            raise InputError(f"mpvlab.sweep: {name}: a {type(flag).__name__} given; allowed: True or False")
    plan = expand(load_spec(path), path, quick=quick)
    if parallel is None:
        parallel = default_parallel(os.cpu_count() or 1)
    elif isinstance(parallel, bool) or not isinstance(parallel, int) or not 1 <= parallel <= MAX_PARALLEL:
        raise InputError(f"mpvlab.sweep: parallel={parallel}: allowed 1..{MAX_PARALLEL}")
    if os.geteuid() != 0:
        raise RunFailed("mpvlab.sweep needs root (each run builds network namespaces, tc, BPF)")
    root = _results_root(results, "mpvlab.sweep")
    ensure_contents(r.scenario for r in plan.runs)      # as the command line
    sweeper = Sweeper(plan, root, parallel=parallel, retry_failed=retry_failed)
    counts = sweeper.run()
    rep = None
    if report and counts.get("complete"):
        from mpvlab.reporting import build_report
        rep = build_report(sweeper.root, sweeper.root / "report", output=output)
    return SweepResult(sweeper.root, sweeper.manifest_path, counts, len(plan.runs), rep)


def report(source: str | Path, out: str | Path | None = None, *, title: str | None = None,
           figures: bool = True, formats: str | Sequence[str] = "svg,pdf", png_dpi: int | None = None,
           include_warned: bool = False) -> Report:
    """Statistics, tables, figures and report.html from result directories, as `mpvlab report SOURCE`.
    out: default SOURCE/report. formats: the figure files, a comma list (or sequence) of svg, pdf, png
    holding svg, as `--formats`; png_dpi: 72..600 (default 300), as `--png-dpi`, only with png among the
    formats (else an error). include_warned: keep runs whose fidelity_ok is false in the statistics and
    figures, as `--include-warned`. Needs no root: it reads result directories only."""
    from mpvlab.input.apiargs import path_arg
    from mpvlab.reporting import build_report
    from mpvlab.reporting.output import output_choice

    output = output_choice(formats, png_dpi, formats_name="mpvlab.report: formats", dpi_name="mpvlab.report: png_dpi")
    src = path_arg(source, "mpvlab.report: source")
    assert src is not None
    dest = path_arg(out, "mpvlab.report: out", optional=True) or src / "report"
    if title is not None and not isinstance(title, str):
        raise InputError(f"mpvlab.report: title: a {type(title).__name__} given; allowed: text or None")
    if not isinstance(figures, bool):
        raise InputError(f"mpvlab.report: figures: a {type(figures).__name__} given; allowed: True or False")
    if not isinstance(include_warned, bool):
        raise InputError(f"mpvlab.report: include_warned: a {type(include_warned).__name__} given; "
                         "allowed: True or False")
    if not src.is_dir():
        raise InputError(f"{src}: no such results directory")
    return build_report(src, dest, title=title, figures=figures, output=output, include_warned=include_warned)
