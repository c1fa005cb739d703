"""`mpvlab validate FILE…`: each file checked exactly as `mpvlab run` or `mpvlab sweep` would check
it before touching the kernel — a scenario (schema, limits, trace files, key files of physical hosts)
or a sweep spec (recognised by its keys; its scenarios and every grid point and override expanded
and validated) — and a one-line verdict or the full explanation per file. Touches nothing."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mpvlab.core.errors import InputError
from mpvlab.input import files as inputs, limits

# Keys only a sweep spec has (mpvlab/input/sweep.py SweepSpec); a scenario has `paths` instead.
SWEEP_KEYS = frozenset({"scenarios", "grid", "trials", "base_seed", "quick", "overrides"})


@dataclass(frozen=True)
class Verdict:
    ok: bool
    text: str


def looks_like_sweep_spec(data: object) -> bool:
    return isinstance(data, dict) and "paths" not in data and bool(SWEEP_KEYS & set(map(str, data)))


def validate_file(path: Path, key_dir: Path | None = None) -> Verdict:
    try:
        data, _ = inputs.load_yaml_file(path, "scenario")
    except inputs.InputFileError as e:
        return Verdict(False, str(e))
    try:
        if looks_like_sweep_spec(data):
            return _validate_spec(path)
        return _validate_scenario(path, key_dir)
    except InputError as e:
        return Verdict(False, str(e))


def _validate_scenario(path: Path, key_dir: Path | None) -> Verdict:
    from mpvlab.input.scenario import ScenarioError, load_scenario

    sc, _ = load_scenario(path)
    note = ""
    if sc.topology_kind.real_hosts:
        # Key files belong to the machine that runs the scenario: checked when a key folder is given
        # (--key-dir, MPVLAB_KEY_DIR) or this machine has the default one; `mpvlab run` always checks.
        from mpvlab.topologies.physical import key_dir_default
        where = key_dir or key_dir_default()
        if key_dir is not None or os.environ.get("MPVLAB_KEY_DIR") or where.is_dir():
            problems = limits.key_file_problems(sc, where)
            if problems:
                raise ScenarioError("\n".join([f"{path}: invalid scenario ({len(problems)} problem(s))",
                                               *(f"  {p}" for p in problems)]))
            note = f"; key files found in {where}"
        else:
            note = f"; key files not checked: no key folder {where} here (give --key-dir)"
    what = sc.workload_kind.describe(sc)
    return Verdict(True, f"{path}: ok (scenario {sc.name!r}, {len(sc.paths)} paths, {what}{note})")


def _validate_spec(path: Path) -> Verdict:
    from mpvlab.input.sweep import expand, load_spec

    spec = load_spec(path)
    plan = expand(spec, path)
    quick = expand(spec, path, quick=True)
    return Verdict(True, f"{path}: ok (sweep spec {spec.name!r}: {len(plan.runs)} runs in {len(plan.configs)} "
                         f"configuration(s); --quick: {len(quick.runs)} runs), every run's scenario validated")
