"""Collect run directories and aggregate their headline metrics per configuration.

Works from result directories alone (another machine, no kernel needed): every folder below the
given one that holds a `status.json` is a run. Only runs whose status is `complete` and that have a
`summary.json` are aggregated; every other one is listed with its state and reason.

A *configuration* is scenario name × congestion control × scheduler × every other resolved scenario
field that differs between the runs of that scenario (read from each run's `resolved.yaml`, so a grid
value, a hand edit of the scenario file or a `--quick` override each make their own configuration;
the seed, name and description never do). Runs of one configuration are its trials.
"""

from __future__ import annotations

from collections import defaultdict

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from mpvlab.core.errors import InputError
from mpvlab.results import metrics
from mpvlab.input.files import InputFileError, load_result_json, load_result_yaml
from mpvlab.results.metrics import MetricDef
from mpvlab.cc import registry as cc_registry
from mpvlab.schedulers import registry as scheduler_registry
from mpvlab.results.stats import CONFIDENCE, Summary, seed_for, summarise
from mpvlab.results.summary_parts.base import nonfinite_value
from mpvlab.core.rundir import read_header

# The metrics (key, label, unit, range, interval, test, views) are declared once, on the summary model's
# fields (mpvlab/results/summary.py); mpvlab/results/metrics.py collects them. Read there at each call, not copied here.
# Resolved fields that never define a configuration (or are named explicitly in it).
IDENTITY_FIELDS = {"name", "description", "seed", "transport.cc", "transport.scheduler"}


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = json.dumps(d, sort_keys=True) if isinstance(d, list) else d
    return out


def _read_json(p: Path) -> dict[str, Any] | None:
    """A run's JSON file if it is a readable object within the limits (mpvlab/input/files.py), else None."""
    try:
        return _read_json_or_say(p)
    except InputError:
        return None


def _read_json_or_say(p: Path) -> dict[str, Any]:
    data = load_result_json(p)
    if not isinstance(data, dict):
        raise InputFileError(f"{p.name}: a {type(data).__name__}, not a JSON object")
    return data


@dataclass
class Run:
    run_dir: Path
    rel: str                      # relative to the report's source dir
    summary: dict[str, Any]
    resolved: dict[str, Any]      # flattened
    provenance: dict[str, Any]
    sweep: dict[str, Any] | None  # the `# mpvlab-sweep:` header, if a sweep made it
    metrics: dict[str, float | None] = field(default_factory=dict)
    config: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scenario(self) -> str:
        return str(self.summary.get("scenario") or self.resolved.get("name") or "?")

    @property
    def cc(self) -> str:
        return str(self.summary.get("cc") or self.resolved.get("transport.cc") or "?")

    @property
    def scheduler(self) -> str:
        return str(self.summary.get("scheduler") or self.resolved.get("transport.scheduler") or "?")

    @property
    def run_id(self) -> str:
        return str(self.summary.get("run_id") or self.run_dir.name)

    @property
    def paths(self) -> list[str]:
        return list((self.summary.get("paths") or {}).keys())

    @property
    def warnings(self) -> list[str]:
        return [*(self.summary.get("fidelity_warnings") or []), *(self.summary.get("warnings") or []),
                *(f"sampler: {e}" for e in self.summary.get("sampler_errors") or [])]


@dataclass
class NotAggregated:
    rel: str
    state: str
    reason: str


@dataclass
class LeftOut:
    """A complete run kept out of every statistic and figure (its fidelity_ok is false), and why."""

    run: Run
    config: str                   # its configuration's label
    reason: str                   # its fidelity findings, in words

    @property
    def rel(self) -> str:
        return self.run.rel


@dataclass
class Config:
    key: str
    scenario: str
    cc: str
    scheduler: str
    extra: dict[str, Any]
    runs: list[Run]
    stats: dict[str, Summary] = field(default_factory=dict)
    left_out: list[LeftOut] = field(default_factory=list)

    @property
    def label(self) -> str:
        parts = [self.scenario, self.cc, self.scheduler, *(f"{k}={v}" for k, v in self.extra.items())]
        return " · ".join(parts)

    @property
    def extra_label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.extra.items())

    def representative(self) -> Run:
        """The trial closest to the configuration's median picture discards, then underflows, then path
        switches (ties: lowest run id) — a typical run, not the best or the worst."""
        meds: dict[str, float] = {}
        for m in ("picture_discards", "underflows", "path_switches"):
            vals = [v for r in self.runs if (v := r.metrics.get(m)) is not None]
            meds[m] = statistics.median(vals) if vals else math.nan

        def dist(r: Run) -> tuple[float, ...]:
            out = []
            for m, med in meds.items():
                v = r.metrics.get(m)
                out.append(abs(v - med) if v is not None and not math.isnan(med) else math.inf)
            return tuple(out)
        return min(self.runs, key=lambda r: (*dist(r), r.run_id))


@dataclass
class Collection:
    source: Path
    runs: list[Run]
    not_aggregated: list[NotAggregated]
    configs: list[Config]
    metric_info: dict[str, tuple[str, str]]   # key → (label, unit)
    metric_defs: dict[str, MetricDef] = field(default_factory=dict)   # key → definition (per path too)
    confidence: float = CONFIDENCE
    # complete runs with fidelity_ok false, out of every statistic and figure (unless include_warned);
    # per configuration in Config.left_out, and here too for configurations with no run kept
    left_out: list[LeftOut] = field(default_factory=list)
    include_warned: bool = False

    def kept_and_left_out(self) -> list[tuple[str, int, int, list[str]]]:
        """Per configuration (label): runs kept, runs left out, and why (each left-out run's reason)."""
        rows: dict[str, tuple[int, list[LeftOut]]] = {cfg.label: (len(cfg.runs), []) for cfg in self.configs}
        for lo in self.left_out:
            rows.setdefault(lo.config, (0, []))[1].append(lo)
        return [(label, kept, len(los), [f"{lo.rel}: {lo.reason}" for lo in los]) for label, (kept, los) in rows.items()]


def find_run_dirs(source: Path, exclude: Iterable[Path] = ()) -> list[Path]:
    excl = [e.resolve() for e in exclude]
    out = []
    for st in source.rglob("status.json"):
        d = st.parent
        rd = d.resolve()
        if any(rd == e or rd.is_relative_to(e) for e in excl):
            continue
        out.append(d)
    return sorted(out)


def load_run(d: Path, source: Path) -> Run | NotAggregated:
    """One run folder; a folder that cannot be read as a run (a crash, a full disk, a crafted file) is a
    row of `not_aggregated` with the reason, never the end of the report (issue 33)."""
    rel = str(d.relative_to(source)) if d != source else d.name
    try:
        return _load_run(d, rel)
    except InputError as e:
        return NotAggregated(rel, "unreadable", _short(str(e), d))
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as e:
        # a field of the wrong type or shape in a file that parsed (only the platform writes these files)
        return NotAggregated(rel, "unreadable", f"unexpected content ({type(e).__name__}: {str(e)[:160]})")


def _short(message: str, d: Path) -> str:
    """The reason without the run folder's path (the row names the run already)."""
    return message.replace(f"{d}/", "")


def _load_run(d: Path, rel: str) -> Run | NotAggregated:
    try:
        status = _read_json_or_say(d / "status.json")
    except InputError as e:
        return NotAggregated(rel, "unreadable", f"status.json missing or not JSON: {_short(str(e), d)}")
    if status.get("state") != "complete":
        return NotAggregated(rel, str(status.get("state"))[:40], str(status.get("reason") or "")[:2000])
    try:
        summary = _read_json_or_say(d / "summary.json")
    except InputError as e:
        return NotAggregated(rel, "complete-without-summary",
                             f"status says complete but summary.json is unreadable: {_short(str(e), d)}")
    where = nonfinite_value(summary)
    if where is not None:
        # JSON has no NaN or Infinity; Python's json reads them anyway, and a run's metric read as NaN
        # became "missing" while Infinity entered the statistics: such a summary is not a complete run.
        return NotAggregated(rel, "invalid-summary",
                             f"summary.json holds {where[1]} at {where[0]}: not a number a run measures")
    resolved_path = d / "resolved.yaml"
    raw = load_result_yaml(resolved_path) if resolved_path.exists() or resolved_path.is_symlink() else {}
    if raw is not None and not isinstance(raw, dict):
        raise InputFileError(f"resolved.yaml: a {type(raw).__name__}, not a mapping")
    resolved = flatten(raw or {})
    header = None
    try:
        with (d / "scenario.yaml").open() as f:
            head = f.read(4096)
        header = read_header(head)
    except (OSError, UnicodeDecodeError, RecursionError):
        pass
    if not isinstance(header, dict):
        header = None
    prov = _read_json(d / "provenance.json") or {}
    run = Run(d, rel, summary, resolved, prov, header)
    run.metrics = run_metrics(summary)
    # Everything the grouping reads, read once here: a wrong type fails this run, not the report.
    for key in (run.scenario, run.cc, run.scheduler, run.run_id, *run.paths, *run.warnings):
        if not isinstance(key, str):
            raise TypeError(f"summary.json: {key!r} is not text")
    return run


def run_metrics(s: dict[str, Any]) -> dict[str, float | None]:
    def num(v: Any) -> float | None:
        if isinstance(v, bool):
            return 1.0 if v else 0.0
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
            return float(v)
        return None
    def get(key: str) -> Any:
        v: Any = s
        for part in key.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        return v
    def checked(m: MetricDef, v: float | None) -> float | None:
        return None if v is None else m.check(v)      # e.g. the stall ratio clamped at 0 (older runs)
    out = {m.key: checked(m, num(get(m.key))) for m in metrics.METRICS}
    # runs made before the summary split picture discards by cause: the network's part from the two counts
    total, cpu_late = out.get("picture_discards"), out.get("picture_discards_no_underflow")
    if "picture_discards_network" in out and out["picture_discards_network"] is None \
            and total is not None and cpu_late is not None:
        out["picture_discards_network"] = total - cpu_late
    for pname, pv in (s.get("paths") or {}).items():
        for m in metrics.PATH_METRICS:
            out[f"paths.{pname}.{m.key}"] = checked(m, num((pv or {}).get(m.key)))
    return out


def _config_extras(runs: list[Run]) -> dict[str, list[str]]:
    """Per scenario: the resolved fields whose values differ among its runs of one congestion control
    and scheduler. Fields that differ only *between* CCs or schedulers (each scheduler's own resolved
    parameters) follow from the CC/scheduler and would only clutter the configuration's name."""
    groups: dict[tuple[str, str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.scenario, r.cc, r.scheduler), []).append(r)
    out: dict[str, set[str]] = {}
    for (name, _, _), rs in groups.items():
        keys = {k for r in rs for k in r.resolved} - IDENTITY_FIELDS
        out.setdefault(name, set()).update(
            k for k in keys if len({json.dumps(r.resolved.get(k), default=str) for r in rs}) > 1)
    return {name: sorted(keys) for name, keys in out.items()}


def left_out_reason(run: Run) -> str | None:
    """Why a complete run stays out of the statistics by default (its fidelity_ok is false), else None."""
    if run.summary.get("fidelity_ok") is not False:
        return None
    found = [str(w) for w in run.summary.get("fidelity_warnings") or []]
    return "fidelity_ok false: " + ("; ".join(found)[:600] if found else "(no finding recorded)")


def aggregate(source: Path, exclude: Iterable[Path] = (), stats: bool = True,
              include_warned: bool = False) -> Collection:
    """The runs below `source` grouped into configurations; `stats=False` skips the per-configuration
    statistics (mpvlab.results.load, which needs only the grouping). A run whose fidelity_ok is false
    is kept out of its configuration's runs (and so of every statistic and figure) and listed in
    `left_out` with why, unless `include_warned`. Configurations are named from every complete run, so
    a run's configuration is the same either way."""
    runs: list[Run] = []
    bad: list[NotAggregated] = []
    for d in find_run_dirs(source, exclude):
        r = load_run(d, source)
        (runs if isinstance(r, Run) else bad).append(r)  # type: ignore[arg-type]
    runs = drop_duplicate_sweep_runs(runs, bad)     # a sweep's run complete in two roots counts once
    extras = _config_extras(runs)
    configs: dict[str, Config] = {}
    for r in runs:
        r.extra = {k: r.resolved.get(k) for k in extras.get(r.scenario, [])}
        key = "|".join([r.scenario, r.cc, r.scheduler, *(f"{k}={v}" for k, v in r.extra.items())])
        r.config = key
        if key not in configs:
            configs[key] = Config(key, r.scenario, r.cc, r.scheduler, r.extra, [])
        configs[key].runs.append(r)
    defs = {m.key: m for m in metrics.METRICS}
    for r in runs:
        for p in r.paths:
            for m in metrics.PATH_METRICS:
                defs.setdefault(f"paths.{p}.{m.key}", metrics.path_metric(p, m))
    info = {k: (m.label, m.unit) for k, m in defs.items()}
    left_out: list[LeftOut] = []
    for c in configs.values():
        c.runs.sort(key=lambda r: ((r.sweep or {}).get("trial", 0), r.run_id))
        if not include_warned:
            c.left_out = [LeftOut(r, c.label, why) for r in c.runs if (why := left_out_reason(r)) is not None]
            c.runs = [r for r in c.runs if left_out_reason(r) is None]
            left_out += c.left_out
    ordered = sorted((c for c in configs.values() if c.runs),
                     key=lambda c: (c.scenario, c.extra_label, cc_order(c.cc), sched_order(c.scheduler)))
    kept = [r for r in runs if left_out_reason(r) is None] if not include_warned else runs
    out = Collection(source, kept, bad, ordered, info, metric_defs=defs, left_out=left_out,
                     include_warned=include_warned)
    if stats:
        summarise_configs(out)
    return out


def summarise_configs(c: Collection) -> Collection:
    """Every configuration's statistics, per metric (what aggregate computes unless stats=False). Apart
    so the report can hand the loaded runs to its figure workers before the bootstrap (issue 36)."""
    for cfg in c.configs:
        for k, m in c.metric_defs.items():
            cfg.stats[k] = summarise((r.metrics.get(k) for r in cfg.runs), m, seed=seed_for(cfg.key, k))
    return c


# Congestion controls and schedulers in their registries' order (the order the report's style table
# takes too, mpvlab/reporting/style.py); unknown ones after, by name.
def cc_order(cc: str) -> tuple[int, str]:
    return _registry_order([e.name for e in cc_registry.ENTRIES], cc)


def sched_order(s: str) -> tuple[int, str]:
    return _registry_order([e.name for e in scheduler_registry.ENTRIES], s)


def _registry_order(names: list[str], name: str) -> tuple[int, str]:
    return (names.index(name) if name in names else len(names), name)


def drop_duplicate_sweep_runs(runs: list[Run], bad: list[NotAggregated]) -> list[Run]:
    """Keep one complete run per (sweep, run key) — the latest; list the others in `bad` as duplicates."""
    # Same sweep, run key and effective scenario (seed included): the same run made twice.
    groups: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    keep: list[Run] = []
    for r in runs:
        if r.sweep and r.sweep.get("key"):
            groups[(str(r.sweep.get("sweep")), str(r.sweep["key"]),
                    json.dumps(r.resolved, sort_keys=True, default=str))].append(r)
        else:
            keep.append(r)
    for (sweep, key, _), rs in groups.items():
        rs.sort(key=lambda r: (r.run_dir / "status.json").stat().st_mtime)
        keep.append(rs[-1])
        for r in rs[:-1]:
            bad.append(NotAggregated(r.rel, "duplicate", f"sweep {sweep} run {key} is complete again in "
                                                         f"{rs[-1].rel}; that one is counted"))
    order = {id(r): i for i, r in enumerate(runs)}
    return sorted(keep, key=lambda r: order[id(r)])
