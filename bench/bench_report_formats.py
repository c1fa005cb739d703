#!/usr/bin/env python3
"""Where a report's figure time goes, per format (docs/cost.md, "Where the figure time goes").

Writes the synthetic set of bench_report.py (3 scenarios × 3 CCs × 3 schedulers × trials, 20 s of
series each), builds every figure of the report (figures.BUILDERS) in this one process, then saves
each figure PNG → PDF → SVG exactly as figure.render does (the layout engine dropped after the PNG),
and prints the CPU time (getrusage of this process) of the build and of each format: the total over
all figures, the share of the rendering, and the range per figure. Serial on purpose: the report
renders in parallel workers, which would hide what each format costs. Prints the load beside the
figures; not a test.

    .venv/bin/python bench/bench_report_formats.py [--runs 1000] [--series-s 20]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
SCENARIOS = ["wifi-lte-a", "wifi-lte-b", "wifi-lte-c"]
CCS = ["cubic", "bbr", "bbr-s"]
SCHEDULERS = ["minrtt", "bdp", "default"]


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--series-s", type=int, default=20, help="seconds of links/subflows CSV per run")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpvlab.reporting import style as st
    from mpvlab.reporting.figures import BUILDERS
    from mpvlab.reporting.synthetic import make_set
    from mpvlab.results.aggregate import aggregate

    base = Path(tempfile.mkdtemp(prefix="bench-report-formats-"))
    try:
        trials = max(1, round(args.runs / 27))
        make_set(base / "src", SCENARIOS, CCS, SCHEDULERS, trials, series_s=args.series_s, n_failed=3)
        print(f"{27 * trials} synthetic runs, {args.series_s} s of series each; "
              f"load (1/5/15 min) {_load()} on {os.cpu_count()} CPUs at the start")
        c = aggregate(base / "src")
        per: dict[str, list[float]] = {"build": [], "png": [], "pdf": [], "svg": []}
        names: list[str] = []
        for _section, builder in BUILDERS:
            before = _cpu_self()
            figs = builder(c)
            if not figs:
                continue
            per["build"] += [(_cpu_self() - before) / len(figs)] * len(figs)   # builders make a section at once
            for f in figs:
                names.append(f.id)
                with matplotlib.rc_context(st.RC):
                    for fmt in ("png", "pdf", "svg"):          # the order and settings of figure.render
                        meta = {"CreationDate": None} if fmt == "pdf" else ({"Date": None} if fmt == "svg" else {})
                        t = _cpu_self()
                        f.mpl.savefig(io.BytesIO(), format=fmt, dpi=st.PNG_DPI if fmt == "png" else None,
                                      metadata=meta)
                        per[fmt].append(_cpu_self() - t)
                        if fmt == "png":
                            f.mpl.set_layout_engine(None)
                plt.close(f.mpl)
        render_total = sum(sum(per[k]) for k in ("png", "pdf", "svg"))
        print(f"{len(names)} figures; CPU-s (getrusage of this process, serial)")
        print(f"{'step':<34} {'CPU-s, all figures':>18} {'share of rendering':>19} {'per figure':>14}")
        labels = {"build": "build (the builders' plotting)", "png": f"PNG, {st.PNG_DPI} dpi (incl. the layout)",
                  "pdf": "PDF (Type 42 fonts, subset)", "svg": "SVG"}
        for k, label in labels.items():
            v = per[k]
            share = "—" if k == "build" else f"{100 * sum(v) / render_total:.0f} %"
            print(f"{label:<34} {sum(v):>18.1f} {share:>19} {min(v):>6.2f}–{max(v):.2f}")
        print(f"rendering (PNG + PDF + SVG)        {render_total:>18.1f}; goal of issue 36: a 1,000-run report "
              f"≤ 7 s wall on the whole")
        print(f"load (1/5/15 min) at the end: {_load()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
