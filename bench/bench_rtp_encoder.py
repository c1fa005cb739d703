#!/usr/bin/env python3
"""The live encoder's rate control offline: replays the bitrate settings of a run (its
logs/rtp/sender/frames.csv, frame by frame) through the encoder's x264enc configuration
(rtp/encoder/live_encoder.py) for each VBV size asked, faster than real time, and prints per 1 s
window the H.264 bits against the setting — how the VBV choice in live_encoder.py was made
(rtp/README.md).

Usage: .venv/bin/python bench/bench_rtp_encoder.py RUN_DIR [--vbv-ms 300 100 …] [--extra 'option-string=…']
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import gi

from mpvlab.core.paths import checkout_root

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

REPO = checkout_root()
sys.path.insert(0, str(REPO / "rtp" / "encoder"))
from live_encoder import CONTENT  # noqa: E402

WITHIN = 0.10


def settings(run_dir: Path) -> tuple[list[int], int]:
    """The encoder's setting (kbit/s) for every frame of the run, and its frame rate."""
    rows = list(csv.DictReader((run_dir / "logs/rtp/sender/frames.csv").open()))
    fps = int(json.loads((run_dir / "logs/rtp/sender/sender.json").read_text())["fps"])
    return [int(r["encoder_bps"]) // 1000 for r in rows], fps


def replay(kbps: list[int], fps: int, vbv_ms: int, extra: str, content: str) -> list[tuple[float, float]]:
    """(achieved kbit, asked kbit) per 1 s window, the setting applied before the frame it was set for."""
    desc = (f"videotestsrc num-buffers={len(kbps)} {CONTENT[content]} ! "
            f"video/x-raw,format=I420,width=640,height=360,framerate={fps}/1 ! "
            f"x264enc name=enc tune=zerolatency speed-preset=ultrafast bitrate={kbps[0]} key-int-max=60 "
            f"vbv-buf-capacity={vbv_ms} byte-stream=true threads=1 {extra} ! "
            "video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=sink emit-signals=true sync=false")
    pipe = Gst.parse_launch(desc)
    enc, sink = pipe.get_by_name("enc"), pipe.get_by_name("sink")
    sizes: list[int] = []
    n = [0]

    def before_encode(_pad: Gst.Pad, _info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        k = kbps[min(n[0], len(kbps) - 1)]
        if k != enc.get_property("bitrate"):
            enc.set_property("bitrate", k)
        n[0] += 1
        return Gst.PadProbeReturn.OK

    def on_sample(s: Gst.Element) -> Gst.FlowReturn:
        sizes.append(s.emit("pull-sample").get_buffer().get_size())
        return Gst.FlowReturn.OK

    enc.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, before_encode)
    sink.connect("new-sample", on_sample)
    pipe.set_state(Gst.State.PLAYING)
    pipe.get_bus().timed_pop_filtered(Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    pipe.set_state(Gst.State.NULL)
    return [(sum(sizes[w * fps:(w + 1) * fps]) * 8 / 1000, sum(kbps[w * fps:(w + 1) * fps]) / fps)
            for w in range(len(sizes) // fps)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--vbv-ms", type=int, nargs="+", default=[300, 150, 100, 66, 33])
    ap.add_argument("--extra", default="", help="more x264enc properties, e.g. option-string=nal-hrd=cbr:filler=1")
    ap.add_argument("--content", choices=sorted(CONTENT), default="moving-smpte")
    args = ap.parse_args()
    Gst.init(None)
    kbps, fps = settings(args.run_dir)
    for vbv in args.vbv_ms:
        w = replay(kbps, fps, vbv, args.extra, args.content)
        ratios = [got / want for got, want in w]
        ok = sum(abs(r - 1) <= WITHIN for r in ratios)
        print(f"vbv {vbv:4d} ms {args.extra}: {ok}/{len(w)} windows within ±{WITHIN:.0%} of the setting, "
              f"mean {sum(ratios) / len(ratios):.3f} | " + " ".join(f"{r:.2f}" for r in ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
