"""Per-run figures from a result directory alone: cwnd of each path's subflow and throughput of each
path over the run, with the configured one-way delay of each path's downlink (the published Wi-Fi/LTE
study's figures). `mpvlab plot RUN_DIR` writes them to RUN_DIR/plots/."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from links.schedule import Schedule  # noqa: E402

COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
BIN_S = 0.5


def _paths(run_dir: Path) -> dict[str, str]:
    """path name -> client address (to map subflows to paths)."""
    prov = json.loads((run_dir / "provenance.json").read_text())
    return {name: p["client_addr"] for name, p in prov["topology"]["paths"].items()}


def _schedule(run_dir: Path, label: str) -> Schedule | None:
    prov = json.loads((run_dir / "provenance.json").read_text())
    link = prov.get("links", {}).get(label)
    if not link:
        return None
    lines = link["schedule"]
    period = int(lines[0].split()[1]) * 1000
    points = [tuple(int(x) * 1000 for x in ln.split()) for ln in lines[1:]]
    return Schedule.piecewise([(t, d) for t, d in points], period)


def plot_run(run_dir: Path) -> Path:
    paths = _paths(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    end = float(summary.get("duration_s") or 0) + 1.0
    fig, (ax_cwnd, ax_tput, ax_delay) = plt.subplots(3, 1, figsize=(10, 8), sharex=True,
                                                     gridspec_kw={"height_ratios": [3, 3, 1.5]})
    # cwnd per path (the scheduler trace's per-subflow samples, taken on ACKs)
    series: dict[str, tuple[list[float], list[int]]] = {n: ([], []) for n in paths}
    with (run_dir / "data" / "schedtrace" / "subflow_samples.csv").open() as f:
        for row in csv.DictReader(f):
            remote = row["subflow"].split("-", 1)[1].rsplit(":", 1)[0]
            for name, addr in paths.items():
                if remote == addr:
                    series[name][0].append(float(row["t"]))
                    series[name][1].append(int(row["cwnd"]))
    for i, (name, (ts, cw)) in enumerate(series.items()):
        ax_cwnd.plot(ts, cw, color=COLOURS[i], lw=0.8, label=name)
    ax_cwnd.set_ylabel("cwnd (packets)")
    ax_cwnd.legend(loc="upper right")
    ax_cwnd.set_title(f"{summary['scenario']} — {summary['cc']}, scheduler {summary['scheduler']}, run "
                      f"{summary['run_id']}")
    # throughput per path from the client's interface counters, in BIN_S bins
    rx: dict[str, list[tuple[float, int]]] = {n: [] for n in paths}
    with (run_dir / "data" / "links.csv").open() as f:
        for row in csv.DictReader(f):
            rx[row["path"]].append((float(row["t_s"]), int(row["rx_bytes"])))
    for i, (name, samples) in enumerate(rx.items()):
        ts, rates = [], []
        j = 0
        for k in range(1, len(samples)):
            if samples[k][0] - samples[j][0] >= BIN_S:
                ts.append((samples[k][0] + samples[j][0]) / 2)
                rates.append((samples[k][1] - samples[j][1]) * 8 / (samples[k][0] - samples[j][0]) / 1e6)
                j = k
        ax_tput.plot(ts, rates, color=COLOURS[i], lw=1.0, label=name)
    ax_tput.set_ylabel(f"throughput (Mbit/s, {BIN_S:g} s bins, on the wire)")
    ax_tput.legend(loc="upper right")
    # the configured downlink delay of each path
    for i, name in enumerate(paths):
        sched = _schedule(run_dir, f"{name}-down")
        if sched is None:
            continue
        ts = [x / 10 for x in range(int(end * 10))]
        ax_delay.step(ts, [sched.delay_at(int(t * 1e9)) / 1e6 for t in ts], where="post", color=COLOURS[i],
                      lw=1.0, label=name)
    ax_delay.set_ylabel("one-way delay\n(ms, configured)")
    ax_delay.set_xlabel("time since the player started (s)")
    ax_delay.set_xlim(0, end)
    for ax in (ax_cwnd, ax_tput, ax_delay):
        ax.grid(alpha=0.3)
    out = run_dir / "plots" / "cwnd_throughput.png"
    out.parent.mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
