#!/usr/bin/env python3
"""dash.js's halt after the last segment (player/README.md, "Halt after the last segment"): N runs each
as `player.dashjs_end_of_stream: stock` (dash.js 3.0.3 as it is) and `recheck` (the page's default) of
the BBR-S study's short dash.js variant (10 s of the 11-level ladder at 640x360 in 5 s segments, BOLA,
BBR, 25 Mbit/s tbf with 1 MB burst, 10 MB buffer, 10 ms), where BOLA's top-level second segment arrives
during a stall. Prints per run how it ended, dash.js's state when it reported buffering completed, and
from that moment (page clock, ms): the element's next `progress` of its own, the page's recheck and
dash.js's BUFFER_LOADED; then per mode how many never ended and the spread of the BUFFER_LOADED delay.
Not a test: a busy host moves these figures (the test is tests/test_dashjs.py::test_halt_after_the_last_segment).

    .venv/bin/python bench/bench_dashjs_end_of_stream.py [--trials 12] [--keep DIR]
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


def scenario(name: str, mode: str, seed: int) -> dict[str, Any]:
    return {"name": name, "seed": seed, "topology": {"kind": "dumbbell"},
            "paths": {"wan": {"down": {"rate": "25mbit", "burst": "1MB", "buffer": "10MB", "delay": "10ms"}}},
            "transport": {"cc": "bbr"},
            "video": {"kind": "dash", "duration": "10s", "segment": "5s", "width": 640, "height": 360},
            "player": {"kind": "dashjs", "abr": "bola", "dashjs_end_of_stream": mode},
            "fidelity": {"probe_duration": "1s"}}


def row(run: Path) -> dict[str, Any]:
    """From the page's record: the moments after dash.js's buffering completed (None: did not happen)."""
    raw = json.loads((run / "data" / "dashjs" / "dashjs-raw.json").read_text())
    eos = raw.get("end_of_stream") or {}
    t = eos.get("buffering_completed_ms")

    def first_after(name: str, trusted: bool | None = None) -> float | None:
        hits = [e[0] - t for e in raw["events"] if t is not None and e[1] == name and e[0] >= t
                and (trusted is None or (e[2] or {}).get("trusted") is trusted)]
        return round(min(hits), 1) if hits else None
    return {"ended": raw.get("ended"), "dashjs_state": eos.get("dashjs_state"),
            "own_progress_ms": first_after("video.progress", trusted=True),
            "recheck_ms": first_after("mpvlab.end_of_stream_recheck"), "loaded_ms": first_after("BUFFER_LOADED")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--keep", type=Path, default=None)
    a = ap.parse_args()
    fmt = "{:8} {:>5} {:>7} {:>12} {:>16} {:>10} {:>15}"
    loaded: dict[str, list[float]] = {"stock": [], "recheck": []}
    hung = {"stock": 0, "recheck": 0}
    with tempfile.TemporaryDirectory(prefix="bench-dashjs-eos-") as tmp:
        root = a.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        print(fmt.format("mode", "trial", "ended", "dash.js state", "own progress ms", "recheck ms", "BUFFER_LOADED ms"))
        for trial in range(a.trials):
            for mode in ("stock", "recheck"):
                name = f"bench-eos-{mode}-{trial}"
                f = root / f"{name}.yaml"
                f.write_text(yaml.safe_dump(scenario(name, mode, 2021 + trial)))
                subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(root / "r")],
                               capture_output=True, text=True, cwd=REPO, timeout=900)
                runs = list((root / "r" / name).iterdir()) if (root / "r" / name).exists() else []
                if len(runs) != 1 or not (runs[0] / "data" / "dashjs" / "dashjs-raw.json").exists():
                    print(f"{mode:8} {trial:5d} no page record (see {root / 'r' / name})")
                    continue
                r = row(runs[0])
                hung[mode] += not r["ended"]
                if r["loaded_ms"] is not None:
                    loaded[mode].append(r["loaded_ms"])
                print(fmt.format(mode, trial, str(r["ended"]), str(r["dashjs_state"]), str(r["own_progress_ms"]),
                                 str(r["recheck_ms"]), str(r["loaded_ms"])), flush=True)
    for mode in ("stock", "recheck"):
        xs = sorted(loaded[mode])
        spread = f"{xs[0]:.1f} … {xs[-1]:.1f} ms" if xs else "-"
        print(f"{mode}: never ended {hung[mode]} of {a.trials}; BUFFER_LOADED after buffering completed: {spread}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
