#!/usr/bin/env python3
"""CPU per second of video: dash.js in headless Chromium (player.kind dashjs) against mpvlab's own DASH
client (player.fetcher own, GStreamer decoding), the same network, content and ABR (BOLA), run with
`mpvlab run` one after the other. The player's CPU is getrusage of our client's process, and for
Chromium the user+system time of its whole process tree from t0 to the end (mpvlab/player/dashjs/player.py).
Prints both beside the load average; not a test (a busy host moves these figures).

    .venv/bin/python bench/bench_dashjs_cpu.py [--duration 20] [--width 640 --height 360] [--protocol h2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


def scenario(kind: str, a: argparse.Namespace) -> dict:
    player = ({"kind": "dashjs", "abr": "bola", "buffer": "10s"} if kind == "dashjs"
              else {"fetcher": "own", "abr": "bola", "buffer": "10s"})
    return {"name": f"bench-cpu-{kind}", "seed": 1, "topology": {"kind": "dumbbell"},
            "paths": {"wan": {"down": {"rate": "25mbit", "buffer": "1MB", "delay": "10ms"}}},
            "transport": {"cc": "cubic"},
            "video": {"kind": "dash", "duration": f"{a.duration}s", "bitrates": ["1mbit", "2500kbit", "5mbit"],
                      "segment": "2s", "width": a.width, "height": a.height},
            "player": player, "server": {"protocol": a.protocol}, "fidelity": {"probe_duration": "1s"}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=360)
    ap.add_argument("--protocol", default="h2", choices=["h2", "http/1.1"])
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dashjs-") as tmp:
        for kind in ("own", "dashjs"):
            f = Path(tmp) / f"{kind}.yaml"
            f.write_text(yaml.safe_dump(scenario(kind, a)))
            load = os.getloadavg()
            cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(Path(tmp) / "r")],
                                capture_output=True, text=True, cwd=REPO, timeout=600)
            if cp.returncode != 0:
                print(cp.stdout[-2000:], cp.stderr[-2000:])
                return 1
            (run,) = (Path(tmp) / "r" / f"bench-cpu-{kind}").iterdir()
            s = json.loads((run / "summary.json").read_text())
            cpu = s["player_cpu"]
            used = cpu["user_s"] + cpu["system_s"]
            rows.append((kind, used, used / a.duration, cpu["share_of_core"], s["dash"]["quality_avg"],
                         s.get("picture_discards"), load[0]))
    print(f"{a.duration} s of {a.width}x{a.height} video, 1/2.5/5 Mbit/s, BOLA, {a.protocol}, 25 Mbit/s link")
    print(f"{'player':8} {'cpu s':>7} {'cpu s per s of video':>21} {'share of a core':>16} {'quality':>8} "
          f"{'dropped':>8} {'load avg 1m':>12}")
    for kind, used, per_s, share, q, dropped, load1 in rows:
        print(f"{kind:8} {used:7.2f} {per_s:21.3f} {share:16.3f} {q:8.2f} {dropped!s:>8} {load1:12.2f}")
    print(f"dash.js/Chromium costs {rows[1][2] / rows[0][2]:.1f}x our client's CPU per second of video")
    return 0


if __name__ == "__main__":
    sys.exit(main())
