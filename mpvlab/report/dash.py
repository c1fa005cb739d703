"""Figures of the DASH studies from the runs' own files (docs/studies.md §2 and §4):

- the CCDF of the VoIP probe's queuing delay (data/cross/voip-probe.csv, `queuing_delay_ns`: the
  receiver's kernel rx stamp minus the sender's stamp, less the smallest such difference, see
  topologies/voip_probe.py), one line per configuration, every trial's packets pooled — SABRE's
  bufferbloat figure;
- the selected bitrate over time (each media segment's nominal bitrate from the players'
  player-summary.json, drawn from the moment its request was sent), a panel per configuration, one
  line per player — for one representative run per configuration.

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

from mpvlab.report import style as st  # noqa: E402
from mpvlab.report.aggregate import Collection, Config, Run  # noqa: E402
from mpvlab.report.figure import Figure  # noqa: E402

VOIP_CSV = Path("data") / "cross" / "voip-probe.csv"


def voip_delays_ms(run: Run) -> list[float]:
    """The probe's queuing delay of every received packet (ms); [] without a probe."""
    try:
        with (run.run_dir / VOIP_CSV).open(newline="") as f:
            return [int(r["queuing_delay_ns"]) / 1e6 for r in csv.DictReader(f) if r.get("queuing_delay_ns")]
    except (OSError, KeyError, ValueError):
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
            d = json.loads(p.read_text())
        except (OSError, ValueError):
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


def voip_ccdf_figures(c: Collection) -> list[Figure]:
    groups: dict[str, list[tuple[Config, list[float]]]] = {}
    for cfg in c.configs:
        d = [x for r in cfg.runs for x in voip_delays_ms(r)]
        if d:
            groups.setdefault(cfg.scenario, []).append((cfg, d))
    figs = []
    for scen, lines in groups.items():
        colours = st.SPARE_COLOURS["abr"] + [st.BLUE, st.VERMILLION, st.BLACK, st.YELLOW]
        with matplotlib.rc_context(st.RC):
            fig, ax = plt.subplots(figsize=(st.COLUMN_W, 2.4), layout="constrained")
            for i, (cfg, d) in enumerate(lines):
                xs, ps = ccdf(d)
                # P = 0 cannot sit on a log axis: the line ends at the largest sample's 1/n.
                keep = [(x, p) for x, p in zip(xs, ps) if p > 0]
                ax.step([x for x, _ in keep], [p for _, p in keep], where="post", color=colours[i % len(colours)],
                        linestyle=st.SPARE_LINESTYLES[i % 2] if i >= len(colours) else "-",
                        label=f"{_name(cfg)} (n={len(d)})")
            ax.set_yscale("log")
            ax.set_xlabel("VoIP probe queuing delay (ms)")
            ax.set_ylabel("P(delay > x)")
            ax.set_xlim(left=0)
            ax.grid(True, which="major")
            ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=1)
        figs.append(Figure(f"voip-ccdf-{scen}", f"VoIP probe queuing delay, CCDF — {scen}",
                           "Complementary CDF of the one-way queuing delay of the VoIP probe's packets (receiver's "
                           "kernel rx stamp − sender's stamp, less the smallest difference of the run: "
                           "topologies/voip_probe.py), every trial's packets pooled per configuration.", fig))
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
