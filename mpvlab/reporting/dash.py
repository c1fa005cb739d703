"""Figures of the DASH studies from the runs' own files (docs/studies.md §2 and §4):

- the CCDF of the VoIP probe's queuing delay (data/cross/voip-probe.csv, `queuing_delay_ns`: the
  receiver's kernel rx stamp minus the sender's stamp, less the smallest such difference, see
  mpvlab/topologies/voip_probe.py), one line per configuration, every trial's packets pooled — SABRE's
  bufferbloat figure;
- the selected bitrate over time (each media segment's nominal bitrate from the players'
  player-summary.json, drawn from the moment its request was sent), a panel per configuration, one
  line per player — for one representative run per configuration.

- per client, for runs with two or more DASH players (the SABRE study's two clients sharing the link):
  each client's average bitrate and stall rate (bar = mean over trials, dots = trials) and Jain's
  fairness index of the clients' average bitrates per run (mpvlab.results.metrics.jain_index) — from the
  players' records in summary.json (`players.<role>.dash`); the same rows are the report's
  `clients.csv` (mpvlab/reporting/tables.py). Single-client runs have no such figure or table.

The quality level and stall rate against the bottleneck buffer (§2) is figures.dash_vs_buffer. Every
builder returns [] when its data is absent, so other studies' reports are unchanged.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mpvlab.input.files import InputFileError, load_result_json, open_data_csv  # noqa: E402
from mpvlab.results import metrics  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.results.aggregate import Collection, Config, Run  # noqa: E402
from mpvlab.reporting.figure import Figure  # noqa: E402

VOIP_CSV = Path("data") / "cross" / "voip-probe.csv"


def voip_delays_ms(run: Run, window: str = "whole_run") -> list[float]:
    """The probe's queuing delay of every received packet (ms) sent inside the run's named window
    (summary.json cross_traffic.voip.windows.<window>: start_s/end_s on the run's clock from t0_ns,
    mpvlab/results/delaywindows.py); the whole run: every packet. [] without a probe or without that window."""
    bounds: tuple[int, int] | None = None
    if window != "whole_run":
        w = ((run.summary.get("cross_traffic") or {}).get("voip") or {}).get("windows") or {}
        win = w.get(window)
        if not win or win.get("start_s") is None or w.get("t0_ns") is None:
            return []
        bounds = (int(w["t0_ns"]) + round(win["start_s"] * 1e9), int(w["t0_ns"]) + round(win["end_s"] * 1e9))
    try:
        with open_data_csv(run.run_dir / VOIP_CSV) as f:
            return [int(r["queuing_delay_ns"]) / 1e6 for r in csv.DictReader(f) if r.get("queuing_delay_ns")
                    and (bounds is None or bounds[0] <= int(r["t_send_ns"]) <= bounds[1])]
    except (OSError, KeyError, ValueError, InputFileError, csv.Error):
        return []


def ccdf(xs: list[float]) -> tuple[list[float], list[float]]:
    """(x, P(X > x)) at every distinct sample: a step function from 1 (below the minimum) to 0."""
    ys = sorted(xs)
    n = len(ys)
    out_x, out_p = [], []
    for i, x in enumerate(ys):
        if i + 1 < n and ys[i + 1] == x:
            continue                      # one point per distinct value: after its last copy
        out_x.append(x)
        out_p.append((n - i - 1) / n)
    return out_x, out_p


def player_summaries(run: Run) -> dict[str, dict[str, Any]]:
    """role → player-summary.json: logs/<role>/ in shared-bottleneck runs, logs/ (role 'client') else."""
    found: dict[str, dict[str, Any]] = {}
    logs = run.run_dir / "logs"
    cands = [("client", logs / "player-summary.json")] + [
        (p.parent.name, p) for p in sorted(logs.glob("*/player-summary.json"))]
    for role, p in cands:
        try:
            d = load_result_json(p)
        except (OSError, ValueError, InputFileError):
            continue
        if isinstance(d, dict) and d.get("segments"):
            found[role] = d
    return found


def bitrate_steps(ps: dict[str, Any]) -> tuple[list[float], list[float]]:
    """(t s, Mbit/s) for a post-step line: each media segment's bitrate from its request until the next
    request, the last one until its last byte arrived (else the last step would have no width)."""
    segs = sorted((s for s in ps.get("segments") or []
                   if isinstance(s, dict) and "t_request" in s and "bitrate_bps" in s),
                  key=lambda s: s.get("index", 0))
    ts = [float(s["t_request"]) for s in segs]
    vs = [s["bitrate_bps"] / 1e6 for s in segs]
    if segs:
        ts.append(max(ts[-1], float(segs[-1].get("t_last_byte", ts[-1]))))
        vs.append(vs[-1])
    return ts, vs


def _name(cfg: Config) -> str:
    return " · ".join([cfg.cc, *(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in cfg.extra.items())])


# The windows the CCDF figure draws, each in its own panel with the window named on the axis.
CCDF_WINDOWS = (("whole_run", "whole run"), ("steady_state", "steady state"))


def voip_ccdf_figures(c: Collection) -> list[Figure]:
    groups: dict[str, list[tuple[Config, dict[str, list[float]]]]] = {}
    for cfg in c.configs:
        d = {w: [x for r in cfg.runs for x in voip_delays_ms(r, w)] for w, _ in CCDF_WINDOWS}
        if d["whole_run"]:
            groups.setdefault(cfg.scenario, []).append((cfg, d))
    figs = []
    for scen, lines in groups.items():
        colours = st.SPARE_COLOURS["abr"] + [st.BLUE, st.VERMILLION, st.BLACK, st.YELLOW]
        windows = [(w, label) for w, label in CCDF_WINDOWS if any(d[w] for _, d in lines)]
        with matplotlib.rc_context(st.RC):
            fig, axes = plt.subplots(len(windows), 1, figsize=(st.COLUMN_W, 2.0 + 1.6 * len(windows)),
                                     layout="constrained", squeeze=False)
            for ax, (w, label) in zip(axes[:, 0], windows):
                for i, (cfg, d) in enumerate(lines):
                    if not d[w]:
                        continue
                    xs, ps = ccdf(d[w])
                    # P = 0 cannot sit on a log axis: the line ends at the largest sample's 1/n.
                    keep = [(x, p) for x, p in zip(xs, ps) if p > 0]
                    ax.step([x for x, _ in keep], [p for _, p in keep], where="post",
                            color=colours[i % len(colours)],
                            linestyle=st.SPARE_LINESTYLES[i % 2] if i >= len(colours) else "-",
                            label=f"{_name(cfg)} (n={len(d[w])})")
                ax.set_yscale("log")
                ax.set_xlabel(f"VoIP probe queuing delay (ms), {label}")
                ax.set_ylabel("P(delay > x)")
                ax.set_xlim(left=0)
                ax.grid(True, which="major")
            axes[0, 0].legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=1)
        figs.append(Figure(f"voip-ccdf-{scen}", f"VoIP probe queuing delay, CCDF — {scen}",
                           "Complementary CDF of the one-way queuing delay of the VoIP probe's packets (receiver's "
                           "kernel rx stamp − sender's stamp, less the smallest difference of the run: "
                           "mpvlab/topologies/voip_probe.py), every trial's packets pooled per configuration; one panel "
                           "per window, named on its axis: the whole run, and the steady state (from when every "
                           "player's buffer first held the buffer less one segment until the last download "
                           "completed, by packet send time: summary.json cross_traffic.voip.windows).", fig))
    return figs


SUBFLOWS_CSV = Path("data") / "subflows.csv"


def advertised_windows(run: Run) -> dict[str, tuple[list[float], list[int]]]:
    """peer → (t s, snd_wnd bytes) from the server's ss samples: the window each client last advertised
    (kernel tcpi_snd_wnd; ss prints it only when non-zero, so an empty cell is a closed window, 0).
    {} when the run's ss did not report it at all (older kernel or iproute2)."""
    out: dict[str, tuple[list[float], list[int]]] = {}
    seen = False
    try:
        with open_data_csv(run.run_dir / SUBFLOWS_CSV) as f:
            for r in csv.DictReader(f):
                if "snd_wnd" not in r:
                    return {}
                seen = seen or bool(r["snd_wnd"])
                ts, ws = out.setdefault(r["peer"], ([], []))
                ts.append(float(r["t_s"]))
                ws.append(int(r["snd_wnd"]) if r["snd_wnd"] else 0)
    except (OSError, KeyError, ValueError, InputFileError, csv.Error):
        return {}
    return out if seen else {}


def window_figures(c: Collection) -> list[Figure]:
    """The client's advertised receive window over time, one panel per configuration (its representative
    run), a line per client connection: the SABRE paper's point that an autotuned on/off client opens a
    window far larger than SABRE's (bursts at every "on"), from the server's `ss` samples."""
    groups: dict[str, list[tuple[Config, Run, dict[str, tuple[list[float], list[int]]]]]] = {}
    for cfg in c.configs:
        rep = cfg.representative()
        w = advertised_windows(rep)
        if w and player_summaries(rep):
            groups.setdefault(cfg.scenario, []).append((cfg, rep, w))
    figs = []
    colours = [st.BLUE, st.VERMILLION, st.GREEN, st.PURPLE, st.ORANGE, st.SKY, st.BLACK, st.YELLOW]
    for scen, rows in groups.items():
        rows = rows[:12]
        with matplotlib.rc_context(st.RC):
            fig, axes = plt.subplots(len(rows), 1, figsize=(st.FULL_W, 0.6 + 1.0 * len(rows)), sharex=True,
                                     squeeze=False, layout="constrained")
            for ax, (cfg, rep, w) in zip(axes[:, 0], rows):
                for i, (peer, (ts, ws)) in enumerate(sorted(w.items())):
                    ax.step(ts, [x / 1e3 for x in ws], where="post", color=colours[i % len(colours)],
                            label=peer.rsplit(":", 1)[0])
                ax.set_title(f"{_name(cfg)} — run {rep.run_id} (of {len(cfg.runs)})", loc="left", pad=2)
                ax.set_ylabel("KB")
                ax.set_ylim(bottom=0)
                ax.grid(axis="y")
            axes[-1, 0].set_xlabel("time since run time zero (s)")
            axes[0, 0].legend(loc="lower left", bbox_to_anchor=(0.0, 1.15), ncol=4)
        figs.append(Figure(f"rwnd-{scen}", f"Advertised receive window over time — {scen}",
                           "The window each client last advertised, as the server's `ss` saw it (tcpi_snd_wnd, "
                           "data/subflows.csv, 5 Hz; a missing value is a closed window), one line per client "
                           "connection, for one representative run per configuration.", fig))
    return figs


def bitrate_figures(c: Collection) -> list[Figure]:
    groups: dict[str, list[tuple[Config, Run, dict[str, dict[str, Any]]]]] = {}
    for cfg in c.configs:
        rep = cfg.representative()
        ps = player_summaries(rep)
        if ps:
            groups.setdefault(cfg.scenario, []).append((cfg, rep, ps))
    figs = []
    for scen, rows in groups.items():
        roles = sorted({r for _, _, ps in rows for r in ps})
        colours = [st.BLUE, st.VERMILLION, st.GREEN, st.PURPLE, st.ORANGE, st.SKY, st.BLACK, st.YELLOW]
        # Long grids (the BBR-S study: 140 configurations) get a figure per 12 panels.
        for part in range(0, len(rows), 12):
            chunk = rows[part:part + 12]
            with matplotlib.rc_context(st.RC):
                fig, axes = plt.subplots(len(chunk), 1, figsize=(st.FULL_W, 0.6 + 1.0 * len(chunk)), sharex=True,
                                         squeeze=False, layout="constrained")
                for ax, (cfg, rep, ps) in zip(axes[:, 0], chunk):
                    for role, p in ps.items():
                        ts, vs = bitrate_steps(p)
                        ax.step(ts, vs, where="post", color=colours[roles.index(role) % len(colours)], label=role)
                    ax.set_title(f"{_name(cfg)} — run {rep.run_id} (of {len(cfg.runs)})", loc="left", pad=2)
                    ax.set_ylabel("Mbit/s")
                    ax.set_ylim(bottom=0)
                    ax.grid(axis="y")
                axes[-1, 0].set_xlabel("request time since run time zero (s)")
                handles, labels = axes[0, 0].get_legend_handles_labels()
                if len(roles) > 1:
                    fig.legend(handles=handles, loc="outside upper right", ncol=len(handles))
                suffix = f" ({part // 12 + 1})" if len(rows) > 12 else ""
                fig.suptitle(f"Selected bitrate over time — {scen}{suffix}", x=0.01, ha="left")
            figs.append(Figure(f"dash-bitrate-{scen}{'-' + str(part // 12 + 1) if suffix else ''}",
                               f"Selected bitrate over time — {scen}{suffix}",
                               "Nominal bitrate of each media segment the ABR chose, from the moment its request "
                               "was sent (player-summary.json), one line per player; one representative run per "
                               "configuration.", fig))
    return figs


# ---------------------------------------------------------------------------------------------
# Several clients on one bottleneck: per-client QoE and fairness between them

CLIENT_FIELDS = ("bitrate_avg_bps", "quality_avg", "stall_rate", "rebuffer_ratio", "bitrate_switches")


def client_values(run: Run) -> dict[str, dict[str, float]] | None:
    """role → the player's DASH QoE (CLIENT_FIELDS, plus startup_delay_s when recorded) for a run with two
    or more players that all reported their DASH average bitrate; None otherwise (single-client runs)."""
    players = run.summary.get("players")
    if not isinstance(players, dict) or len(players) < 2:
        return None
    out: dict[str, dict[str, float]] = {}
    for role in sorted(players):
        p = players[role] if isinstance(players[role], dict) else {}
        dash_part = p.get("dash")
        d = dash_part if isinstance(dash_part, dict) else {}
        if not isinstance(d.get("bitrate_avg_bps"), (int, float)):
            return None
        vals = {k: float(d[k]) for k in CLIENT_FIELDS if isinstance(d.get(k), (int, float))}
        if isinstance(p.get("startup_delay_s"), (int, float)):
            vals["startup_delay_s"] = float(p["startup_delay_s"])
        out[role] = vals
    return out


def run_fairness(vals: dict[str, dict[str, float]]) -> float | None:
    """Jain's index of the clients' average bitrates (None when every one is 0)."""
    rates = [v["bitrate_avg_bps"] for v in vals.values()]
    return metrics.jain_index(rates) if any(rates) else None


def client_rows(c: Collection) -> list[dict[str, Any]]:
    """One row per run × client of every multi-client run: the configuration, the run, the client's QoE
    and the run's fairness index (repeated on each of its clients' rows)."""
    rows: list[dict[str, Any]] = []
    for cfg in c.configs:
        for r in cfg.runs:
            vals = client_values(r)
            if vals is None:
                continue
            jain = run_fairness(vals)
            for role, v in vals.items():
                rows.append({"config": cfg.label, "scenario": cfg.scenario, "cc": cfg.cc, "scheduler": cfg.scheduler,
                             "params": json.dumps(cfg.extra, sort_keys=True, default=str) if cfg.extra else "",
                             "trial": (r.sweep or {}).get("trial"), "run_id": r.run_id, "run_dir": r.rel,
                             "clients": len(vals), "client": role,
                             **{k: v.get(k) for k in (*CLIENT_FIELDS, "startup_delay_s")},
                             "bitrate_fairness_jain": jain})
    return rows


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def clients_figures(c: Collection) -> list[Figure]:
    """Per scenario: the clients' average bitrate and stall rate side by side per configuration, and Jain's
    index of their average bitrates — bars are means over trials, dots the trials."""
    groups: dict[str, list[tuple[Config, list[dict[str, dict[str, float]]]]]] = {}
    for cfg in c.configs:
        per_run = [v for r in cfg.runs if (v := client_values(r)) is not None]
        if per_run:
            groups.setdefault(cfg.scenario, []).append((cfg, per_run))
    figs = []
    colours = [st.BLUE, st.VERMILLION, st.GREEN, st.PURPLE, st.ORANGE, st.SKY, st.BLACK, st.YELLOW]
    for scen, rows in groups.items():
        roles = sorted({role for _, runs in rows for v in runs for role in v})
        width = 0.8 / len(roles)
        with matplotlib.rc_context(st.RC):
            fig, axes = plt.subplots(1, 3, figsize=(st.FULL_W, 2.6), layout="constrained",
                                     gridspec_kw={"width_ratios": [2, 2, 1.2]})
            for ax, key, ylabel, per in ((axes[0], "bitrate_avg_bps", "average bitrate (Mbit/s)", 1e6),
                                         (axes[1], "stall_rate", "stall rate", 1.0)):
                for gi, (_cfg, runs) in enumerate(rows):
                    for ri, role in enumerate(roles):
                        vals = [v[role][key] / per for v in runs if key in v.get(role, {})]
                        if not vals:
                            continue
                        x = gi - 0.4 + width * (ri + 0.5)
                        ax.bar(x, _mean(vals), width * 0.9, color=colours[ri % len(colours)], alpha=0.85,
                               edgecolor="black", linewidth=0.5, label=role if gi == 0 else None)
                        ax.scatter([x] * len(vals), vals, s=3, color="black", zorder=3, alpha=0.6, linewidths=0)
                ax.set_ylabel(ylabel)
                top = max((v[role][key] for _, runs in rows for v in runs for role in v if key in v[role]),
                          default=0.0)
                if key == "stall_rate":
                    # as figures.dash_vs_buffer: a scale on which timing noise (≤ 1e-3) reads as 0
                    ax.set_ylim(0.0, max(0.05, top * 1.15))
                else:
                    ax.set_ylim(0.0, None if top > 0 else 1.0)
            ax = axes[2]
            n_min = min(len(v) for _, runs in rows for v in runs)
            for gi, (_cfg, runs) in enumerate(rows):
                js = [j for v in runs if (j := run_fairness(v)) is not None]
                if js:
                    ax.bar(gi, _mean(js), 0.6, color="#BBBBBB", edgecolor="black", linewidth=0.5)
                    ax.scatter([gi] * len(js), js, s=3, color="black", zorder=3, alpha=0.6, linewidths=0)
            ax.axhline(1.0 / n_min, color="#555", linestyle=":", linewidth=0.8)
            ax.set_ylim(0.0, 1.05)
            ax.set_ylabel("Jain's index of average bitrates")
            for a in axes:
                a.set_xticks(range(len(rows)))
                a.set_xticklabels([_name(cfg) for cfg, _ in rows], rotation=30, ha="right")
                a.set_xlim(-0.5, len(rows) - 0.5)
                a.grid(axis="y")
            axes[0].legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=min(len(roles), 6))
            fig.suptitle(f"Clients sharing the bottleneck — {scen}", x=0.01, ha="left")
        ns = sorted({len(runs) for _, runs in rows})
        figs.append(Figure(f"dash-clients-{scen}", f"Clients sharing the bottleneck — {scen}",
                           "Each client's DASH average bitrate and stall rate per configuration (bar = mean over "
                           f"trials, n = {', '.join(map(str, ns))}; dots = trials), and Jain's fairness index of the "
                           "clients' average bitrates per run, (Σx)² / (N·Σx²) (dotted: 1/N, one client took "
                           "everything). From the players' records in summary.json; values in clients.csv.", fig))
    return figs
