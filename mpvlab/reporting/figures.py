"""Figures in the style of the Wi-Fi/LTE study (docs/studies.md §1), drawn with mpvlab/reporting/style.py
at a paper's column or text width and written as SVG, PDF and, when asked, PNG (output.Output).

Per metric: grouped bars per scenario, one bar per congestion control (colour) × scheduler (hatch),
height = mean over trials, whiskers = the metric's 95 % interval (mpvlab/results/metrics.py), dots = the individual trials. Over time, for
one representative run per configuration: cwnd of each path's subflow (packets, from ss) and
throughput of each path (1 s bins of the client interface's received bytes), with the intervals in
which a square-wave delay is ON shaded.

Every builder takes the Collection and returns Figure objects (empty when its data is absent), so
new kinds (DASH: quality level and buffer over time) are one more builder in BUILDERS. A builder
whose figures are independent of each other may be `Parts`: the report then builds its parts in
separate workers (workers.py).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from dataclasses import dataclass
from functools import partial
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from mpvlab.results import metrics  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.results.aggregate import Collection, Config, Run, cc_order, sched_order  # noqa: E402
from mpvlab.results.stats import Summary  # noqa: E402
from mpvlab.reporting import bbr, bbr_figures, dash, rtp  # noqa: E402
from mpvlab.reporting.capacity import configured_capacity  # noqa: E402
from mpvlab.reporting.figure import (  # noqa: E402
    GREY_SHADE, Figure, FigureTask, square_on_intervals,
)
from mpvlab.results.tidy import addr_to_path, host_of  # noqa: E402


def _style(ax: plt.Axes) -> None:
    ax.grid(axis="y")


def _ci_err(s: Summary) -> tuple[float, float] | None:
    lo, hi, mean = s.ci_low, s.ci_high, s.mean
    if s.n < 2 or math.isnan(lo) or math.isnan(hi):
        return None
    return max(mean - lo, 0.0), max(hi - mean, 0.0)


def _method_text(c: Collection, metric: str, ns: list[int] | None = None) -> str:
    """What a whisker is, at the numbers of trials it has: a bootstrap of two trials can only resample
    means between them, and stats.bootstrap_mean_ci bounds the interval by them, so at n = 2 it is
    their min–max (tests/test_report_captions.py) — said so, not called a 95 % interval; n = 1 has none."""
    m = c.metric_defs.get(metric)
    pct = round(c.confidence * 100)
    if m is not None and m.interval == "bootstrap":
        text = f"{pct} % BCa bootstrap interval of the mean"
        if ns and 2 in ns:
            text += (" where n ≥ 3; where n = 2 the whisker is the min–max of the two trials (a bootstrap of two "
                     "values resamples nothing outside them), not a 95 % interval")
    else:
        text = f"{pct} % Student-t interval of the mean"
    if ns and 1 in ns:
        text += "; no whisker where n = 1"
    return text


# ---------------------------------------------------------------------------------------------
# Bars per CC per scenario


def bar_metrics() -> list[tuple[str, str, str]]:
    """(metric, title, y label) of each bar figure: the metrics whose definition names the `bars` view
    (mpvlab/results/summary.py)."""
    return [(key, v.heading, v.axis) for key, v in metrics.view("bars")]


def bar_figure(c: Collection, metric: str, title: str, ylabel: str) -> Figure | None:
    configs = [cfg for cfg in c.configs if cfg.stats.get(metric) and cfg.stats[metric].n > 0]
    if not configs:
        return None
    groups: dict[str, list[Config]] = {}
    for cfg in configs:
        g = cfg.scenario + (f"\n{cfg.extra_label}" if cfg.extra else "")
        groups.setdefault(g, []).append(cfg)
    ccs = sorted({cfg.cc for cfg in configs}, key=cc_order)
    scheds = sorted({cfg.scheduler for cfg in configs}, key=sched_order)
    sty = st.style_for(cc=ccs, scheduler=scheds)
    slots = [(cc, s) for cc in ccs for s in scheds]
    width = 0.8 / len(slots)
    # A column-wide figure while it fits (≤ 12 bars), else the full text width.
    w = st.COLUMN_W if len(groups) * len(slots) <= 12 else st.FULL_W
    with matplotlib.rc_context(st.RC):
        fig, ax = plt.subplots(figsize=(w, 2.3), layout="constrained")
        for gi, cfgs in enumerate(groups.values()):
            for cfg in cfgs:
                si = slots.index((cfg.cc, cfg.scheduler))
                x = gi - 0.4 + width * (si + 0.5)
                s = cfg.stats[metric]
                ax.bar(x, s.mean, width * 0.9, color=sty.colour("cc", cfg.cc), alpha=0.85, edgecolor="black",
                       linewidth=0.5, hatch=sty.entry("scheduler", cfg.scheduler).hatch)
                err = _ci_err(s)
                if err is not None:
                    ax.errorbar(x, s.mean, yerr=[[err[0]], [err[1]]], color="black", capsize=1.5, linewidth=0.7)
                vals = [v for r in cfg.runs if (v := r.metrics.get(metric)) is not None]
                ax.scatter([x] * len(vals), vals, s=3, color="black", zorder=3, alpha=0.6, linewidths=0)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(list(groups))
        # The axes are ~1.6 in tall: a label longer than that ran off the canvas at both ends (the path
        # switches' "path switches per run (scheduler decisions)"); its parenthesis goes on a second line.
        ax.set_ylabel(ylabel.replace(" (", "\n("))
        ax.set_xlim(-0.5, len(groups) - 0.5)
        top = max((v for cfg in configs for r in cfg.runs if (v := r.metrics.get(metric)) is not None),
                  default=0.0)
        # All zeros (e.g. no underflows anywhere): matplotlib would pick a meaningless tiny range.
        ax.set_ylim(bottom=0, top=None if top > 0 else 1.0)
        if top == 0:
            ax.text(0.5, 0.5, "0 in every run", transform=ax.transAxes, ha="center", va="center", color="#555")
        handles = [Patch(facecolor=sty.colour("cc", cc), edgecolor="black", linewidth=0.5, label=sty.label("cc", cc))
                   for cc in ccs]
        if len(scheds) > 1 or scheds != ["default"]:
            handles += [Patch(facecolor="white", edgecolor="black", linewidth=0.5,
                              hatch=sty.entry("scheduler", s).hatch, label=sty.label("scheduler", s)) for s in scheds]
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=min(len(handles), 6),
                  handlelength=1.6, columnspacing=1.0, borderaxespad=0.2)
        _style(ax)
    ns = sorted({cfg.stats[metric].n for cfg in configs})
    m = c.metric_defs.get(metric)
    counts = f" Counts: {m.definition}." if m is not None and metric in SAYS_WHAT_IT_COUNTS else ""
    return Figure(f"bar-{metric}", title,
                  f"{title} per congestion control (colour) and scheduler (hatch) per scenario: bar = mean over "
                  f"trials (n = {', '.join(map(str, ns))} per configuration), whisker = {_method_text(c, metric, ns)}, "
                  f"dots = individual trials.{counts}", fig)


# Metrics counted in different units of the same thing (a path switch per scheduler decision vs per
# wire segment differ several-fold for one run): their captions quote what they count.
SAYS_WHAT_IT_COUNTS = ("path_switches", "path_switches_wire")


# ---------------------------------------------------------------------------------------------
# Time series of one representative run per configuration


def _read_csv(p: Path) -> list[dict[str, str]]:
    """The rows of a run's data series; none when it is missing, unreadable, not a regular file or over
    the size limit (files.open_data_csv: a results folder is untrusted input, issue 45)."""
    from mpvlab.input.files import InputFileError, open_data_csv
    try:
        with open_data_csv(p) as f:
            return list(csv.DictReader(f))
    except (OSError, InputFileError, csv.Error):
        return []


def _addr_to_path(run: Run) -> dict[str, str]:
    return addr_to_path(run.provenance)


def cwnd_series(run: Run) -> dict[str, tuple[list[float], list[float]]]:
    """Per path: (t_s, cwnd packets) from data/subflows.csv (ss samples)."""
    a2p = _addr_to_path(run)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for row in _read_csv(run.run_dir / "data" / "subflows.csv"):
        try:
            t, cw = float(row["t_s"]), float(row["cwnd"])
        except (KeyError, ValueError):
            continue
        path = a2p.get(host_of(row.get("peer", "")), host_of(row.get("peer", "")))
        ts, vs = out.setdefault(path, ([], []))
        ts.append(t)
        vs.append(cw)
    return out


THROUGHPUT_BIN_S = 1.0      # the throughput-over-time bins (mpvlab plot uses the same)


def throughput_series(run: Run, bin_s: float = THROUGHPUT_BIN_S) -> dict[str, tuple[list[float], list[float]]]:
    """Per path: (bin centre s, Mbit/s) from data/links.csv cumulative rx bytes, in bins of bin_s."""
    cum: dict[str, list[tuple[float, float]]] = {}
    for row in _read_csv(run.run_dir / "data" / "links.csv"):
        try:
            cum.setdefault(row["path"], []).append((float(row["t_s"]), float(row["rx_bytes"])))
        except (KeyError, ValueError):
            continue
    out: dict[str, tuple[list[float], list[float]]] = {}
    for path, pts in cum.items():
        pts.sort()
        if len(pts) < 2:
            continue
        ts, vs = [], []
        edge, i = math.floor(pts[0][0] / bin_s) * bin_s, 0
        # the cumulative count at each bin edge, interpolated linearly between samples
        # pts bound as a default: ruff's B023 cannot see that `at` is called only in this iteration
        def at(t: float, pts: list[tuple[float, float]] = pts) -> float:
            nonlocal i
            while i + 1 < len(pts) and pts[i + 1][0] < t:
                i += 1
            (t0, b0), (t1, b1) = pts[i], pts[min(i + 1, len(pts) - 1)]
            return b0 if t1 == t0 else b0 + (b1 - b0) * min(max((t - t0) / (t1 - t0), 0.0), 1.0)
        prev = at(max(edge, pts[0][0]))
        while edge + bin_s <= pts[-1][0] + 1e-9:
            cur = at(edge + bin_s)
            ts.append(edge + bin_s / 2)
            vs.append((cur - prev) * 8 / bin_s / 1e6)
            prev, edge = cur, edge + bin_s
        out[path] = (ts, vs)
    return out


def _timeseries_groups(c: Collection) -> dict[str, list[Config]]:
    groups: dict[str, list[Config]] = {}
    for cfg in c.configs:
        groups.setdefault(cfg.scenario + (f" ({cfg.extra_label})" if cfg.extra else ""), []).append(cfg)
    return groups


def timeseries_figures(c: Collection, kind: str, group: str | None = None) -> list[Figure]:
    """One figure per scenario (× extra parameters): a panel per configuration, lines per path; with
    `group`, that scenario's only (the same figure: colours are assigned over the whole Collection)."""
    groups = _timeseries_groups(c)
    if group is not None:
        groups = {group: groups[group]} if group in groups else {}
    all_paths = list(dict.fromkeys(p for r in c.runs for p in r.paths))
    sty = st.style_for(path=all_paths, cc=[cfg.cc for cfg in c.configs], scheduler=[cfg.scheduler for cfg in c.configs])
    figs = []
    for gname, cfgs in groups.items():
        series = []
        for cfg in cfgs:
            rep = cfg.representative()
            s = cwnd_series(rep) if kind == "cwnd" else throughput_series(rep)
            if s:
                series.append((cfg, rep, s))
        if not series:
            continue
        with matplotlib.rc_context(st.RC):
            fig, axes = plt.subplots(len(series), 1, figsize=(st.FULL_W, 0.5 + 1.05 * len(series)), sharex=True,
                                     squeeze=False, layout="constrained")
            t_end = max(max(ts) for _, _, s in series for ts, _ in s.values())
            for ax, (cfg, rep, s) in zip(axes[:, 0], series):
                for p in s:
                    for a, b in square_on_intervals(rep, p, t_end):
                        ax.axvspan(a, b, color=sty.colour("path", p), alpha=0.12, linewidth=0)
                for p, (ts, vs) in s.items():
                    ax.plot(ts, vs, color=sty.colour("path", p), label=sty.label("path", p),
                            drawstyle="steps-mid" if kind == "throughput" else "default")
                if kind == "throughput":     # the configured capacity, dashed, beside what was achieved
                    for p, cap in configured_capacity(rep.run_dir, THROUGHPUT_BIN_S, t_end).items():
                        if p in s:
                            ax.plot([t for t, _ in cap], [b / 1e6 for _, b in cap], color=sty.colour("path", p),
                                    lw=0.7, ls="--", drawstyle="steps-mid")
                ax.set_title(f"{sty.label('cc', cfg.cc)} · {sty.label('scheduler', cfg.scheduler)} — run {rep.run_id} "
                             f"(of {len(cfg.runs)})",
                             loc="left", pad=2)
                ax.set_ylabel("cwnd (pkts)" if kind == "cwnd" else "Mbit/s")
                ax.set_ylim(bottom=0)
                _style(ax)
            handles, labels = axes[0, 0].get_legend_handles_labels()
            handles += [Patch(facecolor=GREY_SHADE, alpha=0.5, label="extra delay on (path's colour)")]
            fig.legend(handles=handles, loc="outside upper right", ncol=len(handles))
            axes[-1, 0].set_xlabel("time since run time zero (s)")
            what = "Congestion window per path" if kind == "cwnd" else "Throughput per path"
            fig.suptitle(f"{what} — {gname}", x=0.01, ha="left")
        caption = ("cwnd of each path's subflow in packets (ss, ~5 Hz)" if kind == "cwnd"
                   else "received bytes per path at the client interface, 1 s bins, in Mbit/s; dashed: the path's "
                        "configured down capacity (tbf rate, rate schedule or trace; outages at 0)")
        figs.append(Figure(f"{kind}-{gname}", f"{what} — {gname}",
                           f"{caption}; one representative run per configuration (closest to the configuration's "
                           f"median picture discards, then underflows); shading: path's extra delay ON.",
                           fig))
    return figs


def _bottleneck_buffer_key(cfg: Config) -> str | None:
    """The varied field that is a path's downstream buffer (the study-2 x axis), if any."""
    return next((k for k in cfg.extra if k.startswith("paths.") and k.endswith(".down.buffer")), None)


def dash_vs_buffer(c: Collection) -> list[Figure]:
    """docs/studies.md §2: average quality level and stall rate against the bottleneck buffer, one line
    per congestion control (× scheduler), mean with its interval over trials; one figure per scenario."""
    from mpvlab.core import units
    groups: dict[str, list[tuple[float, Config]]] = {}
    for cfg in c.configs:
        key = _bottleneck_buffer_key(cfg)
        s = cfg.stats.get("dash.quality_avg")
        if key is None or s is None or s.n == 0:
            continue
        try:
            size = units.parse_size(str(cfg.extra[key]))
        except ValueError:
            continue
        rest = ", ".join(f"{k}={v}" for k, v in cfg.extra.items() if k != key)
        groups.setdefault(cfg.scenario + (f" ({rest})" if rest else ""), []).append((float(size), cfg))
    figs = []
    for gname, pts in groups.items():
        ccs = sorted({cfg.cc for _, cfg in pts}, key=cc_order)
        scheds = sorted({cfg.scheduler for _, cfg in pts}, key=sched_order)
        sty = st.style_for(cc=ccs, scheduler=scheds)
        with matplotlib.rc_context(st.RC):
            fig, axes = plt.subplots(1, 2, figsize=(st.FULL_W, 2.4), layout="constrained")
            for ax, metric, ylabel in ((axes[0], "dash.quality_avg", "average quality level"),
                                       (axes[1], "dash.stall_rate", "stall rate")):
                lines: dict[tuple[str, str], list[tuple[float, Config]]] = {}
                for x, cfg in pts:
                    lines.setdefault((cfg.cc, cfg.scheduler), []).append((x, cfg))
                for (cc, sched), lp in sorted(lines.items(),
                                              key=lambda kv: (cc_order(kv[0][0]), sched_order(kv[0][1]))):
                    lp.sort(key=lambda t: t[0])
                    xs = [x / 1e3 for x, _ in lp]
                    sts = [cfg.stats[metric] for _, cfg in lp]
                    errs = [_ci_err(s) or (0.0, 0.0) for s in sts]
                    ax.errorbar(xs, [s.mean for s in sts], yerr=[[e[0] for e in errs], [e[1] for e in errs]],
                                color=sty.colour("cc", cc), linestyle=sty.entry("scheduler", sched).linestyle,
                                marker=sty.entry("cc", cc).marker, capsize=2,
                                label=f"{sty.label('cc', cc)} · {sty.label('scheduler', sched)}")
                ax.set_xscale("log")
                ax.set_xlabel("bottleneck buffer (KB, log scale)")
                ax.set_ylabel(ylabel)
                ys_all = [cfg.stats[metric].ci_high for _, cfg in pts if cfg.stats[metric].n]
                ys_all = [y for y in ys_all if not math.isnan(y)] or [cfg.stats[metric].mean for _, cfg in pts]
                if metric == "dash.stall_rate":
                    # A scale where timing noise (≤ 1e-3) reads as 0; stall rates are clamped at 0.
                    ax.set_ylim(0.0, max(0.05, max(ys_all, default=0.0) * 1.15))
                else:
                    ax.set_ylim(bottom=0)
                _style(ax)
            axes[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
            fig.suptitle(f"DASH quality and stalls against the bottleneck buffer — {gname}", x=0.01, ha="left")
        figs.append(Figure(f"dash-buffer-{gname}", f"DASH against buffer — {gname}",
                           "Average quality level over downloaded segments and stall rate (clamped at 0), mean over "
                           f"trials with {_method_text(c, 'dash.quality_avg')}s, against the bottleneck's "
                           "tail-drop buffer.", fig))
    return figs


Builder = Callable[[Collection], list[Figure]]


@dataclass(frozen=True)
class Parts:
    """A builder made of parts whose figures do not depend on each other: called, it is the parts'
    figures in order (one builder as any other); the report builds each part as a task of its own,
    so its figures spread over the render workers (issue 36: one task per builder left the 9 BBR
    figures, half the CPU, to one worker)."""

    parts: Callable[[Collection], list[Builder]]

    def __call__(self, c: Collection) -> list[Figure]:
        return [f for part in self.parts(c) for f in part(c)]


def _bar_parts(c: Collection) -> list[Builder]:
    def one(c: Collection, metric: str, title: str, ylabel: str) -> list[Figure]:
        f = bar_figure(c, metric, title, ylabel)
        return [f] if f is not None else []
    return [partial(one, metric=m, title=t, ylabel=y) for m, t, y in bar_metrics()]


def _bars(c: Collection) -> list[Figure]:
    return Parts(_bar_parts)(c)


def _timeseries_parts(kind: str) -> Callable[[Collection], list[Builder]]:
    def parts(c: Collection) -> list[Builder]:
        return [partial(timeseries_figures, kind=kind, group=g) for g in _timeseries_groups(c)]
    return parts


def _bbr_part(c: Collection, kind: str, group: str) -> list[Figure]:
    # each BBR figure is drawn from its own group's models only (bbr.py groups them the same way), so
    # the models of one group give that group's figure, as the models of all give all figures
    models = [cm for cm in bbr.config_models(c) if bbr.group_of(cm.cfg) == group]
    if kind == "over-time":
        return bbr_figures.over_time_figures(models)
    return (bbr_figures.mode_share_figures if kind == "modes" else bbr_figures.estimate_figures)(models, c.confidence)


def _bbr_parts(c: Collection) -> list[Builder]:
    # the models (and their statistics) are computed once per Collection and cached on it, and handed
    # to the workers with the statistics (workers.py), so the parts share them; in the order of
    # bbr_figures.figures: kind, then group
    groups = list(dict.fromkeys(bbr.group_of(cm.cfg) for cm in bbr.config_models(c)))
    return [partial(_bbr_part, kind=k, group=g) for k in ("over-time", "modes", "estimate") for g in groups]


BUILDERS: list[tuple[str, Builder]] = [
    ("QoE and path switches per congestion control", Parts(_bar_parts)),
    ("Congestion window over time", Parts(_timeseries_parts("cwnd"))),
    ("Throughput per path over time", Parts(_timeseries_parts("throughput"))),
    ("DASH: quality and stalls against the bottleneck buffer", dash_vs_buffer),
    ("DASH: selected bitrate over time", dash.bitrate_figures),
    ("DASH: clients sharing the bottleneck, per client and fairness", dash.clients_figures),
    ("VoIP probe: queuing delay CCDF", dash.voip_ccdf_figures),
    ("DASH: advertised receive window over time", dash.window_figures),
    ("RTP live video: average bitrate per controller", rtp.bitrate_figures),
    ("RTP live video: GCC − webrtc-bbr bitrate difference", rtp.difference_figures),
    ("RTP live video: estimates against achieved bitrate", rtp.estimate_figures),
    ("BBR's model over time (BBR-family CCs)", Parts(_bbr_parts)),
]


# Sections whose figures read the runs only — no statistics, no BBR models —, so the report's workers
# make them while its process computes the statistics (workers.py, issue 36): the over-time figures
# draw each configuration's representative run (Config.representative: medians of the runs' metrics).
RUNS_ONLY = ("Congestion window over time", "Throughput per path over time")


def tasks_of_phase(c: Collection, phase: str) -> list[tuple[str, FigureTask]]:
    """_tasks' (section, task) pairs of the RUNS_ONLY sections ("runs": they need only the loaded runs)
    or of the others ("stats": after the statistics and the BBR models), in BUILDERS' order."""
    if phase not in ("runs", "stats"):
        raise ValueError(f"phase {phase!r}: runs or stats")
    out: list[tuple[str, FigureTask]] = []
    for section, b in BUILDERS:
        if (section in RUNS_ONLY) == (phase == "runs"):
            for part in (b.parts(c) if isinstance(b, Parts) else [b]):
                out.append((section, partial(part, c)))
    return out


def sections_of(parts: list[tuple[str, list[Figure]]], folder: Path | None = None) -> list[tuple[str, list[Figure]]]:
    """(section, figures) in BUILDERS' order from the tasks' (section, figures), sections without
    figures left out; with `folder`, each figure also written there."""
    by_section: dict[str, list[Figure]] = {}
    for section, figs in parts:
        by_section.setdefault(section, []).extend(figs)
    sections = [(section, by_section[section]) for section, _ in BUILDERS if by_section.get(section)]
    if folder is not None:
        for _, figs in sections:
            for f in figs:
                f.write(folder)
    return sections
