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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from mpvlab.cc import registry  # noqa: E402
from mpvlab.core import units  # noqa: E402
from mpvlab.results import flows  # noqa: E402
from mpvlab.results.metrics import MetricDef  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.reporting.figure import GREY_SHADE, Figure, square_on_intervals  # noqa: E402
from mpvlab.reporting.numbers import fmt  # noqa: E402
from mpvlab.results.aggregate import Collection, Config, Run, cc_order, sched_order  # noqa: E402
from mpvlab.results.stats import Summary, seed_for, summarise  # noqa: E402
from mpvlab.results.tidy import addr_to_path, t0_ns  # noqa: E402

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


# One colour per mode (Paul Tol's bright scheme, apart from the CC and path colours); PROBE_BW's
# sub-phases in shades of one hue so the four read as one mode.
STATE_COLOURS = {"STARTUP": "#EE6677", "DRAIN": "#CCBB44", "PROBE_BW:UP": "#1F4E79", "PROBE_BW:DOWN": "#8FB8DE",
                 "PROBE_BW:CRUISE": "#4477AA", "PROBE_BW:REFILL": "#66CCEE", "PROBE_BW": "#4477AA",
                 "PROBE_RTT": "#AA3377"}


def state_colour(label: str) -> str:
    return STATE_COLOURS.get(label, "#BBBBBB")


def mode_segments(ts: list[float], states: list[str | None]) -> dict[str, list[tuple[float, float]]]:
    """Per mode: (start, width) of each stretch of rows in it; a row holds until the next row."""
    out: dict[str, list[tuple[float, float]]] = {}
    for i, (t, s) in enumerate(zip(ts, states)):
        if s is None or i + 1 >= len(ts):
            continue
        segs = out.setdefault(s, [])
        if segs and abs(segs[-1][0] + segs[-1][1] - t) < 1e-9 and states[i - 1] == s:
            segs[-1] = (segs[-1][0], ts[i + 1] - segs[-1][0])
        else:
            segs.append((t, ts[i + 1] - t))
    return out


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


def _err(s: Summary) -> tuple[float, float] | None:
    if s.n < 2 or math.isnan(s.ci_low) or math.isnan(s.ci_high):
        return None
    return max(s.mean - s.ci_low, 0.0), max(s.ci_high - s.mean, 0.0)


def over_time_figures(models: list[ConfigModel]) -> list[Any]:
    """Per scenario: a row per configuration (its representative run), estimate vs link | min RTT."""
    groups: dict[str, list[ConfigModel]] = {}
    for cm in models:
        groups.setdefault(group_of(cm.cfg), []).append(cm)
    figs = []
    for gname, cms in groups.items():
        paths = sorted({p for cm in cms for m in cm.runs for p in m.paths.values()})
        sty = st.style_for(path=paths, cc=[cm.cfg.cc for cm in cms])
        shown_states: set[str] = set()
        shaded = False
        with matplotlib.rc_context(st.RC):
            fig, axes = plt.subplots(len(cms), 2, figsize=(st.FULL_W, 0.6 + 1.15 * len(cms)), sharex=True,
                                     squeeze=False, layout="constrained")
            for (ax_bw, ax_rtt), cm in zip(axes, cms):
                rep = cm.cfg.representative()
                m = load_series(next((x for x in cm.runs if x.run is rep), cm.runs[0]))
                t_end = max((max(ts) for _, ts, _, _ in m.series.values() if ts), default=1.0)
                rates = link_rates(m.run)
                for path, ts, bw, rtt in m.series.values():
                    ax_bw.plot(ts, bw, color=sty.colour("path", path), linewidth=0.8)
                    ax_rtt.plot(ts, rtt, color=sty.colour("path", path), linewidth=0.8)
                for path in sorted({p for p, *_ in m.series.values()}):
                    if path in rates:
                        ax_bw.axhline(rates[path] / 1e6, color=sty.colour("path", path), linestyle="--",
                                      linewidth=0.8)
                    for a, b in square_on_intervals(m.run, path, t_end):
                        ax_rtt.axvspan(a, b, color=sty.colour("path", path), alpha=0.12, linewidth=0)
                        shaded = True
                ax_bw.set_title(f"{st.style_for(cc=[cm.cfg.cc]).label('cc', cm.cfg.cc)} · {cm.cfg.scheduler} — run "
                                f"{m.run.run_id} (of {len(cm.cfg.runs)})", loc="left", pad=2)
                ax_bw.set_ylabel("estimate (Mbit/s)")
                ax_rtt.set_ylabel("min RTT (ms)")
                top = max([v for _, _, bw, _ in m.series.values() for v in bw if not math.isnan(v)]
                          + [r / 1e6 for r in rates.values()], default=1.0)
                # The mode over time of the run's longest workload flow, as a strip below zero.
                longest = max(m.series, key=lambda k: len(m.series[k][1]))
                for state, segs in mode_segments(m.series[longest][1], m.states[longest]).items():
                    ax_bw.broken_barh(segs, (-0.11 * top, 0.08 * top), facecolors=state_colour(state), linewidth=0)
                    shown_states.add(state)
                ax_bw.set_ylim(-0.12 * top, top * 1.1)
                ax_rtt.set_ylim(bottom=0)
                for ax in (ax_bw, ax_rtt):
                    ax.grid(axis="y")
            for ax in axes[-1]:
                ax.set_xlabel("time since run time zero (s)")
            handles: list[Artist] = [Line2D([], [], color=sty.colour("path", p), label=sty.label("path", p))
                                     for p in paths]
            handles += [Line2D([], [], color="black", linestyle="--", label="link rate (configured)")]
            if shaded:
                handles.append(Patch(facecolor=GREY_SHADE, alpha=0.5, label="extra delay on"))
            handles += [Patch(facecolor=state_colour(x), label=x.replace("PROBE_BW:", "BW:"))
                        for x in sorted(shown_states, key=state_order)]
            fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 7))
            fig.suptitle(f"BBR model over time — {gname}", x=0.01, ha="left")
        figs.append(Figure(f"bbr-model-{gname}", f"BBR model over time — {gname}",
                           "Per configuration's representative run: the CC's bandwidth estimate of each workload "
                           "flow (colour: its path) against the path's configured link rate (dashed), the mode of the "
                           "longest workload flow over time (strip below zero; BW:… = PROBE_BW's sub-phases), and "
                           "the CC's min RTT; workload flows only (probe, loopback check and preflight left out), "
                           "during playback.", fig))
    return figs


def mode_share_figures(models: list[ConfigModel], confidence: float) -> list[Any]:
    """Per scenario: share of time per mode, one bar per configuration (colour: CC, hatch: scheduler)."""
    groups: dict[str, list[ConfigModel]] = {}
    for cm in models:
        if cm.shares:
            groups.setdefault(group_of(cm.cfg), []).append(cm)
    figs = []
    for gname, cms in groups.items():
        cms.sort(key=lambda cm: (cc_order(cm.cfg.cc), sched_order(cm.cfg.scheduler)))
        labels = sorted({k for cm in cms for k in cm.shares}, key=state_order)
        sty = st.style_for(cc=[cm.cfg.cc for cm in cms], scheduler=[cm.cfg.scheduler for cm in cms])
        width = 0.8 / len(cms)
        with matplotlib.rc_context(st.RC):
            fig, ax = plt.subplots(figsize=(st.FULL_W if len(labels) * len(cms) > 12 else st.COLUMN_W * 1.5, 2.4),
                                   layout="constrained")
            for i, cm in enumerate(cms):
                for xi, lab in enumerate(labels):
                    s = cm.shares.get(lab)
                    x = xi - 0.4 + width * (i + 0.5)
                    mean = s.mean if s is not None else 0.0
                    ax.bar(x, mean, width * 0.9, color=sty.colour("cc", cm.cfg.cc), alpha=0.85, edgecolor="black",
                           linewidth=0.5, hatch=sty.entry("scheduler", cm.cfg.scheduler).hatch)
                    if s is not None and (e := _err(s)) is not None:
                        ax.errorbar(x, mean, yerr=[[e[0]], [e[1]]], color="black", capsize=1.5, linewidth=0.7)
                    vals = [m.view.mode_share_time_weighted.get(lab, 0.0) for m in cm.runs]
                    ax.scatter([x] * len(vals), vals, s=3, color="black", zorder=3, alpha=0.6, linewidths=0)
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels([lab.replace("PROBE_BW:", "PROBE_BW\n") for lab in labels])
            ax.set_ylabel("share of time")
            ax.set_ylim(0, 1)
            ax.grid(axis="y")
            handles = [Patch(facecolor=sty.colour("cc", cm.cfg.cc), edgecolor="black", linewidth=0.5,
                             hatch=sty.entry("scheduler", cm.cfg.scheduler).hatch,
                             label=f"{sty.label('cc', cm.cfg.cc)} · {sty.label('scheduler', cm.cfg.scheduler)}")
                       for cm in cms]
            ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=min(len(handles), 4))
            fig.suptitle(f"Share of time per BBR mode — {gname}", x=0.01, ha="left")
        ns = sorted({len(cm.runs) for cm in cms})
        figs.append(Figure(f"bbr-modes-{gname}", f"BBR modes — {gname}",
                           "Share of playback time the CC spent in each mode (PROBE_BW by sub-phase: BBRv3's own; "
                           "BBR v1/BBR-S from the pacing gain, UP 1.25, DOWN 0.75, CRUISE 1), over the workload's "
                           f"flows, time-weighted; bar = mean over trials (n = {', '.join(map(str, ns))}), whisker = "
                           f"{round(confidence * 100)} % BCa bootstrap interval of the mean, dots = trials.", fig))
    return figs


def estimate_figures(models: list[ConfigModel], confidence: float) -> list[Any]:
    """Per scenario: the estimate over the link rate and the min RTT per configuration, mean over
    trials with its interval and the trials as dots."""
    groups: dict[str, list[ConfigModel]] = {}
    for cm in models:
        if cm.ratio.n:
            groups.setdefault(group_of(cm.cfg), []).append(cm)
    figs = []
    for gname, cms in groups.items():
        cms.sort(key=lambda cm: (cc_order(cm.cfg.cc), sched_order(cm.cfg.scheduler)))
        sty = st.style_for(cc=[cm.cfg.cc for cm in cms], scheduler=[cm.cfg.scheduler for cm in cms])
        with matplotlib.rc_context(st.RC):
            fig, axes = plt.subplots(1, 2, figsize=(st.FULL_W, 2.2), layout="constrained")
            for ax, get, per_run, ylabel in (
                    (axes[0], lambda cm: cm.ratio, lambda m: m.ratio, "estimate / link rate"),
                    (axes[1], lambda cm: cm.min_rtt, lambda m: m.view.min_rtt_ms_mean_time_weighted, "min RTT (ms)")):
                for i, cm in enumerate(cms):
                    s = get(cm)
                    ax.bar(i, s.mean, 0.7, color=sty.colour("cc", cm.cfg.cc), alpha=0.85, edgecolor="black",
                           linewidth=0.5, hatch=sty.entry("scheduler", cm.cfg.scheduler).hatch)
                    if (e := _err(s)) is not None:
                        ax.errorbar(i, s.mean, yerr=[[e[0]], [e[1]]], color="black", capsize=1.5, linewidth=0.7)
                    vals = [v for m in cm.runs if (v := per_run(m)) is not None]
                    ax.scatter([i] * len(vals), vals, s=3, color="black", zorder=3, alpha=0.6, linewidths=0)
                ax.set_xticks(range(len(cms)))
                ax.set_xticklabels([f"{sty.label('cc', cm.cfg.cc)}\n{sty.label('scheduler', cm.cfg.scheduler)}"
                                    for cm in cms])
                ax.set_ylabel(ylabel)
                ax.set_ylim(bottom=0)
                ax.grid(axis="y")
            axes[0].axhline(1.0, color="black", linestyle="--", linewidth=0.7)
            fig.suptitle(f"BBR's estimate against the link, and min RTT — {gname}", x=0.01, ha="left")
        figs.append(Figure(f"bbr-estimate-{gname}", f"BBR estimate and min RTT — {gname}",
                           "Per configuration: the CC's bandwidth estimate over the path's configured rate (per "
                           "workload flow, time-weighted, flows weighted by duration; dashed: 1 = the link) and its "
                           f"min RTT; bar = mean over trials, whisker = {round(confidence * 100)} % interval of the "
                           "mean (BCa bootstrap for the ratio, Student t for the RTT), dots = trials.", fig))
    return figs


def figures(c: Collection) -> list[Any]:
    models = config_models(c)
    return [*over_time_figures(models), *mode_share_figures(models, c.confidence),
            *estimate_figures(models, c.confidence)]


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
