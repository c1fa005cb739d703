"""A sweep spec (YAML, validated as strictly as a scenario) and its expansion into planned runs.

The spec names scenario files, a grid of dotted scenario parameters → value lists, a number of trials
and a base seed. It expands into one planned run per scenario × grid point × trial, each with a seed
derived from (base seed, scenario, grid values, trial) by SHA-256 — the same spec always gives the
same seeds, and adding a grid value never changes the seeds of the other runs. Every effective
scenario is validated before anything runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mpvlab.input.scenario import NAME_RE, Scenario, ScenarioError, dump_yaml, load_scenario, override, resolved_dict
from mpvlab.core.errors import InputError
from mpvlab.core.rundir import HEADER_TAG
from mpvlab.input import files as inputs, limits, messages  # issue 15: safe loading, run limit, messages in words

# A `*` segment stands for every key of the mapping at that level, so one named axis can vary the
# same field of every path (e.g. `paths.*.down.buffer`: the study's bottleneck depth on each path).
DOTTED_RE = re.compile(r"[a-z_][a-z0-9_]*(\.([a-z0-9_-]+|\*))*")
# Fields a sweep may not vary: `name` decides where results go (the report groups by it) and `seed`
# is derived per run.
RESERVED = ("name", "seed")


class SweepError(InputError):
    """A sweep that cannot run as specified; str() is the user-facing explanation."""


# ---------------------------------------------------------------------------------------------
# The spec


def _check_params(v: dict[str, Any], what: str) -> dict[str, Any]:
    for k in v:
        if not DOTTED_RE.fullmatch(k):
            raise ValueError(f"{what} key {k!r} is not a dotted scenario path (e.g. transport.cc)")
        if k.split(".")[0] in RESERVED:
            raise ValueError(f"{what} key {k!r}: {k.split('.')[0]!r} cannot be varied by a sweep "
                             "(name decides the results folder; seed is derived per run from base_seed)")
    return v


def _check_grid(v: dict[str, list[Any]]) -> dict[str, list[Any]]:
    _check_params(v, "grid")
    for k, values in v.items():
        if not values:
            raise ValueError(f"grid {k}: needs at least one value")
        canon = [json.dumps(x, sort_keys=True, default=str) for x in values]
        if len(set(canon)) != len(canon):
            raise ValueError(f"grid {k}: duplicate values {values}")
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QuickSpec(_Strict):
    """`--quick`: a short variant (CI). Its overrides are applied after the sweep's, its grid entries
    replace the sweep's dimension of the same name, and `trials` replaces the trial count."""

    trials: int | None = Field(None, ge=1, le=1000, description="Trials per grid point under --quick; null = the sweep's trials.")
    overrides: dict[str, Any] = Field({}, description="dotted scenario path → value, applied after the sweep's overrides.")
    grid: dict[str, list[Any]] = Field({}, description="dotted scenario path → values, replacing the sweep's dimension of that name.")

    @field_validator("overrides")
    @classmethod
    def _ov(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_params(v, "quick.overrides")

    @field_validator("grid")
    @classmethod
    def _gr(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return _check_grid(v)


class SweepSpec(_Strict):
    name: str = Field(pattern=NAME_RE, description="Sweep name; names its results folder (with -quick under --quick).")
    description: str = Field("", description="Free text for people; the sweep does not read it.")
    scenarios: list[str] = Field(min_length=1, description="scenario files, relative to the spec's folder")
    grid: dict[str, list[Any]] = Field({}, description="dotted scenario path → values; the runs are the product")
    overrides: dict[str, Any] = Field({}, description="dotted scenario path → value, applied to every run")
    trials: int = Field(1, ge=1, le=1000, description="Runs per grid point, each with its own derived seed.")
    base_seed: int = Field(1, ge=0, lt=2**31, description="Each run's seed is derived from this, the scenario name, its grid values and the trial.")
    quick: QuickSpec = Field(QuickSpec(), description="The short variant run by `--quick` (CI).")

    @field_validator("overrides")
    @classmethod
    def _ov(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_params(v, "overrides")

    @field_validator("grid")
    @classmethod
    def _gr(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return _check_grid(v)


def load_spec(path: Path) -> SweepSpec:
    try:
        data, _ = inputs.load_yaml_file(path, "sweep spec")
    except inputs.InputFileError as e:
        raise SweepError(str(e)) from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a sweep spec must be a YAML mapping at the top level")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SweepError(messages.describe(str(path), "sweep spec", e, SweepSpec)) from None


# ---------------------------------------------------------------------------------------------
# Expansion into planned runs


def _fmt_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


def config_key(scenario_name: str, params: dict[str, Any]) -> str:
    """`wifi-lte-a|transport.cc=bbr|transport.scheduler=default` — grid order as in the spec."""
    return "|".join([scenario_name, *(f"{k}={_fmt_value(v)}" for k, v in params.items())])


def derive_seed(base_seed: int, scenario_name: str, params: dict[str, Any], trial: int) -> int:
    """A seed in [1, 2^31) from SHA-256 of (base seed, scenario, grid values sorted by key, trial)."""
    material = json.dumps([base_seed, scenario_name, sorted(params.items()), trial], sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "big") % (2**31 - 1) + 1


@dataclass(frozen=True)
class PlannedRun:
    key: str                    # config key + "|trial=N": unique within the sweep
    config: str
    scenario_name: str
    scenario_file: Path         # the base scenario (trace files are found next to it)
    params: dict[str, Any]      # this run's grid values
    trial: int
    seed: int
    scenario: Scenario          # effective: overrides, grid values and seed applied, re-validated
    scenario_sha256: str        # of the effective resolved scenario — detects a changed base file on resume

    def text(self, sweep: str, token: str) -> str:
        """The effective scenario as the run's scenario.yaml, with the sweep header."""
        header = {"sweep": sweep, "key": self.key, "config": self.config, "trial": self.trial, "seed": self.seed,
                  "params": self.params, "base_scenario": str(self.scenario_file), "token": token}
        return (f"# Effective scenario written by `mpvlab sweep {sweep}`: {self.scenario_file.name} with every "
                f"override applied.\n{HEADER_TAG}{json.dumps(header, default=str)}\n"
                + dump_yaml(resolved_dict(self.scenario)))


@dataclass(frozen=True)
class Plan:
    sweep: str                  # the sweep's name (with "-quick" in quick mode: its own manifest)
    spec_file: Path
    quick: bool
    trials: int
    base_seed: int
    grid: dict[str, list[Any]]
    overrides: dict[str, Any]
    runs: list[PlannedRun]

    @property
    def configs(self) -> list[str]:
        return list(dict.fromkeys(r.config for r in self.runs))


def expand(spec: SweepSpec, spec_file: Path, quick: bool = False) -> Plan:
    """Every scenario × grid point × trial, validated now — a bad value fails before any run starts."""
    grid = dict(spec.grid)
    overrides = dict(spec.overrides)
    trials = spec.trials
    if quick:
        grid.update(spec.quick.grid)
        overrides.update(spec.quick.overrides)
        trials = spec.quick.trials or trials
    clash = sorted(set(grid) & set(overrides))
    if clash:
        raise SweepError(f"{spec_file}: {', '.join(clash)} both in grid and overrides — pick one")
    if (too_many := limits.sweep_size_problem(len(spec.scenarios), grid, trials)) is not None:
        raise SweepError(f"{spec_file}: {too_many}")
    scenarios: list[tuple[Path, Scenario]] = []
    names: dict[str, Path] = {}
    for i, rel in enumerate(spec.scenarios):
        f, refused = limits.sweep_scenario_problem(spec_file, rel)
        if refused is not None:
            raise SweepError(f"{spec_file}: scenarios[{i}]: {refused}")
        try:
            sc, _ = load_scenario(f, quote=False)
        except ScenarioError as e:
            raise SweepError(f"{spec_file}: scenarios[{i}]: {e}") from None
        if sc.name in names:
            raise SweepError(f"{spec_file}: scenarios[{i}]: {rel} has the same scenario name {sc.name!r} as "
                             f"{names[sc.name]}; results are grouped by name, so names must differ")
        names[sc.name] = f
        scenarios.append((f, sc))
    runs: list[PlannedRun] = []
    keys = list(grid)
    traces: dict[Path, list[str]] = {}
    for f, sc in scenarios:
        try:
            base_sc = override(sc, overrides, f"{spec_file}: overrides applied to {f.name}") if overrides else sc
        except ScenarioError as e:
            raise SweepError(str(e)) from None
        for combo in itertools.product(*(grid[k] for k in keys)):
            params = dict(zip(keys, combo))
            cfg = config_key(sc.name, params)
            where = ", ".join(f"grid {k}={_fmt_value(v)!s}" for k, v in params.items()) or "no grid"
            try:
                varied = override(base_sc, params, f"{spec_file}: {where} applied to {f.name}")
            except ScenarioError as e:
                raise SweepError(str(e)) from None
            if problems := limits.file_problems(varied, f, traces):   # trace files as the loader checks them
                raise SweepError("\n".join([f"{spec_file}: {where} applied to {f.name}: invalid scenario",
                                            *(f"  {p}" for p in problems)]))
            for trial in range(trials):
                seed = derive_seed(spec.base_seed, sc.name, params, trial)
                eff = override(varied, {"seed": seed}, f"{spec_file}: seed")
                sha = hashlib.sha256(dump_yaml(resolved_dict(eff)).encode()).hexdigest()
                runs.append(PlannedRun(f"{cfg}|trial={trial}", cfg, sc.name, f, params, trial, seed, eff, sha))
    return Plan(spec.name + ("-quick" if quick else ""), spec_file.resolve(), quick, trials, spec.base_seed, grid,
                overrides, runs)
