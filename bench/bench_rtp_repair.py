"""Loss repair on vs off (issue 48 §1, rtp/README.md "Losses were repaired"), per run as measured:
received and on-time video bitrate, the controller's steady target (its estimate for GCC; for
webrtc-bbr min(estimate, pacing rate) while the encoder ran), loss, retransmissions, frames, key
frames.

    .venv/bin/python bench/bench_rtp_repair.py RESULTS_DIR [RESULTS_DIR ...]

Reads every summary.json below each RESULTS_DIR (and its resolved.yaml for the link and any competing
flow: sweeps/rtp-repair-cubic.yaml's cell names the CUBIC flow, its start and its goodput). Prints one
Markdown table row per run, sorted by link, controller, repair; asserts nothing.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml


def rtp_run(run: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """A run's summary, its `rtp` part and its resolved scenario; None if it is not an rtp run
    (bench/bench_rtp_audio.py reads runs the same way)."""
    s = json.loads((run / "summary.json").read_text())
    r = s.get("rtp")
    if s.get("workload") != "rtp" or not r:
        return None
    return s, r, yaml.safe_load((run / "resolved.yaml").read_text())


def link_cell(sc: dict[str, Any]) -> str:
    """The bottleneck's downlink rate, RTT (both one-way delays) and buffer, from a resolved scenario."""
    down = next(iter(sc["paths"].values()))["down"]
    up = next(iter(sc["paths"].values())).get("up", {})
    return f"{down['rate']}, RTT {_ms(down['delay']) + _ms(up.get('delay') or '0ms'):g} ms, {down['buffer']}"


def print_table(roots: list[str], header: list[str], row: Callable[[Path], tuple[tuple[Any, ...], str] | None]) -> None:
    """One Markdown row per run below each root (every summary.json), sorted by the row's key."""
    rows = [x for root in roots for f in sorted(Path(root).rglob("summary.json")) if (x := row(f.parent))]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for _, text in sorted(rows):
        print(text)


def _row(run: Path) -> tuple[tuple[Any, ...], str] | None:
    got = rtp_run(run)
    if got is None:
        return None
    s, r, sc = got
    rep = r.get("repair") or {}
    on = "on" if rep.get("nack") else "off"
    vb, tgt = r["video_bitrate_bps"], r["target_bps"]
    secs = max(1, len(r["received_per_second"]))
    rtx_kbps = rep.get("retransmission_bytes_received", 0) * 8 / secs / 1e3
    cell = link_cell(sc)
    bulk = (sc.get("cross_traffic") or {}).get("bulk")
    if bulk:                            # sweeps/rtp-repair-cubic.yaml: one competing flow on the bottleneck
        c = s.get("competition") or {}    # mpvlab/runner/shared.py: rates over the competing flow's interval
        rtp_c, got = c.get("rtp_received_bps"), c.get("bulk_goodput_bps")
        cell += (f", vs {bulk['cc'].upper()} from {bulk['start']} (over its interval: RTP "
                 f"{'-' if rtp_c is None else f'{rtp_c / 1e3:.0f}'}, {bulk['cc'].upper()} "
                 f"{'-' if got is None else f'{got / 1e3:.0f}'} kbit/s)")
    key = (cell, r["controller"], on)
    text = (f"| {cell} | {r['controller']} | {on} | {vb['received_mean'] / 1e3:.0f} | {vb['on_time_mean'] / 1e3:.0f} | "
            f"{(tgt['steady_mean'] or 0) / 1e3:.0f} | {r['packets_lost']} of {r['packets_sent']} | "
            f"{rep.get('retransmissions_sent', 0)} ({rep.get('retransmissions_in_time', 0)} in time, "
            f"{rep.get('retransmissions_too_late', 0)} late, {rep.get('retransmissions_duplicate', 0)} dup.; "
            f"{rtx_kbps:.1f} kbit/s) | {rep.get('packets_lost_unrepaired', r['packets_lost'])} | "
            f"{r['frames_on_time']} / {r['frames_late']} / {r['frames_lost']} of {r['frames_captured']} | "
            f"{r['decode']['frames_decoded']} | {rep.get('pli_sent', 0)} / {rep.get('keyframes_forced', 0)} of "
            f"{rep.get('keyframes', '-')} | {r['latency_ms'].get('p50') or 0:.0f} | {s.get('run_id', run.name)} |")
    return key, text


def _ms(delay: Any) -> float:
    text = delay["value"] if isinstance(delay, dict) else delay      # resolved.yaml: {kind: constant, value}
    return float(text.removesuffix("ms")) if text.endswith("ms") else float(text.removesuffix("s")) * 1e3


def main(roots: list[str]) -> None:
    print_table(roots, ["cell", "controller", "repair", "received kbit/s", "on time kbit/s", "steady target kbit/s",
                        "media packets lost", "retransmissions (kbit/s received)", "lost unrepaired",
                        "frames on time / late / lost", "decoded", "PLIs / key frames forced of key frames",
                        "p50 latency ms", "run"], _row)


if __name__ == "__main__":
    main(sys.argv[1:] or ["results"])
