"""The rtp workload: live video from the server (the broadcaster) to the client (the viewer) over
RTP/UDP, rate-controlled by a send-side controller fed by TWCC feedback (rtp/README.md). Both ends are
`rtp/build/mpvlab-rtp`; the sender runs the live encoder (rtp/encoder/live_encoder.py) as its child.

Its part of the summary (`rtp`): every frame captured accounted at the viewer (on time, late beyond
the playout deadline, lost), per-frame latency percentiles, packets and bytes both ends, the TWCC
feedback coverage, the controller's target over time and the encoder's achieved bitrate per second.
The run fails when the ends disagree on what was sent (frames or packets unaccounted).
"""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc
from mpvlab.core.errors import RunFailed
from mpvlab.runner import liveness, steps
from mpvlab.runner.context import RunContext
from mpvlab.runner.workloads import rtp_audio, rtp_bitrate, rtp_checks, rtp_freezes, rtp_repair
from mpvlab.runner.workloads.base import Ends, Outcome, still_running, workload_spec
from mpvlab.workloads.rtp import RtpWorkloadSpec
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.workload import RtpRecord
from mpvlab.runner.workloads.two_ends import TwoEnds
from mpvlab.workloads.rtp import RTP

ROOT = checkout_root()
BINARY = ROOT / "rtp" / "build" / "mpvlab-rtp"
ENCODER = ROOT / "rtp" / "encoder" / "live_encoder.py"
AUDIO_ENCODER = ROOT / "rtp" / "encoder" / "live_audio.py"
CODEC = {"x264": "h264", "vp8": "vp8"}     # workload.encoder → the sender's, encoder's and decoder's --codec
DECODER = ROOT / "rtp" / "decoder" / "live_decoder.py"
RTP_PORT = 5601         # not the fidelity probe's 5201, the cross traffic's 5301 nor bulk's 5401


class RtpWorkload(TwoEnds):
    name = RTP.name
    port = RTP_PORT
    # The last check that found sender and receiver alive (None: none yet), for when a death happened.
    last_ok_ns: int | None = None

    def prepare(self, ctx: RunContext) -> None:
        if not BINARY.exists():
            raise RunFailed(f"{BINARY} is missing: run ./setup.sh (it builds rtp/ with Go)")

    def serve(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        pass    # the viewer listens from time zero on (it bins arrivals on the run's fixed clock)

    def _spawn(self, ctx: RunContext, stack: contextlib.ExitStack, host: Any, argv: list[str],
               side: str) -> subprocess.Popen[bytes]:
        out = ctx.logs / "rtp" / side
        with (out / f"{side}.log").open("wb") as log:
            p: subprocess.Popen[bytes] = host.popen(argv, stdout=log, stderr=subprocess.STDOUT)
        ctx.ledger.add_proc(proc.ProcRef.of(p.pid, f"rtp {side}"))
        stack.callback(proc.stop_child, p, 3.0)
        return p

    def start(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        spec = workload_spec(ctx, RtpWorkloadSpec)
        root = ctx.logs / "rtp"
        for side in ("receiver", "sender"):
            (root / side).mkdir(parents=True, exist_ok=True)
        r_ready = root / "receiver" / "ready.json"
        self.receiver = self._spawn(ctx, stack, ends.client, [
            # bound to the path's address: its feedback then leaves with that source, which the client's
            # policy routing sends back over the path (a wildcard socket has no route)
            str(BINARY), "recv", "--listen", f"{ends.clients[0].addr}:{RTP_PORT}", "--out", str(root / "receiver"),
            "--ready", str(r_ready), "--t0-ns", str(ctx.t0_ns),
            "--playout-deadline", f"{spec.playout_deadline}ns", "--start-timeout", "30s", "--idle-timeout", "10s",
            "--max-run", f"{self.max_run_s(ctx):.0f}s", "--python", sys.executable, "--decoder", str(DECODER),
            "--codec", CODEC[spec.encoder], *spec.repair.flags()], "receiver")
        proc.wait_ready(self.receiver, r_ready, "rtp receiver", 10.0, log=root / "receiver" / "receiver.log",
                        error=RunFailed)
        self._register_child(ctx, r_ready, "decoder_pid", "rtp decoder")
        s_ready = root / "sender" / "ready.json"
        self.sender = self._spawn(ctx, stack, ends.server, [
            # from the server's address, the one the viewer's routes lead back to (the default source
            # would be the server's link address, which the client has no route for)
            str(BINARY), "send", "--local", ends.server_addr, "--dest", f"{ends.clients[0].addr}:{RTP_PORT}",
            "--controller", spec.controller, *(spec.bbr.sender_flags() if spec.bbr else []),
            "--out", str(root / "sender"), "--ready", str(s_ready), "--t0-ns", str(ctx.t0_ns),
            "--python", sys.executable, "--encoder", str(ENCODER), "--content", spec.content,
            "--initial-bitrate", str(spec.initial_bitrate), "--min-bitrate", str(spec.min_bitrate),
            *spec.sender_cap_flags(), "--duration", f"{spec.duration}ns",
            "--fps", str(spec.fps), "--width", str(spec.width), "--height", str(spec.height),
            "--keyint", str(spec.keyint), "--codec", CODEC[spec.encoder], *spec.repair.flags(),
            *spec.audio.sender_flags(str(AUDIO_ENCODER))], "sender")
        proc.wait_ready(self.sender, s_ready, "rtp sender", 20.0, log=root / "sender" / "sender.log", error=RunFailed)
        self._register_child(ctx, s_ready, "encoder_pid", "rtp encoder")
        self._register_child(ctx, s_ready, "audio_encoder_pid", "rtp audio encoder")
        self.arm_deadline(ctx)

    @staticmethod
    def _register_child(ctx: RunContext, ready: Path, key: str, what: str) -> None:
        """The encoder (the sender's child) and the decoder (the viewer's) die with their parent
        (PR_SET_PDEATHSIG); the ledger has them too, so a killed run's cleanup finds them by pid and
        start time."""
        pid = steps.read_json(ready).get(key)
        if isinstance(pid, int) and pid > 0:
            ctx.ledger.add_proc(proc.ProcRef.of(pid, what))

    def max_run_s(self, ctx: RunContext) -> float:
        """The scenario's `timeout`, by default the stream's duration + 60 s."""
        spec = workload_spec(ctx, RtpWorkloadSpec)
        return spec.timeout / 1e9 if spec.timeout is not None else spec.duration / 1e9 + 60

    def running(self, wait_s: float = 0.0) -> bool:
        assert self.sender is not None and self.receiver is not None
        return still_running([self.sender, self.receiver], wait_s)

    def check(self, ctx: RunContext) -> None:
        assert self.sender is not None and self.receiver is not None
        for p, side in ((self.sender, "sender"), (self.receiver, "receiver")):
            if p.poll() not in (None, 0):
                # in words, with its pid and when, as for every other component (liveness.py; issue 33)
                raise RunFailed(f"rtp {side} (pid {p.pid}) {liveness.describe_status(p.returncode)} "
                                f"{liveness.when_found(ctx.t0_ns, self.last_ok_ns)} "
                                f"(logs/rtp/{side}/{side}.log)")
        self.last_ok_ns = time.monotonic_ns()
        if self.overdue():
            raise RunFailed(f"rtp stream did not finish within {self.timeout_s:.0f} s")

    def progress(self, ctx: RunContext) -> str:
        return f"streaming ({(time.monotonic_ns() - ctx.t0_ns) / 1e9:5.1f} s)"

    def finish(self, ctx: RunContext) -> Outcome:
        root = ctx.logs / "rtp"
        self.check(ctx)
        tx, rx = steps.read_json(root / "sender" / "sender.json"), steps.read_json(root / "receiver" / "receiver.json")
        if not tx or not rx:
            raise RunFailed("rtp stream left no record (logs/rtp/)")
        record, warnings, evidence = rtp_record(ctx, tx, rx, root)
        duration_s = (rx.get("last_packet_s") or 0.0) - (rx.get("first_packet_s") or 0.0)
        wire = {"udp_datagrams": rx["udp_datagrams_received"], "udp_payload_bytes": rx["udp_payload_bytes_received"]}
        return Outcome({RTP.name: record, "duration_s": round(duration_s, 6)}, duration_s, "rtp_streams", 1,
                       warnings=warnings, wire=wire, evidence={"rtp_logs": evidence})


def rtp_record(ctx: RunContext, tx: dict[str, Any], rx: dict[str, Any],
               root: Path) -> tuple[dict[str, Any], list[str], rtp_checks.Evidence]:
    """The summary's `rtp` part, after the checks that make it trustworthy: the viewer accounted exactly
    the frames the broadcaster captured, and every packet sent was received or counted lost; its
    warnings; the parsed logs its cross-checks read (crosschecks.py runs them)."""
    spec = workload_spec(ctx, RtpWorkloadSpec)
    _check_accounting(tx, rx)
    captured = tx["frames_captured"]
    on_time, late, lost = rx["frames_on_time"], rx["frames_late"], rx["frames_lost"]
    dec = rx["decode"]
    # the viewer's TWCC feedback interval (libwebrtc 2018: from its own sending target; rtp/README.md)
    fb = {**tx["feedback"], "interval_ms": rx.get("feedback_interval_ms"),
          "interval_own_target_bps": rx.get("feedback_own_target_bps")}
    warnings = _warnings(tx, rx, fb)
    targets = _read_csv(root / "sender" / "targets.csv")
    enc = _read_csv(root / "sender" / "encoder.csv")
    sender_frames, receiver_frames = _read_csv(root / "sender" / "frames.csv"), _read_csv(root / "receiver" / "frames.csv")
    rate = _read_csv(root / "receiver" / "rate.csv")
    steady = rtp_checks.steady_target(enc, targets)
    video_bitrate = rtp_bitrate.video_bitrate(receiver_frames, rate)
    # every derived figure against evidence it was not made from (rtp_checks.py, rtp/README.md): the
    # parsed logs, for the checks mpvlab/runner/crosschecks.py runs at the run's end
    evidence = rtp_checks.Evidence(
        tx=tx, rx=rx, sender_frames=sender_frames, packets=_read_csv(root / "sender" / "packets.csv"),
        targets=targets, encoder=enc, receiver_frames=receiver_frames, rate=rate)
    record = {
        "controller": spec.controller,
        "encoder": spec.encoder,
        # how bursty the encoder is: frame sizes (sender/frames.csv has each frame), per-second rates below
        "frame_bytes": frame_size_stats(sender_frames),
        "bbr_variant": spec.bbr.model_dump() if spec.bbr else None,
        "frames_captured": captured, "frames_on_time": on_time, "frames_late": late, "frames_lost": lost,
        "frames_lost_incomplete": rx["frames_lost_incomplete"], "frames_lost_unseen": rx["frames_lost_unseen"],
        "frames_reassembly_mismatch": rx["frames_reassembly_mismatch"],
        "playout_deadline_ms": rx["playout_deadline_ms"],
        "latency_ms": rx["latency_ms"],
        "decode": dec,
        # rendered = on time and decoded; freezes by WebRTC's rule (rtp_freezes.py)
        **rtp_freezes.from_frames(receiver_frames),
        "packets_sent": tx["packets_sent"], "packets_received": rx["packets_received"], "packets_lost": rx["packets_lost"],
        # handed to the controller's pacer but still queued there when the stream ended: never sent
        "packets_unsent_at_end": tx.get("packets_unsent_at_end"),
        "packet_loss": round(rx["packets_lost"] / tx["packets_sent"], 6) if tx["packets_sent"] else None,
        "rtp_bytes_sent": tx["rtp_bytes_sent"], "rtp_bytes_received": rx["rtp_bytes_received"],
        # padding-only packets (webrtc-bbr while probing; rtp/README.md): apart from the video above
        "padding": bool(tx["padding"]),
        "padding_packets": tx["padding_packets_sent"], "padding_bytes": tx["padding_bytes_sent"],
        "padding_packets_received": rx["padding_packets_received"],
        "padding_bytes_received": rx["padding_bytes_received"],
        "padding_packets_lost": rx["padding_packets_lost"],
        "padding_share": (round(tx["padding_bytes_sent"] / (tx["padding_bytes_sent"] + tx["rtp_bytes_sent"]), 6)
                          if tx["padding_bytes_sent"] + tx["rtp_bytes_sent"] else None),
        "feedback": fb,
        # loss repair (NACK/RTX, PLI; rtp/README.md "Losses were repaired"): both ends' counts
        "repair": rtp_repair.repair_record(tx, rx, sender_frames),
        "target_bps": {"initial": spec.initial_bitrate, "final": tx.get("final_target_bps"),
                       "updates": tx["target_updates"], **steady,
                       "steady_definition": "time-weighted mean of the controller's target over the time the "
                                            "encoder was running (target > 0: webrtc-bbr's paused encoder left out) "
                                            "within steady_window_s, the full 1 s windows of capture time of the "
                                            "stream's second half (the last one left out); steady_paused_s: the "
                                            "paused time in that window"},
        "encoder_per_second": _encoder_per_second(enc),
        "received_per_second": _received_per_second(rate),
        # what arrives against what is rendered on time (issue 48; rtp_bitrate.py, rtp/README.md)
        "on_time_per_second": rtp_bitrate.on_time_per_second(receiver_frames),
        "video_bitrate_bps": video_bitrate,
        # the call's audio (issue 48 §1; rtp_audio.py): apart from every video figure above
        "audio": rtp_audio.audio_record(tx, rx, rate, video_bitrate["window_s"]),
        # the RTT GCC derives from TWCC feedback, for both controllers (issue 48; rtp/README.md)
        "feedback_rtt_ms": rtp_bitrate.feedback_rtt(_read_csv(root / "sender" / "feedback_rtt.csv")),
        # each cross-check's numbers; a failed one is also a warning (filled by crosschecks.py)
        "checks": {},
        "target_changes": len(targets),
        # CPU time of each end's process (user/system s, all threads; the sender's excludes its
        # encoder child): the per-packet cost of a real run, printed by bench/bench_rtp.py
        "process_cpu_s": {"sender": tx.get("cpu"), "receiver": rx.get("cpu")},
        "files": {"sender": "logs/rtp/sender/{frames,packets,targets,encoder,bbr_state,feedback_rtt}.csv",
                  "receiver": "logs/rtp/receiver/{frames,rate}.csv"},
    }
    _record_provenance(ctx, spec)
    return build(RtpRecord, RTP.name, record), warnings, evidence


def _check_accounting(tx: dict[str, Any], rx: dict[str, Any]) -> None:
    """RunFailed unless the viewer accounted exactly the frames the broadcaster captured, every packet
    sent was received or counted lost, the decoder settled every frame on time, and no more bytes
    (padding included) arrived than were sent."""
    captured = tx["frames_captured"]
    on_time, late, lost = rx["frames_on_time"], rx["frames_late"], rx["frames_lost"]
    if not rx["end_record_seen"]:
        raise RunFailed("rtp: the sender's end-of-stream record never reached the viewer")
    if rx["frames_accounted"] != captured or on_time + late + lost != captured:
        raise RunFailed(f"rtp: {captured} frames captured, the viewer accounted {rx['frames_accounted']} "
                        f"(on time {on_time} + late {late} + lost {lost})")
    if rx["packets_expected"] != tx["packets_sent"] or rx["packets_received"] + rx["packets_lost"] != tx["packets_sent"]:
        raise RunFailed(f"rtp: {tx['packets_sent']} packets sent, the viewer expected {rx['packets_expected']} "
                        f"and received {rx['packets_received']}")
    dec = rx["decode"]
    if dec["frames_decoded"] + dec["frames_decode_error"] + dec["frames_undecodable"] != on_time:
        raise RunFailed(f"rtp: {on_time} frames on time, the decoder settled {dec['frames_decoded']} decoded + "
                        f"{dec['frames_decode_error']} errors + {dec['frames_undecodable']} undecodable")
    if rx["rtp_bytes_received"] > tx["rtp_bytes_sent"]:
        raise RunFailed(f"rtp: {rx['rtp_bytes_received']} RTP bytes received, more than the {tx['rtp_bytes_sent']} sent")
    _check_padding(tx, rx)


def _warnings(tx: dict[str, Any], rx: dict[str, Any], fb: dict[str, Any]) -> list[str]:
    """What the record holds but a reader must be told: unsent packets, the feedback's problems,
    mismatched reassembly, decoder errors."""
    warnings = []
    if tx.get("packets_unsent_at_end"):
        warnings.append(f"rtp: the controller's pacer still held {tx['packets_unsent_at_end']} packets when the "
                        "stream ended; they were not sent (logs/rtp/sender/sender.json)")
    warnings += feedback_warnings(fb, rx)
    if rx["frames_reassembly_mismatch"]:
        warnings.append(f"rtp: {rx['frames_reassembly_mismatch']} complete frames reassembled to other NAL bytes than sent")
    dec = rx["decode"]
    if dec["decoder_failure"] or dec["frames_decode_error"]:
        warnings.append(f"rtp: the viewer's decoder: {dec['frames_decode_error']} decode errors "
                        f"{dec['decoder_failure']} (logs/rtp/receiver/decoder.log)")
    return warnings


def _encoder_per_second(enc: list[dict[str, str]]) -> list[dict[str, Any]]:
    """sender/encoder.csv's rows, typed: frames, achieved and target rates per 1 s window."""
    return [{"t_s": float(r["window_start_s"]), "frames": int(r["frames"]),
             "achieved_bps": int(r["achieved_bps"]), "achieved_wire_bps": int(r["achieved_wire_bps"]),
             "target_bps": float(r["target_bps_mean"]),
             "encoder_set_bps": float(r["encoder_set_bps_mean"])} for r in enc]


def _received_per_second(rate: list[dict[str, str]]) -> list[dict[str, Any]]:
    """receiver/rate.csv's rows, typed: what the viewer received per second, padding apart."""
    return [{"second": int(r["second"]), "received_bps": int(r["received_bps"]),
             "padding_bps": int(r["padding_bps"]), "audio_bps": int(r.get("audio_bps") or 0)}
            for r in rate]


def _record_provenance(ctx: RunContext, spec: RtpWorkloadSpec) -> None:
    """The programs, controller, encoder settings and caps of the run, in its provenance."""
    ctx.extra_prov["rtp"] = {"binary": str(BINARY), "encoder": str(ENCODER), "decoder": str(DECODER),
                             "controller": spec.controller, "video_encoder": encoder_settings(spec),
                             "audio_encoder": audio_settings(spec),
                             # what max_bitrate capped in this run (issue 48; rtp/README.md "Which cap?")
                             "caps": {"cap_estimate": spec.cap_estimate, "cap_encoder": spec.cap_encoder,
                                      **spec.caps()},
                             "implementation": "pion/interceptor v0.1.51 (pkg/gcc, pkg/twcc, pkg/cc)"}


def frame_size_stats(frames: list[dict[str, str]]) -> dict[str, Any]:
    """Encoded frame sizes (bytes): percentiles over all frames, key and delta frames apart."""
    def pct(xs: list[int]) -> dict[str, Any]:
        xs = sorted(xs)
        if not xs:
            return {"n": 0}
        at = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731 — nearest rank
        return {"n": len(xs), "mean": round(sum(xs) / len(xs), 1), "p50": at(0.5), "p95": at(0.95), "max": xs[-1]}
    sizes = [(int(f["bytes"]), f["keyframe"] == "true") for f in frames]
    return {"all": pct([b for b, _ in sizes]), "key": pct([b for b, k in sizes if k]),
            "delta": pct([b for b, k in sizes if not k])}


def encoder_settings(spec: Any) -> dict[str, Any]:
    """The encoder the run used and its settings as the encoder script builds them (provenance)."""
    cp = subprocess.run([sys.executable, str(ENCODER), "--print-settings", "--codec", CODEC[spec.encoder],
                         "--fps", str(spec.fps), "--keyint", str(spec.keyint), "--width", str(spec.width),
                         "--height", str(spec.height), "--content", spec.content],
                        capture_output=True, text=True, timeout=30)
    if cp.returncode != 0:
        return {"encoder": spec.encoder, "error": cp.stderr[-500:]}
    return {"encoder": spec.encoder, **json.loads(cp.stdout)}


def audio_settings(spec: Any) -> dict[str, Any] | None:
    """The audio encoder's settings as rtp/encoder/live_audio.py builds them (provenance); None when off."""
    if not spec.audio.enabled:
        return None
    cp = subprocess.run([sys.executable, str(AUDIO_ENCODER), "--print-settings", *spec.audio.encoder_args()],
                        capture_output=True, text=True, timeout=30)
    if cp.returncode != 0:
        return {"error": cp.stderr[-500:]}
    return dict(json.loads(cp.stdout))


def feedback_warnings(fb: dict[str, Any], rx: dict[str, Any]) -> list[str]:
    """What the sender's TWCC ledger (fb) says went unreported, against what the viewer (rx) received.

    Feedback can only name a packet the viewer received or one before a packet it received: the stream's
    last packets, lost on the path with nothing after them, are in no feedback — nothing reveals the gap,
    and the sender waited for that feedback in vain (--feedback-wait). A drop-tail queue kept full by
    competing traffic does that now and then. Such a tail (`missing_feedback_at_tail`) is the path's loss,
    which the viewer counted; no warning. Anything else unreported is one: a gap in the middle (a feedback
    datagram lost on the way back) or the stream's first packets (feedback begins at the first packet the
    viewer received; the ledger does not count them apart). So is any disagreement between what feedback
    reported received and what the viewer received."""
    missing, tail = fb["transport_seqs_without_feedback"], fb["missing_feedback_at_tail"]
    received = rx["packets_received"] + rx["padding_packets_received"] + (rx.get("repair") or {}).get("rtx_packets_received", 0)
    warnings = []
    if missing > tail:
        warnings.append(f"rtp: {missing - tail} of {fb['transport_seqs_sent']} packets before the stream's last "
                        "never appeared in TWCC feedback (logs/rtp/sender/sender.json)")
    if received != fb["transport_seqs_reported_received"]:
        warnings.append(f"rtp: the viewer received {received} packets, TWCC feedback reported "
                        f"{fb['transport_seqs_reported_received']} received and left {missing} unreported "
                        "(logs/rtp/sender/sender.json, logs/rtp/receiver/receiver.json)")
    return warnings


def _check_padding(tx: dict[str, Any], rx: dict[str, Any]) -> None:
    """Padding is accounted like the video, apart from it: every padding packet sent was received or
    counted lost, no more padding bytes arrived than left, every transport-wide number (media and
    padding share one sequence) is in the feedback ledger, and the viewer's socket read at least the
    video's and the padding's bytes (the interface check, views.udp_wire_check, compares the socket's
    datagrams — padding included — with the interface counters)."""
    sent = tx["padding_packets_sent"]
    if rx["padding_packets_expected"] != sent or rx["padding_packets_received"] + rx["padding_packets_lost"] != sent:
        raise RunFailed(f"rtp: {sent} padding packets sent, the viewer expected {rx['padding_packets_expected']} "
                        f"and received {rx['padding_packets_received']}")
    if rx["padding_bytes_received"] > tx["padding_bytes_sent"]:
        raise RunFailed(f"rtp: {rx['padding_bytes_received']} padding bytes received, more than the "
                        f"{tx['padding_bytes_sent']} sent")
    rtx_sent = tx["repair"]["counts"]["retransmissions_sent"]
    if tx["feedback"]["transport_seqs_sent"] != tx["packets_sent"] + sent + rtx_sent:
        raise RunFailed(f"rtp: {tx['feedback']['transport_seqs_sent']} transport-wide numbers sent, not the "
                        f"{tx['packets_sent']} video + {sent} padding + {rtx_sent} retransmitted packets")
    rtx_bytes = rx["repair"]["rtx_bytes_received"]
    audio_bytes = (rx.get("audio") or {}).get("bytes_received", 0)
    if rx["udp_payload_bytes_received"] < rx["rtp_bytes_received"] + rx["padding_bytes_received"] + rtx_bytes + audio_bytes:
        raise RunFailed(f"rtp: the viewer's socket read {rx['udp_payload_bytes_received']} bytes, fewer than the "
                        f"{rx['rtp_bytes_received']} video + {rx['padding_bytes_received']} padding + {rtx_bytes} "
                        f"retransmitted + {audio_bytes} audio bytes it counted")
    rtp_repair.check_repair(tx, rx)
    rtp_audio.check_audio(tx, rx)



def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open() as f:
            return list(csv.DictReader(f))
    except OSError:
        return []
