"""The competition case of the WebRTC study (docs/studies.md §3, issue 18) end to end through the CLI:
scenarios/rtp-competition-short.yaml — live video over RTP (GCC, and the same with webrtc-bbr) to one
viewer behind a 5 Mbit/s, 1 MB drop-tail, 100 ms RTT shared bottleneck, against one iperf3 CUBIC flow
starting at 6 s — and what must hold whatever the host's load and whoever wins:

- the run completes and both flows' rates are in summary.json: the viewer's received bitrate per
  second (rtp.received_per_second) and the CUBIC flow's goodput (cross_traffic.bulk);
- every frame captured is accounted at the viewer exactly once: on time + late + lost = captured;
- every packet sent was covered by TWCC feedback, but for a lost tail: the up path has no rate limit and
  no loss, so no feedback datagram can be dropped, and the sender waits for the feedback on its last
  packets. Only when the stream's last packets are themselves dropped (CUBIC keeps the 1 MB drop-tail
  queue full; CI saw the last 5 of 8343 go) does no later packet reveal them, and no feedback can
  name them: then exactly those, the tail, are unreported, and the viewer counted them lost;
- the viewer's OWN interface (client0's, not the bottleneck's, which also carries CUBIC) received
  the RTP bytes (video, padding, retransmissions and the call's audio) plus 42 header bytes per
  datagram (Ethernet 14 + IPv4 20 + UDP 8; the RTP header is
  part of the RTP bytes) and at most a handful of other frames (ARP, the end-of-stream records), each
  at most one MTU;
- the two flows together got no more than the link: over the CUBIC flow's interval, RTP bits/s + CUBIC
  goodput ≤ 5 Mbit/s × 1.05 (both are payload rates, below the frames tbf counts; 5 % for the
  1 s bins' edges against the flow's interval), and CUBIC got > 0;
- the run leaves nothing behind (namespaces, interfaces, ledger).

Who wins and by how much is timing (and a study result): bench/bench_rtp_competition.py prints it.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mpvlab.core import ledger, netns
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
SCENARIO = REPO / "scenarios" / "rtp-competition-short.yaml"
LINK_BPS = 5_000_000
FPS, DURATION_S, BULK_START_S = 30, 25, 6.0
UDP_OVERHEAD = 14 + 20 + 8      # Ethernet + IPv4 + UDP headers per datagram on the viewer's interface
OTHER_FRAMES = 20               # frames on the viewer's interface that are not RTP (ARP, the end records …)
# … plus one ARP request or reply per neighbour entry (the viewer's for its router, the router's for
# the viewer) each time it goes stale: UDP confirms no neighbour, base_reachable_time 30 s → ≥ 15 s
NEIGH_FRAMES_PER_15S = 2
MAX_FRAME = 1514
RATE_MARGIN = 0.05


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


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


def _run(tmp_path: Path, controller: str) -> tuple[Path, dict[str, Any], float]:
    name = f"rtp-competition-{controller}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(SCENARIO.read_text().replace("name: rtp-competition-short", f"name: {name}")
                 .replace("controller: gcc", f"controller: {controller}"))
    results = tmp_path / "results"
    t = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                        capture_output=True, text=True, timeout=150, cwd=REPO)
    wall = time.monotonic() - t
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [d for d in (results / name).iterdir() if d.is_dir()]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "complete"
    return run_dir, json.loads((run_dir / "summary.json").read_text()), wall


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.tools("iperf3")
@pytest.mark.parametrize("controller", ["gcc", "webrtc-bbr"])
def test_rtp_against_cubic_records_both_flows_and_accounts_everything(tmp_path: Path, controller: str) -> None:
    run_dir, s, wall = _run(tmp_path, controller)
    r, bulk, b = s["rtp"], s["cross_traffic"]["bulk"], s["bottleneck"]
    assert s["topology"] == "shared-bottleneck" and s["workload"] == "rtp" and r["controller"] == controller

    # Both flows' rates recorded. The viewer's per-second series covers the stream (its bins are
    # whole seconds of run time from the first packet on).
    rx = r["received_per_second"]
    assert [x["second"] for x in rx] == list(range(rx[0]["second"], rx[0]["second"] + len(rx)))
    assert DURATION_S - 1 <= len(rx) <= DURATION_S + 5, len(rx)
    assert sum(x["received_bps"] for x in rx) > 0
    assert bulk["cc_requested"] == bulk["cc_seen"] == "cubic", bulk
    assert BULK_START_S <= bulk["start_s"] < BULK_START_S + 1.0, bulk
    assert bulk["bytes_received"] > 0 and bulk["goodput_bps"] > 0, bulk
    # what the cross host's interface received is at least the flow's goodput (the viewer's is not in it)
    assert b["leaf_rx_bytes"]["cross"] >= bulk["bytes_received"]

    # Frames: the live source ran for the configured media time (a stalled host may skip captures,
    # never add them), and the viewer accounted each one exactly once.
    captured = r["frames_captured"]
    # frames never encoded while webrtc-bbr's send queue was full exist for nobody, the viewer included
    assert 0.9 * FPS * DURATION_S <= captured + _paused_frames(run_dir) <= FPS * DURATION_S + 1, captured
    assert r["frames_on_time"] + r["frames_late"] + r["frames_lost"] == captured, r
    rx_frames = _rows(run_dir / "logs/rtp/receiver/frames.csv")
    assert [int(f["frame"]) for f in rx_frames] == list(range(captured))

    # Packets and feedback: every packet sent was received or counted lost, and appears in TWCC feedback.
    # Padding-only packets (webrtc-bbr while probing) count apart from the video, and like it.
    assert r["packets_received"] + r["packets_lost"] == r["packets_sent"]
    assert r["padding_packets_received"] + r["padding_packets_lost"] == r["padding_packets"]
    # Retransmissions (RTX, workload.repair on by default) too: numbered, fed back and read apart.
    rep = r["repair"]
    assert rep["retransmissions_received"] + rep["retransmissions_lost"] == rep["retransmissions_sent"], rep
    fb = r["feedback"]
    every = r["packets_sent"] + r["padding_packets"] + rep["retransmissions_sent"]
    assert fb["transport_seqs_sent"] == every
    assert fb["transport_seqs_reported"] + fb["transport_seqs_without_feedback"] == every, fb
    assert fb["transport_seqs_without_feedback"] == fb["missing_feedback_at_tail"], fb   # none in the middle
    received = r["packets_received"] + r["padding_packets_received"] + rep["retransmissions_received"]
    assert fb["transport_seqs_reported_received"] == received, (fb, r)                 # so the tail was lost
    assert not [w for w in s["warnings"] if "TWCC" in w], s["warnings"]

    # Bytes: the viewer's own interface against the RTP bytes it received.
    (check,) = s["cross_checks"].values()
    assert check["ok"], check
    iface = s["clients"]["client0"]
    assert iface["interface"].endswith("c0")                   # client0's own end, not the router's
    assert b["leaf_rx_bytes"]["client0"] == iface["rx_bytes"]
    # the call's audio (on by default) crosses the same interface: its datagrams count with the rest
    a = r["audio"]
    assert a["enabled"] and a["packets_received"] + a["packets_lost"] == a["packets_sent"] > 0, a
    datagrams = (r["packets_received"] + r["padding_packets_received"] + rep["retransmissions_received"]
                 + a["packets_received"])
    rtp_wire = (r["rtp_bytes_received"] + r["padding_bytes_received"] + rep["retransmission_bytes_received"]
                + a["bytes_received"] + UDP_OVERHEAD * datagrams)
    other_frames = iface["rx_packets"] - datagrams
    allowed = OTHER_FRAMES + NEIGH_FRAMES_PER_15S * math.ceil(b["window_s"] / 15)
    assert 0 <= other_frames <= allowed, (iface, datagrams, allowed)
    assert 0 <= iface["rx_bytes"] - rtp_wire <= other_frames * MAX_FRAME, (iface, rtp_wire)

    # Together no more than the link, over the CUBIC flow's interval (the viewer's whole seconds in it).
    lo, hi = bulk["start_s"], bulk["start_s"] + bulk["seconds"]
    inside = [x["received_bps"] for x in rx if x["second"] >= math.ceil(lo) and x["second"] + 1 <= hi]
    assert len(inside) >= 10, (lo, hi, rx)
    rtp_bps = sum(inside) / len(inside)
    assert rtp_bps + bulk["goodput_bps"] <= LINK_BPS * (1 + RATE_MARGIN), (rtp_bps, bulk)
    c = s["competition"]        # the same, as the summary records it for the report
    assert (c["link_bps"], c["rtp_received_bps"], c["bulk_goodput_bps"]) == \
        (LINK_BPS, round(rtp_bps), bulk["goodput_bps"]), c
    assert c["rtp_share"] == round(rtp_bps / (rtp_bps + bulk["goodput_bps"]), 4), c
    # and over the whole window, the payload both got ≤ what tbf can pass (rate × window + burst)
    assert b["payload_bytes"] <= LINK_BPS / 8 * b["window_s"] + b["burst_bytes"], b

    print(f"\n{controller}: wall {wall:.1f} s; RTP {rtp_bps / 1e6:.3f} Mbit/s and CUBIC "
          f"{bulk['goodput_bps'] / 1e6:.3f} Mbit/s while both ran (link {LINK_BPS / 1e6:g}); frames on time "
          f"{r['frames_on_time']}, late {r['frames_late']}, lost {r['frames_lost']}; latency p50 "
          f"{r['latency_ms']['p50']:.0f} ms; tbf drops {b['tbf']['drops']}")

    # Teardown to nothing.
    rid = s["run_id"]
    assert not [n for n in netns.list_netns() if rid in n]
    assert not (ledger.LEDGER_DIR / f"{rid}.json").exists()
    assert f"mv{rid}" not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def _scenario(**changes: object) -> dict[str, Any]:
    import yaml
    data = yaml.safe_load(SCENARIO.read_text())
    for dotted, value in changes.items():
        *head, last = dotted.split("__")
        node = data
        for k in head:
            node = node.setdefault(k, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


@pytest.mark.parametrize("changes,error", [
    # one viewer only: the rtp workload runs one broadcaster → viewer stream
    ({"topology__clients": 2}, "topology.clients: workload.kind rtp on shared-bottleneck takes exactly 1 client"),
    ({"workload": {"kind": "bulk", "duration": "5s"}},
     "workload.kind bulk runs on topology.kind dual-path or dumbbell, not shared-bottleneck"),
    ({"topology": {"kind": "dual-path"}, "cross_traffic": None,
      "paths": {"a": {"down": {"rate": "1mbit"}}, "b": {"down": {"rate": "1mbit"}}}},
     "workload.kind rtp runs on topology.kind dumbbell or shared-bottleneck"),
])
def test_competition_scenario_refuses_what_does_not_run(tmp_path: Path, changes: dict[str, Any], error: str) -> None:
    """The error names the file, the field and what is allowed."""
    import yaml
    from mpvlab.input.scenario import ScenarioError, load_scenario
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(_scenario(**changes)))
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    assert str(f) in str(e.value) and error in str(e.value), str(e.value)


def test_competition_scenarios_validate_with_one_viewer() -> None:
    from mpvlab.input.scenario import load_scenario
    for name, dur_s in (("rtp-competition", 300), ("rtp-competition-short", DURATION_S)):
        sc, _ = load_scenario(REPO / "scenarios" / f"{name}.yaml")
        (path,) = sc.paths.values()
        assert sc.topology.kind == "shared-bottleneck" and sc.n_clients == 1
        assert (path.down.rate, path.down.buffer.to_bytes(1514), path.down.delay.value + path.up.delay.value) == \
            (LINK_BPS, 1_000_000, 100 * 10**6)
        assert sc.cross_traffic is not None and sc.cross_traffic.bulk is not None
        assert sc.cross_traffic.bulk.cc == "cubic" and sc.cross_traffic.voip is None
        assert sc.workload.kind == "rtp" and sc.workload.duration == dur_s * 10**9
    # without topology.clients, rtp on the shared bottleneck means one viewer (players default to 2)
    from mpvlab.input.scenario import parse_scenario
    assert parse_scenario(_scenario(topology__clients=None)).n_clients == 1


def _ledger(sent: int, reported_received: int, reported_lost: int, tail: int) -> dict[str, int]:
    reported = reported_received + reported_lost
    return {"transport_seqs_sent": sent, "transport_seqs_reported": reported,
            "transport_seqs_reported_received": reported_received, "transport_seqs_reported_lost": reported_lost,
            "transport_seqs_without_feedback": sent - reported, "missing_feedback_at_tail": tail}


def _viewer(received: int, padding_received: int = 0) -> dict[str, int]:
    return {"packets_received": received, "padding_packets_received": padding_received}


def test_a_lost_tail_is_the_paths_loss_not_a_feedback_warning() -> None:
    from mpvlab.runner.workloads.rtp import feedback_warnings
    # The CI run: 8343 sent, the last 5 dropped at the bottleneck; nothing after them, so no feedback names them.
    assert feedback_warnings(_ledger(8343, 8250, 88, tail=5), _viewer(8200, 50)) == []
    assert feedback_warnings(_ledger(8343, 8255, 88, tail=0), _viewer(8205, 50)) == []


def test_a_gap_in_feedback_or_a_disagreement_with_the_viewer_is_a_warning() -> None:
    from mpvlab.runner.workloads.rtp import feedback_warnings
    # 10 unreported in the middle (a feedback datagram lost on the way back) besides a tail of 5
    (gap,) = feedback_warnings(_ledger(8343, 8240, 88, tail=5), _viewer(8240))
    assert gap.startswith("rtp: 10 of 8343 packets before the stream's last never appeared in TWCC feedback"), gap
    # the viewer received 2 of the tail the feedback never reported
    (mismatch,) = feedback_warnings(_ledger(8343, 8250, 88, tail=5), _viewer(8252))
    assert mismatch.startswith("rtp: the viewer received 8252 packets, TWCC feedback reported 8250 received"), mismatch


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.tools("iperf3")
def test_competition_run_interrupted_stops_everything(tmp_path: Path) -> None:
    """Ctrl-C while the stream and the CUBIC flow run: the run's own teardown stops the RTP sender,
    its encoder, the receiver, iperf3 and the delay lines (the ledger's fallback finds nothing left)
    and removes every namespace and interface."""
    import signal
    from mpvlab.core import proc
    p = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(SCENARIO), "--results", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    results = tmp_path / "rtp-competition-short"
    deadline = time.monotonic() + 60
    run: Path | None = None
    while time.monotonic() < deadline and run is None:
        # the sender's ready file is written once its encoder runs; the bulk flow starts at 6 s
        hits = list(results.glob("*/logs/rtp/sender/ready.json")) if results.exists() else []
        run = hits[0].parents[3] if hits else None
        time.sleep(0.2)
    if run is None:
        p.kill()
        raise AssertionError("the stream never started: " + (p.communicate()[0] or ""))
    time.sleep(BULK_START_S + 1.5)
    led = json.loads((ledger.LEDGER_DIR / f"{run.name}.json").read_text())
    labels = {x["label"] for x in led["procs"]}
    assert {"rtp sender", "rtp receiver", "rtp encoder", "iperf3 client bulk", "delayline shared-down",
            "delayline shared-up"} <= labels, labels
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 130, out
    assert json.loads((run / "status.json").read_text())["state"] == "failed"
    prov = json.loads((run / "provenance.json").read_text())
    left = [x for x in prov["teardown_leftovers_removed_by_ledger"] if not x.startswith("web root")]
    assert left == [], left
    assert not [x for x in led["procs"] if proc.ProcRef(int(x["pid"]), int(x["start"]), x["label"]).alive()]
    assert not [n for n in netns.list_netns() if run.name in n]
    assert not (ledger.LEDGER_DIR / f"{run.name}.json").exists()
    assert f"mv{run.name}" not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
