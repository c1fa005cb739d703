#!/usr/bin/env python3
"""Live video over RTP (workload rtp): the timing figures the test does not assert, each beside its
configured value — per-frame end-to-end latency against the playout deadline, the encoder's achieved
bitrate against the controller's target in every 1 s window (within 10 %?), the controller's steady
target and the rate the viewer received against the link rate, packet loss, and each end's process
CPU time per packet (scenarios/rtp-gcc-5mbit.yaml: at 5 Mbit/s).

Usage (root): .venv/bin/python bench/bench_rtp.py [SCENARIO] [--runs N] [--controller C] [--padding on|off]
(default: scenarios/rtp-gcc-short.yaml, one run; results kept under --results, /tmp/mpvlab-bench-rtp).
--controller runs the scenario with another controller; --padding (webrtc-bbr) sets workload.bbr.padding:
the scenario is rewritten into the results directory, the shipped file stays as it is. Each run prints
the padding webrtc-bbr sent while probing (its share of the bytes sent) and the host's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any
from mpvlab.core.paths import checkout_root

REPO = checkout_root()

import yaml  # noqa: E402

from mpvlab.collectors import qdiscstat  # noqa: E402
from mpvlab.input.scenario import load_scenario  # noqa: E402

WITHIN = 0.10      # achieved vs target per window


def run_once(scenario: Path, results: Path) -> dict[str, Any]:
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(scenario), "--results", str(results)],
                        capture_output=True, text=True, timeout=600, cwd=REPO)
    if cp.returncode != 0:
        raise SystemExit(cp.stdout + cp.stderr)
    run_dir = max((d for d in results.glob("*/*") if d.is_dir()), key=lambda d: d.stat().st_mtime)
    s: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    s["_dir"] = str(run_dir)
    return s


def full_windows(per_second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The 1 s windows the live source filled (the last, partial one and stalls left out)."""
    most = max(x["frames"] for x in per_second)
    return [w for w in per_second if w["frames"] >= 0.9 * most]


def steady_windows(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The second half, where the summary's steady-state target is taken (rtp_checks.STEADY_FROM)."""
    return windows[len(windows) // 2:]


def within(windows: list[dict[str, Any]], got: str, want: str) -> int:
    return sum(abs(w[got] - w[want]) <= WITHIN * w[want] for w in windows)


def report(s: dict[str, Any], link_bps: int | None, buffer: str, delay: str, path: str = "",
           buffer_bytes: int | None = None, fps_configured: int | None = None) -> None:
    r = s["rtp"]
    lat = r["latency_ms"]
    print(f"run {s['_dir']}")
    print(f"  frames: captured {r['frames_captured']}, on time {r['frames_on_time']}, late {r['frames_late']}, "
          f"lost {r['frames_lost']} (playout deadline {r['playout_deadline_ms']:g} ms)")
    print(f"  latency capture→complete ms: p50 {lat['p50']:.1f}  p95 {lat['p95']:.1f}  p99 {lat['p99']:.1f}  "
          f"max {lat['max']:.1f}   (configured: one-way delay {delay}, buffer {buffer}, deadline "
          f"{r['playout_deadline_ms']:g} ms)")
    fr, fps = r.get("freezes"), r.get("rendered_fps")
    if fr and fps:
        print(f"  rendered frame rate: mean {fps['mean']} fps (captured at {fps_configured} fps); freezes {fr['count']}, "
              f"total {fr['total_s']:.3f} s, longest {fr['longest_s']:.3f} s")
    windows = full_windows(r["encoder_per_second"])
    for label, ws in (("all full", windows), ("steady (2nd half)", steady_windows(windows))):
        print(f"  encoder, {label} 1 s windows within ±{WITHIN:.0%}: video of the encoder setting "
              f"{within(ws, 'achieved_bps', 'encoder_set_bps')}/{len(ws)}, video of the target "
              f"{within(ws, 'achieved_bps', 'target_bps')}/{len(ws)}, on the wire (RTP+UDP+IP) of the target "
              f"{within(ws, 'achieved_wire_bps', 'target_bps')}/{len(ws)}")
    print("    t_s  achieved  encoder_set  target   video/set  wire/target")
    for w in r["encoder_per_second"]:
        ratio = w["achieved_bps"] / w["encoder_set_bps"] if w["encoder_set_bps"] else float("nan")
        wire = w["achieved_wire_bps"] / w["target_bps"] if w["target_bps"] else float("nan")
        print(f"    {w['t_s']:5.1f} {w['achieved_bps']:9d} {w['encoder_set_bps']:11.0f} {w['target_bps']:8.0f}   "
              f"{ratio:.3f}      {wire:.3f}")
    if "decode" in r:
        d = r["decode"]
        print(f"  viewer decoder: decoded {d['frames_decoded']}, decode errors {d['frames_decode_error']}, "
              f"undecodable (reference lost) {d['frames_undecodable']} of {r['frames_on_time']} on time")
    rx = [x["received_bps"] for x in r["received_per_second"]][1:-1]   # full seconds only
    t = r["target_bps"]
    link = f"{link_bps / 1e6:g} Mbit/s" if link_bps else "unshaped"
    print(f"  controller {r['controller']}: target initial {t['initial']}, final {t['final']}, steady mean "
          f"{t['steady_mean']} bit/s ({t['steady_mean'] / link_bps:.3f} × link)" if link_bps else "")
    if rx:
        print(f"  received at the viewer: mean {statistics.mean(rx):.0f} bit/s over full seconds "
              f"(link {link}{', ' + format(statistics.mean(rx) / link_bps, '.3f') + ' × link' if link_bps else ''})")
        pad = [x.get("padding_bps", 0) for x in r["received_per_second"]][1:-1]
        both = statistics.mean(a + b for a, b in zip(rx, pad))
        print(f"  received video + padding: mean {both:.0f} bit/s"
              f"{' (' + format(both / link_bps, '.3f') + ' × link)' if link_bps else ''}")
    if "padding_packets" in r:
        print(f"  padding ({'on' if r['padding'] else 'off'}): {r['padding_packets']} packets, {r['padding_bytes']} bytes "
              f"sent = {r['padding_share'] or 0:.1%} of the RTP bytes sent; received {r['padding_packets_received']}, "
              f"lost {r['padding_packets_lost']}")
    print(f"  frames on time: {r['frames_on_time']} of {r['frames_captured']}")
    print(f"  packets: sent {r['packets_sent']}, lost {r['packets_lost']} ({r['packet_loss']:.4%}); feedback missing "
          f"for {r['feedback']['transport_seqs_without_feedback']}")
    print(f"  host steal during the stream: {s['host_steal_during_playback']}; load average after the run "
          f"(1/5/15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if path:
        report_queue(Path(s["_dir"]), path, link_bps, buffer_bytes)
    report_cpu(r, s["duration_s"])


def report_queue(run_dir: Path, path: str, link_bps: int | None, buffer_bytes: int | None) -> None:
    """The bottleneck's queuing delay from the kernel's own counters: each tbf's backlog, sampled by
    collectors/qdiscstat while the stream ran, over the link rate — beside the buffer's drain time
    (buffer × 8 / rate), which a drop-tail queue can never exceed."""
    if not link_bps:
        return
    rows, _ = qdiscstat.load_samples(run_dir / "data" / "queues" / path, links=False)
    by_dev: dict[str, list[float]] = {}
    for q in rows:
        if q["kind"] == "tbf":
            by_dev.setdefault(str(q["dev"]), []).append(int(q["backlog_bytes"]) * 8 / link_bps * 1e3)
    drain = f"{buffer_bytes * 8 / link_bps * 1e3:.0f} ms" if buffer_bytes else "?"
    for dev, ms in sorted(by_dev.items()):
        if max(ms) == 0:
            continue            # the feedback direction: never queued
        ms.sort()
        pct = {p: ms[min(len(ms) - 1, int(p / 100 * len(ms)))] for p in (50, 95, 99)}
        print(f"  bottleneck queuing delay ({dev}, {len(ms)} samples): p50 {pct[50]:.1f}  p95 {pct[95]:.1f}  "
              f"p99 {pct[99]:.1f}  max {ms[-1]:.1f} ms   (buffer drain time {drain})")


def report_cpu(r: dict[str, Any], duration_s: float) -> None:
    """Each end's process CPU time per packet and as a share of one core over the stream."""
    for side, packets in (("sender", r["packets_sent"]), ("receiver", r["packets_received"])):
        cpu = (r.get("process_cpu_s") or {}).get(side)
        if not cpu or not packets:
            continue
        total = cpu["user_s"] + cpu["system_s"]
        print(f"  {side} process CPU: {total:.2f} s (user {cpu['user_s']:.2f}, system {cpu['system_s']:.2f}) = "
              f"{total / packets * 1e6:.1f} µs per packet, {total / duration_s:.1%} of a core over "
              f"{duration_s:.1f} s ({packets / duration_s:.0f} pkt/s)")


def variant_scenario(scenario: Path, results: Path, controller: str | None, padding: str | None) -> Path:
    """The scenario with another controller and/or workload.bbr.padding, written under `results`
    (its own name, so runs of each variant stay apart)."""
    doc = yaml.safe_load(scenario.read_text())
    wl = doc["workload"]
    if controller:
        wl["controller"] = controller
    if padding:
        wl.setdefault("bbr", {})["padding"] = padding == "on"
    doc["name"] = f"{doc['name']}-{wl['controller']}" + (f"-padding-{padding}" if padding else "")
    results.mkdir(parents=True, exist_ok=True)
    out = results / f"{doc['name']}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default=str(REPO / "scenarios" / "rtp-gcc-short.yaml"))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--results", default="/tmp/mpvlab-bench-rtp", help="kept, to look into")
    ap.add_argument("--controller", help="run the scenario with this controller instead")
    ap.add_argument("--padding", choices=("on", "off"), help="webrtc-bbr: workload.bbr.padding")
    args = ap.parse_args()
    if args.controller or args.padding:
        args.scenario = str(variant_scenario(Path(args.scenario), Path(args.results), args.controller, args.padding))
    sc, _ = load_scenario(Path(args.scenario))
    ((path_name, path),) = sc.paths.items()
    link_bps = path.down.rate
    for _ in range(args.runs):
        delay = getattr(path.down.delay, "value", None)
        report(run_once(Path(args.scenario), Path(args.results)), link_bps, f"{path.down.buffer}",
               f"{delay / 1e6:g} ms" if isinstance(delay, int) else f"{path.down.delay}", path_name,
               path.down.buffer.to_bytes() if path.down.buffer is not None else None, sc.workload.fps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
