"""Tables of a report, as CSV and Parquet: runs (one row per complete run), stats (long: one row per
configuration × metric, with the metric's interval method, t and bootstrap intervals), pairwise (tests
between configurations, mpvlab/reporting/pairwise.py), metrics (the definitions used), configs (wide: the headline means and CIs per configuration), not_aggregated
(failed or incomplete runs and why), left_out (complete runs with fidelity_ok false, kept out of every statistic
and figure, and why), and, when a configuration's CC is BBR-family with a state series,
bbr_model (mode shares, estimate / link rate, min RTT per configuration: mpvlab/reporting/bbr.py) with bbr_flows
(per run and flow: what it carried, its bytes, whether it is in the shares, its own mode shares), and, when
runs have several DASH clients, clients (one row per run × client: its average bitrate, quality, stall rate,
rebuffer ratio, switches, startup and the run's Jain index of the clients' average bitrates:
mpvlab/reporting/dash.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mpvlab.results import metrics
from mpvlab.reporting import bbr, dash
from mpvlab.results.aggregate import Collection


def _extra_json(extra: dict[str, object]) -> str:
    return json.dumps(extra, sort_keys=True, default=str) if extra else ""


def runs_frame(c: Collection) -> pd.DataFrame:
    rows = []
    for cfg in c.configs:
        for r in cfg.runs:
            row: dict[str, object] = {
                "config": cfg.label, "scenario": cfg.scenario, "cc": cfg.cc, "scheduler": cfg.scheduler,
                "params": _extra_json(cfg.extra), "trial": (r.sweep or {}).get("trial"),
                "seed": r.summary.get("seed"), "run_id": r.run_id, "run_dir": r.rel,
                "n_warnings": len(r.warnings), "warnings": " | ".join(r.warnings)}
            row.update(r.metrics)
            rows.append(row)
    return pd.DataFrame(rows)


def stats_frame(c: Collection) -> pd.DataFrame:
    rows = []
    for cfg in c.configs:
        for m, s in cfg.stats.items():
            if s.n == 0:
                continue
            label, unit = c.metric_info[m]
            d = c.metric_defs.get(m)
            rows.append({"config": cfg.label, "scenario": cfg.scenario, "cc": cfg.cc, "scheduler": cfg.scheduler,
                         "params": _extra_json(cfg.extra), "metric": m, "label": label, "unit": unit,
                         "range_low": d.lo if d else None, "range_high": d.hi if d else None,
                         "runs": len(cfg.runs), "n": s.n, "mean": s.mean, "median": s.median, "std": s.std,
                         # the interval the metric's definition names (ci_method), then both kinds
                         "ci_method": s.method, "ci95_low": s.ci_low, "ci95_high": s.ci_high,
                         "ci95_half": s.ci_half, "t_low": s.t_low, "t_high": s.t_high, "t_half": s.t_half,
                         "t_clipped": s.clipped, "boot_low": s.boot_low, "boot_high": s.boot_high,
                         "min": s.min, "max": s.max})
    return pd.DataFrame(rows)


def configs_frame(c: Collection) -> pd.DataFrame:
    rows = []
    paths = sorted({p for r in c.runs for p in r.paths})
    for cfg in c.configs:
        row: dict[str, object] = {"config": cfg.label, "scenario": cfg.scenario, "cc": cfg.cc,
                                  "scheduler": cfg.scheduler, "params": _extra_json(cfg.extra), "n": len(cfg.runs)}
        for m, _ in metrics.view("configs", paths):     # the metrics whose definition names this table
            s = cfg.stats.get(m)
            if s is None:
                continue
            row[f"{m}_mean"], row[f"{m}_median"], row[f"{m}_ci95_half"] = s.mean, s.median, s.ci_half
        rows.append(row)
    return pd.DataFrame(rows)


def left_out_frame(c: Collection) -> pd.DataFrame:
    """Complete runs kept out of the statistics (fidelity_ok false), with their configuration and why."""
    return pd.DataFrame([{"run_dir": lo.rel, "config": lo.config, "reason": lo.reason} for lo in c.left_out],
                        columns=["run_dir", "config", "reason"])


def not_aggregated_frame(c: Collection) -> pd.DataFrame:
    return pd.DataFrame([{"run_dir": b.rel, "state": b.state, "reason": b.reason} for b in c.not_aggregated],
                        columns=["run_dir", "state", "reason"])


def metrics_frame(c: Collection) -> pd.DataFrame:
    """The definitions of the metrics in this report (declared on the summary model, mpvlab/results/summary.py)."""
    return pd.DataFrame([{"metric": k, "label": m.label, "unit": m.unit, "range_low": m.lo, "range_high": m.hi,
                          "direction": m.direction, "interval": m.interval, "test": m.test, "qoe": m.qoe,
                          "clamped": m.clamp, "definition": m.definition, "source": m.source}
                         for k, m in c.metric_defs.items()])


def write_tables(c: Collection, out: Path, pairwise: pd.DataFrame | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    frames = [("runs", runs_frame(c)), ("stats", stats_frame(c)), ("configs", configs_frame(c)),
              ("not_aggregated", not_aggregated_frame(c)), ("left_out", left_out_frame(c)), ("metrics", metrics_frame(c))]
    if pairwise is not None:
        frames.append(("pairwise", pairwise))
    clients = dash.client_rows(c)
    if clients:      # only runs with several DASH clients (mpvlab/reporting/dash.py)
        frames.append(("clients", pd.DataFrame(clients)))
    models = bbr.config_models(c)
    if models:
        frames.append(("bbr_model", bbr.model_frame(models)))
        frames.append(("bbr_flows", bbr.flow_frame(models)))
    for name, df in frames:
        csv = out / f"{name}.csv"
        df.to_csv(csv, index=False)
        pq = out / f"{name}.parquet"
        df.to_parquet(pq, index=False)
        written += [csv, pq]
    return written
