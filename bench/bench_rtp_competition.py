#!/usr/bin/env python3
"""The competition case (docs/studies.md §3, issue 18): live RTP video against one iperf3 CUBIC flow
on a 5 Mbit/s, 1 MB, 100 ms RTT shared bottleneck — the figures tests/test_rtp_competition.py does
not assert (who gets what), per controller, beside the link rate:

  RTP received bit/s before CUBIC starts and while both run (the viewer's 1 s bins inside the flow's
  interval), CUBIC's goodput, their sum against the link, the controller's final target, frames on
  time / late / lost, latency percentiles, packet loss, the bottleneck's drops and mean backlog.

Usage (root): .venv/bin/python bench/bench_rtp_competition.py [--scenario FILE] [--duration 60s]
              [--controllers gcc,webrtc-bbr] [--runs N] [--results DIR]
(default: scenarios/rtp-competition.yaml, its full 5 minutes, both controllers, one run each)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


def scenario_for(base: Path, controller: str, duration: str | None, out: Path) -> Path:
    """The scenario with this controller (and a shorter stream, if asked), as a file `mpvlab run` takes."""
    data = yaml.safe_load(base.read_text())
    data["name"] = f"{data['name']}-{controller}"
    data["workload"]["controller"] = controller
    if duration:
        data["workload"]["duration"] = duration
    f = out / f"{data['name']}.yaml"
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    return f


def run_once(scenario: Path, results: Path) -> dict[str, Any]:
    before = set(results.glob("*/*"))
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(scenario), "--results", str(results)],
                        capture_output=True, text=True, timeout=3600, cwd=REPO)
    if cp.returncode != 0:
        raise SystemExit(cp.stdout[-3000:] + cp.stderr[-3000:])
    (run_dir,) = [d for d in set(results.glob("*/*")) - before if d.is_dir()]
    s: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    s["_dir"] = str(run_dir)
    return s


def rates(s: dict[str, Any]) -> dict[str, float | None]:
    """RTP received bit/s before the bulk flow (whole 1 s bins) and while it ran, and CUBIC's goodput
    (the summary's `competition` record, mpvlab/runner/shared.py)."""
    c = s.get("competition") or {}
    lo = (c.get("interval_s") or [math.inf])[0]
    alone = [x["received_bps"] for x in s["rtp"]["received_per_second"] if x["second"] + 1 <= lo]
    return {"rtp_alone_bps": statistics.fmean(alone) if alone else None,
            "rtp_competing_bps": c.get("rtp_received_bps"), "cubic_bps": c.get("bulk_goodput_bps")}


def report(s: dict[str, Any]) -> dict[str, float | None]:
    r, b = s["rtp"], s["bottleneck"]
    link = b["rate_bps"]
    x = rates(s)
    lat = r["latency_ms"]
    queue = next(iter(b["queue"].values()), {})

    def mbit(v: float | None) -> str:
        return "   n/a" if v is None else f"{v / 1e6:6.3f}"

    both = (x["rtp_competing_bps"] or 0) + (x["cubic_bps"] or 0)
    print(f"run {s['_dir']}  ({r['controller']}, wall {s['run_wall_s']:.0f} s)")
    share = f"{(x['rtp_competing_bps'] or 0) / both:.1%}" if both else "n/a"
    print(f"  link {link / 1e6:g} Mbit/s, buffer {b['limit_bytes']} B: RTP alone {mbit(x['rtp_alone_bps'])}, "
          f"RTP competing {mbit(x['rtp_competing_bps'])}, CUBIC {mbit(x['cubic_bps'])} Mbit/s; sum "
          f"{both / link:.2f} × link; RTP share of it {share}")
    print(f"  final target {r['target_bps']['final']} bit/s; frames on time {r['frames_on_time']}, late "
          f"{r['frames_late']}, lost {r['frames_lost']} of {r['frames_captured']}; latency ms p50 {lat['p50']:.0f} "
          f"p95 {lat['p95']:.0f} max {lat['max']:.0f}; packet loss {r['packet_loss']}; tbf drops "
          f"{b['tbf']['drops']}, mean backlog {queue.get('backlog_bytes_mean', 0) / 1e3:.0f} KB")
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "rtp-competition.yaml")
    ap.add_argument("--duration", help="the stream's length instead of the scenario's (e.g. 60s)")
    ap.add_argument("--controllers", default="gcc,webrtc-bbr")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--results", type=Path, default=Path("/tmp/mpvlab-bench-rtp-competition"))
    a = ap.parse_args()
    a.results.mkdir(parents=True, exist_ok=True)
    table: dict[str, list[dict[str, float | None]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rtp-competition-") as tmp:
        for controller in a.controllers.split(","):
            f = scenario_for(a.scenario, controller, a.duration, Path(tmp))
            for _ in range(a.runs):
                table.setdefault(controller, []).append(report(run_once(f, a.results)))
    print("\ncontroller   RTP alone  RTP competing  CUBIC   (Mbit/s, mean over runs)")
    for controller, rows in table.items():
        def mean(k: str, rows: list[dict] = rows) -> str:
            vals = [r[k] for r in rows if r[k] is not None]
            return f"{statistics.fmean(vals) / 1e6:.3f}" if vals else "n/a"
        print(f"{controller:12s} {mean('rtp_alone_bps'):>9s}  {mean('rtp_competing_bps'):>13s}  "
              f"{mean('cubic_bps'):>5s}")


if __name__ == "__main__":
    main()
