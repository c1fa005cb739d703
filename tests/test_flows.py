"""Flow identity and roles (mpvlab/results/flows.py) and the CC model's means over the workload's flows:
each number recomputed by hand from rows written here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mpvlab.cc import registry
from mpvlab.results import flows
from mpvlab.runner import sampling, server
from mpvlab.runner import cross
from mpvlab.runner.workloads import bulk

RULES = flows.RoleRules(80, frozenset({40200}))


@pytest.mark.parametrize("tup, role", [
    (("127.0.0.1", 80, "127.0.0.1", 40100), "check"),         # Apache's readiness check over loopback
    (("::1", 80, "::1", 40100), "check"),
    (("10.0.100.1", 80, "10.0.1.2", 40200), "check"),         # the preflight request's client port
    (("10.0.100.1", 5201, "10.0.1.2", 40000), "probe"),       # fidelity probe (either side's port)
    (("10.0.1.2", 40000, "10.0.100.1", 5201), "probe"),
    (("10.0.100.1", 5301, "10.0.3.2", 40000), "cross"),
    (("10.0.100.1", 80, "10.0.1.2", 41000), "workload"),
    (("10.0.100.1", 22, "10.0.1.2", 41000), "other"),
])
def test_roles(tup: tuple[str, int, str, int], role: str) -> None:
    assert RULES.role(*tup) == role


def test_constants_agree_with_the_run() -> None:
    # the rules name ports and the preflight marker that other modules own
    assert flows.PREFLIGHT_QUERY == server.PREFLIGHT_QUERY
    assert flows.CROSS_PORT == cross.BULK_PORT == 5301


def test_preflight_ports_from_the_access_log(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text('127.0.0.1 46962 [24/Nov/2026:18:35:50 +0000] "HEAD /video.mp4 HTTP/1.1" 200 0 2115 0 "-" HTTP/1.1 - -\n'
                   '10.0.1.2 56230 [24/Nov/2026:18:35:50 +0000] "HEAD /video.mp4?mpvlab-preflight=1 HTTP/1.1" 200 0 482 '
                   '0 "-" HTTP/1.1 - -\n'
                   '10.0.1.2 56240 [24/Nov/2026:18:35:52 +0000] "GET /video.mp4 HTTP/1.1" 200 1092411 394131 0 "-" '
                   'HTTP/1.1 - -\n')
    assert flows.preflight_ports(log) == {56230}
    assert flows.preflight_ports(tmp_path / "missing.log") == frozenset()


def test_flow_keys_and_endpoints() -> None:
    assert flows.flow_key("10.0.100.1", 80, "10.0.1.2", 5) == "10.0.100.1:80-10.0.1.2:5"
    assert flows.flow_key("2001:db8::1", 80, "::1", 5) == "[2001:db8::1]:80-[::1]:5"
    assert flows.split_endpoint("[::ffff:10.0.1.2]:80") == ("10.0.1.2", 80)
    assert flows.split_endpoint("[2001:db8::1]:443") == ("2001:db8::1", 443)


def test_mode_labels() -> None:
    assert flows.mode_label("PROBE_BW", "1.2500", "pacing_gain") == "PROBE_BW:UP"
    assert flows.mode_label("PROBE_BW", "0.75", "pacing_gain") == "PROBE_BW:DOWN"
    assert flows.mode_label("PROBE_BW", "1", "bbr_pacing_gain") == "PROBE_BW:CRUISE"
    assert flows.mode_label("STARTUP", "2.885", "pacing_gain") == "STARTUP"
    assert flows.mode_label("PROBE_BW", "REFILL", "phase") == "PROBE_BW:REFILL"
    assert flows.mode_label("PROBE_RTT", "DOWN", "phase") == "PROBE_RTT"
    assert flows.mode_label("", "x", "phase") is None


def test_ss_shows_the_mptcp_connection_and_kernel_bbr_state() -> None:
    # as this kernel's ss prints a server-side subflow (token:REMOTE(id)/LOCAL(id); ss -M shows LOCAL)
    text = ("ESTAB 0 0 10.0.100.1:80 10.0.1.2:37834\n\t bbr wscale:7,7 rtt:0.019/0.008 cwnd:16 "
            "bbr:(bw:24000000bps,mrtt:20.5,pacing_gain:1.25,cwnd_gain:2) tcp-ulp-mptcp flags:Mec "
            "token:0000(id:0)/4a7cbfd2(id:0) seq:48eb7c6e9ffe2802 sfseq:0\n")
    (r,) = sampling.parse_ss(text)
    assert r["mptcp_token"] == "4a7cbfd2"
    assert (r["bbr_bw"], r["bbr_min_rtt_ms"], r["bbr_pacing_gain"], r["bbr_cwnd_gain"]) == (24e6, 20.5, 1.25, 2.0)
    assert r["bbr_mode"] == "PROBE_BW"
    assert [sampling.bbr_v1_mode(g, c) for g, c in ((2.88672, 2.88672), (0.34641, 2.88672), (1.0, 1.0), (0.75, 2.0))] \
        == ["STARTUP", "DRAIN", "PROBE_RTT", "PROBE_BW"]


def test_ss_snd_wnd_is_the_window_the_client_advertised() -> None:
    # as this kernel's ss (iproute2 6.1, kernel 6.18) prints tcpi_snd_wnd; absent when it is 0
    text = ("ESTAB 0 0 10.0.100.1:80 10.0.1.2:37834\n\t cubic wscale:9,9 rtt:101.2/0.3 cwnd:40 "
            "bytes_acked:84480 rcv_space:14480 minrtt:100.1 snd_wnd:627712\n"
            "ESTAB 0 0 10.0.100.1:80 10.0.1.3:37836\n\t cubic wscale:9,9 rtt:101.2/0.3 cwnd:40 rwnd_limited:220ms(100.0%)\n")
    a, b = sampling.parse_ss(text)
    assert (a["snd_wnd"], b["snd_wnd"]) == (627712, None)


def test_registry_names_the_state_of_every_bbr_family_cc() -> None:
    assert {e.name for e in registry.ENTRIES if e.state is not None} == {"bbr", "bbr-s", "bbr3", "bbr3-s"}
    assert all(e.bbr_family for e in registry.ENTRIES if e.state is not None)
    assert registry.REGISTRY["bbr-s"].state.file == "bbrs_state.csv"
    assert registry.REGISTRY["bbr3"].state.file == "bbr3_state.csv"
    assert registry.REGISTRY["bbr3-s"].state.file == "bbr3s_state.csv"


def _row(t: float, flow: str, role: str, bw: float, state: str, upd: str) -> flows.StateRow:
    return flows.StateRow(t, flow, role, bw, 20.0, state, upd)


def test_means_over_the_workload_only() -> None:
    # The workload flow: 10 until t=1 (rows 0.0, 0.5), then 40 at t=1.0 and t=1.1 (a burst of rows),
    # rows 0.5 s apart otherwise; a loopback check at 9.27e9 and a probe row in the same file.
    rows = [_row(0.0, "w", "workload", 10, "STARTUP", "a"), _row(0.5, "w", "workload", 10, "STARTUP", "a"),
            _row(1.0, "w", "workload", 40, "PROBE_BW:UP", "b"), _row(1.1, "w", "workload", 40, "PROBE_BW:UP", "c"),
            _row(1.6, "w", "workload", 20, "PROBE_BW:CRUISE", "d"),
            _row(0.2, "c", "check", 9.27e9, "STARTUP", "x"), _row(-1.0, "p", "probe", 50, "STARTUP", "y")]
    v = flows.state_view(flows.frame_of(rows), "data/x.csv", (0.0, 2.0))
    assert v.flows_by_role == {"workload": 1, "check": 1, "probe": 1}
    assert v.workload_rows == 5
    assert v.bw_est_bps_mean_per_sample == pytest.approx((10 + 10 + 40 + 40 + 20) / 5)
    # weights: to the next row (0.5, 0.5, 0.1, 0.5), the last row the median step (0.5)
    w = [0.5, 0.5, 0.1, 0.5, 0.5]
    assert v.bw_est_bps_mean_time_weighted == pytest.approx(
        math.fsum(b * x for b, x in zip([10, 10, 40, 40, 20], w)) / sum(w))
    # per update: the CC wrote records a, b, c, d (a sampled twice)
    assert v.bw_est_bps_mean_per_update == pytest.approx((10 + 40 + 40 + 20) / 4)
    assert v.mode_share_time_weighted == pytest.approx({"STARTUP": 1.0 / 2.1, "PROBE_BW:UP": 0.6 / 2.1,
                                                        "PROBE_BW:CRUISE": 0.5 / 2.1})
    assert sum(v.mode_share_per_sample.values()) == pytest.approx(1.0)
    assert v.mode_share_per_sample == pytest.approx({"STARTUP": 0.4, "PROBE_BW:UP": 0.4, "PROBE_BW:CRUISE": 0.2})
    # the check and the probe have their own per-flow record, outside every workload figure
    assert {f.flow: f.role for f in v.flows} == {"w": "workload", "c": "check"}   # the probe: outside the window


def test_rules_rebuilt_for_a_run_without_flows_json(tmp_path: Path) -> None:
    (tmp_path / "logs" / "apache").mkdir(parents=True)
    (tmp_path / "logs" / "apache" / "access.log").write_text(
        '10.0.1.2 5555 [x] "HEAD /v.mp4?mpvlab-preflight=1 HTTP/1.1" 200 0 1 0 "-" HTTP/1.1 - -\n')
    r = flows.rules_for_run(tmp_path, {"http": {"port": 8443, "tls": True}})
    assert r.workload_port == 8443 and r.check_ports == {5555}
    assert flows.rules_for_run(tmp_path, {"workload": "bulk"}).workload_port == bulk.BULK_PORT
    # recorded rules win
    flows.write_flows(tmp_path / "data", flows.RoleRules(9000, frozenset({1})), {}, {})
    assert flows.rules_for_run(tmp_path, {"http": {"port": 8443}}) == flows.RoleRules(9000, frozenset({1}))
