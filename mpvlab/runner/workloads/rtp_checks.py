"""Cross-checks of the rtp workload's derived figures (issue 43; the table in rtp/README.md, "Cross-checks").

Each check recomputes a figure of the summary's `rtp` part from evidence the figure was not made
from — the sender's per-frame and per-packet logs, its target log, the viewer's per-frame and
per-second logs — and compares within a stated tolerance. The run calls them through
mpvlab/runner/crosschecks.py (the one entry point of every check, in the registry's order); a check that
fails becomes the warning `cross-check rtp_<name> failed: …` in `summary.json` → `warnings`, and
every check's numbers are in `summary.json` → `rtp.checks`. The steady window and the target's
paused time are defined here too (`steady_window`, `steady_target`): the summary and the checks
read the same definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Rows = Sequence[Mapping[str, str]]

STEADY_FROM = 0.5       # the steady state is the stream's second half (full 1 s windows)
# encoder output ÷ setting over the steady window's running time (the encoder not paused). Upper: libvpx's rc_overshoot_pct is
# 15 % (x264: a 100 ms VBV, 10 % of a second) and a 1 s window may hold a key frame and a setting that
# changed inside it: +10 %. Lower: libvpx may undershoot (rc_undershoot_pct 100) and drops frames on
# a hard picture (0.77 x measured offline at 200 kbit/s, rtp/README.md); under half, the encoder is
# not following its setting and the targets in the summary are not what was sent.
ENCODER_RATIO_BOUNDS = (0.5, 1.25)
# the steady target (time-weighted over the encoder's running time) against the mean of the target
# each frame was handed over at: a frame-sampled mean of a step function differs by what the target
# did between frames and by where libvpx dropped frames; 10 %.
STEADY_TARGET_TOLERANCE = 0.10
LATENCY_TOLERANCE_MS = 0.001    # frames.csv writes the latency with three decimals
# encoder.csv's window means are whole bit/s over windows whose start targets.csv-side is known to
# 1 µs (six decimals): a step of up to 1.3 Mbit/s misplaced by 1 µs moves a mean by 1.3 bit/s
ENCODER_MEAN_TOLERANCE_BPS = 2.0
UDP_IPV4_HEADER = 28            # what encoder.csv's achieved_wire_bps adds per packet (results.go)


@dataclass(frozen=True)
class Evidence:
    """What a run's logs/rtp/ holds, parsed (the CSVs as rows of strings, the JSONs as dicts)."""

    tx: Mapping[str, Any]
    rx: Mapping[str, Any]
    sender_frames: Rows = ()
    packets: Rows = ()
    targets: Rows = ()
    encoder: Rows = ()
    receiver_frames: Rows = ()
    rate: Rows = ()


@dataclass
class Check:
    """One check's numbers: `ok` false makes its named warning."""

    name: str
    ok: bool
    figure: str
    evidence: str
    tolerance: str
    values: dict[str, Any] = field(default_factory=dict)
    detail: str = ""

    def record(self) -> dict[str, Any]:
        return {"ok": self.ok, "figure": self.figure, "evidence": self.evidence, "tolerance": self.tolerance,
                **self.values}

    def warning(self) -> str:
        return f"cross-check rtp_{self.name} failed: {self.detail} ({self.evidence}; tolerance {self.tolerance})"


def _is_video(p: Mapping[str, str]) -> bool:
    """A sender/packets.csv row of the video's media stream: not padding, a retransmission or audio
    (the audio column exists since issue 48 §1's audio; older logs have none)."""
    return p["padding"] != "true" and p.get("rtx") != "true" and p.get("audio") != "true"


# --- the steady window and the encoder's running time --------------------------------------------

def steady_window(enc: Rows) -> tuple[float, float] | None:
    """[start, end) in run seconds: the full 1 s windows (encoder.csv, capture time) of the stream's
    second half, the last window left out (it may be cut short)."""
    full = [r for r in enc if int(r["frames"]) > 0]
    half = full[int(len(full) * STEADY_FROM):-1] if len(full) > 2 else []
    if not half:
        return None
    return float(half[0]["window_start_s"]), float(half[-1]["window_start_s"]) + 1.0


def _steps(targets: Rows, column: str) -> list[tuple[float, float]]:
    return [(float(r["t_s"]), float(r[column])) for r in targets]


def step_segments(targets: Rows, column: str, a: float, b: float) -> list[tuple[float, float, float]]:
    """(from, to, value) of targets.csv's step function over [a, b); before the first row the first
    value held (the initial target, as the sender's encoder.csv takes it)."""
    steps = _steps(targets, column)
    out = []
    for i, (t, v) in enumerate(steps):
        lo = a if i == 0 else max(t, a)
        hi = min(steps[i + 1][0] if i + 1 < len(steps) else b, b)
        if hi > lo:
            out.append((lo, hi, v))
    return out


def paused_s(targets: Rows, a: float, b: float) -> float:
    """Seconds of [a, b) with the target at 0: webrtc-bbr's IsSendQueueFull, the encoder paused."""
    return sum(hi - lo for lo, hi, v in step_segments(targets, "target_bps", a, b) if v == 0)


def running_mean(targets: Rows, column: str, a: float, b: float) -> float | None:
    """Time-weighted mean of `column` over the part of [a, b) the encoder was running (target > 0)."""
    segs = [(lo, hi, v) for (lo, hi, v), (_, _, tv) in zip(step_segments(targets, column, a, b),
                                                              step_segments(targets, "target_bps", a, b)) if tv > 0]
    t = sum(hi - lo for lo, hi, _ in segs)
    return sum((hi - lo) * v for lo, hi, v in segs) / t if t > 0 else None


def steady_target(enc: Rows, targets: Rows) -> dict[str, Any]:
    """The summary's steady target: the time-weighted mean of the controller's target over the steady
    window's time with the encoder running (a paused encoder's target of 0 left out), that window, and
    the paused seconds in it."""
    win = steady_window(enc)
    if win is None or not targets:
        return {"steady_mean": None, "steady_window_s": None, "steady_paused_s": None}
    mean = running_mean(targets, "target_bps", *win)
    return {"steady_mean": None if mean is None else round(mean),
            "steady_window_s": [round(win[0], 6), round(win[1], 6)],
            "steady_paused_s": round(paused_s(targets, *win), 6)}


# --- the checks ----------------------------------------------------------------------------------

def _frames_in(frames: Rows, a: float, b: float) -> list[Mapping[str, str]]:
    return [f for f in frames if a <= float(f["capture_s"]) < b]


def _setting_bits(targets: Rows, a: float, b: float) -> float:
    """The bits the encoder's setting asked for over the running time in [a, b) (setting × seconds
    with the target > 0)."""
    return sum((hi - lo) * v for (lo, hi, v), (_, _, t) in zip(step_segments(targets, "encoder_set_bps", a, b),
                                                                 step_segments(targets, "target_bps", a, b)) if t > 0)


def check_encoder_vs_setting(ev: Evidence) -> Check:
    """Encoder output (sender/frames.csv bytes) ÷ what its setting asked for (targets.csv
    encoder_set_bps × the seconds the encoder ran) over the steady window. The frames after a pause
    are in it: that is where an encoder that saw the pause as a timestamp gap spends its budget
    (issue 43). The same ratio over the steady windows without any pause is recorded beside it."""
    lo_ok, hi_ok = ENCODER_RATIO_BOUNDS
    tol = f"{lo_ok} ≤ output ÷ setting ≤ {hi_ok} over the steady window's running time"
    win = steady_window(ev.encoder)
    out = asked = out_np = asked_np = 0.0
    windows = paused = 0
    for r in ev.encoder:
        a = float(r["window_start_s"])
        if win is None or not (win[0] - 1e-6 <= a and a + 1.0 <= win[1] + 1e-6):
            continue
        o = sum(int(f["bytes"]) * 8 for f in _frames_in(ev.sender_frames, a, a + 1.0))
        s = _setting_bits(ev.targets, a, a + 1.0)
        out, asked, windows = out + o, asked + s, windows + 1
        if paused_s(ev.targets, a, a + 1.0) > 0:
            paused += 1
        else:
            out_np, asked_np = out_np + o, asked_np + s
    ratio = out / asked if asked else None
    ok = ratio is None or lo_ok <= ratio <= hi_ok
    return Check("encoder_vs_setting", ok, "rtp.encoder_per_second (achieved_bps against encoder_set_bps)",
                 "sender/frames.csv bytes per 1 s of capture time ÷ targets.csv encoder_set_bps × running time", tol,
                 {"ratio": None if ratio is None else round(ratio, 4), "windows": windows, "windows_with_pause": paused,
                  "ratio_windows_without_pause": round(out_np / asked_np, 4) if asked_np else None},
                 f"the encoder put out {ratio and round(ratio, 3)} × what its setting asked for over the steady "
                 f"window's running time ({windows} windows, {paused} with a pause)")


def check_steady_target_vs_frames(ev: Evidence, steady: Mapping[str, Any]) -> Check:
    """The steady target against the target each frame of the steady window was handed over at
    (sender/frames.csv target_bps, written per frame, not from targets.csv)."""
    tol = f"within ±{STEADY_TARGET_TOLERANCE:.0%}"
    win, mean = steady.get("steady_window_s"), steady.get("steady_mean")
    per_frame = [float(f["target_bps"]) for f in _frames_in(ev.sender_frames, *win)
                 if float(f["target_bps"]) > 0] if win else []
    fmean = sum(per_frame) / len(per_frame) if per_frame else None
    ok = mean is None or fmean is None or abs(mean - fmean) <= STEADY_TARGET_TOLERANCE * fmean
    return Check("steady_target_vs_frames", ok, "rtp.target_bps.steady_mean",
                 "sender/frames.csv target_bps of the steady window's frames (the target at each hand-over)", tol,
                 {"steady_mean": mean, "frames_mean": None if fmean is None else round(fmean), "frames": len(per_frame)},
                 f"steady target {mean} bit/s, its frames were handed over at {fmean and round(fmean)} bit/s on average")


def check_encoder_per_second_vs_frames(ev: Evidence) -> Check:
    """encoder.csv's achieved bit/s and frames per window (the summary's encoder_per_second) against
    sender/frames.csv's frames binned again: window i holds the frames captured i … i+1 s after the
    first frame (whole ns, capture_ns)."""
    bits: dict[int, int] = {}
    count: dict[int, int] = {}
    first = int(ev.sender_frames[0]["capture_ns"]) if ev.sender_frames else 0
    for f in ev.sender_frames:
        w = (int(f["capture_ns"]) - first) // 1_000_000_000
        bits[w] = bits.get(w, 0) + int(f["bytes"]) * 8
        count[w] = count.get(w, 0) + 1
    bad = [(i, int(r["achieved_bps"]), bits.get(i, 0), int(r["frames"]), count.get(i, 0))
           for i, r in enumerate(ev.encoder)
           if int(r["achieved_bps"]) != bits.get(i, 0) or int(r["frames"]) != count.get(i, 0)]
    extra = sorted(set(bits) - set(range(len(ev.encoder))))
    ok = not bad and not extra
    detail = (f"{len(bad)} windows differ, first window {bad[0][0]}: {bad[0][1]} bit/s, {bad[0][3]} frames reported; "
              f"frames.csv {bad[0][2]} bit, {bad[0][4]} frames" if bad
              else f"frames.csv has frames in windows {extra[:3]} that encoder.csv lacks" if extra else "")
    return Check("encoder_per_second_vs_frames", ok, "rtp.encoder_per_second (achieved_bps, frames)",
                 "sender/frames.csv bytes and frames per 1 s window of capture time", "exact",
                 {"windows": len(ev.encoder), "windows_differing": len(bad) + len(extra)}, detail)


def check_received_per_second_vs_totals(ev: Evidence) -> Check:
    """receiver/rate.csv (the summary's received_per_second) summed against the viewer's totals."""
    video = sum(int(r["received_bps"]) for r in ev.rate) // 8
    padding = sum(int(r["padding_bps"]) for r in ev.rate) // 8
    want_v, want_p = ev.rx["rtp_bytes_received"], ev.rx["padding_bytes_received"]
    ok = video == want_v and padding == want_p
    return Check("received_per_second_vs_totals", ok, "rtp.received_per_second",
                 "receiver.json rtp_bytes_received and padding_bytes_received", "exact",
                 {"video_bytes_per_second_sum": video, "video_bytes_total": want_v,
                  "padding_bytes_per_second_sum": padding, "padding_bytes_total": want_p},
                 f"rate.csv sums to {video} video + {padding} padding bytes, the viewer counted {want_v} + {want_p}")


def check_latency_vs_frames(ev: Evidence) -> Check:
    """receiver.json's latency percentiles (the summary's latency_ms) recomputed from the viewer's
    per-frame latencies (receiver/frames.csv), nearest rank as the viewer takes them."""
    lat = sorted(float(f["latency_ms"]) for f in ev.receiver_frames if f.get("latency_ms"))
    got = ev.rx.get("latency_ms") or {}
    bad = {}
    for key, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)):
        want = lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
        have = got.get(key)
        if want is None or have is None:
            if (want is None) != (have is None):
                bad[key] = {"reported": have, "from_frames": want}
        elif abs(want - float(have)) > LATENCY_TOLERANCE_MS:
            bad[key] = {"reported": have, "from_frames": want}
    return Check("latency_vs_frames", not bad, "rtp.latency_ms (p50, p95, p99, max)",
                 "receiver/frames.csv latency_ms of every complete frame", f"±{LATENCY_TOLERANCE_MS} ms",
                 {"frames": len(lat), "differing": bad},
                 "; ".join(f"{k} {v['reported']} ms reported, {v['from_frames']} ms from frames.csv"
                           for k, v in bad.items()))


def check_packets_vs_frames(ev: Evidence) -> Check:
    """The sender's totals (packets_sent, rtp_bytes_sent, frames_captured) against its per-packet log
    (sender/packets.csv) and per-frame log (sender/frames.csv: packets each frame was cut into)."""
    video = [p for p in ev.packets if _is_video(p)]
    in_frames = sum(int(f["packets"]) for f in ev.sender_frames)
    sent, unsent = ev.tx["packets_sent"], ev.tx.get("packets_unsent_at_end") or 0
    nbytes = sum(int(p["udp_payload_bytes"]) for p in video)
    ok = (len(video) == sent and in_frames == sent + unsent and nbytes == ev.tx["rtp_bytes_sent"]
          and len(ev.sender_frames) == ev.tx["frames_captured"])
    return Check("packets_vs_frames", ok, "rtp.packets_sent, rtp.rtp_bytes_sent, rtp.frames_captured",
                 "sender/packets.csv video rows and bytes; sender/frames.csv rows and packets per frame", "exact",
                 {"packets_csv": len(video), "packets_sent": sent, "packets_in_frames": in_frames,
                  "packets_unsent_at_end": unsent, "packets_csv_bytes": nbytes, "rtp_bytes_sent": ev.tx["rtp_bytes_sent"],
                  "frames_csv": len(ev.sender_frames), "frames_captured": ev.tx["frames_captured"]},
                 f"packets.csv {len(video)} video packets / {nbytes} B, frames.csv {len(ev.sender_frames)} frames "
                 f"cut into {in_frames} packets; sender.json {sent} sent + {unsent} unsent, {ev.tx['rtp_bytes_sent']} B, "
                 f"{ev.tx['frames_captured']} frames")


def check_viewer_counts_vs_frames(ev: Evidence) -> Check:
    """The viewer's frame and decode counts (the summary's frames_on_time, _late, _lost, _lost_incomplete,
    _lost_unseen and decode) against its per-frame log, receiver/frames.csv (status, decode, capture_s:
    empty for a frame never seen)."""
    count: dict[str, int] = {}
    for f in ev.receiver_frames:
        status = f["status"]
        if status == "lost":
            status = "lost_incomplete" if f.get("capture_s") else "lost_unseen"
        for key in (status, f"decode_{f.get('decode') or ''}"):
            count[key] = count.get(key, 0) + 1
    dec = ev.rx.get("decode") or {}
    pairs = {"frames_on_time": ("on_time", ev.rx["frames_on_time"]), "frames_late": ("late", ev.rx["frames_late"]),
             "frames_lost_incomplete": ("lost_incomplete", ev.rx["frames_lost_incomplete"]),
             "frames_lost_unseen": ("lost_unseen", ev.rx["frames_lost_unseen"]),
             "frames_decoded": ("decode_decoded", dec.get("frames_decoded", 0)),
             "frames_decode_error": ("decode_decode_error", dec.get("frames_decode_error", 0)),
             "frames_undecodable": ("decode_undecodable", dec.get("frames_undecodable", 0))}
    bad = {k: {"reported": want, "frames_csv": count.get(key, 0)} for k, (key, want) in pairs.items()
           if count.get(key, 0) != want}
    if ev.rx["frames_lost"] != ev.rx["frames_lost_incomplete"] + ev.rx["frames_lost_unseen"]:
        bad["frames_lost"] = {"reported": ev.rx["frames_lost"],
                              "frames_csv": count.get("lost_incomplete", 0) + count.get("lost_unseen", 0)}
    return Check("viewer_counts_vs_frames", not bad,
                 "rtp.frames_on_time, frames_late, frames_lost(_incomplete, _unseen), decode",
                 "receiver/frames.csv status, decode and capture_s of every frame", "exact",
                 {"frames_csv": len(ev.receiver_frames), "differing": bad},
                 "; ".join(f"{k} {v['reported']} reported, {v['frames_csv']} in frames.csv" for k, v in bad.items()))


def check_encoder_targets_vs_log(ev: Evidence) -> Check:
    """encoder.csv's time-weighted target and setting per window (the summary's encoder_per_second
    target_bps, encoder_set_bps) recomputed from targets.csv (every change, with its time)."""
    bad = []
    for r in ev.encoder:
        a = float(r["window_start_s"])
        for col, mean_col in (("target_bps", "target_bps_mean"), ("encoder_set_bps", "encoder_set_bps_mean")):
            segs = step_segments(ev.targets, col, a, a + 1.0)
            want = sum((hi - lo) * v for lo, hi, v in segs)
            if abs(want - float(r[mean_col])) > ENCODER_MEAN_TOLERANCE_BPS:
                bad.append((a, mean_col, float(r[mean_col]), round(want)))
    return Check("encoder_targets_vs_log", not bad, "rtp.encoder_per_second (target_bps, encoder_set_bps)",
                 "sender/targets.csv: every target change and the setting it gave, with its time",
                 f"±{ENCODER_MEAN_TOLERANCE_BPS} bit/s", {"windows": len(ev.encoder), "differing": len(bad)},
                 f"{len(bad)} window means differ, first at {bad[0][0]:.3f} s: {bad[0][1]} {bad[0][2]:.0f} reported, "
                 f"{bad[0][3]} from targets.csv" if bad else "")


def check_encoder_wire_vs_packets(ev: Evidence) -> Check:
    """encoder.csv's achieved_wire_bps summed over the windows (the frames' packets with RTP, UDP and
    IPv4 headers) against sender/packets.csv's video packets + 28 B each. Before issue 43 the wire
    figure was counted at hand-over to the pacer, 4 B per packet short (the transport-wide sequence
    number extension is added later) and with packets that never left; this check found it."""
    wire = sum(int(r["achieved_wire_bps"]) for r in ev.encoder) // 8
    logged = sum(int(p["udp_payload_bytes"]) + UDP_IPV4_HEADER for p in ev.packets if _is_video(p))
    return Check("encoder_wire_vs_packets", wire == logged, "rtp.encoder_per_second (achieved_wire_bps)",
                 "sender/packets.csv video packets' bytes + 28 B (UDP + IPv4) each", "exact",
                 {"wire_bytes": wire, "packets_csv_wire_bytes": logged},
                 f"encoder.csv's windows sum to {wire} B on the wire, packets.csv to {logged} B")


def check_repair_vs_logs(ev: Evidence) -> Check:
    """The repair counts (the summary's rtp.repair: retransmissions sent, received, repaired, frames
    repaired, key frames forced) against the per-packet and per-frame logs and the two ends' totals:
    sender/packets.csv rtx rows (count, bytes; each names a video packet sent before it), the viewer's
    frames.csv packets_repaired, rate.csv rtx_bps, sender/frames.csv forced_keyframe; and the sums
    that must hold: retransmissions received = repaired + duplicate ≤ sent; media packets lost =
    repaired + lost unrepaired."""
    tx_rep, rx_rep = ev.tx.get("repair") or {}, ev.rx.get("repair") or {}
    c = tx_rep.get("counts") or {}
    rtx = [p for p in ev.packets if p.get("rtx") == "true"]
    video_seqs: dict[str, float] = {}
    for p in ev.packets:
        if _is_video(p):
            video_seqs.setdefault(p["rtp_seq"], float(p["t_s"]))
    orphans = sum(1 for p in rtx if not (p["original_seq"] in video_seqs and video_seqs[p["original_seq"]] <= float(p["t_s"])))
    rtx_bytes = sum(int(p["udp_payload_bytes"]) for p in rtx)
    repaired_in_frames = sum(int(f.get("packets_repaired") or 0) for f in ev.receiver_frames)
    frames_repaired = sum(1 for f in ev.receiver_frames if int(f.get("packets_repaired") or 0) > 0 and f["status"] != "lost")
    rate_rtx = sum(int(r.get("rtx_bps") or 0) for r in ev.rate) // 8
    forced = sum(1 for f in ev.sender_frames if f.get("forced_keyframe") == "true")
    repaired = rx_rep.get("packets_repaired", 0)
    values = {
        "packets_csv_rtx": len(rtx), "retransmissions_sent": c.get("retransmissions_sent", 0),
        "packets_csv_rtx_bytes": rtx_bytes, "retransmission_bytes_sent": c.get("retransmission_bytes_sent", 0),
        "rtx_rows_without_earlier_original": orphans,
        "rtx_packets_expected": rx_rep.get("rtx_packets_expected"), "rtx_packets_received": rx_rep.get("rtx_packets_received", 0),
        "rtx_duplicate": rx_rep.get("rtx_duplicate", 0), "packets_repaired": repaired,
        "frames_csv_packets_repaired": repaired_in_frames, "frames_repaired": rx_rep.get("frames_repaired", 0),
        "frames_csv_frames_repaired": frames_repaired, "rate_csv_rtx_bytes": rate_rtx,
        "rtx_bytes_received": rx_rep.get("rtx_bytes_received", 0), "packets_lost": ev.rx["packets_lost"],
        "packets_lost_unrepaired": rx_rep.get("packets_lost_unrepaired", 0),
        "frames_csv_forced_keyframes": forced, "keyframes_forced": c.get("keyframes_forced", 0),
    }
    bad = []
    if len(rtx) != values["retransmissions_sent"] or rtx_bytes != values["retransmission_bytes_sent"]:
        bad.append("packets.csv rtx rows ≠ sender.json retransmissions")
    if orphans:
        bad.append(f"{orphans} rtx rows name no video packet sent before them")
    if values["rtx_packets_expected"] not in (None, len(rtx)):
        bad.append("the end record's rtx_packets ≠ packets.csv rtx rows")
    if values["rtx_packets_received"] != repaired + values["rtx_duplicate"] or values["rtx_packets_received"] > len(rtx):
        bad.append("retransmissions received ≠ repaired + duplicate, or more than sent")
    if repaired_in_frames != repaired or frames_repaired != values["frames_repaired"]:
        bad.append("receiver/frames.csv packets_repaired ≠ receiver.json")
    if rate_rtx != values["rtx_bytes_received"]:
        bad.append("rate.csv rtx_bps ≠ rtx_bytes_received")
    if ev.rx["packets_lost"] != repaired + values["packets_lost_unrepaired"]:
        bad.append("packets lost ≠ repaired + unrepaired")
    if forced != values["keyframes_forced"]:
        bad.append("sender/frames.csv forced_keyframe ≠ keyframes_forced")
    return Check("repair_vs_logs", not bad, "rtp.repair (retransmissions, repaired packets and frames, forced key frames)",
                 "sender/packets.csv rtx rows, sender/frames.csv forced_keyframe, receiver/frames.csv packets_repaired, "
                 "receiver/rate.csv rtx_bps", "exact", values, "; ".join(bad))


def check_audio_vs_logs(ev: Evidence) -> Check:
    """The audio counts (the summary's rtp.audio: packets and bytes sent and received, lost) against
    the per-packet and per-second logs and the two ends' totals: sender/packets.csv audio rows (count,
    bytes, consecutive RTP sequence numbers from 0, no transport-wide number), the end record's audio
    count, receiver/rate.csv audio_bps; and the sums that must hold: received + lost = sent, on time +
    late = received, bytes received ≤ sent."""
    tx_a, rx_a = ev.tx.get("audio") or {}, ev.rx.get("audio") or {}
    rows = [p for p in ev.packets if p.get("audio") == "true"]
    seqs = [int(p["rtp_seq"]) for p in rows]
    numbered = sum(1 for p in rows if int(p["transport_seq"]) >= 0)
    nbytes = sum(int(p["udp_payload_bytes"]) for p in rows)
    rate_audio = sum(int(r.get("audio_bps") or 0) for r in ev.rate) // 8
    received = rx_a.get("packets_received", 0)
    values = {
        "enabled": bool(tx_a.get("enabled")), "packets_csv_audio": len(rows), "packets_sent": tx_a.get("packets_sent", 0),
        "packets_csv_audio_bytes": nbytes, "bytes_sent": tx_a.get("bytes_sent", 0),
        "audio_rows_with_transport_seq": numbered,
        "packets_expected": rx_a.get("packets_expected"), "packets_received": received,
        "packets_lost": rx_a.get("packets_lost"), "packets_on_time": rx_a.get("packets_on_time", 0),
        "packets_late": rx_a.get("packets_late", 0), "rate_csv_audio_bytes": rate_audio,
        "bytes_received": rx_a.get("bytes_received", 0),
    }
    bad = []
    if len(rows) != values["packets_sent"] or nbytes != values["bytes_sent"]:
        bad.append("packets.csv audio rows ≠ sender.json audio packets/bytes")
    if seqs != [x & 0xFFFF for x in range(len(seqs))]:
        bad.append("packets.csv audio rows' RTP sequence numbers are not 0, 1, 2, … in send order")
    if numbered:
        bad.append(f"{numbered} audio rows carry a transport-wide number (2018's default audio has none)")
    if values["packets_expected"] not in (None, len(rows)):
        bad.append("the end record's audio_packets ≠ packets.csv audio rows")
    if received + (values["packets_lost"] or 0) != len(rows):
        bad.append("audio received + lost ≠ sent")
    if values["packets_on_time"] + values["packets_late"] != received:
        bad.append("audio on time + late ≠ received")
    if rate_audio != values["bytes_received"] or values["bytes_received"] > nbytes:
        bad.append("rate.csv audio_bps ≠ audio bytes_received, or more received than sent")
    if not values["enabled"] and (rows or received):
        bad.append("audio off, yet audio packets in the logs")
    return Check("audio_vs_logs", not bad, "rtp.audio (packets and bytes sent, received, lost, on time)",
                 "sender/packets.csv audio rows, the end record's audio_packets, receiver/rate.csv audio_bps", "exact",
                 values, "; ".join(bad))
