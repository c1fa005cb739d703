"""Figures in the style of the Wi-Fi/LTE study (experiments.md §1).

Per metric: grouped bars per scenario, one bar per congestion control (colour) × scheduler (hatch),
height = mean over trials, whiskers = 95 % Student-t CI, dots = the individual trials. Over time, for
one representative run per configuration: cwnd of each path's subflow (packets, from ss) and
throughput of each path (1 s bins of the client interface's received bytes), with the intervals in
which a square-wave delay is ON shaded.

Every builder takes the Collection and returns Figure objects (empty when its data is absent), so
new kinds (DASH: quality level and buffer over time) are one more builder in BUILDERS.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from mpvlab.report.aggregate import Collection, Config, Run, cc_order, sched_order  # noqa: E402

# Colours fixed per congestion control (unknown ones get the next free colour, by name order), hatches
# per scheduler, colours per path (distinct from the CC colours: they never share a plot).
CC_COLOURS = {"cubic": "#1f77b4", "bbr": "#d62728", "bbr-s": "#2ca02c"}
SPARE_COLOURS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
SCHED_HATCHES = {"default": "", "minrtt": "///", "bdp": "..."}
SPARE_HATCHES = ["xx", "\\\\\\", "++", "oo"]
SCHED_STYLES = {"default": "-", "minrtt": "--", "bdp": ":"}
PATH_COLOURS = ["#ff7f0e", "#6a3d9a", "#17becf", "#8c564b"]
DPI = 100


@dataclass
class Figure:
    id: str
    title: str
    caption: str
    png: bytes


def cc_colour(cc: str, all_ccs: list[str]) -> str:
    if cc in CC_COLOURS:
        return CC_COLOURS[cc]
    unknown = sorted(c for c in all_ccs if c not in CC_COLOURS)
    return SPARE_COLOURS[unknown.index(cc) % len(SPARE_COLOURS)] if cc in unknown else "#7f7f7f"


def sched_hatch(s: str, all_s: list[str]) -> str:
    if s in SCHED_HATCHES:
        return SCHED_HATCHES[s]
    unknown = sorted(x for x in all_s if x not in SCHED_HATCHES)
    return SPARE_HATCHES[unknown.index(s) % len(SPARE_HATCHES)] if s in unknown else "--"


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _style(ax: plt.Axes) -> None:
    ax.grid(axis="y", alpha=0.3)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


# ---------------------------------------------------------------------------------------------
# Bars per CC per scenario


BAR_METRICS = [
    ("underflows", "Buffer underflows", "underflow events per run"),
    ("picture_discards", "Picture discards", "discarded frames per run"),
    ("path_switches", "Path switches", "scheduler path switches per run"),
]


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
    slots = [(cc, s) for cc in ccs for s in scheds]
    width = 0.8 / len(slots)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 + len(groups) * len(slots) * 0.45), 3.6))
    for gi, (gname, cfgs) in enumerate(groups.items()):
        for cfg in cfgs:
            si = slots.index((cfg.cc, cfg.scheduler))
            x = gi - 0.4 + width * (si + 0.5)
            st = cfg.stats[metric]
            colour = cc_colour(cfg.cc, ccs)
            ax.bar(x, st.mean, width * 0.9, color=colour, alpha=0.85, edgecolor="black", linewidth=0.6,
                   hatch=sched_hatch(cfg.scheduler, scheds))
            if st.n >= 2 and not math.isnan(st.ci_half):
                ax.errorbar(x, st.mean, yerr=st.ci_half, color="black", capsize=3, linewidth=1)
            vals = [r.metrics.get(metric) for r in cfg.runs if r.metrics.get(metric) is not None]
            ax.scatter([x] * len(vals), vals, s=10, color="black", zorder=3, alpha=0.6)
            ax.annotate(f"n={st.n}", (x, 0), xytext=(0, -11), textcoords="offset points", ha="center",
                        fontsize=7, color="#444")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(list(groups), fontsize=9)
    ax.tick_params(axis="x", pad=14)
    ax.set_ylabel(ylabel)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    top = max((v for cfg in configs for r in cfg.runs if (v := r.metrics.get(metric)) is not None), default=0.0)
    # All zeros (e.g. no underflows anywhere): matplotlib would pick a meaningless tiny range.
    ax.set_ylim(bottom=0, top=None if top > 0 else 1.0)
    if top == 0:
        ax.text(0.5, 0.5, "0 in every run", transform=ax.transAxes, ha="center", va="center", color="#555")
    ax.set_title(title)
    handles = [Patch(facecolor=cc_colour(cc, ccs), edgecolor="black", label=cc.upper()) for cc in ccs]
    if len(scheds) > 1 or scheds != ["default"]:
        handles += [Patch(facecolor="white", edgecolor="black", hatch=sched_hatch(s, scheds),
                          label=f"scheduler {s}") for s in scheds]
    ax.legend(handles=handles, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _style(ax)
    return Figure(f"bar-{metric}", title,
                  f"{title} per congestion control per scenario: bar = mean over trials, whisker = 95 % "
                  f"Student-t confidence interval (n ≥ 2), dots = individual trials.", _png(fig))


# ---------------------------------------------------------------------------------------------
# Time series of one representative run per configuration


def _read_csv(p: Path) -> list[dict[str, str]]:
    try:
        with p.open(newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def _addr_to_path(run: Run) -> dict[str, str]:
    """Client address → path name, from provenance (topology.paths.<name>.client_addr)."""
    paths = ((run.provenance.get("topology") or {}).get("paths") or {})
    return {str(v.get("client_addr")): name for name, v in paths.items() if isinstance(v, dict)}


def _host(endpoint: str) -> str:
    """'[::ffff:10.0.1.2]:59128' or '10.0.1.2:59128' → '10.0.1.2'."""
    h = endpoint.rsplit(":", 1)[0].strip("[]")
    return h.removeprefix("::ffff:")


def cwnd_series(run: Run) -> dict[str, tuple[list[float], list[float]]]:
    """Per path: (t_s, cwnd packets) from data/subflows.csv (ss samples)."""
    a2p = _addr_to_path(run)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for row in _read_csv(run.run_dir / "data" / "subflows.csv"):
        try:
            t, cw = float(row["t_s"]), float(row["cwnd"])
        except (KeyError, ValueError):
            continue
        path = a2p.get(_host(row.get("peer", "")), _host(row.get("peer", "")))
        ts, vs = out.setdefault(path, ([], []))
        ts.append(t)
        vs.append(cw)
    return out


def throughput_series(run: Run, bin_s: float = 1.0) -> dict[str, tuple[list[float], list[float]]]:
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
        def at(t: float) -> float:
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


def square_on_intervals(run: Run, path: str, t_end: float) -> list[tuple[float, float]]:
    """When the path's down delay is a square wave: the [start, end) intervals with the amplitude ON."""
    r = run.resolved
    pre = f"paths.{path}.down.delay."
    if r.get(pre + "kind") != "square":
        return []
    try:
        from core import units
        period = units.parse_duration_ns(r[pre + "period"]) / 1e9
        phase = units.parse_duration_ns(r[pre + "phase"]) / 1e9
        duty = float(r[pre + "duty"])
    except (KeyError, ValueError, Exception):  # noqa: BLE001 — a figure decoration, never fatal
        return []
    out, k = [], math.floor((0 - phase) / period)
    while phase + k * period < t_end:
        s = phase + k * period
        out.append((max(s, 0.0), min(s + duty * period, t_end)))
        k += 1
    return [iv for iv in out if iv[1] > iv[0]]


def timeseries_figures(c: Collection, kind: str) -> list[Figure]:
    """One figure per scenario (× extra parameters): a panel per configuration, lines per path."""
    groups: dict[str, list[Config]] = {}
    for cfg in c.configs:
        groups.setdefault(cfg.scenario + (f" ({cfg.extra_label})" if cfg.extra else ""), []).append(cfg)
    all_paths = list(dict.fromkeys(p for r in c.runs for p in r.paths))
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
        fig, axes = plt.subplots(len(series), 1, figsize=(9.5, 1.9 + 1.7 * len(series)), sharex=True, squeeze=False)
        t_end = max(max(ts) for _, _, s in series for ts, _ in s.values())
        for ax, (cfg, rep, s) in zip(axes[:, 0], series):
            shaded = False
            for p in s:
                for a, b in square_on_intervals(rep, p, t_end):
                    ax.axvspan(a, b, color=PATH_COLOURS[all_paths.index(p) % len(PATH_COLOURS)] if p in all_paths
                               else "#ccc", alpha=0.10, linewidth=0,
                               label=None if shaded else f"{p} extra delay on")
                    shaded = True
            for p, (ts, vs) in s.items():
                colour = PATH_COLOURS[all_paths.index(p) % len(PATH_COLOURS)] if p in all_paths else "#333"
                ax.plot(ts, vs, color=colour, linewidth=1.1, label=p,
                        drawstyle="steps-mid" if kind == "throughput" else "default")
            ax.set_title(f"{cfg.cc.upper()} · scheduler {cfg.scheduler} — run {rep.run_id} "
                         f"(representative of {len(cfg.runs)})", fontsize=9, loc="left")
            ax.set_ylabel("cwnd (packets)" if kind == "cwnd" else "throughput (Mbit/s)", fontsize=9)
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            _style(ax)
        axes[-1, 0].set_xlabel("time since run time zero (s)")
        what = "Congestion window per path" if kind == "cwnd" else "Throughput per path"
        fig.suptitle(f"{what} — {gname}", fontsize=11, x=0.02, ha="left")
        fig.tight_layout()
        cap = ("cwnd of each path's subflow in packets (ss, ~5 Hz)" if kind == "cwnd"
               else "received bytes per path at the client interface, 1 s bins, in Mbit/s")
        figs.append(Figure(f"{kind}-{gname}", f"{what} — {gname}",
                           f"{cap}; one representative run per configuration (closest to the configuration's "
                           f"median picture discards, then underflows); shading: path's extra delay ON.", _png(fig)))
    return figs


def _bottleneck_buffer_key(cfg: Config) -> str | None:
    """The varied field that is a path's downstream buffer (the study-2 x axis), if any."""
    return next((k for k in cfg.extra if k.startswith("paths.") and k.endswith(".down.buffer")), None)


def dash_vs_buffer(c: Collection) -> list[Figure]:
    """experiments.md §2: average quality level and stall rate against the bottleneck buffer, one line
    per congestion control (× scheduler), mean ± 95 % CI over trials; one figure per scenario."""
    from core import units
    groups: dict[str, list[tuple[float, Config]]] = {}
    for cfg in c.configs:
        key = _bottleneck_buffer_key(cfg)
        st = cfg.stats.get("dash.quality_avg")
        if key is None or st is None or st.n == 0:
            continue
        try:
            x = units.parse_size(str(cfg.extra[key]))
        except ValueError:
            continue
        rest = ", ".join(f"{k}={v}" for k, v in cfg.extra.items() if k != key)
        groups.setdefault(cfg.scenario + (f" ({rest})" if rest else ""), []).append((float(x), cfg))
    figs = []
    for gname, pts in groups.items():
        ccs = sorted({cfg.cc for _, cfg in pts}, key=cc_order)
        fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.6))
        for ax, metric, ylabel in ((axes[0], "dash.quality_avg", "average quality level"),
                                   (axes[1], "dash.stall_rate", "stall rate ((playback − video) / video)")):
            lines: dict[tuple[str, str], list[tuple[float, Config]]] = {}
            for x, cfg in pts:
                lines.setdefault((cfg.cc, cfg.scheduler), []).append((x, cfg))
            for (cc, sched), lp in sorted(lines.items(), key=lambda kv: (cc_order(kv[0][0]), sched_order(kv[0][1]))):
                lp.sort(key=lambda t: t[0])
                xs = [x / 1e3 for x, _ in lp]
                sts = [cfg.stats[metric] for _, cfg in lp]
                ys = [s.mean for s in sts]
                err = [0.0 if math.isnan(s.ci_half) else s.ci_half for s in sts]
                ax.errorbar(xs, ys, yerr=err, color=cc_colour(cc, ccs), linestyle=SCHED_STYLES.get(sched, "-."),
                            marker="o", markersize=4, capsize=3, label=f"{cc.upper()} · {sched}")
            ax.set_xscale("log")
            ax.set_xlabel("bottleneck buffer (KB, log scale)")
            ax.set_ylabel(ylabel)
            ys_all = [cfg.stats[metric].mean for _, cfg in pts if cfg.stats[metric].n]
            if metric == "dash.stall_rate":
                # Playback timing noise makes stall rates of ±1e-5 where nothing stalled: keep the axis
                # at a scale where that reads as 0 (and show a slightly negative mean, not clip it).
                ax.set_ylim(min(0.0, min(ys_all, default=0.0) * 1.2), max(0.05, max(ys_all, default=0.0) * 1.15))
            else:
                ax.set_ylim(bottom=0)
            _style(ax)
        axes[1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.suptitle(f"DASH quality and stalls against the bottleneck buffer — {gname}", fontsize=11, x=0.02,
                     ha="left")
        fig.tight_layout()
        figs.append(Figure(f"dash-buffer-{gname}", f"DASH against buffer — {gname}",
                           "Average quality level over downloaded segments and stall rate, mean over trials with "
                           "95 % Student-t confidence intervals, against the bottleneck's tail-drop buffer.",
                           _png(fig)))
    return figs


Builder = Callable[[Collection], list[Figure]]


def _bars(c: Collection) -> list[Figure]:
    return [f for m, t, y in BAR_METRICS if (f := bar_figure(c, m, t, y)) is not None]


BUILDERS: list[tuple[str, Builder]] = [
    ("QoE and path switches per congestion control", _bars),
    ("Congestion window over time", lambda c: timeseries_figures(c, "cwnd")),
    ("Throughput per path over time", lambda c: timeseries_figures(c, "throughput")),
    ("DASH: quality and stalls against the bottleneck buffer", dash_vs_buffer),
]


def build_all(c: Collection) -> list[tuple[str, list[Figure]]]:
    return [(section, figs) for section, b in BUILDERS if (figs := b(c))]
