"""The call's audio source for mpvlab-rtp's sender (issue 48 §1: "the call had audio"): a live
GStreamer test signal (audiotestsrc is-live) encoded with Opus as libwebrtc 2018 configured it by
default, one encoded frame per record. Started by `mpvlab-rtp send` as its second child, beside the
video encoder (rtp/encoder/live_encoder.py); talks over pipes:

  stdin   `stop` (or EOF) ends it
  stdout  one record per encoded Opus frame: a 16-byte header (frame number u32, capture time u64 in
          ns on CLOCK_MONOTONIC, length u32; big-endian) followed by the frame's bytes (one Opus
          packet, RFC 6716: what one RTP packet carries, RFC 7587)

Why a child of its own and not a branch in the video encoder's pipeline: the video encoder is paused
(its `valve`) while webrtc-bbr's send queue is full, and libwebrtc 2018 paused only the video
encoder then (`IsSendQueueFull` reaches `VideoSendStream` only); a separate pipeline keeps the audio
running at its own clock whatever the video does, and keeps the video pipe's record format as it was.

libwebrtc 2018's Opus defaults (rtp/README.md, "The call had audio"; github.com/HackWebRTC/webrtc
665174fd `modules/audio_coding/codecs/opus/audio_encoder_opus.cc`): the SDP format it offers is
`opus/48000/2 minptime=10 useinbandfec=1` (`AppendSupportedEncoders`), so mono (`GetChannelCount`:
stereo only with `stereo=1`), full band (max playback rate 48 kHz), `CalculateDefaultBitrate` =
`kOpusBitrateFbBps` 32 000 bit/s × 1 channel, 20 ms frames (`kDefaultFrameSizeMs`), application
VOIP for mono, VBR (`cbr` off; libopus's default constraint kept), in-band FEC on (`useinbandfec=1`;
it codes redundancy only once a packet-loss rate is reported, 0 here), DTX off (`usedtx` absent),
complexity 9 (`kDefaultComplexity` on x86 desktop, audio_encoder_opus_config.cc).

The signal: pink noise by default (`--wave`), a full-band signal in which the encoder has a use for
every bit of its 32 kbit/s, standing in for a participant who talks the whole call (DTX is off in
2018's default, so a silent participant's packets would still go out, just smaller). The choice is
the scenario's (`workload.audio.wave`), recorded in provenance; the encoder's output rate is
measured, not assumed (sender.json `audio`).

The capture time, as the video's: the buffer's running time plus the pipeline's base time on
GStreamer's system clock (CLOCK_MONOTONIC, the run's clock), taken at the encoder's input (the first
sample of the frame), so the measured audio latency includes the encoder's own delay.
"""

from __future__ import annotations

import argparse
import struct
import sys
import threading
from collections import deque

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

HEADER = struct.Struct(">IQI")
WAVES = {"pink-noise": "pink-noise", "sine": "sine", "silence": "silence"}


def opus_settings(args: argparse.Namespace) -> dict[str, int | str]:
    """opusenc's properties for libwebrtc 2018's defaults (module docstring); GStreamer's names."""
    return {"bitrate": args.bitrate, "frame-size": args.frame_ms, "audio-type": "voice",
            "bitrate-type": "constrained-vbr", "inband-fec": "true", "packet-loss-percentage": 0,
            "dtx": "false", "complexity": 9}


def encoder_desc(args: argparse.Namespace) -> str:
    props = " ".join(f"{k}={v}" for k, v in opus_settings(args).items())
    return f"opusenc name=enc {props}"


def build(args: argparse.Namespace) -> Gst.Pipeline:
    # One 20 ms buffer per source tick, so a frame's first sample is a buffer's first sample and the
    # capture probe below sees each frame's start.
    samples = 48000 * args.frame_ms // 1000
    desc = (f"audiotestsrc is-live=true wave={WAVES[args.wave]} samplesperbuffer={samples} ! "
            "audio/x-raw,rate=48000,channels=1 ! audioconvert ! audioresample ! "
            f"{encoder_desc(args)} ! appsink name=sink emit-signals=true sync=false max-buffers=16 drop=false")
    pipe = Gst.parse_launch(desc)
    assert isinstance(pipe, Gst.Pipeline)
    return pipe


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bitrate", type=int, default=32000, help="Opus target, bit/s (2018: kOpusBitrateFbBps)")
    ap.add_argument("--frame-ms", type=int, choices=[10, 20, 40, 60], default=20,
                    help="Opus frame length (2018: kDefaultFrameSizeMs 20; kOpusSupportedFrameLengths)")
    ap.add_argument("--wave", choices=sorted(WAVES), default="pink-noise")
    ap.add_argument("--print-settings", action="store_true", help="print the encoder's settings as JSON and exit")
    args = ap.parse_args()
    if args.print_settings:
        import json
        print(json.dumps({"codec": "opus", "pipeline": encoder_desc(args), "wave": args.wave}))
        return 0
    Gst.init(None)
    pipe = build(args)
    enc, sink = pipe.get_by_name("enc"), pipe.get_by_name("sink")
    out = sys.stdout.buffer
    loop = GLib.MainLoop()
    state = {"frame": 0}
    # capture running times of the buffers entering the encoder, oldest first: each output frame
    # takes the oldest not yet taken (one 20 ms buffer in, one Opus frame out, in order)
    captured: deque[int] = deque()
    lock = threading.Lock()

    def before_encoder(pad: Gst.Pad, info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        buf = info.get_buffer()
        seg_event = pad.get_sticky_event(Gst.EventType.SEGMENT, 0)
        if buf is not None and seg_event is not None:
            with lock:
                captured.append(seg_event.parse_segment().to_running_time(Gst.Format.TIME, buf.pts))
        return Gst.PadProbeReturn.OK

    def on_sample(appsink: Gst.Element) -> Gst.FlowReturn:
        sample = appsink.emit("pull-sample")
        buf = sample.get_buffer()
        data = buf.extract_dup(0, buf.get_size())
        if not data:
            return Gst.FlowReturn.OK
        with lock:
            # opusenc's output is timestamped from its input; when the probe's queue is ahead of
            # it (never seen), the output's own running time is the fallback
            running = captured.popleft() if captured else \
                sample.get_segment().to_running_time(Gst.Format.TIME, buf.pts)
            try:
                out.write(HEADER.pack(state["frame"], pipe.get_base_time() + running, len(data)) + data)
                out.flush()
            except BrokenPipeError:
                GLib.idle_add(loop.quit)
                return Gst.FlowReturn.EOS
            state["frame"] += 1
        return Gst.FlowReturn.OK

    def commands() -> None:
        for line in sys.stdin:
            if line.split()[:1] == ["stop"]:
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
