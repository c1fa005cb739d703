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
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import multiprocessing as mp
import os
import queue
import re
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mpvlab import results
from mpvlab.scenario import NAME_RE, Scenario, ScenarioError, dump_yaml, load_scenario, override, resolved_dict

MANIFEST = "sweep.json"
MANIFEST_FORMAT = 1
HEADER_TAG = "# mpvlab-sweep: "
DOTTED_RE = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z0-9_-]+)*")
# Fields a sweep may not vary: `name` decides where results go (the report groups by it) and `seed`
# is derived per run.
RESERVED = ("name", "seed")
STATES = ("planned", "running", "complete", "failed", "interrupted")


class SweepError(Exception):
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

    trials: int | None = Field(None, ge=1, le=1000)
    overrides: dict[str, Any] = {}
    grid: dict[str, list[Any]] = {}

    @field_validator("overrides")
    @classmethod
    def _ov(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_params(v, "quick.overrides")

    @field_validator("grid")
    @classmethod
    def _gr(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return _check_grid(v)


class SweepSpec(_Strict):
    name: str = Field(pattern=NAME_RE)
    description: str = ""
    scenarios: list[str] = Field(min_length=1, description="scenario files, relative to the spec's folder")
    grid: dict[str, list[Any]] = Field({}, description="dotted scenario path → values; the runs are the product")
    overrides: dict[str, Any] = Field({}, description="dotted scenario path → value, applied to every run")
    trials: int = Field(1, ge=1, le=1000)
    base_seed: int = Field(1, ge=0, lt=2**31)
    quick: QuickSpec = QuickSpec()

    @field_validator("overrides")
    @classmethod
    def _ov(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_params(v, "overrides")

    @field_validator("grid")
    @classmethod
    def _gr(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return _check_grid(v)


def _format_spec_error(source: str, err: ValidationError) -> str:
    n = err.error_count()
    lines = [f"{source}: invalid sweep spec ({n} problem{'s' if n > 1 else ''})"]
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            model: type[BaseModel] = QuickSpec if e["loc"][0] == "quick" and len(e["loc"]) > 1 else SweepSpec
            msg = f"unknown key; allowed here: {', '.join(sorted(model.model_fields))}"
        elif e["type"] == "missing":
            msg = "required field is missing"
        lines.append(f"  {where}: {msg}")
    return "\n".join(lines)


def load_spec(path: Path) -> SweepSpec:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise SweepError(f"{path}: cannot read sweep spec: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SweepError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a sweep spec must be a YAML mapping at the top level")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SweepError(_format_spec_error(str(path), e)) from None


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
    base = spec_file.resolve().parent
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
    scenarios: list[tuple[Path, Scenario]] = []
    names: dict[str, Path] = {}
    for i, rel in enumerate(spec.scenarios):
        f = (base / rel).resolve()
        try:
            sc, _ = load_scenario(f)
        except ScenarioError as e:
            raise SweepError(f"{spec_file}: scenarios[{i}]: {e}") from None
        if sc.name in names:
            raise SweepError(f"{spec_file}: scenarios[{i}]: {rel} has the same scenario name {sc.name!r} as "
                             f"{names[sc.name]}; results are grouped by name, so names must differ")
        names[sc.name] = f
        scenarios.append((f, sc))
    runs: list[PlannedRun] = []
    keys = list(grid)
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
            for trial in range(trials):
                seed = derive_seed(spec.base_seed, sc.name, params, trial)
                eff = override(varied, {"seed": seed}, f"{spec_file}: seed")
                sha = hashlib.sha256(dump_yaml(resolved_dict(eff)).encode()).hexdigest()
                runs.append(PlannedRun(f"{cfg}|trial={trial}", cfg, sc.name, f, params, trial, seed, eff, sha))
    return Plan(spec.name + ("-quick" if quick else ""), spec_file.resolve(), quick, trials, spec.base_seed, grid,
                overrides, runs)


# ---------------------------------------------------------------------------------------------
# The manifest


def sweep_dir(results_root: Path, plan: Plan) -> Path:
    return results_root / plan.sweep


def load_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise SweepError(f"{path}: unreadable sweep manifest ({e}); move it away to start the sweep afresh") from None
    if data.get("format") != MANIFEST_FORMAT:
        raise SweepError(f"{path}: manifest format {data.get('format')!r}, this mpvlab writes {MANIFEST_FORMAT}")
    return data


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def merge_manifest(plan: Plan, old: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest for this plan, keeping the state of runs an earlier invocation recorded.

    A recorded run whose effective scenario differs from the plan's (the base scenario file or the
    spec changed) is an error if it completed — mixing two setups under one key would corrupt the
    statistics — and is simply replanned otherwise."""
    old_runs = {r["key"]: r for r in (old or {}).get("runs", [])}
    changed = [k for k, r in old_runs.items()
               if r.get("state") == "complete" and any(p.key == k and p.scenario_sha256 != r.get("scenario_sha256")
                                                       for p in plan.runs)]
    if changed:
        raise SweepError(
            f"sweep {plan.sweep}: {len(changed)} completed run(s) were made with a different scenario than the spec "
            f"now gives (e.g. {changed[0]}): a base scenario file or the spec changed. Use a new sweep name or "
            f"--results DIR so the two setups are not mixed.")
    runs = []
    for p in plan.runs:
        entry = {"key": p.key, "config": p.config, "scenario": p.scenario_name, "scenario_file": str(p.scenario_file),
                 "params": p.params, "trial": p.trial, "seed": p.seed, "scenario_sha256": p.scenario_sha256,
                 "state": "planned", "run_dir": None, "reason": "", "attempts": []}
        prev = old_runs.pop(p.key, None)
        if prev is not None:
            for k in ("state", "run_dir", "reason", "attempts", "fidelity_ok", "wall_s", "pid"):
                if k in prev:
                    entry[k] = prev[k]
            if prev.get("scenario_sha256") != p.scenario_sha256:
                entry["state"], entry["run_dir"] = "planned", None
        runs.append(entry)
    return {"format": MANIFEST_FORMAT, "sweep": plan.sweep, "spec_file": str(plan.spec_file), "quick": plan.quick,
            "trials": plan.trials, "base_seed": plan.base_seed, "grid": plan.grid, "overrides": plan.overrides,
            "seed_rule": "sha256(json([base_seed, scenario, sorted(grid values), trial]))[:8] mod (2^31-1) + 1",
            "created": (old or {}).get("created", _now()), "updated": _now(), "runs": runs,
            # runs of an earlier version of the spec that this plan no longer contains: kept, not run
            "retired_runs": [*(old or {}).get("retired_runs", []), *old_runs.values()]}


def select(manifest: dict[str, Any], sweep_root: Path, retry_failed: bool) -> tuple[list[str], dict[str, int]]:
    """Keys of the runs to do now, in plan order, and counts of what is skipped and why."""
    todo: list[str] = []
    skipped = {"complete": 0, "failed": 0}
    for r in manifest["runs"]:
        state = r["state"]
        if state == "complete":
            status = results.read_status(sweep_root / r["run_dir"]) if r.get("run_dir") else None
            if status and status.get("state") == "complete":
                skipped["complete"] += 1
                continue
            r["state"], r["reason"] = "planned", "result directory missing or no longer complete; redone"
        elif state == "failed" and not retry_failed:
            skipped["failed"] += 1
            continue
        todo.append(r["key"])
    return todo, skipped


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie or a recycled pid of something else is not our run
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def find_run_dir(results_root: Path, scenario_name: str, token: str) -> Path | None:
    """The result directory whose scenario.yaml carries this attempt's token (runner API gives no
    run dir when a run fails)."""
    parent = results_root / scenario_name
    if not parent.is_dir():
        return None
    needle = f'"token": "{token}"'
    for d in sorted(parent.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            with (d / "scenario.yaml").open() as f:
                head = f.read(4096)
        except OSError:
            continue
        if needle in head:
            return d
    return None


def read_header(scenario_text: str) -> dict[str, Any] | None:
    """The `# mpvlab-sweep:` header of a run's scenario.yaml, or None for a run not made by a sweep."""
    for line in scenario_text.splitlines()[:5]:
        if line.startswith(HEADER_TAG):
            try:
                data: dict[str, Any] = json.loads(line[len(HEADER_TAG):])
                return data
            except ValueError:
                return None
    return None


# ---------------------------------------------------------------------------------------------
# Executing runs


class RunFn(Protocol):
    """How one run is made: the real one is `real_runner`; tests inject fakes. Returns the complete
    run dir; raises on failure (after leaving a failed run dir, like the runner does)."""

    def __call__(self, scenario: Scenario, scenario_file: Path, scenario_text: str, results_root: Path,
                 progress: Callable[[str], None], log: Callable[[str], None]) -> Path: ...


def real_runner(scenario: Scenario, scenario_file: Path, scenario_text: str, results_root: Path,
                progress: Callable[[str], None], log: Callable[[str], None]) -> Path:
    from mpvlab.runner import RunOptions, run_scenario
    return run_scenario(scenario, scenario_file, scenario_text,
                        RunOptions(results_root=results_root, progress=progress, log=log))


@dataclass
class Event:
    """What the sweep tells its display: kind ∈ start | phase | log | end | note."""

    kind: str
    key: str = ""
    text: str = ""
    entry: dict[str, Any] | None = None


@dataclass
class Outcome:
    state: str                  # complete | failed | interrupted
    run_dir: Path | None
    reason: str = ""


def _classify(exc: BaseException) -> tuple[str, str]:
    reason = str(exc).split("\n  results kept")[0] or type(exc).__name__
    if isinstance(exc, KeyboardInterrupt) or "interrupted" in reason.split(":", 1)[-1][:60]:
        return "interrupted", reason or "interrupted"
    return "failed", reason


def _child_main(runner: RunFn, job: dict[str, Any], q: Any) -> None:
    """Entry of a run's own process (spawned, so it is its process's main thread)."""
    key = job["key"]

    def progress(phase: str) -> None:
        q.put(("phase", key, phase))

    def log(msg: str) -> None:
        q.put(("log", key, msg))

    try:
        run_dir = runner(job["scenario"], job["scenario_file"], job["text"], job["results_root"], progress, log)
        q.put(("end", key, "complete", str(run_dir), ""))
    except BaseException as e:  # noqa: BLE001 — the parent must always learn how the run ended
        state, reason = _classify(e)
        q.put(("end", key, state, "", reason))


@dataclass
class _Active:
    key: str
    token: str
    started: float
    process: mp.process.BaseProcess | None = None
    outcome: Outcome | None = None
    phase: str = "starting"


@dataclass
class Sweeper:
    """Runs a plan against its manifest. `isolate=False` runs in this process, one at a time (tests
    with fake runners); otherwise every run gets its own spawned process, `parallel` at once."""

    plan: Plan
    results_root: Path
    runner: RunFn = real_runner
    parallel: int = 1
    retry_failed: bool = False
    isolate: bool = True
    on_event: Callable[[Event], None] = lambda _e: None
    kill_grace_s: float = 120.0
    manifest: dict[str, Any] = field(default_factory=dict)
    todo: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    _stop: str = ""

    @property
    def root(self) -> Path:
        return sweep_dir(self.results_root, self.plan)

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def _entry(self, key: str) -> dict[str, Any]:
        return next(r for r in self.manifest["runs"] if r["key"] == key)

    def save(self) -> None:
        self.manifest["updated"] = _now()
        counts = {s: 0 for s in STATES}
        for r in self.manifest["runs"]:
            counts[r["state"]] += 1
        self.manifest["counts"] = counts
        results.write_json(self.manifest_path, self.manifest)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".sweep.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                raise SweepError(f"sweep {self.plan.sweep} is already running in {self.root} "
                                 f"(pid {lock.read().strip() or '?'})") from None
            lock.seek(0)
            lock.truncate()
            lock.write(str(os.getpid()))
            lock.flush()
            yield

    def prepare(self) -> None:
        """Merge the manifest, settle runs an earlier (killed) sweep left `running`, pick the todo list."""
        self.manifest = merge_manifest(self.plan, load_manifest(self.manifest_path))
        for r in self.manifest["runs"]:
            if r["state"] != "running":
                continue
            if _pid_alive(r.get("pid")) and r.get("pid") != os.getpid():
                raise SweepError(f"run {r['key']} of sweep {self.plan.sweep} is still being made by pid {r['pid']} "
                                 "(a sweep that was killed left it); wait for it or end it, then resume")
            last = r["attempts"][-1] if r["attempts"] else None
            found = find_run_dir(self.results_root / self.plan.sweep, r["scenario"], last["token"]) if last else None
            status = results.read_status(found) if found else None
            if found and status and status.get("state") == "complete":
                self._record(r, last, Outcome("complete", found), time.time())
            else:
                self._record(r, last, Outcome("interrupted", found, "the sweep stopped while this run was going"),
                             time.time())
        self.todo, self.skipped = select(self.manifest, self.root, self.retry_failed)
        self.save()

    def _record(self, entry: dict[str, Any], attempt: dict[str, Any] | None, out: Outcome, t_end: float) -> None:
        rel = os.path.relpath(out.run_dir, self.root) if out.run_dir else None
        entry.update(state=out.state, run_dir=rel, reason=out.reason)
        entry.pop("pid", None)
        if attempt is not None:
            attempt.update(state=out.state, run_dir=rel, reason=out.reason, ended=_now(),
                           wall_s=round(t_end - attempt.get("t_start", t_end), 2))
            entry["wall_s"] = attempt["wall_s"]
        if out.state == "complete" and out.run_dir is not None:
            try:
                s = json.loads((out.run_dir / "summary.json").read_text())
                entry["fidelity_ok"] = s.get("fidelity_ok")
                entry["run_id"] = s.get("run_id")
            except (OSError, ValueError):
                pass

    def run(self) -> dict[str, int]:
        """Do the todo runs. Returns counts by final state of the whole manifest."""
        with self._locked():
            self.prepare()
            self.on_event(Event("note", text=f"{len(self.todo)} to run, {self.skipped['complete']} already "
                                              f"complete, {self.skipped['failed']} failed earlier (skipped"
                                              f"{'' if self.retry_failed else '; --retry-failed redoes them'})"))
            if self.isolate:
                self._run_processes()
            else:
                self._run_inline()
            self.save()
        return dict(self.manifest["counts"])

    def _begin(self, key: str) -> tuple[dict[str, Any], PlannedRun, str, str]:
        entry = self._entry(key)
        planned = next(p for p in self.plan.runs if p.key == key)
        token = secrets.token_hex(6)
        entry["attempts"].append({"token": token, "started": _now(), "t_start": time.time(), "state": "running"})
        entry.update(state="running", reason="")
        return entry, planned, token, planned.text(self.plan.sweep, token)

    def _finish(self, key: str, token: str, out: Outcome) -> None:
        entry = self._entry(key)
        if out.run_dir is None:
            out.run_dir = find_run_dir(self.results_root / self.plan.sweep, entry["scenario"], token)
        if self._stop and out.state == "failed":
            out.state = "interrupted"       # a run that failed because the sweep was stopped is redone on resume
        attempt = next(a for a in entry["attempts"] if a["token"] == token)
        self._record(entry, attempt, out, time.time())
        self.save()
        self.on_event(Event("end", key, out.state, entry))

    def _run_inline(self) -> None:
        for key in self.todo:
            entry, planned, token, text = self._begin(key)
            self.save()
            self.on_event(Event("start", key, entry=entry))
            try:
                run_dir = self.runner(planned.scenario, planned.scenario_file, text, self.root,
                                      lambda ph, k=key: self.on_event(Event("phase", k, ph)),
                                      lambda m, k=key: self.on_event(Event("log", k, m)))
                out = Outcome("complete", Path(run_dir))
            except KeyboardInterrupt:
                self._stop = "interrupted (Ctrl-C)"
                self._finish(key, token, Outcome("interrupted", None, self._stop))
                raise
            except Exception as e:  # noqa: BLE001 — a run's failure is recorded, the sweep goes on
                out = Outcome(*_classify_outcome(e))
            self._finish(key, token, out)

    def _run_processes(self) -> None:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        pending = list(self.todo)
        active: dict[str, _Active] = {}

        def on_term(signum: int, _frame: Any) -> None:
            # SIGTERM/SIGHUP: stop starting runs; ask our runs to stop with SIGINT, which their runner
            # turns into a clean teardown (and ignores during that teardown).
            if not self._stop:
                self._stop = f"interrupted by {signal.Signals(signum).name}"
                for a in active.values():
                    if a.process is not None and a.process.pid and a.process.is_alive():
                        os.kill(a.process.pid, signal.SIGINT)

        old = {s: signal.signal(s, on_term) for s in (signal.SIGTERM, signal.SIGHUP)}
        stop_deadline: float | None = None
        try:
            while pending or active:
                try:
                    while pending and len(active) < self.parallel and not self._stop:
                        key = pending.pop(0)
                        entry, planned, token, text = self._begin(key)
                        job = {"key": key, "scenario": planned.scenario, "scenario_file": planned.scenario_file,
                               "text": text, "results_root": self.root}
                        p = ctx.Process(target=_child_main, args=(self.runner, job, q), name=f"mpvlab-sweep-{key}")
                        p.start()
                        entry["pid"] = p.pid
                        active[key] = _Active(key, token, time.monotonic(), p)
                        self.save()
                        self.on_event(Event("start", key, entry=entry))
                    self._pump(q, active, timeout=0.25)
                    if self._stop:
                        pending.clear()
                        stop_deadline = stop_deadline or time.monotonic() + self.kill_grace_s
                        if time.monotonic() > stop_deadline:
                            for a in active.values():
                                if a.process is not None and a.process.is_alive():
                                    a.process.kill()  # its ledger lets the next run clean up after it
                except KeyboardInterrupt:
                    # Ctrl-C reached our runs too (same process group): let them tear down, then record.
                    self._stop = self._stop or "interrupted (Ctrl-C)"
                    self.on_event(Event("note", text="interrupted: waiting for running runs to clean up"))
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        if self._stop:
            raise KeyboardInterrupt(self._stop)

    def _pump(self, q: Any, active: dict[str, _Active], timeout: float) -> None:
        """Handle messages from the runs; retire runs whose process ended."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            kind, key = msg[0], msg[1]
            a = active.get(key)
            if a is None:
                continue
            if kind == "phase":
                a.phase = msg[2]
                self.on_event(Event("phase", key, msg[2]))
            elif kind == "log":
                self.on_event(Event("log", key, msg[2]))
            elif kind == "end":
                a.outcome = Outcome(msg[2], Path(msg[3]) if msg[3] else None, msg[4])
        for key, a in list(active.items()):
            assert a.process is not None
            if a.process.is_alive():
                continue
            a.process.join()
            if a.outcome is None:   # its last message may still be in the pipe
                with contextlib.suppress(queue.Empty):
                    while True:
                        msg = q.get(timeout=0.5)
                        if msg[0] == "end" and msg[1] in active:
                            active[msg[1]].outcome = Outcome(msg[2], Path(msg[3]) if msg[3] else None, msg[4])
            out = a.outcome or Outcome("failed", None, f"run process exited with code {a.process.exitcode} "
                                                       "without reporting (see the run's logs/)")
            del active[key]
            self._finish(key, a.token, out)


def _classify_outcome(e: BaseException) -> tuple[str, Path | None, str]:
    state, reason = _classify(e)
    return state, None, reason


def run_keys_by_state(manifest: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {s: [] for s in STATES}
    for r in manifest["runs"]:
        out[r["state"]].append(r["key"])
    return out


def estimate_run_s(scenario: Scenario) -> float:
    """Before any run has finished: video length plus the platform's fixed cost per run (topology,
    probes and lead-in, teardown — ~15 s measured here)."""
    probe = scenario.fidelity.probe_duration / 1e9 + 4.0 if scenario.fidelity.probe else 2.0
    return scenario.video.duration / 1e9 + probe + 8.0
