"""The rtp workload (mpvlab/run/workloads/rtp.py, rtp/cmd/mpvlab-rtp) end to end: the shipped
scenario scenarios/rtp-gcc-short.yaml (and the same with controller webrtc-bbr, all but the last point) — 20 s of live video under Google Congestion Control through a
1 Mbit/s, 15 KB drop-tail bottleneck — and what must hold whatever the host's load:

- every frame captured is accounted at the viewer exactly once: on time + late + lost = captured;
- every packet sent appears in TWCC feedback (a handful may miss it: bounded and reported), and what
  the feedback reports received agrees with what the viewer counted;
- the bytes agree three ways: RTP bytes sent, RTP bytes received, the client interface's counters;
- the encoder followed the controller: every bitrate the encoder ran at was one the controller set;
- GCC's steady-state target (mean over the second half) lies within 0.5× … 1.0× the 1 Mbit/s link.
  Why, from first principles: above the link the bottleneck queue grows, the delay-based detector
  signals overuse and GCC sets 0.85 × the rate the viewer received, which cannot exceed the link; and
  on an idle link with no loss nothing cuts the target twice in a row without growth in between (the
  decrease is to 0.85 × the received rate, after which it grows again), so it cannot sit below half
  the link for half the stream. A CPU stall on this shared host slows the encoder (fewer bits than
  the target) but not the controller's arithmetic, so the bound needs no allowance for steal.

Timing figures (latency, achieved-vs-target per second) are printed by bench/bench_rtp.py, not asserted.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "scenarios" / "rtp-gcc-short.yaml"
LINK_BPS = 1_000_000
FPS, DURATION_S = 30, 20
# Feedback the sender may never see: pion's TWCC recorder reports every packet it got; one lost
# feedback datagram (the up path has no loss configured) would leave ~10 packets unreported.
MISSING_FEEDBACK_BOUND = 20


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.parametrize("controller", ["gcc", "webrtc-bbr"])
def test_rtp_run_accounts_every_frame_packet_and_byte(tmp_path: Path, controller: str) -> None:
    """The shipped scenario, and the same with WebRTC's 2018 BBR in GCC's place (correctness only:
    its rates are a study result, rtp/README.md)."""
    name = f"rtp-{controller}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(SCENARIO.read_text().replace("name: rtp-gcc-short", f"name: {name}")
                 .replace("controller: gcc", f"controller: {controller}"))
    results = tmp_path / "results"
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (run_dir,) = [d for d in (results / name).iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    r = s["rtp"]
    assert s["workload"] == "rtp" and s["topology"] == "dumbbell" and r["controller"] == controller

    # Frames: the live source ran for the configured media time (a stalled host may skip captures,
    # never add them), and the viewer accounted each one exactly once.
    captured = r["frames_captured"]
    assert 0.9 * FPS * DURATION_S <= captured <= FPS * DURATION_S + 1, captured
    assert r["frames_on_time"] + r["frames_late"] + r["frames_lost"] == captured, r
    tx_frames = _rows(run_dir / "logs/rtp/sender/frames.csv")
    rx_frames = _rows(run_dir / "logs/rtp/receiver/frames.csv")
    assert len(tx_frames) == len(rx_frames) == captured
    assert [int(f["frame"]) for f in rx_frames] == list(range(captured))
    by_status = {st: sum(f["status"] == st for f in rx_frames) for st in ("on_time", "late", "lost")}
    assert by_status == {"on_time": r["frames_on_time"], "late": r["frames_late"], "lost": r["frames_lost"]}
    assert r["frames_reassembly_mismatch"] == 0      # complete frames depacketised to the bytes sent

    # Packets and feedback.
    packets = _rows(run_dir / "logs/rtp/sender/packets.csv")
    assert len(packets) == r["packets_sent"] == sum(int(f["packets"]) for f in tx_frames)
    assert r["packets_received"] + r["packets_lost"] == r["packets_sent"]
    fb = r["feedback"]
    assert fb["transport_seqs_sent"] == r["packets_sent"]
    assert fb["transport_seqs_reported"] + fb["transport_seqs_without_feedback"] == r["packets_sent"]
    assert fb["transport_seqs_without_feedback"] <= MISSING_FEEDBACK_BOUND, fb
    # The feedback says received exactly what the viewer counted (less what it never reported on).
    assert fb["transport_seqs_reported_received"] <= r["packets_received"] \
        <= fb["transport_seqs_reported_received"] + fb["transport_seqs_without_feedback"], (fb, r)

    # Bytes: sent = the packets' sum; received ≤ sent, short by at most the lost packets; the
    # interface saw every datagram with its 42 header bytes and little else (views.udp_wire_check).
    assert r["rtp_bytes_sent"] == sum(int(p["udp_payload_bytes"]) for p in packets)
    largest = max(int(p["udp_payload_bytes"]) for p in packets)
    assert r["rtp_bytes_sent"] - r["packets_lost"] * largest <= r["rtp_bytes_received"] <= r["rtp_bytes_sent"]
    (wire,) = s["cross_checks"].values()
    assert wire["ok"], wire
    assert s["paths"]["link"]["rx_bytes"] >= r["rtp_bytes_received"] + 42 * r["packets_received"]

    # The encoder followed the controller: each bitrate a frame was encoded at is one the controller set.
    set_kbps = {int(t["encoder_set_bps"]) // 1000 for t in _rows(run_dir / "logs/rtp/sender/targets.csv")}
    used_kbps = {int(f["encoder_bps"]) // 1000 for f in tx_frames}
    assert used_kbps <= set_kbps, used_kbps - set_kbps
    assert r["target_bps"]["updates"] >= 10         # the controller updated its target as feedback came in

    if controller != "gcc":
        return
    steady = r["target_bps"]["steady_mean"]
    assert 0.5 * LINK_BPS <= steady <= 1.0 * LINK_BPS, r["target_bps"]


@pytest.mark.parametrize("workload,topology,error", [
    ({"kind": "rtp", "controller": "bbr"}, "dumbbell", "controller"),
    ({"kind": "rtp", "initial_bitrate": "2mbit"}, "dumbbell", "min_bitrate ≤ initial_bitrate ≤ max_bitrate"),
    ({"kind": "rtp", "max_bitrate": "100gbit"}, "dumbbell", "between 16kbit and 50mbit"),
    ({"kind": "rtp", "duration": "1s"}, "dumbbell", "duration must lie between 2s and 60min"),
    ({"kind": "rtp", "playout_deadline": "1ms"}, "dumbbell", "playout_deadline"),
    ({"kind": "rtp", "width": 641}, "dumbbell", "multiple of 2"),
    ({"kind": "rtp", "encoder": "x"}, "dumbbell", "encoder"),
    ({"kind": "rtp"}, "dual-path", "rtp runs on topology.kind dumbbell or shared-bottleneck"),
])
def test_rtp_scenario_rejects_bad_input(workload: dict, topology: str, error: str) -> None:
    from mpvlab.scenario import Scenario
    paths = {"a": {"down": {"rate": "1mbit", "buffer": "15KB", "delay": "20ms"}}}
    if topology == "dual-path":
        paths["b"] = paths["a"]
    with pytest.raises(ValueError) as e:
        Scenario.model_validate({"name": "x", "topology": {"kind": topology}, "paths": paths, "workload": workload})
    assert error in str(e.value), str(e.value)
