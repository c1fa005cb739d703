"""The call's audio on vs off (issue 48 §1, rtp/README.md "The call had audio"), per run as measured:
received and on-time video bitrate, the audio received, the controller's steady target and estimate,
video loss, retransmissions, key frames, frames, latency.

    .venv/bin/python bench/bench_rtp_audio.py RESULTS_DIR [RESULTS_DIR ...]

Reads every summary.json below each RESULTS_DIR (its resolved.yaml for the link, and for webrtc-bbr
logs/rtp/sender/bbr_state.csv for the estimate). Prints one Markdown table row per run, sorted by link,
controller, audio; asserts nothing. Columns:

- received / on time: `rtp.video_bitrate_bps` received_mean / on_time_mean (the video stream alone);
- audio: `rtp.audio.received_mean_bps` over the same window, packets lost of sent, share on time;
- steady target: `rtp.target_bps.steady_mean` (GCC: its estimate; webrtc-bbr: min(estimate, pacing
  rate) while the encoder ran), over the stream's second half;
- estimate: GCC's is its target; webrtc-bbr's the mean of bbr_state.csv's estimate_bps over the rows
  (one per feedback report, every 50 ms) inside the same steady window;
- competing (runs with a bulk cross flow): `competition.rtp_received_bps` (the video's 1 s bins inside
  the CUBIC flow's interval) / `competition.bulk_goodput_bps`.
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rtp_repair import link_cell, print_table, rtp_run  # noqa: E402  (the repair table's run reading)


def _bbr_estimate(run: Path, window: list[float] | None) -> float | None:
    path = run / "logs" / "rtp" / "sender" / "bbr_state.csv"
    if window is None or not path.exists():
        return None
    with path.open() as f:
        xs = [float(r["estimate_bps"]) for r in csv.DictReader(f) if window[0] <= float(r["t_s"]) < window[1]]
    return sum(xs) / len(xs) if xs else None


def _row(run: Path) -> tuple[tuple[Any, ...], str] | None:
    got = rtp_run(run)
    if got is None:
        return None
    s, r, sc = got
    a = r.get("audio") or {}
    on = "on" if a.get("enabled") else "off"
    vb, tgt, rep = r["video_bitrate_bps"], r["target_bps"], r.get("repair") or {}
    steady = tgt.get("steady_mean") or 0
    est = steady if r["controller"] == "gcc" else _bbr_estimate(run, tgt.get("steady_window_s"))
    audio = (f"{a['received_mean_bps'] / 1e3:.1f} ({a['packets_lost']} of {a['packets_sent']} lost, "
             f"{a['on_time_share']:.3f} on time, p50 {a['latency_ms']['p50']:.0f} ms)" if a.get("enabled") else "—")
    cell = link_cell(sc)
    key = (cell, r["controller"], on)
    c = s.get("competition") or {}
    competing = (f"{(c.get('rtp_received_bps') or 0) / 1e3:.0f} / {(c.get('bulk_goodput_bps') or 0) / 1e3:.0f}"
                 if c else "—")
    warn = [w for w in s.get("warnings", []) if "stall" in w or "fidelity" in w]
    text = (f"| {cell} | {r['controller']} | {on} | {vb['received_mean'] / 1e3:.0f} | {vb['on_time_mean'] / 1e3:.0f} | "
            f"{audio} | {steady / 1e3:.0f} | {'—' if est is None else f'{est / 1e3:.0f}'} | "
            f"{r['packets_lost']} of {r['packets_sent']} | {rep.get('retransmissions_sent', 0)} | "
            f"{rep.get('keyframes', '-')} ({rep.get('keyframes_forced', 0)} forced) | "
            f"{r['frames_on_time']} / {r['frames_late']} / {r['frames_lost']} of {r['frames_captured']} | "
            f"{r['latency_ms'].get('p50') or 0:.0f} | {competing} | {s.get('fidelity_ok')}{' (' + str(len(warn)) + ' warnings)' if warn else ''} "
            f"| {s.get('run_id', run.name)} |")
    return key, text


def main(roots: list[str]) -> None:
    print_table(roots, ["cell", "controller", "audio", "video received kbit/s", "video on time kbit/s",
                        "audio received kbit/s", "steady target kbit/s", "estimate kbit/s", "video packets lost",
                        "retransmissions", "key frames", "frames on time / late / lost", "p50 latency ms",
                        "competing: video / CUBIC kbit/s", "fidelity_ok", "run"], _row)


if __name__ == "__main__":
    main(sys.argv[1:] or ["results"])
