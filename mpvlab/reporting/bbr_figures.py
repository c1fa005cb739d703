"""The BBR model's figures (mpvlab/reporting/bbr.py computes the models): per scenario, each
configuration's representative run over time (estimate against the link rate, the mode strip, min
RTT), the share of time per mode, and the estimate over the link rate with the min RTT.

Split out of bbr.py (issue 46): that module computes the models, tables and the page's rows without
drawing; this one only draws them (mpvlab/reporting/figures.py builds each figure as its own part).
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.reporting.bbr import ConfigModel, config_models, group_of, link_rates, load_series, state_order  # noqa: E402
from mpvlab.reporting.figure import GREY_SHADE, Figure, square_on_intervals  # noqa: E402
from mpvlab.results.aggregate import Collection, cc_order, sched_order  # noqa: E402
from mpvlab.results.stats import Summary  # noqa: E402


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
