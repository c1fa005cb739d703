"""Per-run figures from a result directory alone: cwnd of each path's subflow and throughput of each
path over the run, with the configured one-way delay of each path's downlink (the published Wi-Fi/LTE
study's figures). `mpvlab plot RUN_DIR` writes RUN_DIR/plots/cwnd_throughput.{pdf,svg,png}, in the
report's style (mpvlab/reporting/style.py: the same colour per path, sizes for a paper's text width, PNG
at 300 dpi) and with the report's throughput binning (1 s, mpvlab/reporting/figures.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mpvlab.links.schedule import Schedule  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.reporting.capacity import configured_capacity  # noqa: E402

BIN_S = 1.0     # the report's bin (figures.throughput_series), so both show the same curve


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
    """Writes the figure as PDF, SVG and PNG; returns the PNG's path."""
    from mpvlab.results.aggregate import Run, load_run
    from mpvlab.reporting.figure import render
    from mpvlab.reporting.figures import throughput_series
    from mpvlab.reporting.output import FORMATS, Output

    paths = _paths(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    end = float(summary.get("duration_s") or 0) + 1.0
    sty = st.style_for(path=list(paths))
    # cwnd per path (the scheduler trace's per-subflow samples, taken on ACKs)
    series: dict[str, tuple[list[float], list[int]]] = {n: ([], []) for n in paths}
    with (run_dir / "data" / "schedtrace" / "subflow_samples.csv").open() as f:
        for row in csv.DictReader(f):
            remote = row["subflow"].split("-", 1)[1].rsplit(":", 1)[0]
            for name, addr in paths.items():
                if remote == addr:
                    series[name][0].append(float(row["t"]))
                    series[name][1].append(int(row["cwnd"]))
    run = load_run(run_dir, run_dir.parent)
    tput = throughput_series(run, BIN_S) if isinstance(run, Run) else {}     # not complete: no counters to trust
    with matplotlib.rc_context(st.RC):
        fig, (ax_cwnd, ax_tput, ax_delay) = plt.subplots(3, 1, figsize=(st.FULL_W, 4.6), sharex=True,
                                                         gridspec_kw={"height_ratios": [3, 3, 1.5]},
                                                         layout="constrained")
        for name, (ts, cw) in series.items():
            ax_cwnd.plot(ts, cw, color=sty.colour("path", name), lw=0.8, label=sty.label("path", name))
        ax_cwnd.set_ylabel("cwnd (packets)")
        ax_cwnd.legend(loc="upper right", ncol=len(series))
        ax_cwnd.set_title(f"{summary['scenario']} — {summary['cc']}, scheduler {summary['scheduler']}, run "
                          f"{summary['run_id']}", loc="left")
        # throughput per path from the client's interface counters
        for name, (ts, rates) in tput.items():
            ax_tput.plot(ts, rates, color=sty.colour("path", name), label=sty.label("path", name),
                         drawstyle="steps-mid")
        # the configured capacity of each path's downlink, dashed, beside what it achieved
        for name, cap in configured_capacity(run_dir, BIN_S, end).items():
            ax_tput.plot([t for t, _ in cap], [b / 1e6 for _, b in cap], color=sty.colour("path", name), lw=0.8,
                         ls="--", drawstyle="steps-mid", label=f"{sty.label('path', name)} configured")
        ax_tput.set_ylabel(f"Mbit/s ({BIN_S:g} s bins,\non the wire;\ndashed: configured)")
        ax_tput.set_ylim(bottom=0)
        # the configured downlink delay of each path
        for name in paths:
            sched = _schedule(run_dir, f"{name}-down")
            if sched is None:
                continue
            ts = [x / 10 for x in range(int(end * 10))]
            ax_delay.step(ts, [sched.delay_at(int(t * 1e9)) / 1e6 for t in ts], where="post",
                          color=sty.colour("path", name), label=sty.label("path", name))
        ax_delay.set_ylabel("one-way delay\n(ms, configured)")
        ax_delay.set_xlabel("time since the player started (s)")
        ax_delay.set_xlim(0, end)
        for ax in (ax_cwnd, ax_tput, ax_delay):
            ax.grid(alpha=0.3)
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    # one figure: every format (the report's default leaves PNG out to save time over many figures)
    for fmt, data in render(fig, Output(FORMATS)).items():
        (out_dir / f"cwnd_throughput.{fmt}").write_bytes(data)
    return out_dir / "cwnd_throughput.png"
