#!/usr/bin/env python3
"""dash.js start-ups: N short `mpvlab run`s of player.kind dashjs one after the other, alternating
HTTP/2 and HTTP/1.1 (both over TLS), each with a Chromium profile (and so disk cache, service-worker
and code caches) never used before: the driver makes a fresh --user-data-dir per run under the run's
data/ and deletes it at the end. Prints, per run, whether it played to the end, how many page loads
it needed (`page_load_failures`) and what the browser reported (failed requests, exceptions; from
data/dashjs/browser-events.jsonl), then the totals. Not a test: it takes minutes (issue 51's
acceptance: 0 failures and 0 page_load_failures in 50 start-ups).

    .venv/bin/python bench/bench_dashjs_startup.py [--runs 50] [--duration 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


def scenario(i: int, protocol: str, duration_s: int) -> dict[str, Any]:
    return {"name": f"bench-start-{i:03d}", "seed": i, "topology": {"kind": "dumbbell"},
            "paths": {"wired": {"down": {"rate": "20mbit", "buffer": "100KB", "delay": "10ms"}}},
            "transport": {"cc": "cubic"},
            "video": {"kind": "dash", "duration": f"{duration_s}s", "bitrates": ["500kbit", "1mbit", "2mbit"],
                      "segment": "2s", "width": 640, "height": 360},
            "player": {"kind": "dashjs"}, "server": {"protocol": protocol, "tls": True},
            "fidelity": {"probe_duration": "1s"}}


def browser_problems(run: Path) -> list[str]:
    """Failed requests and exceptions the browser reported during the run (favicon 404s aside)."""
    out = []
    f = run / "data" / "dashjs" / "browser-events.jsonl"
    if not f.exists():
        return ["no browser-events.jsonl"]
    for line in f.read_text().splitlines():
        e = json.loads(line)
        if e["method"] == "Network.loadingFailed":
            out.append(f"{e.get('url')}: {e.get('errorText')}")
        elif e["method"] == "Runtime.exceptionThrown":
            out.append(f"exception: {e.get('description') or e.get('text')}")
    return out


def one(i: int, protocol: str, a: argparse.Namespace, root: Path) -> dict[str, Any]:
    f = root / f"s{i:03d}.yaml"
    f.write_text(yaml.safe_dump(scenario(i, protocol, a.duration)))
    t = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(root / "r")],
                        capture_output=True, text=True, cwd=REPO, timeout=600)
    row: dict[str, Any] = {"i": i, "protocol": protocol, "exit": cp.returncode, "wall_s": time.monotonic() - t,
                           "page_load_failures": None, "status": None, "problems": [], "error": ""}
    runs = sorted((root / "r" / f"bench-start-{i:03d}").glob("*"))
    if runs:
        ps_file = runs[-1] / "logs" / "player-summary.json"
        if ps_file.exists():
            ps = json.loads(ps_file.read_text())
            row["page_load_failures"] = len(ps.get("page_load_failures") or [])
            row["status"] = ps.get("status")
            if ps.get("reason"):
                row["error"] = str(ps["reason"])[:300]
        row["problems"] = browser_problems(runs[-1])
    if cp.returncode != 0 and not row["error"]:
        row["error"] = (cp.stdout + cp.stderr).strip().splitlines()[-1][:300] if (cp.stdout + cp.stderr).strip() else ""
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--duration", type=int, default=4, help="seconds of video per run")
    ap.add_argument("--keep", type=Path, default=None, help="keep the result directories here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dashjs-start-") as tmp:
        root = a.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        rows = []
        for i in range(a.runs):
            row = one(i, "h2" if i % 2 == 0 else "http/1.1", a, root)
            rows.append(row)
            print(f"{i:3d} {row['protocol']:8} exit {row['exit']} {row['status']!s:8} page_load_failures "
                  f"{row['page_load_failures']!s:4} {row['wall_s']:6.1f} s {row['error']}"
                  f"{' browser: ' + '; '.join(row['problems'][:3]) if row['problems'] else ''}", flush=True)
    failures = sum(1 for r in rows if r["exit"] != 0 or r["status"] != "eos")
    plf = sum(r["page_load_failures"] or 0 for r in rows)
    with_problems = sum(1 for r in rows if r["problems"])
    print(f"{a.runs} dash.js start-ups ({a.duration} s of video each, h2 and http/1.1 alternating, fresh profiles): "
          f"failures {failures}, page_load_failures {plf}, runs where the browser reported a failed request or "
          f"exception {with_problems}")
    return 0 if failures == 0 and plf == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
