"""The parts of summary.json that were free-form dicts until issue 46's last item, each built as its model
where the runner makes it: a steered scheduler's record (`steering`), the packet capture (`capture`), the
wire-order switch count (`wire_switches`), kernel BBR's modes (`bbr_diag`), the shared bottleneck
(`bottleneck`) and a UDP viewer's interface counters (`clients`), the whole-run fidelity checks
(`fidelity_checks`) and each kind's plain fields (`run fields`). Each producer's real output is accepted
and handed back unchanged (the same object); a wrong key or a wrong type fails at the producer's line,
naming the part, the model and the field."""

from __future__ import annotations

import copy
import struct
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from mpvlab.cc import bbr_diag
from mpvlab.collectors import qdiscstat
from mpvlab.collectors.pcap import Capture, TapResult
from mpvlab.core.errors import MpvlabError
from mpvlab.core.paths import checkout_root
from mpvlab.input.scenario import load_scenario
from mpvlab.results import summary as model
from mpvlab.runner import capture, crosschecks, runchecks, shared, views
from mpvlab.runner.workloads.base import Client, Ends, Outcome
from test_summary_model import _bulk_summary

REPO = checkout_root()


def _fails_at(make: Callable[[], Any], where: str, message: str) -> str:
    """`make()` raises SummaryPartError starting with `message`, from a frame of `where` (the producer's
    own line, not the end of the run)."""
    with pytest.raises(model.SummaryPartError) as e:
        make()
    msg = str(e.value)
    assert isinstance(e.value, MpvlabError) and msg.startswith(message), msg
    frames = [f for f in traceback.extract_tb(e.value.__traceback__) if not f.filename.endswith("summary_parts/base.py")]
    assert frames and Path(frames[-1].filename).as_posix().endswith(where), [f.filename for f in frames]
    return msg


# --- steering: mpvlab/runner/views.py over the controller's steer_summary.json (schedulers/steer.c) ---

def _steer_summary() -> dict[str, Any]:
    """steer_summary.json as schedulers/steer.c writes it (write_summary), the keys the view reads."""
    stats = {"n": 3, "min": 0.21, "p50": 0.4, "p95": 1.9, "max": 1.9}
    return {
        "schema": "mpvlab.steer/1", "policy": "minrtt",
        "set_flags": {"calls": 4, "errors": 0, "at_close": 0, "mean_us": 35.2, "max_us": 61.0},
        "lost_events": {"ringbuf": 0, "map_full": 0, "userspace": 0},
        "connections": [{"token": "0a0b0c0d", "priority_changes": 3}, {"token": "01020304", "priority_changes": 1}],
        "conformance": {"bytes_conformant": 9000, "bytes_nonconformant": 0, "bytes_unmanaged": 100, "by_bytes": 1.0,
                        "by_decisions": None, "wire_bytes_allowed": 9100, "wire_bytes_excluded": 0,
                        "wire_bytes_unmanaged": 0, "on_wire": 1.0},
        "steering_latency_ms": {"decision_to_assignment": dict(stats), "assignment_to_wire": {"n": 0},
                                "decision_to_wire": dict(stats)},
    }


def test_steering_is_built_where_the_view_makes_it() -> None:
    view = views._steering_view(_steer_summary())
    assert view is not None and view["priority_changes"] == 4 and view["set_flags"]["calls"] == 4
    assert views._steering_view({}) is None                  # the kernel's own scheduler: null
    extra = _steer_summary()
    extra["set_flags"]["retries"] = 1
    _fails_at(lambda: views._steering_view(extra), "mpvlab/runner/views.py",
              "summary part steering (SteeringRecord): set_flags.retries: Extra inputs are not permitted")
    wrong = _steer_summary()
    wrong["steering_latency_ms"]["decision_to_wire"]["p95"] = "slow"
    msg = _fails_at(lambda: views._steering_view(wrong), "mpvlab/runner/views.py",
                    "summary part steering (SteeringRecord): steering_latency_ms.decision_to_wire.p95:")
    assert "valid number" in msg, msg


# --- capture and wire_switches: mpvlab/runner/capture.py over mpvlab/collectors/pcap.py, wire_switches.py ---

def _tap(point: str, file: str, **change: Any) -> TapResult:
    rec = dict(point=point, interface="mvabc0", file=file, packets=900, bytes=1_000_000, captured=900,
               received_by_filter=900, dropped_by_kernel=0, truncated=False, counter_bytes=1_000_000,
               counter_packets=900, ratio=1.0, ok=True)
    return TapResult(**{**rec, **change})


def _empty_pcap(f: Path) -> None:
    """A pcap file with its global header (microseconds, Ethernet) and no packet."""
    f.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))


def test_capture_and_wire_switches_are_built_where_the_view_makes_them(tmp_path: Path) -> None:
    topo: Any = SimpleNamespace(paths=[])
    sched = {"connections": [], "totals": {"path_switches": 0}}
    _empty_pcap(tmp_path / "server-mvabc0.pcap")
    cap = Capture([], tmp_path, 128, 200_000_000, [_tap("server", "server-mvabc0.pcap")])
    out = capture.view(topo, cap, sched)
    assert out["capture"]["files"][0]["point"] == "server" and out["wire_switches"]["totals"]["connections"] == 0
    assert out["wire_switches"]["truncated"] is False and out["wire_switches"]["totals"]["decision_path_switches"] == 0
    none = capture.view(topo, None, sched)
    assert none["wire_switches"] == {"not_collected": capture.WIRE_NOT_COLLECTED} and none["capture"] is None
    # a tap record of the wrong type: the capture part names the file's field
    bad = Capture([], tmp_path, 128, 200_000_000, [_tap("client", "client-mvabc0.pcap", interface=None)])
    _fails_at(lambda: capture.view(topo, bad, sched), "mpvlab/runner/capture.py",
              "summary part capture (CaptureRecord): files.0.interface: Input should be a valid string")
    # the decision count joined beside the wire count, of the wrong type
    half = {"connections": [], "totals": {"path_switches": 2.5}}
    _fails_at(lambda: capture.view(topo, cap, half), "mpvlab/runner/capture.py",
              "summary part wire_switches (WireSwitchesRecord): totals.decision_path_switches: Input should be a "
              "valid integer")


# --- bbr_diag: mpvlab/cc/bbr_diag.py summarize, built in mpvlab/runner/emulated.py ---

def _bbr_csv(f: Path) -> None:
    """bbr_diag.csv as the recorder writes it: header, rows, `# sample` lines, the `# end` line."""
    rows = []
    for i, (mode_gains, acked) in enumerate([((739, 739), 0), ((739, 739), 5000), ((88, 739), 9000),
                                             ((256, 512), 20000)]):
        rec = {"t_ns": 1_000_000_000 + i * 10_000_000, "src": "10.0.100.1", "sport": 443, "dst": "10.0.1.2",
               "dport": 40000, "state": 1, "cong": "bbr", "mode": bbr_diag.mode_from_gains(*mode_gains, 1_000_000),
               "pacing_gain": mode_gains[0], "cwnd_gain": mode_gains[1], "bw_bps": 1_000_000, "min_rtt_us": 20000,
               "bytes_acked": acked, "bytes_sent": acked, "cwnd": 10, "srtt_us": 21000}
        rows.append(",".join(str(rec.get(k, "")) for k in bbr_diag.COLUMNS))
        rows.append(f"# sample {rec['t_ns'] + 1000}")
    f.write_text(",".join(bbr_diag.COLUMNS) + "\n# start 999999000\n" + "\n".join(rows)
                 + "\n# end cpu_s 0.010 wall_s 0.040\n")


def test_bbr_diag_record_is_the_summarizers_output(tmp_path: Path) -> None:
    f = tmp_path / "bbr_diag.csv"
    _bbr_csv(f)
    s = bbr_diag.summarize(f, 1_000_000_000)
    assert s["samples"] == 4 and s["connections_with_data"] == 1, s
    assert model.build(model.BbrDiagRecord, "bbr_diag", s) is s
    # the summarizer's key names drift from the model's: refused, naming the record's field
    wrong = copy.deepcopy(s)
    wrong["connections"][0]["startup_episodes"][0]["start"] = wrong["connections"][0]["startup_episodes"][0].pop("start_s")
    with pytest.raises(model.SummaryPartError) as e:
        model.build(model.BbrDiagRecord, "bbr_diag", wrong)
    assert str(e.value).startswith("summary part bbr_diag (BbrDiagRecord): connections.0.startup_episodes.0.start_s: "
                                   "Field required; connections.0.startup_episodes.0.start: Extra inputs"), str(e.value)


# --- bottleneck and clients: mpvlab/runner/shared_summary.py ---

def _shared_ctx(tmp_path: Path) -> Any:
    sc, _ = load_scenario(REPO / "scenarios" / "sabre-own-short.yaml")
    q = tmp_path / "queues" / shared.PATH_LABEL
    q.mkdir(parents=True)
    rows = [{"t_s": t, "dev": "mvabcI0", "kind": "tbf", "handle": "1:", "parent": "root", "backlog_bytes": b,
             "backlog_pkts": b // 1514, "drops": d, "overlimits": 0, "requeues": 0, "sent_bytes": 0, "sent_pkts": 0}
            for t, b, d in ((0.0, 0, 0), (0.5, 30280, 2), (1.0, 15140, 5))]
    (q / qdiscstat.QDISC_FILE).write_text(",".join(qdiscstat.QDISC_COLUMNS) + "\n" + "".join(
        ",".join(str(r[k]) for k in qdiscstat.QDISC_COLUMNS) + "\n" for r in rows))
    return SimpleNamespace(scenario=sc, data=tmp_path, queue_rows=None)


def test_bottleneck_is_built_where_the_view_makes_it(tmp_path: Path) -> None:
    ctx = _shared_ctx(tmp_path)
    tbf0, tbf1 = {"bytes": 0, "packets": 0, "drops": 0}, {"bytes": 7_000_000, "packets": 4700, "drops": 5}
    b = shared.bottleneck_view(ctx, {"client0": 3_000_000, "client1": 3_500_000}, tbf0, tbf1, 10.0, 6_000_000, {})
    assert b["queue"] == {"mvabcI0": {"samples": 3, "backlog_bytes_max": 30280, "backlog_bytes_mean": 15140,
                                      "drops": 5}}
    assert b["tbf"]["bytes"] == 7_000_000 and b["utilisation"] == round(7e6 * 8 / (6e6 * 10.0), 4)
    # without the tbf's counters the record has neither tbf nor utilisation, and is still whole
    assert "tbf" not in shared.bottleneck_view(ctx, {"client0": 1}, None, None, 10.0, 0, {})
    _fails_at(lambda: shared.bottleneck_view(ctx, {"client0": 1.5}, None, None, 10.0, 0, {}),
              "mpvlab/runner/shared_summary.py", "summary part bottleneck (BottleneckRecord): leaf_rx_bytes.client0: Input "
              "should be a valid integer, got a number with a fractional part")


def test_udp_viewer_counters_are_built_where_they_are_made(tmp_path: Path) -> None:
    ctx: Any = SimpleNamespace(scenario=SimpleNamespace(workload=SimpleNamespace(kind="rtp")))
    ends = Ends(None, (Client("client0", None, "10.0.1.2", "mvabcc0"),), "10.0.100.1", "cubic", {})  # type: ignore[arg-type]
    outcome = Outcome({"duration_s": 9.5}, 9.5, "rtp_connections", 0)
    bottleneck = {"rate_bps": 6_000_000, "window_s": 10.0}
    before = {"client0": {"rx_bytes": 100, "rx_packets": 2}}
    body = shared.summarise_udp(ctx, ends, outcome, bottleneck, {}, before,
                                {"client0": {"rx_bytes": 1_000_100, "rx_packets": 802}}, [])
    assert body["clients"] == {"client0": {"interface": "mvabcc0", "rx_bytes": 1_000_000, "rx_packets": 800}}
    _fails_at(lambda: shared.summarise_udp(ctx, ends, outcome, bottleneck, {}, before,
                                           {"client0": {"rx_bytes": 1_000_100, "rx_packets": 802.5}}, []),
              "mpvlab/runner/shared_summary.py", "summary part clients.client0 (ClientCounters): rx_packets: Input should be a "
              "valid integer, got a number with a fractional part")


# --- fidelity_checks: mpvlab/runner/runchecks.py's records, put into the summary by crosschecks.apply ---

def _apply(records: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {"warnings": [], "fidelity_checks": None}
    crosschecks.apply(summary, {}, crosschecks.Result(records={"fidelity_checks": records}), lambda _m: None)
    return summary


def test_fidelity_checks_are_built_where_the_run_stores_them() -> None:
    sc = SimpleNamespace(media_s=10.0)
    playback = runchecks.check_playback(sc, {"players": {"client0": {"playback_s": 11.0, "underflow_total_s": 0.5}}})  # type: ignore[arg-type]
    assert playback is not None and playback["ok"]
    silence = {"ok": False, "silence_threshold_s": 1.0, "silences": 1, "longest_silence_s": 3.2,
               "intervals_s": [[4.0, 7.2]], "probe_packets": 600}
    s = _apply({"playback_within_media_and_stalls": playback, "no_simultaneous_silence": silence})
    assert s["fidelity_checks"]["playback_within_media_and_stalls"] is playback
    _fails_at(lambda: _apply({"made_up_check": {"ok": True}}), "mpvlab/runner/crosschecks.py",
              "summary part fidelity_checks (FidelityChecks): made_up_check: Extra inputs are not permitted")
    _fails_at(lambda: _apply({"no_simultaneous_silence": {**silence, "silences": "one"}}),
              "mpvlab/runner/crosschecks.py", "summary part fidelity_checks (FidelityChecks): "
              "no_simultaneous_silence.silences: Input should be a valid integer")


# --- each kind's plain fields, built where the life cycle assembles the summary ---

@pytest.mark.parametrize("topology, field, value, kind_model, words", [
    ("dual-path", "duration_s", "long", "EmulatedFields", "valid number"),
    ("dual-path", "path_switches_wire", 1.5, "EmulatedFields", "valid integer"),
    ("dual-path", "scheduler", None, "EmulatedFields", "valid string"),
    ("shared-bottleneck", "transport", 5, "SharedFields", "valid string"),
    ("physical", "bytes_total", "many", "PhysicalFields", "valid integer"),
])
def test_a_kinds_plain_field_of_the_wrong_type_fails_as_run_fields(topology: str, field: str, value: Any,
                                                                   kind_model: str, words: str) -> None:
    fields = getattr(model, kind_model)
    assert field in fields.model_fields
    s = {k: v for k, v in _bulk_summary().items() if k in fields.model_fields}
    s.update(topology=topology, workload="video", transport="t", player_mode="m", video_length_s=10.0,
             not_collected={}, path_switches=None if topology == "physical" else 3)
    assert model.run_fields(topology, s) is s
    s[field] = value
    with pytest.raises(model.SummaryPartError) as e:
        model.run_fields(topology, s)
    assert str(e.value).startswith(f"summary part run fields ({kind_model}): {field}: "), str(e.value)
    assert words in str(e.value), str(e.value)

