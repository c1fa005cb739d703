#!/usr/bin/env python3
"""How long `mpvlab report` takes on many runs (issue: summarising 1,000 runs takes seconds).

Writes N synthetic result directories in the runner's exact layout (mpvlab/report/synthetic.py:
3 scenarios × 3 CCs × 3 schedulers × trials, each with summary, resolved scenario, provenance and,
optionally, time series like a 20 s run's), then times, separately: finding and loading the runs
and computing every configuration's statistics (t and BCa bootstrap intervals); the pairwise tests;
writing the tables (CSV + Parquet); the figures (PDF, SVG, PNG files); the HTML. Prints the figures; not a test.

    .venv/bin/python bench/bench_report.py [--runs 1000] [--series-s 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from core import rundir  # noqa: E402
from mpvlab.report.aggregate import aggregate  # noqa: E402
from mpvlab.report.figures import build_all  # noqa: E402
from mpvlab.report.html import render  # noqa: E402
from mpvlab.report.pairwise import pairwise_frame  # noqa: E402
from mpvlab.report.synthetic import make_set  # noqa: E402
from mpvlab.report.tables import write_tables  # noqa: E402

SCENARIOS = ["wifi-lte-a", "wifi-lte-b", "wifi-lte-c"]
CCS = ["cubic", "bbr", "bbr-s"]
SCHEDULERS = ["minrtt", "bdp", "default"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--series-s", type=int, default=20, help="seconds of links/subflows CSV per run (0: none)")
    ap.add_argument("--keep", help="write the synthetic runs here and keep them")
    args = ap.parse_args()
    trials = max(1, round(args.runs / 27))
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        t = time.monotonic()
        make_set(base / "src", SCENARIOS, CCS, SCHEDULERS, trials, series_s=args.series_s, n_failed=3)
        n = 27 * trials
        print(f"wrote {n} synthetic runs (+3 failed), {args.series_s} s of time series each, "
              f"in {time.monotonic() - t:.1f} s")
        out = base / "src" / "report"
        t0 = time.monotonic()
        c = aggregate(base / "src", exclude=[out])
        t1 = time.monotonic()
        pw = pairwise_frame(c)
        t1p = time.monotonic()
        write_tables(c, out, pw)
        t2 = time.monotonic()
        sections = build_all(c, out / "figures")
        t3 = time.monotonic()
        page = render(c, sections, ["runs.csv"], "bench", pw, html_dir=out)
        rundir.write_text(out / "report.html", page)
        t4 = time.monotonic()
        n_figs = sum(len(f) for _, f in sections)
        print(f"load + statistics : {t1 - t0:6.2f} s  ({n} runs, {len(c.configs)} configurations, "
              f"{(t1 - t0) / n * 1e3:.2f} ms per run)")
        print(f"pairwise tests     : {t1p - t1:6.2f} s  ({len(pw)} comparisons, {int(pw.significant.sum())} "
              "different after Holm)")
        print(f"tables (CSV+Parquet): {t2 - t1p:6.2f} s")
        print(f"figures            : {t3 - t2:6.2f} s  ({n_figs} figures × PDF, SVG, PNG 300 dpi; time series "
              f"read for one representative run per configuration)")
        print(f"HTML               : {t4 - t3:6.2f} s  ({len(page) / 1e6:.1f} MB)")
        print(f"total              : {t4 - t0:6.2f} s for {n} runs")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
