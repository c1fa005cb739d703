"""The live encoder (rtp/encoder/live_encoder.py) across a pause of its gate (the sender's `pause`,
webrtc-bbr's IsSendQueueFull): the encoder must not spend the pause's budget after it (issue 43
item 3), and the capture times it reports must stay the real ones."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
import time

import pytest
from mpvlab.core.paths import checkout_root

ENCODER = checkout_root() / "rtp" / "encoder" / "live_encoder.py"
HEADER = struct.Struct(">IQIII")
KBPS, FPS = 500, 30
PAUSE_S = 2.0


def _read_frames(out: object, frames: list[tuple[int, int, int]]) -> None:
    """(capture ns, keyframe, bytes) per encoded frame, until the encoder closes its stdout."""
    while True:
        head = out.read(HEADER.size)  # type: ignore[attr-defined]
        if len(head) < HEADER.size:
            return
        _n, cap, key, _kbps, size = HEADER.unpack(head)
        out.read(size)  # type: ignore[attr-defined]
        frames.append((cap, key, size))


def _run_with_pause(codec: str) -> tuple[list[tuple[int, int, int]], int, int]:
    """Encode 3 s, pause PAUSE_S, encode 3 s; the frames and CLOCK_MONOTONIC at pause and resume."""
    p = subprocess.Popen([sys.executable, str(ENCODER), "--codec", codec, "--bitrate-kbps", str(KBPS),
                          "--fps", str(FPS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    assert p.stdin is not None and p.stdout is not None
    frames: list[tuple[int, int, int]] = []
    reader = threading.Thread(target=_read_frames, args=(p.stdout, frames), daemon=True)
    reader.start()
    try:
        time.sleep(3.0)
        p.stdin.write(b"pause\n")
        p.stdin.flush()
        paused = time.monotonic_ns()
        time.sleep(PAUSE_S)
        p.stdin.write(b"resume\n")
        p.stdin.flush()
        resumed = time.monotonic_ns()
        time.sleep(3.0)
        p.stdin.write(b"stop\n")
        p.stdin.flush()
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    reader.join(timeout=5)
    return frames, paused, resumed


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_encoder_does_not_spend_a_pause_budget_after_it(codec: str) -> None:
    """After a 2 s pause at 500 kbit/s, the first second of frames after it carries about one
    second of the setting (62.5 kB), not the pause's budget on top. Bound: 1.5 x — libvpx's overshoot
    setting is 15 %, x264's VBV 100 ms; before the fix VP8 put out 2.0 x (125 653 B, a 17 kB first
    delta frame; libvpx's frame rate, and so its budget per frame, came from the gap). Also the capture times: real instants (the pause shows as a gap of about PAUSE_S in them),
    strictly increasing."""
    frames, paused, resumed = _run_with_pause(codec)
    caps = [c for c, _, _ in frames]
    assert caps == sorted(caps) and len(set(caps)) == len(caps)
    gaps = [b - a for a, b in zip(caps, caps[1:])]
    big = max(gaps)
    # the gap in capture time is the pause (± the command's way through the pipe and GLib's idle)
    assert PAUSE_S * 0.8e9 < big < PAUSE_S * 1e9 + 1.0e9, f"largest capture gap {big / 1e9:.3f} s"
    first_after = caps[gaps.index(big) + 1]
    assert paused - 0.5e9 < first_after - big and first_after < resumed + 1.0e9
    after = [size for c, _key, size in frames if first_after <= c < first_after + 1e9]
    assert len(after) >= 5, f"only {len(after)} frames in the second after the pause"
    # bytes per second of capture time, key frames included (a CBR encoder budgets them too); frames
    # libvpx dropped leave their budget to the others, so the bound is per second, not per frame
    spent, budget = sum(after), KBPS * 1000 / 8
    assert spent <= 1.5 * budget, (f"{codec}: {spent} B in the second after the pause, "
                                    f"{spent / budget:.2f} x the setting's {budget:.0f} B")


KEYINT_LONG = 600   # no periodic key frame within the test: every later key frame was asked for


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_keyframe_command_forces_the_next_frame_to_a_key_frame(codec: str) -> None:
    """The sender's `keyframe` command (a PLI from the viewer, rtp/README.md "Losses were repaired")
    makes the encoder put out a key frame soon after, for x264enc and vp8enc alike (GStreamer's
    upstream force-key-unit event); without it no key frame follows the first within the 600-frame
    interval. Two requests 1.5 s apart give two key frames, each within 0.5 s of its request (the
    command's way through the pipe and GLib's idle, then one frame at 30 fps and the encoder's delay)."""
    p = subprocess.Popen([sys.executable, str(ENCODER), "--codec", codec, "--bitrate-kbps", str(KBPS),
                          "--fps", str(FPS), "--keyint", str(KEYINT_LONG)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdin is not None and p.stdout is not None
    frames: list[tuple[int, int, int]] = []
    reader = threading.Thread(target=_read_frames, args=(p.stdout, frames), daemon=True)
    reader.start()
    asked = []
    try:
        time.sleep(2.0)
        for _ in range(2):
            asked.append(time.monotonic_ns())
            p.stdin.write(b"keyframe\n")
            p.stdin.flush()
            time.sleep(1.5)
        p.stdin.write(b"stop\n")
        p.stdin.flush()
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    reader.join(timeout=5)
    keys = [c for c, key, _ in frames if key]
    assert frames and frames[0][1] == 1, "the first frame is a key frame"
    later = keys[1:]
    assert len(later) == len(asked), (f"{codec}: key frames at {[(k - asked[0]) / 1e9 for k in later]} s "
                                      f"from the first request, {len(asked)} requests")
    for k, a in zip(later, asked):
        # capture time of the key frame: the first frame captured after the request reached the
        # encoder (a frame captured before it may be encoded after it, so a little before `a` is fine)
        assert a - 0.1e9 <= k <= a + 0.5e9, f"{codec}: key frame {(k - a) / 1e9:+.3f} s from its request"
