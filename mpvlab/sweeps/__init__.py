"""Sweeps: many runs of scenario variations with repeated trials, resumable.

A sweep spec (YAML, validated as strictly as a scenario) names scenario files, a grid of dotted
scenario parameters → value lists, a number of trials and a base seed. It expands into planned runs,
one per scenario × grid point × trial, each with a seed derived from (base seed, scenario, grid
values, trial) by SHA-256 — the same spec always gives the same seeds, and adding a grid value never
changes the seeds of the other runs.

The sweep keeps a manifest, `<results>/<sweep-name>/sweep.json`, rewritten atomically after every
change of state: every planned run with its parameters, trial, seed, state
(planned | running | complete | failed | interrupted), run directory and every attempt. Running the
same sweep again resumes it: complete runs are skipped, interrupted ones are redone, failed ones only
with `retry_failed`. Each run executes in its own process (the runner installs signal handlers, which
only a main thread may do, and a crash of one run must not take the sweep down); `parallel` of them
at once.

Each run's `scenario.yaml` is its *effective* scenario (every override applied, seed set), headed by
a `# mpvlab-sweep: {json}` comment naming the sweep, run key, trial, seed and a per-attempt token —
the token is how the sweep finds the result directory of a run that failed.

Modules: `spec` (the spec file, its validation and expansion into planned runs with seeds),
`manifest` (sweep.json: what was planned, done, failed; resume rules), `execute` (running the runs,
each in its own process), `display` (the progress shown by `mpvlab sweep`).
"""

from __future__ import annotations

from mpvlab.sweeps.execute import Event, Outcome, RunFn, Sweeper, estimate_run_s, real_runner, run_keys_by_state
from mpvlab.core.rundir import HEADER_TAG, read_header
from mpvlab.sweeps.manifest import (
    MANIFEST, MANIFEST_FORMAT, STATES, find_run_dir, load_manifest, merge_manifest, select, sweep_dir,
)
from mpvlab.input.sweep import (
    Plan, PlannedRun, QuickSpec, SweepError, SweepSpec, config_key, derive_seed, expand, load_spec,
)

__all__ = [
    "Event", "HEADER_TAG", "MANIFEST", "MANIFEST_FORMAT", "Outcome", "Plan", "PlannedRun", "QuickSpec", "RunFn",
    "STATES", "SweepError", "SweepSpec", "Sweeper", "config_key", "derive_seed", "estimate_run_s", "expand",
    "find_run_dir", "load_manifest", "load_spec", "merge_manifest", "read_header", "real_runner",
    "run_keys_by_state", "select", "sweep_dir",
]
