"""The rtp workload (mpvlab/runner/workloads/rtp.py, rtp/cmd/mpvlab-rtp) end to end: the shipped
scenario scenarios/rtp-gcc-short.yaml (and the same with controller webrtc-bbr, all but the last point) — 20 s of live video under Google Congestion Control through a
1 Mbit/s, 15 KB drop-tail bottleneck — and what must hold whatever the host's load:

- every frame captured is accounted at the viewer exactly once: on time + late + lost = captured;
- every packet sent appears in TWCC feedback (a handful may miss it: bounded and reported), and what
  the feedback reports received agrees with what the viewer counted;
- the bytes agree three ways: RTP bytes sent, RTP bytes received, the client interface's counters;
- the encoder followed the controller: every bitrate the encoder ran at was one the controller set,
  and (gcc) in the steady state (second half) at least 80 % of the full 1 s windows are within ±10 %
  twice over: the H.264 bytes of the encoder's setting, and the frames' packets as the IP layer carries
  them (RTP + UDP + IPv4 headers) of the controller's target, which budgets for those headers; and
  over all full windows (the ramp too) at least 90 % within ±10 % of the setting. Measured with the
  100 ms VBV (rtp/README.md), 5 runs: steady 10/10 both ways, all 20/20 against the setting; with the
  old 300 ms VBV the steady state was 8-9/10 and all windows 15-17/20 in 3 bench runs, but one test
  run with it passed these bounds: they are a floor that holds on a busy host, not a detector of that
  regression (bench/bench_rtp.py shows the difference). A CPU stall makes the encoder skip captures:
  such a window (< 90 % of the frames) is left out, not counted;
- the viewer decoded what it received: every on-time frame is decoded, a decode error or undecodable
  (a frame it refers to was late or lost); decoded + decode errors + undecodable + late + lost =
  captured; never a decode error (whole frames of a valid stream); after a late or lost frame at most
  keyint - 1 frames are undecodable; and with no loss and nothing late, decoded = on time (rendered);
  with 1 % loss (a third run) the attribution matches the sender's keyframes frame by frame;
- GCC's steady-state target (mean over the second half) lies within 0.5× … 1.0× the 1 Mbit/s link.
  Why, from first principles: above the link the bottleneck queue grows, the delay-based detector
  signals overuse and GCC sets 0.85 × the rate the viewer received, which cannot exceed the link; and
  on an idle link with no loss nothing cuts the target twice in a row without growth in between (the
  decrease is to 0.85 × the received rate, after which it grows again), so it cannot sit below half
  the link for half the stream. A CPU stall on this shared host slows the encoder (fewer bits than
  the target) but not the controller's arithmetic, so the bound needs no allowance for steal.

And scenarios/rtp-gcc-step.yaml (the link steps from 2 to 0.5 Mbit/s): the same accounting, and GCC's
target below 0.5 Mbit/s within a bound after the step (the test's docstring derives it).

Timing figures (latency, the per-window achieved-vs-target series) are printed by bench/bench_rtp.py,
the step reaction time by bench/bench_rtp_step.py; the tests assert bounds only.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mpvlab.core.paths import checkout_root

from mpvlab.results import checks

# Per test (issue 44): `cpu` on the runs (frame, packet and rate bounds; tests/hostnoise.py);
# the input checks start nothing.

REPO = checkout_root()
SCENARIO = REPO / "scenarios" / "rtp-gcc-short.yaml"
LINK_BPS = 1_000_000
FPS, DURATION_S = 30, 20
# Feedback the sender may never see: pion's TWCC recorder reports every packet it got and every gap
# before one, so only the stream's last packets, dropped at the 15 KB drop-tail queue with nothing after
# them, go unreported (the up path has no loss configured; a lost feedback datagram would leave ~10).
MISSING_FEEDBACK_BOUND = 20
WITHIN = 0.10          # achieved vs asked per 1 s window
STEADY_WITHIN_FRACTION = 0.8
ALL_WITHIN_FRACTION = 0.9
KEYINT = 60            # the scenario's default keyframe interval (workload spec)
RTX_OSN_BYTES = 2      # an RTX packet's original sequence number before the payload (RFC 4588 §4)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _run(scenario: Path, name: str, results: Path) -> tuple[Path, dict]:
    """One run through the real CLI; its directory and summary."""
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(scenario), "--results", str(results)],
                        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (run_dir,) = [d for d in (results / name).iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["workload"] == "rtp" and s["topology"] == "dumbbell"
    return run_dir, s


def _paused_frames(run_dir: Path) -> int:
    """Frames the live source captured but the encoder never encoded because webrtc-bbr's send queue
    was full (libwebrtc 2018's IsSendQueueFull: the encoder is told 0 and pauses): the capture gaps
    beyond one frame interval in the sender's frames.csv, counted only when the controller recorded a
    full-queue spell (targets.csv `sendQueueFullSpells`); 0 for GCC or a run that never paused."""
    targets = _rows(run_dir / "logs/rtp/sender/targets.csv")
    stats = json.loads(targets[-1]["controller_stats"] or "{}") if targets else {}
    if not stats.get("sendQueueFullSpells"):
        return 0
    caps = [int(f["capture_ns"]) for f in _rows(run_dir / "logs/rtp/sender/frames.csv")]
    interval = 1e9 / FPS
    return sum(max(0, round((b - a) / interval) - 1) for a, b in zip(caps, caps[1:]))


def _assert_accounted(run_dir: Path, s: dict, duration_s: int = DURATION_S) -> None:
    """Every frame, packet and byte accounted, the ends and the interface agreeing (module docstring);
    duration_s: the scenario's media time."""
    r = s["rtp"]
    # Frames: the live source ran for the configured media time (a stalled host may skip captures,
    # never add them), and the viewer accounted each one exactly once.
    captured = r["frames_captured"]
    # frames never encoded while webrtc-bbr's send queue was full exist for nobody, the viewer included
    assert 0.9 * FPS * duration_s <= captured + _paused_frames(run_dir) <= FPS * duration_s + 1, captured
    assert r["frames_on_time"] + r["frames_late"] + r["frames_lost"] == captured, r
    tx_frames = _rows(run_dir / "logs/rtp/sender/frames.csv")
    rx_frames = _rows(run_dir / "logs/rtp/receiver/frames.csv")
    assert len(tx_frames) == len(rx_frames) == captured
    assert [int(f["frame"]) for f in rx_frames] == list(range(captured))
    by_status = {st: sum(f["status"] == st for f in rx_frames) for st in ("on_time", "late", "lost")}
    assert by_status == {"on_time": r["frames_on_time"], "late": r["frames_late"], "lost": r["frames_lost"]}
    assert r["frames_reassembly_mismatch"] == 0      # complete frames depacketised to the bytes sent

    # Packets and feedback. Padding-only packets (webrtc-bbr while probing) are their own rows and
    # counts, never the video's; media and padding share one transport-wide sequence, consecutive in
    # the order packets left (the pacer numbers them as they leave).
    packets = _rows(run_dir / "logs/rtp/sender/packets.csv")
    # Retransmissions (RTX, workload.repair) and the call's audio (workload.audio, on by default) are
    # their own rows too, apart from the video's counts.
    media = [p for p in packets if p["padding"] == "false" and p["rtx"] == "false" and p["audio"] == "false"]
    padding = [p for p in packets if p["padding"] == "true"]
    rtx = [p for p in packets if p["rtx"] == "true"]
    audio = [p for p in packets if p["audio"] == "true"]
    assert len(media) + len(padding) + len(rtx) + len(audio) == len(packets)
    rep = r["repair"]
    assert len(rtx) == rep["retransmissions_sent"]
    assert rep["retransmissions_received"] + rep["retransmissions_lost"] == rep["retransmissions_sent"]
    assert len(media) == r["packets_sent"] == sum(int(f["packets"]) for f in tx_frames)
    assert len(padding) == r["padding_packets"]
    assert r["packets_received"] + r["packets_lost"] == r["packets_sent"]
    assert r["padding_packets_received"] + r["padding_packets_lost"] == r["padding_packets"]
    # the audio carries no transport-wide number (2018's default: rtp/README.md "The call had audio")
    assert all(p["transport_seq"] == "-1" for p in audio)
    tseqs = [int(p["transport_seq"]) for p in packets if p["audio"] == "false"]
    assert tseqs == list(range(tseqs[0], tseqs[0] + len(tseqs)))
    fb = r["feedback"]
    every = r["packets_sent"] + r["padding_packets"] + rep["retransmissions_sent"]
    assert fb["transport_seqs_sent"] == every
    assert fb["transport_seqs_reported"] + fb["transport_seqs_without_feedback"] == every
    assert fb["transport_seqs_without_feedback"] <= MISSING_FEEDBACK_BOUND, fb
    # libwebrtc 2018: 68 B × 8 / (5 % of the viewer's own target, 300 kbit/s by default) = 36 ms, kept
    # within [50, 250] ms
    assert (fb["interval_own_target_bps"], fb["interval_ms"]) == (300_000, 50), fb
    # The feedback says received exactly what the viewer counted (less what it never reported on).
    received = r["packets_received"] + r["padding_packets_received"] + rep["retransmissions_received"]
    assert fb["transport_seqs_reported_received"] <= received \
        <= fb["transport_seqs_reported_received"] + fb["transport_seqs_without_feedback"], (fb, r)

    # Bytes: sent = the packets' sum; received ≤ sent, short by at most the lost packets; the
    # interface saw every datagram (video and padding) with its 42 header bytes and little else
    # (views.udp_wire_check).
    assert r["rtp_bytes_sent"] == sum(int(p["udp_payload_bytes"]) for p in media)
    assert r["padding_bytes"] == sum(int(p["udp_payload_bytes"]) for p in padding)
    largest = max(int(p["udp_payload_bytes"]) for p in media)
    assert r["rtp_bytes_sent"] - r["packets_lost"] * largest <= r["rtp_bytes_received"] <= r["rtp_bytes_sent"]
    assert r["padding_bytes"] - r["padding_packets_lost"] * 300 <= r["padding_bytes_received"] <= r["padding_bytes"]
    (wire,) = s["cross_checks"].values()
    assert wire["ok"], wire
    a = r["audio"]
    assert s["paths"]["link"]["rx_bytes"] >= (r["rtp_bytes_received"] + r["padding_bytes_received"]
                                              + rep["retransmission_bytes_received"] + a["bytes_received"]
                                              + 42 * (received + a["packets_received"]))
    if a["enabled"]:
        _check_audio(run_dir, r, audio, duration_s)
    else:   # workload.audio off: the video-only stream of mpvlab-rtp before the audio existed
        assert not audio and a["packets_sent"] == a["packets_received"] == a["bytes_received"] == 0, a
        assert not (run_dir / "logs/rtp/sender/audio.log").exists()
    _check_decoding(r, rx_frames)
    _check_rendering(r, rx_frames, duration_s)
    # every cross-check of the summary's figures against the logs held (rtp_checks.py, tests/test_rtp_checks.py)
    assert all(c["ok"] for c in r["checks"].values()), {k: c for k, c in r["checks"].items() if not c["ok"]}
    assert not [w for w in s["warnings"] if w.startswith("cross-check rtp_")], s["warnings"]
    # exactly the registry's records for its controller's workload (no probe here: no fidelity checks)
    want = checks.expected_records(f"rtp-{r['controller']}", set(), list(s["paths"]))
    assert set(s["cross_checks"]) == want["cross_checks"] and set(r["checks"]) == want["rtp.checks"], want
    assert not s["fidelity_checks"] and "fidelity_checks" not in want


AUDIO_BPS, AUDIO_FRAME_S = 32_000, 0.020     # workload.audio's defaults: libwebrtc 2018's Opus
RTP_HEADER = 12                              # an audio packet's RTP header: no header extension


def _check_audio(run_dir: Path, r: dict, rows: list[dict[str, str]], duration_s: int) -> None:
    """The call's audio (on by default; rtp/README.md "The call had audio"), apart from the video:
    every packet sent was received or counted lost; the sender's totals are its packets.csv rows, RTP
    sequence numbers 0, 1, 2, … in send order; one packet per 20 ms frame over the audio's capture
    span (a live source timestamps by sample count, so never a gap), which covers the video's media
    time less a stalled start (≥ 0.9 ×) and at most the few seconds the audio child ran before the
    video's first frame (+ 3 s); the received rate, RTP header included, within first principles: Opus
    VBR (constrained) averages at most its 32 kbit/s target (+ 10 % for a 1 s window's frames), at
    least half of it on the full-band pink noise it is fed (measured 27.5 kbit/s of payload), + 12 B
    of RTP header per packet; no audio packet arrives before it was captured + the path's 20 ms."""
    a, tx = r["audio"], json.loads((run_dir / "logs/rtp/sender/sender.json").read_text())["audio"]
    assert a["enabled"] and (a["bitrate_bps"], a["frame_ms"]) == (AUDIO_BPS, 20), a
    assert a["packets_received"] + a["packets_lost"] == a["packets_sent"] == len(rows) > 0, a
    assert a["bytes_sent"] == sum(int(p["udp_payload_bytes"]) for p in rows) == tx["bytes_sent"]
    assert a["bytes_sent"] - a["packets_lost"] * 1500 <= a["bytes_received"] <= a["bytes_sent"]
    assert [int(p["rtp_seq"]) for p in rows] == [n & 0xFFFF for n in range(len(rows))]
    assert a["packets_on_time"] + a["packets_late"] == a["packets_received"]
    span = tx["last_capture_s"] - tx["first_capture_s"]
    assert a["packets_sent"] + a["packets_unsent_at_end"] == round(span / AUDIO_FRAME_S) + 1, (a, span)
    assert 0.9 * duration_s / AUDIO_FRAME_S <= a["packets_sent"] <= (duration_s + 3) / AUDIO_FRAME_S, a
    per_packet = 8 / AUDIO_FRAME_S * RTP_HEADER
    assert 0.5 * AUDIO_BPS + per_packet <= a["received_mean_bps"] <= 1.1 * AUDIO_BPS + per_packet, a
    assert a["latency_ms"]["p50"] >= PATH_RTT_MS / 2 - 1, a
    print(f"{r['controller']}: audio {a['packets_sent']} packets sent, {a['packets_lost']} lost, "
          f"{a['received_mean_bps'] / 1e3:.1f} kbit/s received, on time {a['on_time_share']}, "
          f"latency p50 {a['latency_ms']['p50']:.1f} ms")


def _check_rendering(r: dict, rx_frames: list[dict[str, str]], duration_s: int) -> None:
    """Rendered frames (on time and decoded) per second and freezes (rtp_freezes.py, unit-tested in
    tests/test_rtp_freezes.py) are counted over the same frames the viewer accounted."""
    rendered = [f for f in rx_frames if f["status"] == "on_time" and f["decode"] == "decoded"]
    assert len(rendered) == r["decode"]["frames_decoded"]
    per_second = r["rendered_fps"]["per_second"]
    # whole seconds of capture time: all rendered frames but those of the last, partial second
    assert len(rendered) - FPS <= sum(per_second) <= len(rendered), (len(rendered), per_second)
    assert all(0 <= n <= FPS + 1 for n in per_second), per_second
    fr = r["freezes"]
    assert 0 <= fr["longest_s"] <= fr["total_s"] <= duration_s + 1 and fr["count"] >= (fr["total_s"] > 0)
    caps = [float(f["capture_s"]) for f in rx_frames if f["capture_s"]]
    if len(rendered) == r["frames_captured"] and max(b - a for a, b in zip(caps, caps[1:])) < 0.15:
        # every frame rendered and the live source never stalled (a stalled host skips captures, which
        # the viewer sees as a freeze): every interval is a capture gap, far below avg + 150 ms
        assert fr["count"] == 0, fr
    # each freeze is at least 150 ms beyond the average interval, so they cannot outnumber this
    assert fr["count"] <= duration_s / 0.15


PATH_RTT_MS = 40           # the scenario's 20 ms each way
QUEUE_MS = 15_000 * 8 / LINK_BPS * 1000      # its 15 KB drop-tail queue drained at 1 Mbit/s: 120 ms
FEEDBACK_INTERVAL_MS = 50  # the viewer's (receiver.json feedback_interval_ms)


def _check_feedback_rtt(run_dir: Path, r: dict) -> None:
    """The RTT GCC derives from TWCC feedback (issue 48), recorded for either controller: one sample per
    feedback report with a received packet, so no more than the reports the sender read and, over 10 s
    or more at one every 50 ms, well over 100; none below the path's configured RTT (less 1 ms: TWCC's arrival
    deltas are 250 µs steps and the departure is taken before the socket write); the median within
    path + a full queue + one feedback interval (the latest arrival stands in for the feedback's send
    time, up to one interval earlier) + one 1200 B packet's serialisation at 1 Mbit/s (~10 ms), with
    100 ms for a loaded host."""
    rows = _rows(run_dir / "logs/rtp/sender/feedback_rtt.csv")
    rtt = r["feedback_rtt_ms"]
    assert rtt["samples"] == len(rows), (rtt, len(rows))
    assert 100 <= rtt["samples"] <= r["feedback"]["twcc_feedback_packets"], (rtt, r["feedback"])
    xs = sorted(float(x["rtt_ms"]) for x in rows)
    assert rtt["min"] == xs[0] >= PATH_RTT_MS - 1, xs[:5]
    assert rtt["p50"] == xs[len(xs) // 2] and rtt["p90"] == xs[int(0.9 * len(xs))]
    assert rtt["p50"] <= PATH_RTT_MS + QUEUE_MS + FEEDBACK_INTERVAL_MS + 10 + 100, rtt
    print(f"{r['controller']}: GCC's feedback RTT p50 {rtt['p50']} ms, p90 {rtt['p90']} ms, min {rtt['min']} ms "
          f"over {rtt['samples']} feedback reports")


def _check_bitrates(run_dir: Path, r: dict) -> None:
    """Received and on-time video bitrate (rtp/README.md "Which bitrate?"), recomputed here from the raw
    logs and compared exactly: which frames were rendered from the viewer's frames.csv (status on time,
    decoded), their bytes from the sender's packets.csv (every video packet's UDP payload as it left:
    a rendered frame arrived whole, so the viewer read exactly those bytes), binned on whole seconds of
    capture time from the first capture; the received mean from the viewer's rate.csv seconds wholly
    inside that window. A packet that arrived only as a retransmission (RTX) carries 2 B more, its
    original sequence number (RFC 4588): the viewer read the frame's bytes + 2 B per repaired packet."""
    sent: dict[str, int] = {}
    for p in _rows(run_dir / "logs/rtp/sender/packets.csv"):
        if p["padding"] != "true" and p["rtx"] != "true" and p["audio"] != "true":
            sent[p["frame"]] = sent.get(p["frame"], 0) + int(p["udp_payload_bytes"])
    rx_frames = _rows(run_dir / "logs/rtp/receiver/frames.csv")
    for f in rx_frames:
        if f["frame"] in sent:
            sent[f["frame"]] += RTX_OSN_BYTES * int(f["packets_repaired"])
    caps = [float(f["capture_s"]) for f in rx_frames if f["capture_s"]]
    first, last = min(caps), max(caps)
    n = int(last + (last - first) / (len(caps) - 1) - first + 1e-9)
    per = [0] * n
    for f in rx_frames:
        if f["status"] == "on_time" and f["decode"] == "decoded":
            assert int(f["rtp_bytes"]) == sent[f["frame"]], f     # the viewer read what the sender sent
            i = int(float(f["capture_s"]) - first + 1e-6)
            if i < n:
                per[i] += 8 * sent[f["frame"]]
    assert r["on_time_per_second"] == per
    vb = r["video_bitrate_bps"]
    assert vb["window_s"] == [round(first, 6), round(first + n, 6)]
    assert vb["on_time_mean"] == round(sum(per) / n)
    rx = [int(x["received_bps"]) for x in _rows(run_dir / "logs/rtp/receiver/rate.csv")
          if int(x["second"]) >= first and int(x["second"]) + 1 <= first + n]
    assert vb["received_seconds"] == len(rx) >= n - 1
    assert vb["received_mean"] == round(sum(rx) / len(rx))
    # rendered frames' bytes all arrived, but not all arriving bytes were rendered; the window's
    # seconds of arrival and of capture differ by the latency, so only a loose bound between the two
    assert 0 <= vb["on_time_mean"] <= 1.5 * vb["received_mean"]
    print(f"{r['controller']}: received {vb['received_mean'] / 1e3:.0f} kbit/s, on time "
          f"{vb['on_time_mean'] / 1e3:.0f} kbit/s over {vb['window_s']}")


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.parametrize("controller,padding", [("gcc", None), ("webrtc-bbr", None), ("webrtc-bbr", False)])
@pytest.mark.cpu_light   # cpu_light: measured 0.23 cores (docs/testing.md)
def test_rtp_run_accounts_every_frame_packet_and_byte(tmp_path: Path, controller: str, padding: bool | None) -> None:
    """The shipped scenario, and the same with WebRTC's 2018 BBR in GCC's place (correctness only:
    its rates are a study result, rtp/README.md), with its padding while probing (the default) and
    without (workload.bbr.padding: false). GCC sends no padding; webrtc-bbr pads at least in
    STARTUP, where the encoder's rate is below the pacing rate. The webrtc-bbr runs send 10 s of media,
    not the scenario's 20 s (issue 44): they assert accounting, padding and the encoder following the
    controller, which any length shows; GCC's steady-state mean keeps the 20 s."""
    name = f"rtp-{controller}" + ("" if padding is None else "-nopad")
    duration_s = DURATION_S if controller == "gcc" else DURATION_S // 2
    f = tmp_path / f"{name}.yaml"
    text = (SCENARIO.read_text().replace("name: rtp-gcc-short", f"name: {name}")
            .replace("controller: gcc", f"controller: {controller}")
            .replace(f"duration: {DURATION_S}s", f"duration: {duration_s}s"))
    assert f"duration: {duration_s}s" in text
    if padding is not None:
        text = text.replace(f"controller: {controller}", f"controller: {controller}\n  bbr: {{padding: {str(padding).lower()}}}")
        assert "padding: false" in text
    f.write_text(text)
    run_dir, s = _run(f, name, tmp_path / "results")
    r = s["rtp"]
    assert r["controller"] == controller
    pads = controller == "webrtc-bbr" and padding is not False
    assert r["padding"] is pads
    assert (r["padding_packets"] > 0) if pads else (r["padding_packets"] == 0 == r["padding_bytes"]), r
    assert sum(x["padding_bps"] for x in r["received_per_second"]) == 8 * r["padding_bytes_received"]
    _assert_accounted(run_dir, s, duration_s)
    _check_bitrates(run_dir, r)
    _check_feedback_rtt(run_dir, r)
    tx_frames = _rows(run_dir / "logs/rtp/sender/frames.csv")

    # The encoder followed the controller: each bitrate a frame was encoded at is one the controller set.
    set_kbps = {int(t["encoder_set_bps"]) // 1000 for t in _rows(run_dir / "logs/rtp/sender/targets.csv")}
    used_kbps = {int(f["encoder_bps"]) // 1000 for f in tx_frames}
    assert used_kbps <= set_kbps, used_kbps - set_kbps
    assert r["target_bps"]["updates"] >= 10         # the controller updated its target as feedback came in

    if controller != "gcc":
        return
    steady = r["target_bps"]["steady_mean"]
    assert 0.5 * LINK_BPS <= steady <= 1.0 * LINK_BPS, r["target_bps"]
    _check_encoder_follows(r["encoder_per_second"])


@pytest.mark.netns
@pytest.mark.e2e
# cpu_light: the audio-on runs above measured 0.17-0.25 cores before the audio; its child adds 0.034
# (live_audio.py alone: 0.34 s of CPU over 10 s, start-up included); this run has no audio child
@pytest.mark.cpu_light
def test_rtp_audio_off_sends_video_only(tmp_path: Path) -> None:
    """`workload.audio: false` is the stream before the audio existed: no audio packet in the sender's
    log or at the viewer, no audio child, no audio in rate.csv or provenance, and every frame, packet and
    byte accounted as with audio (the audio-on runs are the accounting test's, where audio is the
    default: _check_audio)."""
    name = "rtp-audio-off"
    f = tmp_path / f"{name}.yaml"
    text = (SCENARIO.read_text().replace("name: rtp-gcc-short", f"name: {name}")
            .replace(f"duration: {DURATION_S}s", "duration: 6s\n  audio: false"))
    assert "audio: false" in text
    f.write_text(text)
    run_dir, s = _run(f, name, tmp_path / "results")
    r = s["rtp"]
    assert r["audio"]["enabled"] is False and r["audio"]["received_mean_bps"] is None, r["audio"]
    _assert_accounted(run_dir, s, 6)
    assert all(x["audio_bps"] == 0 for x in r["received_per_second"])
    tx = json.loads((run_dir / "logs/rtp/sender/sender.json").read_text())["audio"]
    assert tx["enabled"] is False and tx["packets_sent"] == tx["frames"] == 0, tx
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["rtp"]["audio_encoder"] is None


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu_light   # cpu_light: measured 0.17 cores (docs/testing.md)
def test_rtp_viewer_decode_attribution_under_loss(tmp_path: Path) -> None:
    """1 % independent loss on the bottleneck with loss repair off (workload.repair: both false): frames
    are lost, none is repaired, no PLI is sent, and the viewer's attribution must agree with the
    sender's ground truth (its keyframe flags, which the viewer never sees): an on-time frame is
    decoded iff no frame since the last keyframe was late or lost, and the decoder decodes all it is
    fed."""
    lossy = SCENARIO.read_text().replace(
        "down: {rate: 1mbit, buffer: 15KB, delay: 20ms}",
        "down: {rate: 1mbit, buffer: 15KB, delay: 20ms, loss_model: {kind: independent, probability: 0.01}}"
    ).replace("playout_deadline: 400ms", "playout_deadline: 400ms\n  repair: {nack: false, pli: false}")
    assert "loss_model" in lossy and "repair:" in lossy
    f = tmp_path / "rtp-lossy.yaml"
    f.write_text(lossy.replace("name: rtp-gcc-short", "name: rtp-lossy"))
    run_dir, s = _run(f, "rtp-lossy", tmp_path / "results")
    r = s["rtp"]
    tx = _rows(run_dir / "logs/rtp/sender/frames.csv")
    rx = _rows(run_dir / "logs/rtp/receiver/frames.csv")
    _check_decoding(r, rx)
    # 20 s × ~70 packets/s at 1 %: ~14 expected; 0 would be a 1e-6 event (the loss model is seeded anyway).
    assert r["frames_lost"] >= 1 and r["decode"]["frames_undecodable"] >= 1, r["decode"]
    # repair off: nothing asked for, nothing resent, every lost packet stays lost, no forced key frame
    rep = r["repair"]
    assert (rep["nack"], rep["pli"]) == (False, False), rep
    assert all(rep[k] == 0 for k in ("nack_messages_sent", "nacked_packets", "retransmissions_sent",
                                      "retransmissions_received", "packets_repaired", "frames_repaired", "pli_sent",
                                      "pli_received", "keyframe_requests_to_encoder", "keyframes_forced")), rep
    assert rep["packets_lost_unrepaired"] == r["packets_lost"] >= 1, rep
    assert not any(p["rtx"] == "true" for p in _rows(run_dir / "logs/rtp/sender/packets.csv"))
    assert all(f["packets_repaired"] == "0" for f in rx)
    broken = True
    for t, f in zip(tx, rx, strict=True):
        if t["keyframe"] == "true":
            broken = False
        if f["status"] != "on_time":
            broken = True
            continue
        assert f["decode"] == ("undecodable" if broken else "decoded"), (t, f)


REPAIR_LOSS = 0.05           # independent loss on the bottleneck in the repair test
REPAIR_DEADLINE_MS = 100     # playout deadline there: a repair takes ≥ 1 RTT (40 ms) more, so some are late
REPAIR_KEYINT = 600          # no periodic key frame within the run: only a PLI ends a broken chain
REPAIR_DURATION_S = 15


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu
def test_rtp_loss_repair_nack_rtx_and_pli(tmp_path: Path) -> None:
    """Loss repair on (the default, as libwebrtc 2018): 5 % independent loss on the bottleneck, a
    100 ms playout deadline, key frames only on request. Retransmissions happen and repair frames
    (complete, some on time); every count adds up at both ends and against the per-packet logs; a
    frame late or lost breaks the reference chain, so 3 s later (2018's kMaxWaitForFrameMs) the viewer
    sends a PLI and the encoder makes a key frame out of its interval. 15 s × ~90 packets/s at 5 %:
    ~70 losses expected, none would be a 1e-30 event."""
    text = (SCENARIO.read_text()
            .replace("down: {rate: 1mbit, buffer: 15KB, delay: 20ms}",
                     "down: {rate: 1mbit, buffer: 15KB, delay: 20ms, "
                     f"loss_model: {{kind: independent, probability: {REPAIR_LOSS}}}}}")
            .replace("playout_deadline: 400ms", f"playout_deadline: {REPAIR_DEADLINE_MS}ms\n  keyint: {REPAIR_KEYINT}")
            .replace(f"duration: {DURATION_S}s", f"duration: {REPAIR_DURATION_S}s")
            .replace("name: rtp-gcc-short", "name: rtp-repair"))
    assert "loss_model" in text and f"keyint: {REPAIR_KEYINT}" in text and f"duration: {REPAIR_DURATION_S}s" in text
    f = tmp_path / "rtp-repair.yaml"
    f.write_text(text)
    run_dir, s = _run(f, "rtp-repair", tmp_path / "results")
    r, rep = s["rtp"], s["rtp"]["repair"]
    assert (rep["nack"], rep["pli"]) == (True, True), rep
    # the summary's figures against the raw logs (rtp_checks.check_repair_vs_logs among the others)
    assert r["checks"]["repair_vs_logs"]["ok"], r["checks"]["repair_vs_logs"]
    assert all(c["ok"] for c in r["checks"].values()), {k: c for k, c in r["checks"].items() if not c["ok"]}
    tx_frames = _rows(run_dir / "logs/rtp/sender/frames.csv")
    rx_frames = _rows(run_dir / "logs/rtp/receiver/frames.csv")
    packets = _rows(run_dir / "logs/rtp/sender/packets.csv")
    rtx = [p for p in packets if p["rtx"] == "true"]

    # NACKs went out and packets were resent; counts add up at each end
    assert r["packets_lost"] >= 1 and rep["nack_messages_sent"] >= 1 and rep["retransmissions_sent"] >= 1, rep
    assert len(rtx) == rep["retransmissions_sent"]
    assert rep["retransmissions_received"] + rep["retransmissions_lost"] == rep["retransmissions_sent"], rep
    assert (rep["retransmissions_in_time"] + rep["retransmissions_too_late"] + rep["retransmissions_duplicate"]
            == rep["retransmissions_received"]), rep
    assert rep["packets_repaired"] == rep["retransmissions_in_time"] + rep["retransmissions_too_late"]
    assert rep["packets_repaired"] + rep["packets_lost_unrepaired"] == r["packets_lost"], rep
    assert r["packets_received"] + r["packets_lost"] == r["packets_sent"], r
    # every retransmission is of a video packet that left before it; each NACK named what was resent
    first_sent = {}
    for p in packets:
        if p["padding"] == "false" and p["rtx"] == "false" and p["audio"] == "false":
            first_sent.setdefault(p["rtp_seq"], float(p["t_s"]))
    assert all(p["original_seq"] in first_sent and first_sent[p["original_seq"]] <= float(p["t_s"]) for p in rtx)
    assert rep["nacked_packets_received"] <= rep["nacked_packets"], rep   # the up path has no loss; a late NACK may miss the sender
    assert rep["retransmissions_sent"] <= rep["nacked_packets_received"], rep

    # repaired frames became complete; a repaired frame is on time only if repaired by its deadline
    repaired = [f for f in rx_frames if int(f["packets_repaired"]) > 0]
    assert rep["frames_repaired"] == sum(f["status"] != "lost" for f in repaired) >= 1, rep
    assert rep["frames_repaired_on_time"] == sum(f["status"] == "on_time" for f in repaired)
    for f in repaired:
        if f["status"] == "on_time":
            assert float(f["latency_ms"]) <= REPAIR_DEADLINE_MS, f
        if f["status"] != "lost":
            assert f["packets_received"] == f["packets_in_frame"], f
    assert sum(int(f["packets_repaired"]) for f in rx_frames) == rep["packets_repaired"]

    # a frame late or lost broke the chain; with no periodic key frame, a PLI asked for one
    assert r["frames_late"] + r["frames_lost"] >= 1, r
    assert rep["pli_sent"] >= 1 and rep["pli_received"] >= 1 and rep["keyframe_requests_to_encoder"] >= 1, rep
    assert rep["keyframe_requests_to_encoder"] + rep["keyframe_requests_rate_limited"] == rep["pli_received"], rep
    forced = [int(t["frame"]) for t in tx_frames if t["forced_keyframe"] == "true"]
    keys = [int(t["frame"]) for t in tx_frames if t["keyframe"] == "true"]
    assert len(forced) == rep["keyframes_forced"] >= 1, rep
    assert set(forced) <= set(keys) and keys[0] == 0
    # out of the 600-frame interval: every key frame after the first was asked for
    assert len(keys) - 1 == len(forced), (keys, forced)
    # decoding starts over at a forced key frame that arrived on time
    by_frame = {int(f["frame"]): f for f in rx_frames}
    assert all(by_frame[k]["decode"] == "decoded" for k in forced if by_frame[k]["status"] == "on_time"), \
        [by_frame[k] for k in forced]
    _check_decoding(r, rx_frames, REPAIR_KEYINT)
    print(f"repair: {rep['retransmissions_sent']} resent, {rep['packets_repaired']} repaired "
          f"({rep['retransmissions_in_time']} in time), {rep['frames_repaired']} frames repaired, "
          f"{rep['pli_sent']} PLIs, {rep['keyframes_forced']} key frames forced")


def _check_decoding(r: dict, rx_frames: list[dict[str, str]], keyint: int = KEYINT) -> None:
    d = r["decode"]
    decoded, errors, undecodable = d["frames_decoded"], d["frames_decode_error"], d["frames_undecodable"]
    assert decoded + errors + undecodable + r["frames_late"] + r["frames_lost"] == r["frames_captured"], (d, r)
    assert d["decoder_failure"] == "" and d["decoder"]["error"] is None, d
    assert d["decoder"]["fed"] == decoded + errors and d["decoder"]["pictures"] == decoded, d
    assert errors == 0, d
    per_frame = {st: sum(f["decode"] == st for f in rx_frames) for st in ("decoded", "decode_error", "undecodable")}
    assert per_frame == {"decoded": decoded, "decode_error": errors, "undecodable": undecodable}
    assert all((f["decode"] != "") == (f["status"] == "on_time") for f in rx_frames)
    assert undecodable <= (r["frames_late"] + r["frames_lost"]) * (keyint - 1), d
    if r["packets_lost"] == 0 and r["frames_late"] == 0:
        assert decoded == r["frames_on_time"], d


def _check_encoder_follows(per_second: list[dict]) -> None:
    most = max(w["frames"] for w in per_second)
    full = [w for w in per_second if w["frames"] >= 0.9 * most]
    steady = full[len(full) // 2:]
    assert len(steady) >= 5, per_second
    video = sum(abs(w["achieved_bps"] - w["encoder_set_bps"]) <= WITHIN * w["encoder_set_bps"] for w in steady)
    wire = sum(abs(w["achieved_wire_bps"] - w["target_bps"]) <= WITHIN * w["target_bps"] for w in steady)
    assert video >= STEADY_WITHIN_FRACTION * len(steady), (video, steady)
    assert wire >= STEADY_WITHIN_FRACTION * len(steady), (wire, steady)
    video_all = sum(abs(w["achieved_bps"] - w["encoder_set_bps"]) <= WITHIN * w["encoder_set_bps"] for w in full)
    assert video_all >= ALL_WITHIN_FRACTION * len(full), (video_all, full)


STEP_SCENARIO = REPO / "scenarios" / "rtp-gcc-step.yaml"
# The bound on GCC's reaction to the step (test below): ~1 s from first principles, 5 × that here.
STEP_REACTION_BOUND_S = 5.0


def _step(scenario: Path) -> tuple[float, int, int]:
    """(step time s, rate before, rate after), read from the scenario's piecewise schedule."""
    from mpvlab.input.scenario import load_scenario
    sc, _ = load_scenario(scenario)
    rate = sc.paths["link"].down.capacity.rate
    (t0, before), (t_ns, after) = rate.points
    assert t0 == 0 and before > after
    return t_ns / 1e9, before, after


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu_light   # cpu_light: measured 0.18 cores (docs/testing.md)
def test_rtp_gcc_target_follows_a_step_down_of_the_link(tmp_path: Path) -> None:
    """scenarios/rtp-gcc-step.yaml: the link steps from 2 to 0.5 Mbit/s at 12 s (25 KB buffer, 20 ms
    each way). The run completes with every frame, packet and byte accounted, GCC's target was
    above 1.5 × 0.5 Mbit/s when the step came (else "below 0.5 Mbit/s" would prove nothing), and
    it is below 0.5 Mbit/s within STEP_REACTION_BOUND_S = 5 s of the step.

    Why ~1 s suffices, from first principles (pion/interceptor v0.1.51's gcc, ≈ libwebrtc's):
    while the target stays ≥ 0.5 Mbit/s the sender puts ≥ 0.5 Mbit/s into a link that drains
    0.5 Mbit/s — about 1.4 Mbit/s too much right after the step — so the queue grows without end:
    - delay-based: the queue's delay grows 2.8 ms per ms; the viewer reports it in the next TWCC
      feedback (every 100 ms) plus 20 ms up, and the trendline crosses its threshold (~76 ms in
      these runs) within a few arrival groups: overuse ≲ 0.3 s after the step. Each feedback in
      overuse sets the target to β = 0.85 × the received rate, measured over the last 500 ms of
      acknowledged arrivals (the rate calculator's window); once that window holds post-step
      arrivals only (≤ 0.5 s + 0.1 s feedback + 0.04 s RTT), the received rate is ≤ the 0.5 Mbit/s
      link and the next decrease gives ≤ 425 kbit/s: ≲ 1 s in all.
    - loss-based, independently: the 25 KB buffer is full ~0.13 s after the step; with > 10 % of
      the packets lost the target is cut by (1 − loss/2) at most every 200 ms.
    Measured (bench/bench_rtp_step.py): ~0.5–0.6 s. The 5 s bound allows a 2-core host with heavy
    steal to delay the feedback, the pacer and the delay line several-fold; a controller that never
    reacted (or reacted only to loss averaged over many seconds) still fails it.
    """
    step_s, before, after = _step(STEP_SCENARIO)
    assert step_s + STEP_REACTION_BOUND_S < DURATION_S     # the bound ends inside the stream
    run_dir, s = _run(STEP_SCENARIO, "rtp-gcc-step", tmp_path / "results")
    assert s["rtp"]["controller"] == "gcc"
    _assert_accounted(run_dir, s)

    targets = [(float(t["t_s"]), int(t["target_bps"])) for t in _rows(run_dir / "logs/rtp/sender/targets.csv")]
    at_step = [bps for t, bps in targets if t < step_s][-1]
    assert at_step > 1.5 * after, (at_step, targets)
    below = [t - step_s for t, bps in targets if t >= step_s and bps < after]
    assert below, f"the target never fell below {after} bit/s after the step: {targets}"
    assert below[0] <= STEP_REACTION_BOUND_S, (below[0], targets)


@pytest.mark.parametrize("workload,topology,error", [
    ({"kind": "rtp", "controller": "bbr"}, "dumbbell", "controller"),
    ({"kind": "rtp", "initial_bitrate": "2mbit"}, "dumbbell", "min_bitrate ≤ initial_bitrate ≤ max_bitrate"),
    ({"kind": "rtp", "max_bitrate": "100gbit"}, "dumbbell", "between 16kbit and 50mbit"),
    ({"kind": "rtp", "duration": "1s"}, "dumbbell", "duration must lie between 2s and 60min"),
    ({"kind": "rtp", "playout_deadline": "1ms"}, "dumbbell", "playout_deadline"),
    ({"kind": "rtp", "width": 641}, "dumbbell", "multiple of 2"),
    ({"kind": "rtp", "encoder": "x"}, "dumbbell", "encoder"),
    ({"kind": "rtp", "cap_encoder": "maybe"}, "dumbbell", "cap_encoder"),
    ({"kind": "rtp", "cap_estimate": 2}, "dumbbell", "cap_estimate"),
    ({"kind": "rtp", "audio": {"bitrate": "1kbit"}}, "dumbbell", "audio.bitrate must lie between 6kbit and 510kbit"),
    ({"kind": "rtp", "audio": {"frame_ms": 30}}, "dumbbell", "10, 20, 40 or 60"),
    ({"kind": "rtp", "audio": {"codec": "g711"}}, "dumbbell", "audio.codec"),
    ({"kind": "rtp", "audio": "on"}, "dumbbell", "audio"),
    ({"kind": "rtp"}, "dual-path", "rtp runs on topology.kind dumbbell or shared-bottleneck"),
])
def test_rtp_scenario_rejects_bad_input(workload: dict, topology: str, error: str) -> None:
    from mpvlab.input.scenario import Scenario
    paths = {"a": {"down": {"rate": "1mbit", "buffer": "15KB", "delay": "20ms"}}}
    if topology == "dual-path":
        paths["b"] = paths["a"]
    with pytest.raises(ValueError) as e:
        Scenario.model_validate({"name": "x", "topology": {"kind": topology}, "paths": paths, "workload": workload})
    assert error in str(e.value), str(e.value)


def test_bbr_variant_only_with_webrtc_bbr_and_passed_to_the_sender() -> None:
    """workload.bbr: the study's variants, refused with gcc (naming the field and what it needs), and
    turned into exactly the sender's flags (rtp/cmd/mpvlab-rtp's Go test checks they reach the
    controller)."""
    from mpvlab.input.scenario import Scenario
    paths = {"a": {"down": {"rate": "1mbit", "buffer": "15KB", "delay": "20ms"}}}

    def wl(**kw: Any) -> dict:
        return {"name": "x", "topology": {"kind": "dumbbell"}, "paths": paths, "workload": {"kind": "rtp", **kw}}
    with pytest.raises(ValueError) as e:
        Scenario.model_validate(wl(controller="gcc", bbr={"estimate": "third-best"}))
    assert "bbr" in str(e.value) and "webrtc-bbr" in str(e.value), str(e.value)
    with pytest.raises(ValueError) as e:
        Scenario.model_validate(wl(controller="webrtc-bbr", bbr={"estimate": "second-best"}))
    assert "third-best" in str(e.value), str(e.value)
    sc = Scenario.model_validate(wl(controller="webrtc-bbr", bbr={"filter": "non-replacing", "estimate": "third-best",
                                                                   "recovery": False, "probe_rtt": "v2"}))
    assert sc.workload.bbr.sender_flags() == ["--bbr-non-replacing-filter", "--bbr-third-best",
                                              "--bbr-no-recovery", "--bbr-probe-rtt-v2"]
    default = Scenario.model_validate(wl(controller="webrtc-bbr", bbr={}))
    assert default.workload.bbr.sender_flags() == []


def test_rtp_caps_default_to_both_and_reach_the_sender() -> None:
    """workload.cap_estimate / cap_encoder (issue 48): both on by default (the behaviour before them:
    max_bitrate bounds the controller, so the encoder too), each turned into exactly the sender's flags."""
    from mpvlab.input.scenario import Scenario
    from mpvlab.workloads.rtp import ESTIMATE_BOUND_UNCAPPED
    paths = {"a": {"down": {"rate": "1mbit", "buffer": "15KB", "delay": "20ms"}}}

    def wl(**kw: Any) -> Any:
        return Scenario.model_validate({"name": "x", "topology": {"kind": "dumbbell"}, "paths": paths,
                                        "workload": {"kind": "rtp", "max_bitrate": "600kbit", **kw}}).workload
    assert wl().sender_cap_flags() == ["--max-bitrate", "600000", "--encoder-max-bitrate", "600000"]
    assert wl(cap_estimate=False).sender_cap_flags() == ["--max-bitrate", str(ESTIMATE_BOUND_UNCAPPED),
                                                        "--encoder-max-bitrate", "600000"]
    assert wl(cap_encoder=False).sender_cap_flags() == ["--max-bitrate", "600000", "--encoder-max-bitrate", "0"]
    assert wl(cap_encoder=False, cap_estimate=False).caps() == {"estimate_max_bps": ESTIMATE_BOUND_UNCAPPED,
                                                                "encoder_max_bps": None}


def test_rtp_audio_defaults_to_2018s_opus_and_reaches_the_sender() -> None:
    """workload.audio (rtp/README.md "The call had audio"): on by default with libwebrtc 2018's Opus
    defaults (32 kbit/s, 20 ms frames), turned into exactly the sender's flags; `audio: false` and
    `{enabled: false}` give none (the video-only stream)."""
    from mpvlab.input.scenario import Scenario
    paths = {"a": {"down": {"rate": "1mbit", "buffer": "15KB", "delay": "20ms"}}}

    def wl(**kw: Any) -> Any:
        return Scenario.model_validate({"name": "x", "topology": {"kind": "dumbbell"}, "paths": paths,
                                        "workload": {"kind": "rtp", **kw}}).workload
    a = wl().audio
    assert (a.enabled, a.bitrate, a.frame_ms, a.wave) == (True, 32_000, 20, "pink-noise")
    assert a.sender_flags("enc.py") == ["--audio", "--audio-encoder", "enc.py", "--audio-bitrate", "32000",
                                        "--audio-frame", "20ms", "--audio-wave", "pink-noise"]
    assert wl(audio=False).audio.sender_flags("enc.py") == [] == wl(audio={"enabled": False}).audio.sender_flags("x")
    assert wl(audio={"bitrate": "24kbit", "frame_ms": 60}).audio.encoder_args() == [
        "--bitrate", "24000", "--frame-ms", "60", "--wave", "pink-noise"]


CAP_BPS = 600_000       # below what GCC reaches on the 1 Mbit/s link (steady ~0.95 x link, rtp/README.md)


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu_light   # cpu_light: measured 0.20 cores (docs/testing.md)
@pytest.mark.parametrize("cap", ["estimate", "encoder"])
def test_rtp_cap_is_honoured(tmp_path: Path, cap: str) -> None:
    """max_bitrate 600 kbit/s on the 1 Mbit/s scenario, capping either GCC's estimate alone or the encoder
    alone (issue 48). Estimate: no target in targets.csv above the cap. Encoder: the controller's
    target goes above the cap (the link allows ~0.95 Mbit/s) while no encoder setting exceeds what a
    target of the cap gives (1200/1264 of it for GCC), and no 1 s window of the encoder's output
    (encoder.csv, capture time) exceeds that setting by more than the window's largest frame
    plus x264's 100 ms VBV (a CBR encoder may spend its buffer in one window: rtp/README.md)."""
    name = f"rtp-cap-{cap}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(SCENARIO.read_text().replace("name: rtp-gcc-short", f"name: {name}")
                 .replace("max_bitrate: 1.3mbit", "max_bitrate: 600kbit\n"
                          f"  cap_estimate: {str(cap == 'estimate').lower()}\n"
                          f"  cap_encoder: {str(cap == 'encoder').lower()}"))
    run_dir, s = _run(f, name, tmp_path / "results")
    _assert_accounted(run_dir, s)
    prov = json.loads((run_dir / "provenance.json").read_text())
    caps = json.dumps(prov)
    assert f'"cap_estimate": {str(cap == "estimate").lower()}' in caps, caps[:2000]
    targets = _rows(run_dir / "logs/rtp/sender/targets.csv")
    top = max(int(t["target_bps"]) for t in targets)
    setting = max(int(t["encoder_set_bps"]) for t in targets)
    enc_cap = CAP_BPS * 1200 // 1264
    print(f"cap {cap}: highest target {top} bit/s, highest encoder setting {setting} bit/s")
    if cap == "estimate":
        assert top <= CAP_BPS, top
        return
    assert top > CAP_BPS, top              # the estimate was not capped
    assert setting <= enc_cap, setting
    frames = _rows(run_dir / "logs/rtp/sender/frames.csv")
    for w in s["rtp"]["encoder_per_second"]:
        if w["frames"] == 0:
            continue
        biggest = max((8 * int(x["bytes"]) for x in frames if w["t_s"] <= float(x["capture_s"]) < w["t_s"] + 1),
                      default=0)
        assert w["achieved_bps"] <= enc_cap + biggest + 0.1 * enc_cap, (w, biggest)


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu_light   # cpu_light: measured 0.25 cores (docs/testing.md)
def test_rtp_vp8_encoder_run_is_accounted_and_decoded(tmp_path: Path) -> None:
    """workload.encoder vp8 (libvpx with libwebrtc's 2018 real-time rate control, issue 32), 10 s of
    the shipped scenario: every frame the encoder put out accounted once (VP8 drops frames when its
    buffer runs low — rc_dropframe_thresh 30 — so fewer than fps × duration may exist, never more, and
    the capture gaps are whole frame intervals), reassembled to the bytes sent, key frames where
    libvpx put them (the first frame one), the viewer's vp8dec decoding every fed frame, the
    settings in provenance."""
    name = "rtp-vp8"
    f = tmp_path / f"{name}.yaml"
    f.write_text(SCENARIO.read_text().replace("name: rtp-gcc-short", f"name: {name}")
                 .replace("duration: 20s", "duration: 10s\n  encoder: vp8"))
    assert "encoder: vp8" in f.read_text()
    run_dir, s = _run(f, name, tmp_path / "results")
    r = s["rtp"]
    captured = r["frames_captured"]
    assert 0 < captured <= FPS * 10 + 1, captured
    assert r["frames_on_time"] + r["frames_late"] + r["frames_lost"] == captured, r
    assert r["frames_reassembly_mismatch"] == 0
    tx = _rows(run_dir / "logs/rtp/sender/frames.csv")
    rx = _rows(run_dir / "logs/rtp/receiver/frames.csv")
    assert [int(x["frame"]) for x in rx] == list(range(captured)) and len(tx) == captured
    assert tx[0]["keyframe"] == "true"
    caps = [int(x["capture_ns"]) for x in tx]
    interval = 1e9 / FPS
    for a, b in zip(caps, caps[1:]):
        gap = (b - a) / interval
        assert gap > 0.5 and abs(gap - round(gap)) < 0.25, (a, b)   # whole frame intervals, never less
    assert len(_rows(run_dir / "logs/rtp/sender/packets.csv")) == (r["packets_sent"] + r["padding_packets"]
                                                                   + r["repair"]["retransmissions_sent"]
                                                                   + r["audio"]["packets_sent"])
    d = r["decode"]
    assert d["decoder"]["decoder"].startswith("vp8dec"), d
    assert d["frames_decoded"] + d["frames_decode_error"] + d["frames_undecodable"] \
        + r["frames_late"] + r["frames_lost"] == captured, d
    assert d["decoder"]["fed"] == d["frames_decoded"] + d["frames_decode_error"], d
    if r["packets_lost"] == 0 and r["frames_late"] == 0:
        assert d["frames_decoded"] == captured, d
    prov = json.loads((run_dir / "provenance.json").read_text())
    enc = prov["rtp"]["video_encoder"]
    assert enc["encoder"] == "vp8" and "dropframe-threshold=30" in enc["pipeline"] and "overshoot=15" in enc["pipeline"]
    assert s["fidelity_ok"] is not None
