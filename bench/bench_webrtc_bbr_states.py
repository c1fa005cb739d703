"""webrtc-bbr runs as measured, per condition: received bitrate, estimate vs link, min-RTT estimate vs
base RTT, time per BBR mode and recovery state, late frames (issue 32: the grid corners, before and
after the libwebrtc-2018 audit of rtp/bbr).

    .venv/bin/python bench/bench_webrtc_bbr_states.py RESULTS_DIR [RESULTS_DIR ...]

Reads every run directory below each RESULTS_DIR (summary.json, resolved.yaml, logs/rtp/sender/).
The controller's state over time comes from `bbr_state.csv` (one row per feedback report) when the
run has it; runs made before that file existed only have `targets.csv`, whose rows are written when
the target changes — the state between two rows is then taken as the earlier row's, an
approximation the output marks with `(targets)`. Prints numbers, asserts nothing.
"""
from __future__ import annotations

import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml


def _rate_bps(text: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}
    for u, f in units.items():
        if text.endswith(u):
            return float(text[: -len(u)]) * f
    return float(text)


def _states(run: Path, controller: str) -> tuple[list[tuple[float, dict[str, Any]]], str]:
    sender = run / "logs" / "rtp" / "sender"
    rows: list[tuple[float, dict[str, Any]]] = []
    if controller == "gcc":     # GCC's estimate is its target; it has no min-RTT filter or modes
        with open(sender / "targets.csv") as f:
            for r in csv.DictReader(f):
                rows.append((float(r["t_s"]), {"mode": "-", "recovery": "-", "estimate": float(r["target_bps"]),
                                                "min_rtt_ms": 0.0}))
        return rows, "targets"
    if (sender / "bbr_state.csv").exists():
        with open(sender / "bbr_state.csv") as f:
            for r in csv.DictReader(f):
                rows.append((float(r["t_s"]), {"mode": r["mode"], "recovery": r["recovery"],
                                                "estimate": float(r["estimate_bps"]), "min_rtt_ms": float(r["min_rtt_ms"])}))
        return rows, "feedback"
    with open(sender / "targets.csv") as f:
        for r in csv.DictReader(f):
            st = json.loads(r["controller_stats"] or "{}")
            if "mode" in st:
                rows.append((float(r["t_s"]), {"mode": st["mode"], "recovery": st["recovery"],
                                                "estimate": float(st["bwEstimate"]), "min_rtt_ms": float(st["minRTTms"])}))
    return rows, "targets"


def _weighted(rows: list[tuple[float, dict[str, Any]]], end: float, key: str, t_from: float = 0.0) -> dict[str, float]:
    """Share of [t_from, end] each value of `key` held (the state holds until the next row)."""
    acc: dict[str, float] = defaultdict(float)
    for (t, st), nxt in zip(rows, [*rows[1:], (end, None)]):
        a, b = max(t, t_from), min(nxt[0], end)
        if b > a:
            acc[st[key]] += b - a
    total = sum(acc.values()) or 1.0
    return {k: v / total for k, v in acc.items()}


def _mean_over(rows: list[tuple[float, dict[str, Any]]], end: float, key: str, t_from: float) -> float | None:
    acc = dur = 0.0
    for (t, st), nxt in zip(rows, [*rows[1:], (end, None)]):
        a, b = max(t, t_from), min(nxt[0], end)
        if b > a and st[key] > 0:
            acc += st[key] * (b - a)
            dur += b - a
    return acc / dur if dur else None


def one_run(run: Path) -> dict[str, Any] | None:
    s = json.loads((run / "summary.json").read_text())
    r = s.get("rtp") or {}
    if r.get("controller") not in ("webrtc-bbr", "gcc"):
        return None
    sc = yaml.safe_load((run / "resolved.yaml").read_text())
    (path,) = sc["paths"].values()      # one path: dumbbell's `link` or the shared bottleneck
    down = path["down"]
    link = _rate_bps(str(down["rate"]))
    up = path.get("up") or {}
    base_rtt_ms = float(str(down["delay"]["value"]).removesuffix("ms")) + float(
        str((up.get("delay") or down["delay"])["value"]).removesuffix("ms"))
    buffer = down.get("buffer")
    rows, source = _states(run, r["controller"])
    per_s = [x["received_bps"] for x in r["received_per_second"]]
    half = len(per_s) // 2
    end = float(len(per_s))
    return {
        "cond": f"{link / 1e6:g} Mbit/s, RTT {base_rtt_ms:g} ms, buffer {buffer}", "run": run.name,
        "controller": r["controller"], "encoder": r.get("encoder", "x264"), "frame_bytes": r.get("frame_bytes"),
        "competition": s.get("competition"),
        "fidelity_ok": s.get("fidelity_ok"),
        "received_x_link": statistics.fmean(per_s[half:-1]) / link if len(per_s) > 3 else None,
        "estimate_x_link": (_mean_over(rows, end, "estimate", end / 2) or 0) / link,
        "min_rtt_x_base": (_mean_over(rows, end, "min_rtt_ms", end / 2) or 0) / base_rtt_ms,
        "modes": _weighted(rows, end, "mode"), "recovery": _weighted(rows, end, "recovery"),
        "late": r["frames_late"], "lost": r["frames_lost"], "captured": r["frames_captured"],
        "p50_ms": r["latency_ms"].get("p50"), "source": source,
    }


def main(roots: list[str]) -> None:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for root in roots:
        for summ in sorted(Path(root).rglob("summary.json")):
            res = one_run(summ.parent)
            if res is not None:
                out[res["cond"]].append(res)
    for cond, runs in sorted(out.items()):
        print(f"\n== {cond}: {len(runs)} runs")
        for x in runs:
            modes = " ".join(f"{k} {v:.1%}" for k, v in sorted(x["modes"].items()))
            rec = " ".join(f"{k} {v:.1%}" for k, v in sorted(x["recovery"].items()) if v > 0)
            fb = (x["frame_bytes"] or {}).get("all", {})
            sizes = f"frames p50/p95/max {fb.get('p50')}/{fb.get('p95')}/{fb.get('max')} B" if fb else ""
            print(f"  {x['controller']} {x['encoder']} {x['run']}: {sizes}, received {x['received_x_link']:.3f}×link, estimate {x['estimate_x_link']:.3f}×link, "
                  f"min-RTT {x['min_rtt_x_base']:.3f}×base, late {x['late']}/{x['captured']} lost {x['lost']}, "
                  f"p50 {x['p50_ms']:.0f} ms, fidelity_ok {x['fidelity_ok']} | {modes} | {rec}"
                  f"{' (targets)' if x['source'] == 'targets' and x['controller'] != 'gcc' else ''}")
            if x["competition"]:
                c = x["competition"]
                print(f"      competition {c['interval_s']}: rtp {c['rtp_received_bps']} bit/s, bulk "
                      f"{c['bulk_goodput_bps']} bit/s, rtp share {c['rtp_share']}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
