"""The one entry point of a run's checks on its own figures (issue 43).

`run(summary, state)` runs exactly the registry's checks for the run's workload
(mpvlab/results/checks.py `CHECKS`, rows whose `applies` names the workload), in the registry's order,
and returns their records by the summary object that holds each (`cross_checks`, `rtp.checks`,
`fidelity_checks`) with the warnings of the failed ones; `apply` puts them into the summary and the
provenance's fidelity record. The life cycle (lifecycle.py) calls both once per run, after the
network is torn down and the whole-run fidelity verdict is made: by then every figure a check
compares is in the summary or in the run's files, and the in-memory evidence that is in neither
(the scheduler trace's totals, the capture's per-tap counts, the workload's own socket counts and
parsed logs) is handed over in `CheckState` by the network (`Network.check_state`) and the workload
(`Outcome.evidence`).

No other module calls a check function: tests/test_crosschecks.py reads the package's source and
fails when a registry row's function is named anywhere but here and in its own module. A row the
workload's run meets no evidence for (no capture, no CC state model, a topology without the MPTCP
trace) makes no record; a record name outside the row's pattern is refused (ValueError), so a run
cannot carry a record the registry does not list for its workload.

A check whose failure means the run measured something else (`on_failure` "run fails":
subflow_addresses) raises RunFailed here, as soon as its record is made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from mpvlab.core.errors import RunFailed
from mpvlab.results import checks as registry
from mpvlab.results.summary_parts.base import build, build_each
from mpvlab.results.summary_parts.network import CrossCheck
from mpvlab.results.summary_parts.runchecks import FidelityChecks
from mpvlab.results.summary_parts.workload import RtpCheck
from mpvlab.runner.context import RunContext
from mpvlab.runner.workloads.base import Outcome
from mpvlab.workloads.bulk import BULK
from mpvlab.workloads.rtp import RTP

if TYPE_CHECKING:
    from mpvlab.collectors.pcap import Capture
    from mpvlab.runner.fidelity import PathSchedules
    from mpvlab.runner.capture import SubflowCounters
    from mpvlab.topologies.dual_path import DualPath

Records = dict[str, Any]     # record name → its record
# An rtp check's warning names what differs in words its record does not hold (rtp_checks.Check.warning):
# its adapter hands it over beside the record under this prefix.
_RTP_WARNING = "warning:"


@dataclass
class CheckState:
    """What the checks read besides the summary and the run's files (ctx.data, ctx.logs). A field left
    None means the run has no such evidence, and the checks that need it make no record."""

    ctx: RunContext
    outcome: Outcome
    topo: DualPath | None = None                 # MPTCP over the dual-path builder: trace and subflow checks
    sched: dict[str, Any] | None = None          # the scheduler trace's summary (collectors.load_summary)
    cap: Capture | None = None                   # observe.pcap's captures
    counters: SubflowCounters | None = None      # ss and interface samples for the per-path pcap check
    # a UDP workload: the viewer's interface counters (name → rx_bytes, rx_packets) and their window (s)
    udp: tuple[dict[str, dict[str, Any]], float] | None = None
    # the whole-run fidelity checks: the paths' schedules (None: the kind makes no whole-run verdict)
    schedules: dict[str, PathSchedules] | None = None


@dataclass
class Result:
    """The records of one run's checks by the summary object holding them, and the named warnings."""

    records: dict[str, Records] = field(default_factory=dict)   # stored → name → record
    warnings: list[str] = field(default_factory=list)           # failed cross-checks (summary `warnings`)
    fidelity_warnings: list[str] = field(default_factory=list)  # failed fidelity checks (fidelity_ok false)


def workload_of(scenario: Any) -> str:
    """The registry's workload key of a scenario (checks.WORKLOADS)."""
    kind = scenario.workload.kind
    if kind == BULK.name:
        return BULK.name
    if kind == RTP.name:
        return f"{RTP.name}-{scenario.workload.controller}"
    kind = scenario.player_kind         # its player kind's checks (mpvlab/player/kinds.py), by ABR where they differ
    return str(kind.checks_by_abr.get(scenario.player.abr, kind.checks))


# --- one adapter per registry row: gathers the row's evidence and calls its function -----------------

def _interface_vs_collector(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.views import interface_vs_collector, retransmitted_segments_by_path
    if st.topo is None or st.sched is None:
        return {}
    retrans = retransmitted_segments_by_path(st.topo, st.ctx.data / "subflows.csv")
    out = {}
    for p in st.topo.paths:
        v = s["paths"][p.name]
        out[f"bytes_{p.name}_interface_vs_collector"] = interface_vs_collector(
            v["rx_bytes"], v["rx_packets"], v["payload_bytes_handed"], retrans.get(p.name, 0))
    return out


def _collector_connections(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.views import connections_check
    if st.topo is None or st.sched is None:
        return {}
    o = st.outcome
    return {"collector_saw_every_connection": connections_check(o.connections_key, o.connections,
                                                                st.sched["totals"]["connections"])}


def _collector_lost(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.views import lost_events_check
    if st.topo is None or st.sched is None:
        return {}
    return {"collector_lost_events": lost_events_check(st.sched["lost_events"]["total"])}


def _subflow_addresses(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.views import subflow_address_check
    if st.topo is None or st.sched is None:
        return {}
    return {"subflow_addresses": subflow_address_check(st.topo, s["subflows"])}


def _udp_wire(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.views import udp_wire_check
    if st.udp is None:
        return {}
    counters, window_s = st.udp
    return udp_wire_check(counters, st.outcome.wire or {}, window_s)


def _pcap_bytes(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.capture import pcap_bytes_check
    if st.cap is None:
        return {}
    return {f"pcap_bytes_{r.point}_{r.interface}": pcap_bytes_check(r) for r in st.cap.results}


def _pcap_vs_subflows(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.capture import pcap_vs_subflow_check
    if st.cap is None or st.topo is None or st.counters is None:
        return {}
    if not any(r.point == "server" for r in st.cap.results):
        return {}
    subflows = (s.get("wire_switches") or {}).get("subflows")
    if not subflows:                # no MPTCP subflow the capture saw open
        return {}
    c = st.counters
    return {"pcap_path_bytes_vs_subflow_counters": pcap_vs_subflow_check(
        subflows, c.last_ss(), c.links_rx(), {p.client_addr: p.name for p in st.topo.paths}, c.margin_s)}


def _mode_shares(s: dict[str, Any], st: CheckState) -> Records:
    if s.get("cc_state") is None:
        return {}
    from mpvlab.results.flows import mode_share_check      # pandas: only when there is a CC state model
    return {"mode_shares_over_workload_flows": mode_share_check(s["cc_state"])}


def _player_bytes(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.workloads.video import body_bytes_by_client, player_bytes_check
    ev = st.outcome.evidence.get("player_bytes")
    if ev is None:
        return {}
    return {"player_bytes_vs_access_log": player_bytes_check(
        ev["received"], ev["addrs"], body_bytes_by_client(st.ctx.logs / "apache" / "access.log"), ev["own"])}


def _stalls(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.steps import read_json
    from mpvlab.runner.workloads.video import stalls_vs_element_check
    raw_files = st.outcome.evidence.get("dashjs_raw")
    if raw_files is None:
        return {}
    frame_s = 1.0 / st.ctx.scenario.video.fps
    per = {role: stalls_vs_element_check(st.outcome.per_client[role], read_json(f) or {}, frame_s)
           for role, f in raw_files.items()}
    return {"stalls_vs_element_buffered": {"players": per, "ok": all(v["ok"] for v in per.values())}}


def _rtp(fn_name: str) -> Callable[[dict[str, Any], CheckState], Records]:
    """The adapter of one rtp check (rtp_checks.py): its Evidence from the workload, the steady target
    from the summary's rtp.target_bps."""
    def adapter(s: dict[str, Any], st: CheckState) -> Records:
        from mpvlab.runner.workloads import rtp_checks
        ev = st.outcome.evidence.get("rtp_logs")
        if ev is None:
            return {}
        fn = getattr(rtp_checks, fn_name)
        c = fn(ev, s["rtp"]["target_bps"]) if fn_name == "check_steady_target_vs_frames" else fn(ev)
        return {c.name: c.record(), _RTP_WARNING + c.name: c.warning()}
    return adapter


def _fidelity_inputs(st: CheckState) -> tuple[int | None, float | None]:
    """The configured queue's byte bound and largest one-way delay (s) of a one-path run with a buffer.
    No byte bound (buffer_counting merged_packets): None, so no check uses a wrong one (the fidelity
    record's run.<link>.queue says why)."""
    sc = st.ctx.scenario
    if len(sc.paths) == 1 and st.schedules:
        (pname, spec), = sc.paths.items()
        if pname in st.schedules and spec.down.buffer is not None:
            return spec.down.queue_byte_bound(), st.schedules[pname].down.max_delay_ns / 1e9
    return None, None


def _probe_delay(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.runchecks import check_probe_delay
    if st.schedules is None:
        return {}
    p = check_probe_delay(st.ctx.scenario, s, *_fidelity_inputs(st))
    return {} if p is None else {"probe_delay_within_queue_bound": p}


def _playback(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.runchecks import check_playback
    if st.schedules is None:
        return {}
    pl = check_playback(st.ctx.scenario, s)
    return {} if pl is None else {"playback_within_media_and_stalls": pl}


def _silence(s: dict[str, Any], st: CheckState) -> Records:
    from mpvlab.runner.runchecks import check_silence
    if st.schedules is None:
        return {}
    sc = st.ctx.scenario
    si = check_silence(sc, s, st.ctx.data, getattr(st.ctx, "t0_ns", 0), *_fidelity_inputs(st), sc.observe.sample_hz)
    return {} if si is None else {"no_simultaneous_silence": si}


ADAPTERS: dict[str, Callable[[dict[str, Any], CheckState], Records]] = {
    "bytes_{path}_interface_vs_collector": _interface_vs_collector,
    "collector_saw_every_connection": _collector_connections,
    "collector_lost_events": _collector_lost,
    "subflow_addresses": _subflow_addresses,
    "bytes_{path}_interface_vs_udp_socket": _udp_wire,
    "pcap_bytes_{point}_{interface}": _pcap_bytes,
    "pcap_path_bytes_vs_subflow_counters": _pcap_vs_subflows,
    "mode_shares_over_workload_flows": _mode_shares,
    "player_bytes_vs_access_log": _player_bytes,
    "stalls_vs_element_buffered": _stalls,
    "rtp_encoder_vs_setting": _rtp("check_encoder_vs_setting"),
    "rtp_steady_target_vs_frames": _rtp("check_steady_target_vs_frames"),
    "rtp_encoder_per_second_vs_frames": _rtp("check_encoder_per_second_vs_frames"),
    "rtp_received_per_second_vs_totals": _rtp("check_received_per_second_vs_totals"),
    "rtp_latency_vs_frames": _rtp("check_latency_vs_frames"),
    "rtp_packets_vs_frames": _rtp("check_packets_vs_frames"),
    "rtp_viewer_counts_vs_frames": _rtp("check_viewer_counts_vs_frames"),
    "rtp_encoder_targets_vs_log": _rtp("check_encoder_targets_vs_log"),
    "rtp_encoder_wire_vs_packets": _rtp("check_encoder_wire_vs_packets"),
    "rtp_repair_vs_logs": _rtp("check_repair_vs_logs"),
    "rtp_audio_vs_logs": _rtp("check_audio_vs_logs"),
    "probe_delay_within_queue_bound": _probe_delay,
    "playback_within_media_and_stalls": _playback,
    "no_simultaneous_silence": _silence,
}


# What a failed "run fails" check means, as the RunFailed says it.
FATAL = {"subflow_addresses": "MPTCP subflows on unexpected (client, server) address pairs"}


def _pattern(row: registry.CheckDef) -> re.Pattern[str]:
    """The record names a row may make: its name with `{…}` as one name part; rtp.checks without rtp_."""
    name = row.name.removeprefix("rtp_") if row.stored == "rtp.checks" else row.name
    return re.compile("".join(r"[A-Za-z0-9._-]+" if part.startswith("{") else re.escape(part)
                              for part in re.split(r"(\{[a-z]+\})", name)) + r"\Z")


def rows_for(workload: str) -> list[registry.CheckDef]:
    """The registry's rows a run of `workload` runs, in the registry's order (the order of `run`)."""
    if workload not in registry.WORKLOADS:
        raise ValueError(f"workload {workload!r} is not in the check registry's WORKLOADS: {sorted(registry.WORKLOADS)}")
    return [c for c in registry.CHECKS if workload in c.applies]


def run(summary: dict[str, Any], state: CheckState, workload: str | None = None) -> Result:
    """Every check of the registry for the run's workload (by default `workload_of` its scenario), in
    the registry's order; the records by object and the named warnings of the failed ones. Raises
    RunFailed at the first failed check whose failure ends the run."""
    from mpvlab.runner import runchecks
    wl = workload or workload_of(state.ctx.scenario)
    out = Result()
    for row in rows_for(wl):
        made = ADAPTERS[row.name](summary, state)
        texts = {k.removeprefix(_RTP_WARNING): made.pop(k) for k in list(made) if k.startswith(_RTP_WARNING)}
        pat = _pattern(row)
        for name, rec in made.items():
            if not pat.match(name):
                raise ValueError(f"check {row.name} made a record named {name!r}, outside its registry row")
            if "ok" not in rec:
                raise ValueError(f"check {name}: the record has no `ok`")
            out.records.setdefault(row.stored, {})[name] = rec
            if rec["ok"]:
                continue
            if row.on_failure == "run fails":
                raise RunFailed(f"{FATAL.get(row.name, row.name)}: {rec}")
            elif row.stored == "cross_checks":
                out.warnings.append(registry.warning(name, rec))
            elif row.stored == "rtp.checks":
                out.warnings.append(texts[name])
    fid = out.records.get("fidelity_checks")
    if fid:
        out.fidelity_warnings = runchecks.warnings_of(fid)
    return out


def apply(summary: dict[str, Any], fid: dict[str, Any], result: Result, log: Callable[[str], None]) -> None:
    """The records into the summary (and the fidelity ones into `fid`, the provenance's record), the
    warnings after the run's own; a failed fidelity check makes fidelity_ok false."""
    cross = result.records.get("cross_checks", {})
    if cross or "cross_checks" in summary:
        # typed where made (issue 46 item 3): a record of the wrong shape fails here, naming it
        summary["cross_checks"] = build_each(CrossCheck, "cross_checks", {**(summary.get("cross_checks") or {}), **cross})
    if "rtp.checks" in result.records:
        summary["rtp"]["checks"] = build_each(RtpCheck, "rtp.checks", result.records["rtp.checks"])
    summary["warnings"] = [*summary.get("warnings", []), *result.warnings]
    fchecks = result.records.get("fidelity_checks", {})
    if fchecks:
        build(FidelityChecks, "fidelity_checks", fchecks)
        fid["checks"] = fchecks
        summary["fidelity_checks"] = fchecks
    if result.fidelity_warnings:
        fid["warnings"] = [*fid.get("warnings", []), *result.fidelity_warnings]
        fid["ok"] = False
        summary["fidelity_ok"] = False
        summary["fidelity_warnings"] = list(fid["warnings"])
        for w in result.fidelity_warnings:
            log(f"fidelity warning: {w}")
