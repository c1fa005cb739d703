#!/usr/bin/env python3
"""dash.js's start-up stall with a full buffer (player/README.md, "Start-up stall"): the same runs with
`player.dashjs_start: autoplay` (dash.js's own autoplay) and `gated` (the page starts the element once
dash.js's own level is current), for BOLA and DYNAMIC over a 25 Mbit/s token bucket (1 MB burst),
10 MB buffer, 100 ms delay, BBR, the study's 11-level ladder (5 s segments) at 640x360. Prints per run
dash.js's BUFFER_EMPTY events, every stall episode of the element, those excluded as stalls with video
(stalls_with_data), the counted ones, the stall rate and the start-up delay with the gate's own cost.
Not a test: a busy host moves these figures.

    .venv/bin/python bench/bench_dashjs_start_stall.py [--duration 60] [--trials 1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
sys.path.insert(0, str(REPO))


def scenario(name: str, abr: str, start: str, duration: int, seed: int) -> dict[str, Any]:
    return {"name": name, "seed": seed, "topology": {"kind": "dumbbell"},
            "paths": {"wan": {"down": {"rate": "25mbit", "burst": "1MB", "buffer": "10MB", "delay": "100ms"}}},
            "transport": {"cc": "bbr"},
            "video": {"kind": "dash", "duration": f"{duration}s", "segment": "5s", "width": 640, "height": 360,
                      "bitrates": [f"{b}kbit" for b in (1000, 2500, 5000, 7500, 10000, 12500, 15000, 17500, 20000,
                                                         22500, 25000)]},
            "player": {"kind": "dashjs", "abr": abr, "buffer": "30s", "dashjs_start": start},
            "server": {"protocol": "h2"}, "fidelity": {"probe_duration": "1s"}}


def row(run: Path) -> dict[str, Any]:
    from mpvlab.player.dashjs import qoe as dashjs_qoe
    ps = json.loads((run / "logs" / "player-summary.json").read_text())
    raw = json.loads((run / "data" / "dashjs" / "dashjs-raw.json").read_text())
    _, _, all_eps = dashjs_qoe.stall_episodes(raw["events"])
    empties = [t for t, name, _ in raw["events"] if name == "BUFFER_EMPTY"]
    gate = raw.get("start_gate") or {}
    gate_ms = (gate["opened_ms"] - gate["element_can_play_ms"]
               if gate.get("opened_ms") is not None and gate.get("element_can_play_ms") is not None else None)
    return {"status": ps["status"], "buffer_empty": len(empties), "episodes": len(all_eps),
            "episodes_s": sum(b - a for a, b in all_eps) / 1000, "excluded": ps["stalls_excluded"],
            "excluded_s": ps["stalls_excluded_s"], "counted": ps["rebuffer_events"],
            "counted_s": ps["underflow_total_s"], "stall_rate": ps["stall_rate"],
            "startup_s": ps["startup_delay_s"], "gate_after_can_play_ms": gate_ms}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dashjs-stall-") as tmp:
        root = a.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        print(f"{'abr':8} {'start':9} {'trial':>5} {'BUFFER_EMPTY':>12} {'episodes (s)':>14} {'excluded (s)':>14} "
              f"{'counted (s)':>13} {'stall_rate':>10} {'startup s':>9} {'gate ms':>8}")
        for trial in range(a.trials):
            for abr in ("bola", "dynamic"):
                for start in ("autoplay", "gated"):
                    name = f"bench-stall-{abr}-{start}-{trial}"
                    f = root / f"{name}.yaml"
                    f.write_text(yaml.safe_dump(scenario(name, abr, start, a.duration, 2021 + trial)))
                    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(root / "r")],
                                        capture_output=True, text=True, cwd=REPO, timeout=900)
                    if cp.returncode != 0:
                        print(f"{abr:8} {start:9} {trial:5d} run failed: {(cp.stdout + cp.stderr)[-400:]}")
                        continue
                    (run,) = (root / "r" / name).iterdir()
                    r = row(run)
                    gate = "-" if r["gate_after_can_play_ms"] is None else f"{r['gate_after_can_play_ms']:.0f}"
                    print(f"{abr:8} {start:9} {trial:5d} {r['buffer_empty']:12d} {r['episodes']:3d} ({r['episodes_s']:6.2f}) "
                          f"{r['excluded']:3d} ({r['excluded_s']:6.2f}) {r['counted']:3d} ({r['counted_s']:5.2f}) "
                          f"{r['stall_rate']:10.4f} {r['startup_s']:9.3f} {gate:>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
