"""BBR's model over time (the BBR-S study's central figures), for every CC whose registry entry names
a state series (mpvlab/cc/registry.py `state`: BBR-S, BBRv3, BBRv3-S; kernel BBR's bw and min RTT from `ss`,
whose mode the kernel does not export):

- per configuration's representative run: the bandwidth estimate of each workload flow against the
  path's link rate, and the CC's min RTT, over time;
- per configuration: the share of time per mode — STARTUP, DRAIN, PROBE_BW by sub-phase (v3's
  UP/DOWN/CRUISE/REFILL; v1's from its pacing gain: UP 1.25, DOWN 0.75, CRUISE 1), PROBE_RTT — mean
  over trials with a bootstrap interval (mpvlab/results/stats.py), and the estimate over the link rate;
- the table `bbr_model` (CSV, Parquet): one row per configuration × quantity.

Everything is computed over the workload's flows only, during playback (mpvlab/results/flows.py): the probe,
the loopback check and the preflight request are in the same files and would skew every figure.
The figures are drawn by mpvlab/reporting/bbr_figures.py from the models computed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mpvlab.cc import registry
from mpvlab.core import units
from mpvlab.results import flows
from mpvlab.results.metrics import MetricDef
from mpvlab.reporting.numbers import fmt
from mpvlab.results.aggregate import Collection, Config, Run
from mpvlab.results.stats import Summary, seed_for, summarise
from mpvlab.results.tidy import addr_to_path, t0_ns

# The order modes are shown in (unknown labels after, by name).
STATE_ORDER = ["STARTUP", "DRAIN", "PROBE_BW:UP", "PROBE_BW:DOWN", "PROBE_BW:CRUISE", "PROBE_BW:REFILL",
               "PROBE_BW", "PROBE_RTT"]
SHARE = MetricDef("share of time in mode", "fraction", 0.0, 1.0, "none",
                  "time-weighted share of the workload flows' state rows in the mode, during playback",
                  "mpvlab", interval="bootstrap", test="mannwhitney", key="bbr.mode_share")
RATIO = MetricDef("bandwidth estimate / link rate", "ratio", 0.0, math.inf, "none",
                  "per workload flow, its time-weighted bandwidth estimate over its path's configured down rate; "
                  "mean over the flows weighted by their duration", "mpvlab", interval="bootstrap", test="mannwhitney",
                  key="bbr.bw_est_over_link")
MIN_RTT = MetricDef("min RTT", "ms", 0.0, math.inf, "none",
                    "time-weighted mean of the CC's min RTT over the workload flows", "mpvlab", key="bbr.min_rtt_ms")


PLOT_POINTS = 1500


def state_order(label: str) -> tuple[int, str]:
    return (STATE_ORDER.index(label) if label in STATE_ORDER else len(STATE_ORDER), label)


def state_spec(cc: str) -> Any:
    e = registry.REGISTRY.get(cc)
    return e.state if e is not None and e.bbr_family else None


def link_rates(run: Run) -> dict[str, float]:
    """Path → configured down rate (bit/s) where it is a constant rate."""
    out = {}
    for p in run.paths or [k.split(".")[1] for k in run.resolved if k.startswith("paths.") and k.endswith(".down.rate")]:
        v = run.resolved.get(f"paths.{p}.down.rate")
        try:
            out[p] = float(units.parse_rate(str(v)))
        except (ValueError, TypeError):
            continue
    return out


@dataclass
class RunModel:
    run: Run
    view: flows.StateView
    # per workload flow: its path (from the peer address)
    paths: dict[str, str] = field(default_factory=dict)
    # per workload flow: path and its series (t_s, estimate Mbit/s, min RTT ms); read on demand
    # (series_loaded) — only a configuration's representative run is drawn over time
    series: dict[str, tuple[str, list[float], list[float], list[float]]] = field(default_factory=dict)
    states: dict[str, list[str | None]] = field(default_factory=dict)   # per flow: the mode of each row
    ratio: float | None = None
    series_loaded: bool = False


def _flow_path(flow: str, a2p: dict[str, str], rates: dict[str, float]) -> str:
    peer = str(flow).split("-", 1)[1]
    path = a2p.get(flows.split_endpoint(peer)[0], "?")
    if path == "?" and len(rates) == 1:      # one path (shared bottleneck): every flow takes it
        path = next(iter(rates))
    return path


def _window_end(run: Run, rows: pd.DataFrame | None) -> float:
    """The window the run used for its summary (playback), else the playback duration, else every row."""
    cs = run.summary.get("cc_state") or {}
    recorded = cs.get("playback_window_s") or cs.get("window_s")
    return float(recorded[1] if recorded else run.summary.get("duration_s")
                 or (rows.t_s.max() if rows is not None else 0.0))


def _read_rows(run: Run) -> pd.DataFrame:
    spec = state_spec(run.cc)
    rules = flows.rules_for_run(run.run_dir, run.summary)
    t0 = t0_ns(run.run_dir, "") if spec.time == "t_ns" else None
    return flows.read_state(run.run_dir / "data" / spec.file, spec, rules, t0)


def _activity(run: Run) -> flows.Activity:
    """Which flows of a run summarised before flows were told apart carried the workload (its `ss`
    samples and Apache's log, as the run now records them in `cc_state`)."""
    log = run.run_dir / "logs" / "apache" / "access.log"
    return flows.flow_activity(run.run_dir / "data" / "subflows.csv", flows.rules_for_run(run.run_dir, run.summary),
                               log, flows.mptcp_tokens(run.run_dir / "data"), log.exists())


def summarised_view(run: Run) -> flows.StateView | None:
    """The model the run computed once when it was summarised (summary.json `cc_state`, the same
    state_view over the same rows and window), so a report need not re-read every run's series."""
    cs = run.summary.get("cc_state")
    if not isinstance(cs, dict) or "mode_share_time_weighted" not in cs:
        return None
    try:
        d = dict(cs)
        d["window_s"] = tuple(d["window_s"])
        d["flows"] = [flows.FlowState(**f) for f in d.get("flows") or []]
        return flows.StateView(**d)
    except (TypeError, KeyError, ValueError):
        return None              # a summary from another version: read the series instead


def run_model(run: Run) -> RunModel | None:
    """The CC's model over the run's workload flows during playback; None without a state series.
    From the run's summary where it recorded its model, else from its state series."""
    spec = state_spec(run.cc)
    if spec is None:
        return None
    view, rows = summarised_view(run), None
    if view is None:
        rows = _read_rows(run)
        if rows.empty:
            return None
        view = flows.state_view(rows, f"data/{spec.file}", (0.0, _window_end(run, rows)), None, _activity(run))
    if view.workload_rows == 0 or view.bw_est_bps_mean_per_sample is None:
        return None        # e.g. kernel BBR's ss samples without a bbr:(…) block
    a2p = addr_to_path(run.provenance)
    rates = link_rates(run)
    m = RunModel(run, view)
    m.paths = {f.flow: _flow_path(f.flow, a2p, rates) for f in view.flows if f.role == "workload"}
    # Each carrying flow's time-weighted estimate over its own path's rate, weighted by the flow's time
    # (an idle connection's estimate says nothing of the link).
    pairs = [(f.bw_est_bps_mean_time_weighted / rates[path], f.last_t_s - f.first_t_s)
             for f in view.flows if f.in_shares and f.bw_est_bps_mean_time_weighted is not None
             and (path := m.paths.get(f.flow, "?")) in rates]
    w = math.fsum(p[1] for p in pairs)
    if w > 0:
        m.ratio = math.fsum(r * wt for r, wt in pairs) / w
    elif pairs:
        m.ratio = math.fsum(r for r, _ in pairs) / len(pairs)
    if rows is not None:
        load_series(m, rows)
    return m


def load_series(m: RunModel, rows: pd.DataFrame | None = None) -> RunModel:
    """Fill the run's per-flow series for the over-time figures (read once, on demand)."""
    if m.series_loaded:
        return m
    if rows is None:
        rows = _read_rows(m.run)
    end = _window_end(m.run, rows)
    wl = rows[(rows.role == "workload") & (rows.t_s >= 0.0) & (rows.t_s <= end)].sort_values(["flow", "t_s"])
    for key, g in wl.groupby("flow", sort=False):
        # At most PLOT_POINTS rows per flow in a figure (a 180 s run at 100 Hz has 18,000): evenly
        # spaced rows, so the lines and the mode strip keep their shape and the SVG stays small.
        if len(g) > PLOT_POINTS:
            g = g.iloc[np.unique(np.linspace(0, len(g) - 1, PLOT_POINTS).astype(int))]
        m.states[str(key)] = [None if not isinstance(x, str) else x for x in g.state]
        rtt = g.min_rtt_ms.where(g.min_rtt_ms > 0)
        path = m.paths.get(str(key)) or _flow_path(str(key), addr_to_path(m.run.provenance), link_rates(m.run))
        m.series[str(key)] = (path, g.t_s.tolist(), (g.bw_bps / 1e6).tolist(), rtt.tolist())
    m.series_loaded = True
    return m


@dataclass
class ConfigModel:
    cfg: Config
    runs: list[RunModel]
    shares: dict[str, Summary]
    ratio: Summary
    min_rtt: Summary


def config_models(c: Collection) -> list[ConfigModel]:
    """Per configuration with a BBR-family CC's state: its trials' models and the statistics (computed
    once per Collection: the figures, the table and the page share them)."""
    cached = getattr(c, "_bbr_models", None)
    if cached is not None:
        return cached
    out = []
    for cfg in c.configs:
        ms = [m for r in cfg.runs if (m := run_model(r)) is not None]
        if not ms:
            continue
        labels = sorted({k for m in ms for k in m.view.mode_share_time_weighted}, key=state_order)
        # A mode a run never entered had share 0 there (not missing): every trial counts.
        shares = {s: summarise([m.view.mode_share_time_weighted.get(s, 0.0) for m in ms], SHARE,
                               seed=seed_for(cfg.key, "bbr", s)) for s in labels}
        out.append(ConfigModel(cfg, ms, shares, summarise([m.ratio for m in ms], RATIO, seed=seed_for(cfg.key, "ratio")),
                                summarise([m.view.min_rtt_ms_mean_time_weighted for m in ms], MIN_RTT,
                                          seed=seed_for(cfg.key, "rtt"))))
    # an attribute the Collection does not declare: mpvlab.results knows nothing of the report's cache
    setattr(c, "_bbr_models", out)  # noqa: B010
    return out


def model_frame(models: list[ConfigModel]) -> pd.DataFrame:
    """One row per configuration × quantity: mode shares (`mode_share:<state>`), the estimate over
    the link rate and min RTT, with n, mean, median and the interval (method named)."""
    rows = []
    for cm in models:
        cfg = cm.cfg
        qs = [(f"mode_share:{k}", s) for k, s in cm.shares.items()] + [("bw_est_over_link", cm.ratio),
                                                                        ("min_rtt_ms", cm.min_rtt)]
        for q, s in qs:
            rows.append({"config": cfg.label, "scenario": cfg.scenario, "cc": cfg.cc, "scheduler": cfg.scheduler,
                         "quantity": q, "runs": len(cfg.runs), "n": s.n, "mean": s.mean, "median": s.median,
                         "ci_method": s.method, "ci95_low": s.ci_low, "ci95_high": s.ci_high, "min": s.min,
                         "max": s.max})
    return pd.DataFrame(rows, columns=["config", "scenario", "cc", "scheduler", "quantity", "runs", "n", "mean",
                                       "median", "ci_method", "ci95_low", "ci95_high", "min", "max"])


def group_of(cfg: Config) -> str:
    """The figure a configuration's models are drawn in (one per scenario × extra parameters)."""
    return cfg.scenario + (f" ({cfg.extra_label})" if cfg.extra else "")


def flow_frame(models: list[ConfigModel]) -> pd.DataFrame:
    """One row per run × flow on the workload's port: what it carried (media / page / idle / data), its
    bytes (ss bytes_acked; Apache's requests and bytes), whether it is in the mode shares, and its own
    time-weighted mode shares over the active window and over the whole run (`active:<mode>`,
    `whole_run:<mode>`)."""
    rows = []
    for cm in models:
        for m in cm.runs:
            for f in m.view.flows:
                if f.role != "workload":
                    continue
                rows.append({"config": cm.cfg.label, "run": m.run.rel, "flow": f.flow, "carried": f.carried,
                             "bytes_acked": f.bytes_acked, "http_requests": f.http_requests, "http_bytes": f.http_bytes,
                             "in_shares": f.in_shares, "window": m.view.window,
                             "window_start_s": m.view.window_s[0], "window_end_s": m.view.window_s[1],
                             **{f"active:{k}": v for k, v in f.mode_share_active_time_weighted.items()},
                             **{f"whole_run:{k}": v for k, v in f.mode_share_whole_run_time_weighted.items()}})
    return pd.DataFrame(rows, columns=None if rows else FLOW_COLUMNS)


FLOW_COLUMNS = ["config", "run", "flow", "carried", "bytes_acked", "http_requests", "http_bytes", "in_shares", "window",
                "window_start_s", "window_end_s"]


def _size(b: float) -> str:
    return f"{b / 1e6:.1f} MB" if b >= 1e6 else f"{b / 1e3:.1f} KB" if b >= 1e3 else f"{b:.0f} B"


def flows_cell(cm: ConfigModel) -> str:
    """Which flows a configuration's mode shares are over, and which were left out, per run on average:
    what each carried and its mean bytes acked; and the window."""
    acc: dict[tuple[bool, str], list[float]] = {}
    for m in cm.runs:
        for f in m.view.flows:
            if f.role == "workload":
                acc.setdefault((f.in_shares, f.carried or "?"), []).append(float(f.bytes_acked or 0))
    n = max(len(cm.runs), 1)

    def part(inside: bool) -> str:
        return ", ".join(f"{kind} ×{len(v) / n:g} ({_size(sum(v) / len(v))})"
                         for (i, kind), v in sorted(acc.items()) if i == inside) or "none"
    windows = sorted({m.view.window for m in cm.runs})
    return f"in: {part(True)}; left out: {part(False)}; window: {'/'.join(windows)}"


def html_rows(c: Collection) -> tuple[list[str], list[dict[str, Any]]]:
    """The report page's table: per configuration, the flows the figures are over (and those left
    out, with what they carried and their bytes), estimate / link, min RTT and the mode shares as
    'mean [low, high]'."""
    models = config_models(c)
    labels = sorted({k for cm in models for k in cm.shares}, key=state_order)

    def cell(s: Summary | None) -> str:
        if s is None or s.n == 0:
            return "–"
        return fmt(s.mean) + (f" [{fmt(s.ci_low)}, {fmt(s.ci_high)}]" if s.n >= 2 and not math.isnan(s.ci_low) else "")
    rows = [{"label": cm.cfg.label, "n": len(cm.runs),
             "cells": [flows_cell(cm), cell(cm.ratio), cell(cm.min_rtt), *(cell(cm.shares.get(k)) for k in labels)]}
            for cm in models]
    return ["flows (per run: what each carried, bytes acked)", "estimate / link", "min RTT (ms)", *labels], rows
