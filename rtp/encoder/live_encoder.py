"""The live source of mpvlab-rtp's sender: a GStreamer pipeline capturing a test picture in real time
(videotestsrc is-live) and encoding it with x264 (zerolatency, ultrafast) or VP8 (libvpx with
libwebrtc's 2018 real-time rate control, `--codec vp8`), whose bitrate the sender changes at run
time. Started by `mpvlab-rtp send` as its child; talks over pipes:

  stdin   one command per line: `bitrate <kbit/s>` (the controller's target), `pause` / `resume`
          (capture goes on, no picture is encoded while paused), `keyframe` (the next frame is a key
          frame: the viewer asked for one), or `stop`
  stdout  one record per encoded frame: a 24-byte header (frame number u32, capture time u64 in ns on
          CLOCK_MONOTONIC, keyframe flag u32, encoder bitrate in kbit/s u32, length u32; big-endian)
          followed by the frame's bytes (H.264 Annex B access unit, or one VP8 frame)

Why Python: PyGObject is on the system Python and is what the player already uses; Go has no
maintained GStreamer binding on this machine. The capture time is the buffer's running time plus the
pipeline's base time on GStreamer's system clock, which is CLOCK_MONOTONIC — the run's clock — so
end-to-end latency includes the encoder's own delay.
"""

from __future__ import annotations

import argparse
import struct
import sys
import threading
from collections import deque

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import GLib, Gst, GstVideo  # noqa: E402

HEADER = struct.Struct(">IQIII")
CONTENT = {"moving-smpte": "pattern=smpte horizontal-speed=4", "snow": "pattern=snow"}


# libwebrtc's 2018 VP8 settings (modules/video_coding/codecs/vp8/libvpx_vp8_encoder.cc, InitEncode
# and InitAndSetControlSettings, github.com/HackWebRTC/webrtc 665174fd): one-pass CBR, no lag, frame
# dropping on (rc_dropframe_thresh 30), undershoot 100 %, overshoot 15 %, buffer 500/600/1000 ms,
# quantizer 2..56 (the default qpMax), key frames capped at MaxIntraTarget(600 ms) = 600 × 0.5 × fps / 10
# % of a frame's budget (at least 300), cpu-used -6 (x86, VGA or more), one thread (VGA or less),
# static threshold 1, one token partition, denoiser "on adaptive" (4), no error resilience (one
# temporal layer). One difference, kept on purpose: key frames every `keyint` frames (libwebrtc:
# every 3000 and on a PLI, which this sender has no receiver to ask for: the keyframe interval is
# what ends a loss's damage, as with x264).
def vp8_settings(args: argparse.Namespace) -> dict[str, int | str]:
    return {"end-usage": "cbr", "deadline": 1, "lag-in-frames": 0, "dropframe-threshold": 30,
            "undershoot": 100, "overshoot": 15, "buffer-initial-size": 500, "buffer-optimal-size": 600,
            "buffer-size": 1000, "min-quantizer": 2, "max-quantizer": 56,
            "max-intra-bitrate": max(300, 600 * 5 * args.fps // 100), "cpu-used": -6, "threads": 1,
            "static-threshold": 1, "token-partitions": 0, "noise-sensitivity": 4, "error-resilient": 0,
            "keyframe-mode": "auto", "keyframe-max-dist": args.keyint}


def encoder_desc(args: argparse.Namespace) -> str:
    if args.codec == "vp8":
        props = " ".join(f"{k}={v}" for k, v in vp8_settings(args).items())
        return (f"vp8enc name=enc target-bitrate={args.bitrate_kbps * 1000} {props} ! video/x-vp8 ! ")
    return (f"x264enc name=enc tune=zerolatency speed-preset=ultrafast bitrate={args.bitrate_kbps} "
            f"key-int-max={args.keyint} vbv-buf-capacity={args.vbv_ms} byte-stream=true threads=1 ! "
            "video/x-h264,stream-format=byte-stream,alignment=au ! ")


def build(args: argparse.Namespace) -> Gst.Pipeline:
    # A scrolling SMPTE picture is hard enough that x264 spends the bits it is given (measured: 0.8 Mbit/s
    # asked, 0.74-0.90 per second got); a still picture or the bouncing ball falls far below any target
    # (0.15 of 0.8 Mbit/s) and would measure the content, not the control.
    desc = (f"videotestsrc is-live=true {CONTENT[args.content]} ! "
            f"video/x-raw,format=I420,width={args.width},height={args.height},framerate={args.fps}/1 ! "
            # the gate: closed while the sender says `pause` (libwebrtc's target of 0 when its pacer's
            # queue exceeds 2 s), so those pictures are never encoded and no reference breaks
            "valve name=gate drop=false ! "
            + encoder_desc(args) + "appsink name=sink emit-signals=true sync=false max-buffers=4 drop=false")
    pipe = Gst.parse_launch(desc)
    assert isinstance(pipe, Gst.Pipeline)
    return pipe


class Cadence:
    """Frame timestamps for the encoder spaced 1/fps apart, whatever was dropped before it.

    libwebrtc 2018 gives libvpx a fixed duration per frame: `LibvpxVp8Encoder::Encode` calls
    `vpx_codec_encode(…, timestamp_, duration, …)` with duration = 90000 / maxFramerate and then
    `timestamp_ += duration` (libvpx_vp8_encoder.cc at 665174fd; "the rate control seems to be off"
    with real gaps, its comment says). libvpx derives its frame rate, and so each frame's share of
    the bitrate, from the timestamps (onyx_if.c `vp8_get_compressed_data`: the time from the previous
    frame's end to this frame's end; when it differs by 10 % from the last, `vp8_new_framerate(cpi,
    10000000.0 / this_duration)`), so a pause of the `gate` (the sender's `pause`) seen as a timestamp
    gap made the next frames spend the gap's budget: a 22.5 kB frame after a 0.8 s pause at ~2 kB
    per frame. Here every frame fed to the encoder gets the
    timestamp first + n/fps (n: frames fed so far) and duration 1/fps; `capture_running` maps an
    encoded frame's running time back to its capture instant, so the reported capture time (and
    the measured latency) stays the real one."""

    def __init__(self, fps: int) -> None:
        self.fps = fps
        self.fed = 0
        self.first: int | None = None
        self.pending: deque[tuple[int, int]] = deque()     # (encoder-side running time, capture running time)

    def _at(self, n: int) -> int:
        assert self.first is not None
        return self.first + Gst.util_uint64_scale(n, Gst.SECOND, self.fps)

    def retime(self, buf: Gst.Buffer, segment: Gst.Segment) -> None:
        """Give the next frame into the encoder its place in the fixed cadence."""
        capture = segment.to_running_time(Gst.Format.TIME, buf.pts)
        if self.first is None:
            self.first = buf.pts
        pts = self._at(self.fed)
        buf.pts, buf.dts, buf.duration = pts, Gst.CLOCK_TIME_NONE, self._at(self.fed + 1) - pts
        self.fed += 1
        self.pending.append((segment.to_running_time(Gst.Format.TIME, pts), capture))

    def capture_running(self, encoder_running: int) -> int:
        """The capture running time of the encoded frame at `encoder_running` (frames the encoder
        dropped are passed over: their output never comes)."""
        while self.pending and self.pending[0][0] < encoder_running:
            self.pending.popleft()
        if self.pending and self.pending[0][0] == encoder_running:
            return self.pending.popleft()[1]
        raise LookupError(f"no frame fed to the encoder at running time {encoder_running} ns")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=360)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--bitrate-kbps", type=int, default=300)
    ap.add_argument("--keyint", type=int, default=60)
    # 100 ms VBV (x264's CBR: vbv-maxrate = bitrate, buffer = 100 ms of it), as a real-time sender keeps
    # it a few frames deep. Measured by replaying the bitrate GCC set in three runs of
    # scenarios/rtp-gcc-short.yaml through this encoder, offline: 1 s windows within 10 % of the
    # setting 16-17/20 at 300 ms (the ABR predictor spends a rising setting up to a buffer late and the
    # surplus after the next cut), 18-19/20 at 150 ms, 20/20 at 100 and 66 ms, and 0/20 at 33 ms
    # (a buffer of one frame cannot hold a keyframe: every frame's QP rises, 0.74 × the setting).
    # nal-hrd=cbr with filler is no remedy: it does not follow a bitrate set while playing (0.6 ×),
    # and the payloader drops filler NALs anyway.
    ap.add_argument("--vbv-ms", type=int, default=100)
    ap.add_argument("--content", choices=sorted(CONTENT), default="moving-smpte")
    ap.add_argument("--codec", choices=["h264", "vp8"], default="h264")
    ap.add_argument("--print-settings", action="store_true", help="print the encoder's settings as JSON and exit")
    args = ap.parse_args()
    if args.print_settings:
        import json
        print(json.dumps({"codec": args.codec, "pipeline": encoder_desc(args).rstrip(" !")}))
        return 0
    Gst.init(None)
    pipe = build(args)
    enc, sink, gate = pipe.get_by_name("enc"), pipe.get_by_name("sink"), pipe.get_by_name("gate")
    out = sys.stdout.buffer
    lock = threading.Lock()
    loop = GLib.MainLoop()
    state = {"frame": 0, "kbps": args.bitrate_kbps}
    cadence = Cadence(args.fps)

    def before_encoder(pad: Gst.Pad, info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        buf = info.get_buffer()
        seg_event = pad.get_sticky_event(Gst.EventType.SEGMENT, 0)
        if buf is not None and seg_event is not None:
            cadence.retime(buf, seg_event.parse_segment())
        return Gst.PadProbeReturn.OK

    def on_sample(appsink: Gst.Element) -> Gst.FlowReturn:
        sample = appsink.emit("pull-sample")
        buf = sample.get_buffer()
        data = buf.extract_dup(0, buf.get_size())
        # x264enc shifts its timestamps by 1000 h (room for negative DTS) and says so in its segment:
        # the segment's running time is the capture instant relative to the pipeline's base time.
        # The encoder saw the frames in a fixed cadence (Cadence): map back to the capture instant.
        running = cadence.capture_running(sample.get_segment().to_running_time(Gst.Format.TIME, buf.pts))
        capture_ns = pipe.get_base_time() + running
        key = 0 if buf.has_flags(Gst.BufferFlags.DELTA_UNIT) else 1
        with lock:
            try:
                out.write(HEADER.pack(state["frame"], capture_ns, key, state["kbps"], len(data)) + data)
                out.flush()
            except BrokenPipeError:
                GLib.idle_add(loop.quit)
                return Gst.FlowReturn.EOS
            state["frame"] += 1
        return Gst.FlowReturn.OK

    def commands() -> None:
        for line in sys.stdin:
            parts = line.split()
            if parts[:1] == ["bitrate"] and len(parts) == 2:
                kbps = max(16, min(100_000, int(parts[1])))
                # x264enc reconfigures its rate control for a bitrate set while PLAYING
                # (vp8enc takes bit/s and reconfigures libvpx with vpx_codec_enc_config_set, as
                # libwebrtc's SetRateAllocation does)
                prop, val = ("target-bitrate", kbps * 1000) if args.codec == "vp8" else ("bitrate", kbps)
                GLib.idle_add(lambda p=prop, v=val, k=kbps: (enc.set_property(p, v), state.__setitem__("kbps", k)) and False)
            elif parts[:1] in (["pause"], ["resume"]):
                drop = parts[0] == "pause"
                GLib.idle_add(lambda d=drop: gate.set_property("drop", d) and False)
            elif parts[:1] == ["keyframe"]:
                # a key-frame request (the viewer's PLI, rtp/README.md): GStreamer's upstream
                # force-key-unit event into the encoder's source pad; x264enc and vp8enc (both
                # GstVideoEncoder) make the next frame an IDR / key frame
                ev = GstVideo.video_event_new_upstream_force_key_unit(Gst.CLOCK_TIME_NONE, True, 0)
                GLib.idle_add(lambda e=ev: enc.get_static_pad("src").send_event(e) and False)
            elif parts[:1] == ["stop"]:
                break
        GLib.idle_add(loop.quit)

    sink.connect("new-sample", on_sample)
    enc.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, before_encoder)
    clock = Gst.SystemClock.obtain()
    if clock.get_property("clock-type") != Gst.ClockType.MONOTONIC:
        print("GStreamer's system clock is not CLOCK_MONOTONIC", file=sys.stderr)
        return 2
    pipe.use_clock(clock)
    bus = pipe.get_bus()
    bus.add_signal_watch()
    bus.connect("message::error", lambda _b, m: (print(m.parse_error(), file=sys.stderr), loop.quit()))
    threading.Thread(target=commands, daemon=True).start()
    pipe.set_state(Gst.State.PLAYING)
    try:
        loop.run()
    finally:
        pipe.set_state(Gst.State.NULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
