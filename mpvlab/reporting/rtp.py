"""Figures of the WebRTC live-video study (docs/studies.md §3, sweeps/webrtc-study.yaml) from the runs'
own records — every run whose summary has an `rtp` part (mpvlab/runner/workloads/rtp.py):

- the average received bitrate per controller, grouped by condition, one panel without and one with
  TCP competition (a run competes when its summary records cross traffic other than the VoIP probe);
- the bitrate difference GCC − webrtc-bbr over the condition grid: RTT × rate, a panel per buffer
  (runs without competition; mean over trials), with its numbers in a CSV beside the figure;
- the controllers' estimated bandwidth and min RTT against the achieved bitrate, one point per run.

Definitions (the report's, stated once here):
- achieved (average) bitrate = 8 × RTP bytes the viewer received / the viewer's first-to-last packet
  time (summary `rtp.rtp_bytes_received`, `duration_s`): what the stream delivered, headers included;
- condition = (RTT = down + up one-way delay, bottleneck rate, buffer) of the run's one path, read
  from resolved.yaml; the buffer's class is its rank among the buffers seen at the same RTT and rate
  ("shallow" the smallest, "deep" the largest), so the figure follows whatever rule the sweep named;
- a controller's estimate = the time-weighted mean, over the stream's second half, of the step
  series in logs/rtp/sender/targets.csv: webrtc-bbr's `bwEstimate` and `minRTTms` (its bandwidth
  filter and min-RTT filter); GCC's estimate is its target (the lower of its delay- and loss-based
  rates) and GCC keeps no min-RTT estimate, so its runs are absent from the min-RTT panel.

Every builder returns [] when no run has an `rtp` part, so other studies' reports are unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mpvlab.core import units  # noqa: E402
from mpvlab.input.files import InputFileError, open_data_csv  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.results.aggregate import Collection, Run  # noqa: E402
from mpvlab.reporting.figure import Figure  # noqa: E402
from mpvlab.workloads.rtp import WebrtcBbrVariant  # noqa: E402

TARGETS_CSV = Path("logs") / "rtp" / "sender" / "targets.csv"
WIRE_PACKET = 1514          # bytes a 'Npkt' buffer holds per packet (full-size Ethernet frame), for ranking
CONTROLLER_COLOURS = {"gcc": st.BLUE, "webrtc-bbr": st.VERMILLION}
DIFF_PAIR = ("gcc", "webrtc-bbr")


@dataclass(frozen=True)
class Condition:
    rtt_ms: float
    rate_bps: int
    buffer: str                 # as the scenario gave it (e.g. 6250B, 256pkt)
    buffer_bytes: int

    @property
    def bdp_bytes(self) -> float:
        return self.rate_bps / 8 * self.rtt_ms / 1e3


def condition(run: Run) -> Condition | None:
    """The run's bottleneck: its one path with a down rate (None when there is none or several)."""
    r = run.resolved
    paths = sorted({k.split(".")[1] for k in r if k.startswith("paths.") and k.endswith(".down.rate")
                    and r[k] is not None})
    if len(paths) != 1:
        return None
    pre = f"paths.{paths[0]}."
    try:
        rtt_ns = sum(units.parse_duration_ns(r.get(f"{pre}{d}.delay.value") or 0) for d in ("down", "up"))
        rate = units.parse_rate(r[pre + "down.rate"])
        buf = str(r.get(pre + "down.buffer"))
        q = units.parse_queue_limit(buf)
    except (KeyError, ValueError, units.UnitError):
        return None
    return Condition(rtt_ns / 1e6, rate, buf, q.bytes if q.bytes is not None else (q.packets or 0) * WIRE_PACKET)


def rtp_record(run: Run) -> dict[str, Any] | None:
    rec = run.summary.get("rtp")
    return rec if isinstance(rec, dict) else None


def achieved_bps(run: Run) -> float | None:
    rec, dur = rtp_record(run), run.summary.get("duration_s")
    if rec is None or not isinstance(dur, (int, float)) or dur <= 0:
        return None
    return 8 * rec["rtp_bytes_received"] / dur


def competing(run: Run) -> bool:
    """Cross traffic other than the VoIP probe (which measures the queue, it does not compete)."""
    cross = run.summary.get("cross_traffic")
    return isinstance(cross, dict) and any(v for k, v in cross.items() if k != "voip")


def buffer_classes(conds: list[Condition]) -> dict[Condition, str]:
    """Each condition's buffer class: its rank among the buffers at the same RTT and rate."""
    by_cell: dict[tuple[float, int], set[int]] = {}
    for c in conds:
        by_cell.setdefault((c.rtt_ms, c.rate_bps), set()).add(c.buffer_bytes)
    out = {}
    for c in conds:
        sizes = sorted(by_cell[(c.rtt_ms, c.rate_bps)])
        i = sizes.index(c.buffer_bytes)
        out[c] = ("shallow" if i == 0 else "deep" if i == len(sizes) - 1 else f"buffer {i + 1}") \
            if len(sizes) > 1 else "buffer"
    return out


def _rate_text(bps: int) -> str:
    return f"{bps / 1e6:g} Mbit/s"


def _cond_text(c: Condition, cls: str) -> str:
    return f"{c.rtt_ms:g} ms · {_rate_text(c.rate_bps)} · {cls} ({c.buffer_bytes / c.bdp_bytes:.1f}×BDP)"


def _study_runs(c: Collection) -> list[tuple[Run, Condition, float]]:
    out = []
    for r in c.runs:
        cond, bps = condition(r), achieved_bps(r)
        if rtp_record(r) is not None and cond is not None and bps is not None:
            out.append((r, cond, bps))
    return out


# workload.bbr's fields at WebRTC's own behaviour; a run that differs is labelled by what differs.
# WebRTC's own BBR: the variant model's defaults (one place, so a new variant field labels itself)
BBR_DEFAULTS = WebrtcBbrVariant().model_dump()


def _ctrl(run: Run) -> str:
    """The controller's label: its name, and for a webrtc-bbr variant what differs from WebRTC's own
    (so variants are their own bars and points, and the GCC − BBR difference compares WebRTC's own)."""
    rec = rtp_record(run) or {}
    name = str(rec.get("controller") or "?")
    variant = rec.get("bbr_variant") or {}
    changed = [f"{k} {v}" if not isinstance(v, bool) else f"{k} {'on' if v else 'off'}"
               for k, v in variant.items() if k in BBR_DEFAULTS and v != BBR_DEFAULTS[k]]
    return f"{name} ({', '.join(changed)})" if changed else name


def _controllers(runs: list[tuple[Run, Condition, float]]) -> list[str]:
    seen = {_ctrl(r) for r, _, _ in runs}
    return [x for x in DIFF_PAIR if x in seen] + sorted(seen - set(DIFF_PAIR))


def _colour(ctrl: str, ctrls: list[str]) -> str:
    spare = [st.GREEN, st.PURPLE, st.ORANGE, st.SKY, st.BLACK]
    return CONTROLLER_COLOURS.get(ctrl) or spare[ctrls.index(ctrl) % len(spare)]


# ---------------------------------------------------------------------------------------------
# (a) average bitrate per controller, without and with competition


def bitrate_figures(c: Collection) -> list[Figure]:
    runs = _study_runs(c)
    if not runs:
        return []
    classes = buffer_classes([cond for _, cond, _ in runs])
    ctrls = _controllers(runs)
    conds = sorted({cond for _, cond, _ in runs}, key=lambda x: (x.rtt_ms, x.rate_bps, x.buffer_bytes))
    panels = []
    for comp in (False, True):
        sel = [(r, cond, bps) for r, cond, bps in runs if competing(r) == comp]
        panels.append((comp, sel, [x for x in conds if any(cond == x for _, cond, _ in sel)]))
    # each panel as tall as its conditions need; an empty one keeps room for its note only
    heights = [max(len(here), 1.5) for _, _, here in panels]
    with matplotlib.rc_context(st.RC):
        fig, axes = plt.subplots(2, 1, figsize=(st.FULL_W, 1.4 + 0.3 * sum(heights)), squeeze=False,
                                 layout="constrained", gridspec_kw={"height_ratios": heights})
        for ax, (comp, sel, here) in zip(axes[:, 0], panels):
            ax.set_title("with TCP competition" if comp else "without competition", loc="left", pad=2)
            if not here:
                ax.text(0.5, 0.5, "no competition runs" if comp else "no runs without competition",
                        ha="center", va="center", transform=ax.transAxes)
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            w = 0.8 / len(ctrls)
            for j, ctrl in enumerate(ctrls):
                for i, x in enumerate(here):
                    vals = [bps / 1e6 for r, cond, bps in sel if cond == x and _ctrl(r) == ctrl]
                    if not vals:
                        continue
                    m = statistics.fmean(vals)
                    # the bar is the mean over trials; the whisker spans the trials' min … max
                    ax.barh(i + (j - (len(ctrls) - 1) / 2) * w, m, height=w, color=_colour(ctrl, ctrls),
                            xerr=[[m - min(vals)], [max(vals) - m]] if len(vals) > 1 else None,
                            label=ctrl if i == 0 else None)
            ax.set_yticks(range(len(here)), [_cond_text(x, classes[x]) for x in here])
            ax.invert_yaxis()
            ax.set_xlabel("average received bitrate (Mbit/s)")
            ax.set_xlim(left=0)
            ax.grid(axis="x")
        handles = [h for ax in axes[:, 0] for h in ax.get_legend_handles_labels()[0]]
        labels = [lb for ax in axes[:, 0] for lb in ax.get_legend_handles_labels()[1]]
        uniq = dict(zip(labels, handles))
        if uniq:
            fig.legend(list(uniq.values()), list(uniq), loc="outside upper right", ncol=len(uniq))
    return [Figure("rtp-bitrate-per-controller", "RTP: average received bitrate per controller",
                   "Average received bitrate (8 × RTP bytes at the viewer / first-to-last packet time) per "
                   "controller and condition (RTT · bottleneck rate · buffer class, buffer as a multiple of "
                   "the BDP), mean over trials (whiskers: min … max); top without competition, bottom with "
                   "TCP cross traffic on the bottleneck.", fig)]


# ---------------------------------------------------------------------------------------------
# (b) the GCC − webrtc-bbr difference over the condition grid


def difference_rows(c: Collection) -> list[dict[str, Any]]:
    """One row per condition (runs without competition) where both controllers ran: the mean achieved
    bitrate of each over its trials and GCC − BBR. The figure and its CSV are drawn from these."""
    runs = [x for x in _study_runs(c) if not competing(x[0])]
    classes = buffer_classes([cond for _, cond, _ in runs])
    by: dict[tuple[Condition, str], list[float]] = {}
    for r, cond, bps in runs:
        by.setdefault((cond, _ctrl(r)), []).append(bps)
    rows = []
    for cond in sorted({cond for _, cond, _ in runs}, key=lambda x: (x.rtt_ms, x.rate_bps, x.buffer_bytes)):
        a, b = by.get((cond, DIFF_PAIR[0])), by.get((cond, DIFF_PAIR[1]))
        if not a or not b:
            continue
        ma, mb = statistics.fmean(a), statistics.fmean(b)
        rows.append({"rtt_ms": cond.rtt_ms, "rate_bps": cond.rate_bps, "buffer": cond.buffer,
                     "buffer_bytes": cond.buffer_bytes, "buffer_class": classes[cond],
                     "buffer_bdp": round(cond.buffer_bytes / cond.bdp_bytes, 3),
                     "gcc_bps": round(ma, 1), "webrtc_bbr_bps": round(mb, 1), "diff_bps": round(ma - mb, 1),
                     "gcc_trials": len(a), "webrtc_bbr_trials": len(b)})
    return rows


def rows_csv(rows: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def difference_figures(c: Collection) -> list[Figure]:
    rows = difference_rows(c)
    if not rows:
        return []
    classes = list(dict.fromkeys(r["buffer_class"] for r in sorted(rows, key=lambda r: r["buffer_bytes"])))
    rtts = sorted({r["rtt_ms"] for r in rows})
    rates = sorted({r["rate_bps"] for r in rows})
    lim = max(abs(r["diff_bps"]) for r in rows) / 1e3 or 1.0     # symmetric colour scale around 0
    with matplotlib.rc_context(st.RC):
        fig, axes = plt.subplots(1, len(classes), figsize=(st.FULL_W, 0.9 + 0.45 * len(rtts)), squeeze=False,
                                 layout="constrained")
        im = None
        for ax, cls in zip(axes[0], classes):
            grid = [[math.nan] * len(rates) for _ in rtts]
            for r in rows:
                if r["buffer_class"] == cls:
                    grid[rtts.index(r["rtt_ms"])][rates.index(r["rate_bps"])] = r["diff_bps"] / 1e3
            im = ax.imshow(grid, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    if not math.isnan(v):
                        # white on the scale's dark ends, black elsewhere: readable either way
                        ax.text(j, i, f"{v:+.0f}", ha="center", va="center", fontsize=7,
                                color="white" if abs(v) > 0.6 * lim else "black")
            ax.set_xticks(range(len(rates)), [f"{x / 1e6:g}" for x in rates])
            ax.set_yticks(range(len(rtts)), [f"{x:g}" for x in rtts])
            ax.set_xlabel("bottleneck (Mbit/s)")
            ax.set_title(f"{cls} buffer", loc="left", pad=2)
        axes[0, 0].set_ylabel("RTT (ms)")
        assert im is not None       # rows is not empty, so at least one buffer class was drawn
        fig.colorbar(im, ax=list(axes[0]), label="GCC − BBR (kbit/s)")
    f = Figure("rtp-bitrate-diff-gcc-bbr", "RTP: bitrate difference GCC − webrtc-bbr over the condition grid",
               "Mean achieved bitrate of GCC minus that of webrtc-bbr (kbit/s; red: GCC higher) per RTT × "
               "bottleneck rate, one panel per buffer class, runs without competition, mean over each "
               "controller's trials; cells where either controller has no run are blank. The numbers are "
               "in rtp-bitrate-diff-gcc-bbr.csv beside the figure.", fig)
    f.tables["csv"] = rows_csv(rows)
    return [f]


# ---------------------------------------------------------------------------------------------
# (c) estimated bandwidth and min RTT against the achieved bitrate


def _series(run: Run) -> list[tuple[float, dict[str, float]]]:
    """(t s, {target_bps, bwEstimate, minRTTms, …}) per controller update, from targets.csv."""
    try:
        with open_data_csv(run.run_dir / TARGETS_CSV) as f:
            rows = list(csv.DictReader(f))
    except (OSError, InputFileError, csv.Error):
        return []
    out = []
    for row in rows:
        try:
            stats = json.loads(row.get("controller_stats") or "{}")
            vals = {k: float(v) for k, v in stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            vals["target_bps"] = float(row["target_bps"])
            out.append((float(row["t_s"]), vals))
        except (KeyError, ValueError, TypeError):
            continue
    return out


def second_half_mean(series: list[tuple[float, dict[str, float]]], key: str, t0: float, t1: float) -> float | None:
    """Time-weighted mean of a step series (each value holds until the next update) over the second
    half [t0 + (t1 − t0)/2, t1] of the stream, weighting only time where the key has a value; None
    when it has none there."""
    a = t0 + (t1 - t0) / 2
    pts = [(t, v[key]) for t, v in series if key in v]
    acc = covered = 0.0
    for i, (t, v) in enumerate(pts):
        lo, hi = max(t, a), min(pts[i + 1][0] if i + 1 < len(pts) else t1, t1)
        if hi > lo:
            acc += v * (hi - lo)
            covered += hi - lo
    return acc / covered if covered > 0 else None


def estimates(run: Run) -> tuple[float | None, float | None]:
    """(estimated bandwidth bit/s, min RTT ms) over the stream's second half (module docstring)."""
    rec = rtp_record(run) or {}
    enc = rec.get("encoder_per_second") or []
    if not enc:
        return None, None
    t0, t1 = float(enc[0]["t_s"]), float(enc[-1]["t_s"]) + 1.0
    s = _series(run)
    bw_key = "target_bps" if rec.get("controller") == "gcc" else "bwEstimate"
    return second_half_mean(s, bw_key, t0, t1), second_half_mean(s, "minRTTms", t0, t1)


def estimate_figures(c: Collection) -> list[Figure]:
    runs = _study_runs(c)
    if not runs:
        return []
    ctrls = _controllers(runs)
    classes = buffer_classes([cond for _, cond, _ in runs])
    markers = {"shallow": "o", "deep": "s"}
    with matplotlib.rc_context(st.RC):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(st.FULL_W, 2.6), layout="constrained")
        top, right, rtt_top = 0.0, 0.0, 0.0
        for r, cond, bps in runs:
            right = max(right, bps / 1e6)
            bw, mrtt = estimates(r)
            ctrl = _ctrl(r)
            col = _colour(ctrl, ctrls)
            kw: dict[str, Any] = {"marker": markers.get(classes[cond], "^"), "s": 14, "edgecolors": col, "alpha": 0.8,
                                  "facecolors": "none" if competing(r) else col}
            if bw is not None:
                a1.scatter(bps / 1e6, bw / 1e6, **kw)
                top = max(top, bw / 1e6, bps / 1e6)
            if mrtt is not None:
                a2.scatter(bps / 1e6, mrtt, **kw)
                rtt_top = max(rtt_top, mrtt, cond.rtt_ms)
        # the configured base RTTs (no queue), what a min-RTT filter should find
        for i, rtt in enumerate(sorted({cond.rtt_ms for _, cond, _ in runs})):
            a2.axhline(rtt, color=st.BLACK, lw=0.6, ls=":", label="base RTT" if i == 0 else None)
        a1.plot([0, top * 1.05 or 1], [0, top * 1.05 or 1], color=st.BLACK, lw=0.6, ls="--", label="y = x")
        a1.set_xlabel("achieved bitrate (Mbit/s)")
        a1.set_ylabel("estimated bandwidth (Mbit/s)")
        a2.set_xlabel("achieved bitrate (Mbit/s)")
        a2.set_ylabel("min RTT estimate (ms)")
        if not a2.collections:
            a2.text(0.5, 0.5, "no min-RTT estimates\n(GCC keeps none)", ha="center", va="center",
                    transform=a2.transAxes)
        for ax, ytop in ((a1, top), (a2, rtt_top or max(cond.rtt_ms for _, cond, _ in runs))):
            ax.set_xlim(0, right * 1.08 or 1)       # margins: points at the maximum stay inside the axes
            ax.set_ylim(0, ytop * 1.12 or 1)
            ax.grid(True)
        a2.legend(loc="lower right")
        for ctrl in ctrls:
            a1.scatter([], [], color=_colour(ctrl, ctrls), marker="o", s=14, label=ctrl)
        a1.legend(loc="upper left")
    return [Figure("rtp-estimates-vs-bitrate", "RTP: estimated bandwidth and min RTT against achieved bitrate",
                   "One point per run: the controller's estimate (time-weighted mean over the stream's second "
                   "half; webrtc-bbr: its bandwidth filter and min-RTT filter; GCC: its target, and no min RTT) "
                   "against the run's average received bitrate. Circles: shallow buffer, squares: deep; hollow: "
                   "with TCP competition.", fig)]
