"""Cross-checks: the one place a derived figure of `summary.json` meets independent raw evidence.

A cross-check compares one figure the run derived (a byte count, a mode share, a connection count)
with evidence a different collector recorded (the client interface's counters, the scheduler's BPF
trace, a packet capture, Apache's access log, the workload's own socket counts), within a stated
tolerance. Every check has the same shape:

- a function returning the check's record: its figures, its `tolerance` in words where the
  numbers alone do not say it, and `ok`. The run calls it only through the one entry point,
  mpvlab/runner/crosschecks.py `run` (an adapter per row gathers the row's evidence), once per run
  after the whole-run fidelity verdict, over the registry's rows for the run's workload in this
  tuple's order; `apply` stores each record under its name in the summary's `cross_checks` and,
  when `ok` is false, adds the named warning `cross-check <name> failed: …` to the summary's
  `warnings` (`warning(name, result)` spells it; nothing else does);
- a row in `CHECKS` below naming the figure, the evidence, the tolerance, the workloads it runs
  for, the function and the test that plants the disagreement and sees the warning. The docs'
  table (docs/reference/cross-checks.md) is generated from `CHECKS` (`python -m mpvlab.schemas`),
  so the table and the code cannot drift; tests/test_checks.py checks every named function and test
  exists.

The same page lists every numeric figure a summary.json can hold (mpvlab/results/figures.py walks
the summary model) with the checks here that verify it, or `no check:` and why.

A check whose failure means the run measured something else (a subflow on a wrong address pair)
raises RunFailed instead of warning; its row says so.

`CHECKS` is the one registry of every check a run makes on its own figures: the cross-checks above
(`cross_checks`), the rtp workload's (mpvlab/runner/workloads/rtp_checks.py, stored under
`rtp.checks`, warning `cross-check rtp_<name> failed: …`) and the whole-run fidelity checks
(mpvlab/runner/runchecks.py, stored under `fidelity_checks`, warning `<name>: …` in
`fidelity_warnings`, and `fidelity_ok` false: a run they flag is a broken run, which the report
leaves out). Each row's `stored` says where its record is, `applies` the workloads whose runs
carry it; tests/test_crosschecks.py checks that the entry point has an adapter for exactly these rows
and that no other module calls a row's function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from mpvlab.workloads.bulk import BULK

WARNING_PREFIX = "cross-check "


@dataclass(frozen=True)
class CheckDef:
    """One cross-check, as the docs' table lists it."""

    name: str              # the key in summary.json `cross_checks` (`{path}`: one check per path)
    figure: str            # the summary field the check guards
    evidence: str          # the independent raw evidence it is compared with
    tolerance: str         # what counts as agreement, in words
    workloads: str         # the workloads (and topologies) whose runs carry it
    function: str          # module:function that computes it
    test: str              # tests/<file>::<test> that plants the disagreement and sees the warning
    on_failure: str = "warning"     # "warning", "run fails" or "fidelity_ok false"
    stored: str = "cross_checks"    # the summary.json object holding its record under its name
    applies: tuple[str, ...] = ()   # the WORKLOADS whose runs carry it (subject to `workloads`' condition)
    requires: tuple[str, ...] = ()  # CONDITIONS the run must meet besides its workload (all of them)


# What a run must have, besides its workload, for a check to run (`requires`; expected_records).
CONDITIONS: dict[str, str] = {
    "mptcp-trace": "a topology whose backend traces the MPTCP scheduler and samples the subflows: dual-path and "
                   "dumbbell (a shared-bottleneck run has neither)",
    "pcap": "observe.pcap (a record per captured interface)",
    "pcap-server": "observe.pcap with the `server` point",
    "cc-state": "a CC whose state the registry models (BBR, BBR-S, BBRv3, BBRv3-S)",
    "voip": "cross_traffic.voip, no path with a capacity trace, loss model or outages",
    "voip-one-path": "cross_traffic.voip on one shaped path with a buffer, no capacity trace, loss model or outages",
}


def warning(name: str, result: dict[str, Any]) -> str:
    """The named warning of a failed check (one line: the figures, no newline)."""
    return f"{WARNING_PREFIX}{name} failed: {result}".replace("\n", " ")


def record(checks: dict[str, Any], warnings: list[str], name: str, result: dict[str, Any]) -> None:
    """Store a check's result (it must hold `ok`) and add its named warning when it failed."""
    if "ok" not in result:
        raise ValueError(f"cross-check {name}: the result has no `ok`")
    checks[name] = result
    if not result["ok"]:
        warnings.append(warning(name, result))


def failed(warnings: list[str]) -> list[str]:
    """The names of the failed cross-checks among a summary's warnings."""
    return [w[len(WARNING_PREFIX):].split(" failed:", 1)[0] for w in warnings
            if w.startswith(WARNING_PREFIX) and " failed:" in w]


def all_warnings(summary: dict[str, Any]) -> list[str]:
    """Every warning a run's summary holds, one line each: fidelity findings first, then the run's
    warnings (failed cross-checks among them), then the samplers' errors. What `mpvlab run` prints at
    its end, what a sweep counts and what the report lists per run."""
    def lines(key: str, prefix: str = "") -> list[str]:
        v = summary.get(key)
        return [f"{prefix}{str(w)}".replace("\n", " ") for w in v] if isinstance(v, list) else []
    return [*lines("fidelity_warnings", "fidelity: "), *lines("warnings"), *lines("sampler_errors", "sampler: ")]


_TCP_VIDEO = "video (progressive/GStreamer, own DASH, dash.js), bulk; dual-path and dumbbell"

# The workloads of the per-workload tables (issue 43): the key and how the docs name it.
WORKLOADS: dict[str, str] = {
    "progressive": "progressive (GStreamer)", "own-dash": "own DASH client", "dash.js": "dash.js (Chromium)",
    "sabre": "SABRE (own client, abr: sabre)", "rtp-gcc": "RTP, GCC controller",
    "rtp-webrtc-bbr": "RTP, webrtc-bbr controller", BULK.name: "bulk transfer"}
_TCP = ("progressive", "own-dash", "dash.js", "sabre", BULK.name)
_VIDEO = ("progressive", "own-dash", "dash.js", "sabre")
_RTP = ("rtp-gcc", "rtp-webrtc-bbr")
_ALL = tuple(WORKLOADS)
_RTP_WL = "rtp (gcc, webrtc-bbr)"
_RTP_MOD = "mpvlab.runner.workloads.rtp_checks:"
_RTP_TEST = "tests/test_rtp_checks.py::"
_RUN_MOD = "mpvlab.runner.runchecks:"
_RUN_TEST = "tests/test_runchecks.py::"
_FID = "fidelity_ok false"

CHECKS: tuple[CheckDef, ...] = (
    CheckDef("bytes_{path}_interface_vs_collector", "paths.PATH.rx_bytes, payload_bytes_handed, share",
             "the scheduler's BPF trace: payload bytes the MPTCP scheduler handed to the path's subflow",
             "0.99 ≤ (interface bytes − 90 B per packet) / handed ≤ 1.01 + the path's retransmitted segments × "
             "1424 B / handed", _TCP_VIDEO, "mpvlab.runner.views:interface_vs_collector",
             "tests/test_checks.py::test_interface_vs_collector_warns", applies=_TCP,
             requires=("mptcp-trace",)),
    CheckDef("collector_saw_every_connection", "scheduler_decisions, path_switches (the trace's completeness)",
             "Apache's access log: client connections that made media requests (the bulk sender's connection "
             "count for bulk)", "traced connections ≥ connections that made requests", _TCP_VIDEO,
             "mpvlab.runner.views:connections_check", "tests/test_checks.py::test_collector_connections_warns",
             applies=_TCP, requires=("mptcp-trace",)),
    CheckDef("collector_lost_events", "scheduler_decisions, path_switches",
             "the BPF ring buffer's own count of events it could not deliver", "0 lost events", _TCP_VIDEO,
             "mpvlab.runner.views:lost_events_check", "tests/test_checks.py::test_collector_connections_warns",
             applies=_TCP, requires=("mptcp-trace",)),
    CheckDef("subflow_addresses", "subflows, paths.PATH.* (which path a subflow is)",
             "ss on the server: each subflow's (client, server) address pair", "no pair outside the "
             "topology's paths", _TCP_VIDEO, "mpvlab.runner.views:subflow_address_check",
             "tests/test_checks.py::test_subflow_addresses_fail", on_failure="run fails", applies=_TCP,
             requires=("mptcp-trace",)),
    CheckDef("bytes_{path}_interface_vs_udp_socket", "paths.PATH.rx_bytes / clients.ROLE.rx_bytes (RTP)",
             "the RTP receiver's own socket counts: datagrams and UDP payload bytes it read",
             "0 ≤ other packets ≤ 20 + 2 per 15 s of the window; 0 ≤ other bytes ≤ 1 % of datagrams × (payload + "
             "42 B)", "rtp (gcc, webrtc-bbr); dual-path, dumbbell, shared bottleneck",
             "mpvlab.runner.views:udp_wire_check", "tests/test_checks.py::test_udp_wire_warns", applies=_RTP),
    CheckDef("pcap_bytes_{point}_{interface}", "capture (the pcap every wire-order figure is read from)",
             "the captured interface's kernel counters over the capture's window",
             "|capture bytes − counter bytes| within mpvlab/collectors/pcap.py's allowance (headers of packets in "
             "flight at the window's edges)", "any TCP workload with observe.pcap",
             "mpvlab.runner.capture:pcap_bytes_check", "tests/test_checks.py::test_pcap_bytes_warns", applies=_TCP,
             requires=("pcap",)),
    CheckDef("pcap_path_bytes_vs_subflow_counters", "wire_switches.subflows (per path: seq_data_bytes)",
             "ss on the server (data/subflows.csv): each subflow's bytes_acked in its last sample; the path's "
             "client interface rx bytes (data/links.csv) after it",
             "per path, over the subflows both saw: −2 B per subflow ≤ capture − counter ≤ 2 B per subflow + the "
             "client interface's rx bytes after each subflow's last ss sample less one ACK delay (srtt + 4 rttvar + "
             "200 ms delayed ACK) and one period of each sampler (the capture counts every byte sent once, the "
             "counter every byte acknowledged by that sample; the SYN's and FIN's sequence numbers)",
             "any TCP workload with observe.pcap at the server",
             "mpvlab.runner.capture:pcap_vs_subflow_check",
             "tests/test_wire_switches.py::test_pcap_path_bytes_against_the_subflow_counters_warn", applies=_TCP,
             requires=("pcap-server",)),
    CheckDef("mode_shares_over_workload_flows", "cc_state.mode_share_time_weighted, cc_state.mode_share_per_sample",
             "Apache's access log: requests and bytes per client connection (media / page / none); for a "
             "workload without HTTP, the flow's acknowledged bytes (ss bytes_acked)",
             "every flow in the shares carried workload bytes, and every flow that carried them is in the "
             "shares (exact)", "any CC with a state model (BBR, BBR-S, BBRv3, BBRv3-S) and a TCP workload",
             "mpvlab.results.flows:mode_share_check", "tests/test_measurement_integrity.py::test_mode_share_check_warns_when_an_idle_flow_is_in_the_shares",
             applies=_TCP, requires=("cc-state",)),
    CheckDef("player_bytes_vs_access_log", "bytes_received (players.ROLE.bytes_received, aggregate.bytes_received)",
             "Apache's access log: response body bytes (%B) of the video's requests from the player's address "
             "(every address with one player; loopback, the pre-run check and the dash.js page left out)",
             "own DASH client (incl. SABRE): equal (it reads every response it asks for; measured equal on "
             "sabre-own-short); dash.js and GStreamer: 0 ≤ player ≤ Apache (a fragment abandoned or a stream not "
             "read to its end was still written by Apache)", "video (progressive/GStreamer, own DASH, dash.js); "
             "dual-path, dumbbell, shared bottleneck", "mpvlab.runner.workloads.video:player_bytes_check",
             "tests/test_checks.py::test_player_bytes_against_the_access_log_warn", applies=_VIDEO),
    CheckDef("stalls_vs_element_buffered", "underflows, underflow_episodes, underflow_total_s, dash.rebuffer_* "
             "(dash.js)",
             "the page's own record (data/dashjs/dashjs-raw.json): the <video> element's readyState, playhead and "
             "buffered ranges at each `waiting`",
             "every counted stall opens at a `waiting` of the page's record (±0.002 ms) whose element had readyState "
             "< HAVE_FUTURE_DATA or < 0.5 s (dash.js 3.0.3's STALL_THRESHOLD, below which it halts playback itself) "
             "+ one frame (the playhead's advance between dash.js's level reading and the snapshot) beyond its "
             "playhead; a `waiting` without a snapshot is listed as unverified", "video with player.kind dashjs",
             "mpvlab.runner.workloads.video:stalls_vs_element_check",
             "tests/test_checks.py::test_stalls_against_the_element_buffered_ranges_warn", applies=("dash.js",)),
    # --- the rtp workload's figures against its own logs (rtp_checks.py; rtp/README.md has the
    # figure-by-figure table with the hard checks that end the run) ---
    CheckDef("rtp_encoder_vs_setting", "rtp.encoder_per_second (achieved_bps against encoder_set_bps)",
             "sender/frames.csv bytes per 1 s of capture time ÷ targets.csv encoder_set_bps × the encoder's running time",
             "0.5 ≤ output ÷ setting ≤ 1.25 over the steady window's running time (libvpx's 15 % overshoot, x264's "
             "100 ms VBV, + 10 % for a key frame or a change in a window; below half the encoder is not following)",
             _RTP_WL, _RTP_MOD + "check_encoder_vs_setting", _RTP_TEST + "test_encoder_overshoot_after_pauses_is_named",
             stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_steady_target_vs_frames", "rtp.target_bps.steady_mean",
             "sender/frames.csv target_bps of the steady window's frames (the target at each hand-over)", "±10 %",
             _RTP_WL, _RTP_MOD + "check_steady_target_vs_frames",
             _RTP_TEST + "test_steady_target_against_the_frames_targets_is_named", stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_encoder_per_second_vs_frames", "rtp.encoder_per_second (achieved_bps, frames)",
             "sender/frames.csv bytes and frames per 1 s window of capture time", "exact", _RTP_WL,
             _RTP_MOD + "check_encoder_per_second_vs_frames",
             _RTP_TEST + "test_encoder_per_second_against_the_frames_is_named", stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_received_per_second_vs_totals", "rtp.received_per_second",
             "receiver.json rtp_bytes_received and padding_bytes_received", "exact", _RTP_WL,
             _RTP_MOD + "check_received_per_second_vs_totals",
             _RTP_TEST + "test_received_per_second_against_the_totals_is_named", stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_latency_vs_frames", "rtp.latency_ms (p50, p95, p99, max)",
             "receiver/frames.csv latency_ms of every complete frame (nearest rank)", "±0.001 ms (three decimals)",
             _RTP_WL, _RTP_MOD + "check_latency_vs_frames", _RTP_TEST + "test_latency_against_the_frames_is_named",
             stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_packets_vs_frames", "rtp.packets_sent, rtp.rtp_bytes_sent, rtp.frames_captured",
             "sender/packets.csv video rows and bytes; sender/frames.csv rows and packets per frame", "exact",
             _RTP_WL, _RTP_MOD + "check_packets_vs_frames", _RTP_TEST + "test_packets_against_the_packet_log_is_named",
             stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_viewer_counts_vs_frames",
             "rtp.frames_on_time, frames_late, frames_lost(_incomplete, _unseen), decode",
             "receiver/frames.csv status, decode and capture_s of every frame", "exact", _RTP_WL,
             _RTP_MOD + "check_viewer_counts_vs_frames",
             _RTP_TEST + "test_viewer_counts_against_its_frame_log_are_named", stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_encoder_targets_vs_log", "rtp.encoder_per_second (target_bps, encoder_set_bps)",
             "sender/targets.csv: every target change and the setting it gave, with its time",
             "±2 bit/s (window starts known to 1 µs)", _RTP_WL, _RTP_MOD + "check_encoder_targets_vs_log",
             _RTP_TEST + "test_encoder_window_targets_against_the_target_log_are_named", stored="rtp.checks",
             applies=_RTP),
    CheckDef("rtp_encoder_wire_vs_packets", "rtp.encoder_per_second (achieved_wire_bps)",
             "sender/packets.csv video packets' bytes + 28 B (UDP + IPv4) each", "exact (sum over windows)",
             _RTP_WL, _RTP_MOD + "check_encoder_wire_vs_packets",
             _RTP_TEST + "test_encoder_wire_bytes_against_the_packet_log_are_named", stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_repair_vs_logs", "rtp.repair (retransmissions, repaired packets and frames, forced key frames)",
             "sender/packets.csv rtx rows, sender/frames.csv forced_keyframe, receiver/frames.csv packets_repaired, "
             "receiver/rate.csv rtx_bps", "exact", _RTP_WL, _RTP_MOD + "check_repair_vs_logs",
             _RTP_TEST + "test_repair_counts_against_the_logs_are_named", stored="rtp.checks", applies=_RTP),
    CheckDef("rtp_audio_vs_logs", "rtp.audio (packets and bytes sent, received, lost, on time)",
             "sender/packets.csv audio rows, the end record's audio_packets, receiver/rate.csv audio_bps", "exact",
             _RTP_WL, _RTP_MOD + "check_audio_vs_logs",
             _RTP_TEST + "test_audio_counts_against_the_logs_are_named", stored="rtp.checks", applies=_RTP),
    # --- whole-run fidelity checks (runchecks.py): a failure is a broken run, fidelity_ok false ---
    CheckDef("probe_delay_within_queue_bound", "fidelity_ok (cross_traffic.voip delays)",
             "the VoIP probe's CSV: kernel receive stamp − send stamp of every packet",
             "largest one-way delay ≤ queue bytes ÷ rate + largest scheduled propagation + 100 ms (the delay line's "
             "20 ms lateness allowance, a frame in service, the sender's stamp before sendto under CPU steal)",
             "any workload with cross_traffic.voip on one shaped path without capacity trace, loss model or outages",
             _RUN_MOD + "check_probe_delay", _RUN_TEST + "test_a_probe_delay_beyond_the_queue_is_a_named_warning",
             on_failure=_FID, stored="fidelity_checks", applies=_ALL, requires=("voip-one-path",)),
    CheckDef("playback_within_media_and_stalls", "playback_s, underflow_total_s (players.ROLE.*)",
             "the scenario's media length and the player's own stall record",
             "playback ≤ media + stalls + 2 s (the end-of-stream handshake, the stall detector's resolution)",
             "video workloads", _RUN_MOD + "check_playback",
             _RUN_TEST + "test_playback_longer_than_media_and_stalls_is_a_named_warning", on_failure=_FID,
             stored="fidelity_checks", applies=_VIDEO),
    CheckDef("no_simultaneous_silence", "fidelity_ok (every figure over the run's time)",
             "the VoIP probe's CSV (kernel receive stamps) and every client interface's kernel counters "
             "(links.csv, observe.sample_hz)",
             "no interval ≥ max(1 s, queue ÷ rate + propagation + 100 ms + one sample period) between the probe's first "
             "and last packet in which neither the probe nor any client interface received anything (a working path "
             "delivers the probe's packet or, with the queue full, the queue's packets)",
             "any workload with cross_traffic.voip, no path with a capacity trace, loss model or outages",
             _RUN_MOD + "check_silence",
             _RUN_TEST + "test_every_flow_and_the_probe_silent_for_seconds_is_a_named_warning", on_failure=_FID,
             stored="fidelity_checks", applies=_ALL, requires=("voip",)),
)


def expected_records(workload: str, conditions: set[str], paths: list[str],
                     captured: tuple[tuple[str, str], ...] = ()) -> dict[str, set[str]]:
    """The record names a run of `workload` meeting `conditions` must hold, by the object that holds
    them (`stored`): the registry's rows for it, `{path}` once per path and `{point}_{interface}` once
    per captured (point, interface)."""
    unknown = set(conditions) - set(CONDITIONS)
    if unknown:
        raise ValueError(f"unknown conditions {sorted(unknown)}; known: {sorted(CONDITIONS)}")
    out: dict[str, set[str]] = {}
    for c in CHECKS:
        if workload not in c.applies or not set(c.requires) <= set(conditions):
            continue
        names = ([c.name.replace("{path}", p) for p in paths] if "{path}" in c.name else
                 [c.name.replace("{point}", pt).replace("{interface}", i) for pt, i in captured]
                 if "{point}" in c.name else [c.name])
        out.setdefault(c.stored, set()).update(
            n.removeprefix("rtp_") if c.stored == "rtp.checks" else n for n in names)
    return out


def registered(stored: str) -> set[str]:
    """The names of the checks whose records live in `stored` (rtp.checks: without the rtp_ prefix)."""
    return {c.name.removeprefix("rtp_") if stored == "rtp.checks" else c.name for c in CHECKS if c.stored == stored}


def table_page() -> str:
    """docs/reference/cross-checks.md, generated from CHECKS (`python -m mpvlab.schemas`)."""
    from mpvlab.results import figures      # the summary model: imported here, not by the runner's checks
    def cell(s: str) -> str:
        return s.replace("|", "\\|")
    rows = [f"| `{c.name}` | {cell(c.figure)} | {cell(c.evidence)} | {cell(c.tolerance)} | {cell(c.workloads)} | "
            f"{', '.join(f'`{r}`' for r in c.requires) or '—'} | "
            f"{c.on_failure} | `{c.stored}` | `{c.function}` | `{c.test}` |" for c in CHECKS]
    per: list[str] = []
    for key, title in WORKLOADS.items():
        mine = [c for c in CHECKS if key in c.applies]
        per += [f"### {title}", "", f"{len(mine)} checks.", "",
                "| summary figure | check | evidence | tolerance | on failure |", "|---|---|---|---|---|",
                *[f"| {cell(c.figure)} | `{c.name}` | {cell(c.evidence)} | {cell(c.tolerance)} | {c.on_failure} |"
                  for c in mine], ""]
    return "\n".join([
        "# Cross-checks", "",
        "<!-- generated by `python -m mpvlab.schemas` from mpvlab/results/checks.py; do not edit -->", "",
        f"{len(CHECKS)} checks. Each compares a figure of `summary.json` with independent raw evidence "
        "within a stated tolerance; the run calls it and stores its record under its name in the object the "
        "`stored` column names. A failed cross-check adds the named warning `cross-check NAME failed: {its figures}` "
        "to `warnings`; a failed fidelity check adds `NAME: …` to `fidelity_warnings` and sets `fidelity_ok` false, "
        "so `mpvlab report` leaves the run out (and says so) unless asked `--include-warned`. `mpvlab run` prints "
        "every warning at its end. Each has a test that plants the disagreement and sees the warning. A check is "
        "defined in one place: a function and a row of `CHECKS` in mpvlab/results/checks.py, from which this page "
        "is made.", "",
        "The rtp workload's hard checks, which end the run instead of warning, are listed figure by figure in "
        "rtp/README.md; the fidelity figures of delay and rate (the delay line's lateness, the achieved rate) "
        "are judged in mpvlab/runner/fidelity.py and also land in `fidelity_warnings`.", "",
        "## Every check", "",
        "| check (record key) | figure it guards | evidence | tolerance | workloads | requires | on failure | "
        "stored in | function | test |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows, "",
        "`requires`: what a run must have besides its workload for the check to run "
        "(`expected_records` in checks.py gives the record names a run must hold; the smoke run's test "
        "compares its summary with them):", "",
        *[f"- `{k}`: {v}" for k, v in CONDITIONS.items()], "",
        "## Every figure of summary.json", "",
        "Each numeric figure the summary model can hold, with the checks above that compare it with independent "
        "raw evidence, or `no check:` and why there is none.", "",
        *figures.table(), "",
        "## Per workload", "",
        "The checks a run of each workload carries (each under the condition its row above states: a "
        "pcap check only with observe.pcap, the probe's checks only with cross_traffic.voip, …).", "",
        *per])
