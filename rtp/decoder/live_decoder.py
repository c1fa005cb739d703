"""The viewer's decoder: `mpvlab-rtp recv` runs it as its child and feeds it, in frame order, every
frame that was complete by its playout deadline (and whose reference chain is whole, see recv's
playout); it decodes them with libav's H.264 decoder (GStreamer avdec_h264) into a fakesink. Talks
over pipes:

  stdin   one record per frame: a 12-byte header (frame number u32, flags u32 (1 = keyframe), length
          u32; big-endian) followed by the frame's H.264 Annex B access unit; EOF ends the stream
  stdout  `decoded <frame>` for every picture the decoder put out, then `end <JSON>` once the decoder
          drained (frames fed, pictures out, the decoder's warnings and whether it failed)

A frame fed but never put out is a decode error: avdec_h264 runs with output-corrupt=false, so a
picture libav flags as corrupt is dropped, not shown, and with max-errors=-1 a bad frame never stops
the pipeline. One decoding thread: 640×360 at 30 fps needs a few % of a core, and frame threading
would hold pictures back by a frame per thread. Why Python: the encoder side's reason
(rtp/encoder/live_encoder.py) — PyGObject is on the system Python, no Go GStreamer binding here.
"""

from __future__ import annotations

import json
import resource
import struct
import sys
from typing import Any, BinaryIO

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

HEADER = struct.Struct(">III")
FLAG_KEY = 1
# Each frame's number travels as its PTS (n ms): the decoder keeps a frame's timestamp on the picture
# it makes (no B-frames, no reordering), so every picture names the frame it came from.
PTS_UNIT = Gst.MSECOND
DRAIN_TIMEOUT = 10 * Gst.SECOND


# Per codec (`--codec`, what the sender encoded): the caps of what is fed and the decoder. VP8 goes to
# libvpx's decoder (vp8dec), which libwebrtc's own VP8 receive path uses too; one thread as above.
DECODERS = {
    "h264": ("video/x-h264,stream-format=byte-stream,alignment=au",
             "avdec_h264 name=dec max-threads=1 output-corrupt=false max-errors=-1", "libav"),
    "vp8": ("video/x-vp8", "vp8dec name=dec threads=1", "vpx"),
}


def build(codec: str) -> Gst.Pipeline:
    caps, dec, _ = DECODERS[codec]
    desc = (f"appsrc name=src format=time block=true max-bytes=4000000 caps={caps} ! {dec} ! "
            "fakesink name=sink sync=false signal-handoffs=true")
    pipe = Gst.parse_launch(desc)
    assert isinstance(pipe, Gst.Pipeline)
    return pipe


def read_frame(inp: BinaryIO) -> tuple[int, int, bytes] | None:
    head = inp.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    frame, flags, n = HEADER.unpack(head)
    data = inp.read(n)
    return (frame, flags, data) if len(data) == n else None


def push(src: Gst.Element, frame: int, flags: int, data: bytes) -> Gst.FlowReturn:
    buf = Gst.Buffer.new_wrapped(data)
    buf.pts = buf.dts = frame * PTS_UNIT
    buf.duration = PTS_UNIT
    if not flags & FLAG_KEY:
        buf.set_flags(Gst.BufferFlags.DELTA_UNIT)
    return src.emit("push-buffer", buf)


def drain(pipe: Gst.Pipeline) -> dict[str, Any]:
    """Waits for EOS (every fed frame decoded or dropped); counts the decoder's warnings on the way."""
    bus = pipe.get_bus()
    warnings: list[str] = []
    while True:
        msg = bus.timed_pop_filtered(DRAIN_TIMEOUT, Gst.MessageType.EOS | Gst.MessageType.ERROR
                                     | Gst.MessageType.WARNING)
        if msg is None:
            return {"warnings": len(warnings), "warning_texts": warnings[:5], "error": "no EOS within 10 s"}
        if msg.type == Gst.MessageType.WARNING:
            warnings.append(str(msg.parse_warning()[0].message))
            continue
        error = None if msg.type == Gst.MessageType.EOS else str(msg.parse_error()[0].message)
        return {"warnings": len(warnings), "warning_texts": warnings[:5], "error": error}


def main() -> int:
    Gst.init(None)
    codec = sys.argv[sys.argv.index("--codec") + 1] if "--codec" in sys.argv else "h264"
    if codec not in DECODERS:
        print(f"--codec {codec!r}: one of {sorted(DECODERS)}", file=sys.stderr)
        return 2
    pipe = build(codec)
    src, sink = pipe.get_by_name("src"), pipe.get_by_name("sink")
    out = sys.stdout
    pictures = 0

    def on_picture(_sink: Gst.Element, buf: Gst.Buffer, _pad: Gst.Pad) -> None:
        nonlocal pictures
        pictures += 1
        out.write(f"decoded {round(buf.pts / PTS_UNIT)}\n")
        out.flush()

    sink.connect("handoff", on_picture)
    pipe.set_state(Gst.State.PLAYING)
    fed, refused = 0, 0
    inp = sys.stdin.buffer
    while (rec := read_frame(inp)) is not None:
        if push(src, *rec) == Gst.FlowReturn.OK:
            fed += 1
        else:
            refused += 1     # the pipeline failed: the frame is not decoded, the viewer counts it so
    src.emit("end-of-stream")
    result = drain(pipe)
    pipe.set_state(Gst.State.NULL)
    use = resource.getrusage(resource.RUSAGE_SELF)   # its cost on the viewer's host, start-up included
    result.update({"fed": fed, "refused": refused, "pictures": pictures,
                   "cpu_s": round(use.ru_utime + use.ru_stime, 3),
                   "decoder": DECODERS[codec][1].split()[0] + " "
                   + Gst.Registry.get().find_plugin(DECODERS[codec][2]).get_version()})
    out.write("end " + json.dumps(result) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
