#!/usr/bin/env python3
"""The encoder across a pause (issue 43): what it puts out against its setting.

Two modes, both printing measured figures beside the configured setting (nothing tuned):

  offline   the live encoder alone (rtp/encoder/live_encoder.py, or another copy of it given with
            --encoder, e.g. `git show main:rtp/encoder/live_encoder.py > /tmp/old.py`): encode 3 s,
            pause, encode 3 s; bytes per 1 s of capture time before the pause and after it, ÷ the
            setting.
  RUN_DIR…  finished rtp runs: the encoder's output ÷ what its setting asked for over the steady
            window's running time (rtp_checks.check_encoder_vs_setting) and over the steady windows
            without a pause, the pauses (spells, seconds), the steady target as the summary has it and
            as it was before issue 43 (windows' means, the pauses' zeros in).

Usage: .venv/bin/python bench/bench_rtp_pause.py offline [--codec vp8] [--kbps 500] [--pause-s 2] [--encoder PATH]
       .venv/bin/python bench/bench_rtp_pause.py RUN_DIR [RUN_DIR …]
"""

from __future__ import annotations

import argparse
import csv
import json
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
sys.path.insert(0, str(REPO))
from mpvlab.runner.workloads import rtp_checks  # noqa: E402

HEADER = struct.Struct(">IQIII")


def offline(encoder: Path, codec: str, kbps: int, fps: int, pause_s: float) -> None:
    p = subprocess.Popen([sys.executable, str(encoder), "--codec", codec, "--bitrate-kbps", str(kbps), "--fps", str(fps)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdin is not None and p.stdout is not None
    frames: list[tuple[int, int]] = []

    def read(out: IO[bytes]) -> None:
        while len(head := out.read(HEADER.size)) == HEADER.size:
            _n, cap, _key, _k, size = HEADER.unpack(head)
            out.read(size)
            frames.append((cap, size))

    t = threading.Thread(target=read, args=(p.stdout,), daemon=True)
    t.start()
    for cmd, wait in ((b"", 3.0), (b"pause\n", pause_s), (b"resume\n", 3.0), (b"stop\n", 0.0)):
        if cmd:
            p.stdin.write(cmd)
            p.stdin.flush()
        time.sleep(wait)
    p.wait(timeout=20)
    t.join(timeout=5)
    caps = [c for c, _ in frames]
    gaps = [b - a for a, b in zip(caps, caps[1:])]
    i = gaps.index(max(gaps))
    budget = kbps * 1000 / 8

    def second(a: float) -> str:
        fs = [s for c, s in frames if a <= c < a + 1e9]
        return f"{len(fs)} frames, {sum(fs)} B = {sum(fs) / budget:.2f} x"
    print(f"{encoder} {codec} at {kbps} kbit/s ({budget:.0f} B/s), pause {pause_s:g} s (capture gap "
          f"{max(gaps) / 1e9:.3f} s)")
    print(f"  1 s before the pause: {second(caps[i] - 1e9 + 1)}")
    print(f"  1st s after:          {second(caps[i + 1])}   max frame {max(s for c, s in frames if c >= caps[i + 1])} B")
    print(f"  2nd s after:          {second(caps[i + 1] + 1e9)}")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def run(run_dir: Path) -> None:
    root = run_dir / "logs" / "rtp"
    s = json.loads((run_dir / "summary.json").read_text())["rtp"]
    ev = rtp_checks.Evidence(
        tx=json.loads((root / "sender/sender.json").read_text()), rx=json.loads((root / "receiver/receiver.json").read_text()),
        sender_frames=_rows(root / "sender/frames.csv"), packets=_rows(root / "sender/packets.csv"),
        targets=_rows(root / "sender/targets.csv"), encoder=_rows(root / "sender/encoder.csv"),
        receiver_frames=_rows(root / "receiver/frames.csv"), rate=_rows(root / "receiver/rate.csv"))
    c = rtp_checks.check_encoder_vs_setting(ev).values
    steady = rtp_checks.steady_target(ev.encoder, ev.targets)
    full = [r for r in ev.encoder if int(r["frames"]) > 0]
    half = full[int(len(full) * rtp_checks.STEADY_FROM):-1]
    old = sum(float(r["target_bps_mean"]) for r in half) / len(half) if half else None
    spells = sum(1 for r in ev.targets if r["target_bps"] == "0")
    rx = [x["received_bps"] for x in s["received_per_second"]]
    print(f"run {run_dir}: {s['controller']} {s['encoder']}, {ev.tx['frames_captured']} frames")
    print(f"  encoder output ÷ setting, steady window's running time: {c['ratio']} ({c['windows']} windows, "
          f"{c['windows_with_pause']} with a pause); steady windows without a pause: {c['ratio_windows_without_pause']}")
    print(f"  pauses: {spells} spells, {rtp_checks.paused_s(ev.targets, 0.0, 1e9):.1f} s in the run, "
          f"{steady['steady_paused_s']} s in the steady window {steady['steady_window_s']}")
    print(f"  steady target: {steady['steady_mean']} bit/s (running time); {old and round(old)} bit/s with the "
          f"pauses' zeros in (before issue 43); viewer received {sum(rx) / max(1, len(rx)):.0f} bit/s mean per second")
    failed = [k for k, v in s.get("checks", {}).items() if not v["ok"]]
    print(f"  summary checks failed: {failed or 'none'}" if "checks" in s else "  summary has no checks (older run)")


def main(argv: list[str]) -> int:
    if argv[:1] == ["offline"]:
        ap = argparse.ArgumentParser()
        ap.add_argument("--encoder", type=Path, default=REPO / "rtp" / "encoder" / "live_encoder.py")
        ap.add_argument("--codec", choices=["vp8", "h264"], default="vp8")
        ap.add_argument("--kbps", type=int, default=500)
        ap.add_argument("--fps", type=int, default=30)
        ap.add_argument("--pause-s", type=float, default=2.0)
        a = ap.parse_args(argv[1:])
        offline(a.encoder, a.codec, a.kbps, a.fps, a.pause_s)
        return 0
    if not argv:
        print(__doc__)
        return 2
    for d in argv:
        run(Path(d))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
