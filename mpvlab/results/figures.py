"""Every numeric figure a summary.json can hold, with the check(s) that verify it against independent
raw evidence or, where there is none, why not (issue 43).

`figures()` walks the summary model (mpvlab.results.summary.Summary, through its public name) and
lists each numeric field by its path (`paths.PATH.rx_bytes`: KEY stands for a dict key, `[]` for a
list's items); a field typed `Any` or an untyped dict is listed as one block (its contents are the
producer's, not the model's). `FIGURES` gives, in order, a glob over those paths and either the names
of the registry's checks (mpvlab/results/checks.py CHECKS) that compare the figure with evidence a
different collector recorded, or "no check: <why>". The first matching row holds a path.
tests/test_figures.py fails when the model gains a figure no row matches, a row names a check the
registry does not have or matches no figure, and the generated docs page
(docs/reference/cross-checks.md, "Every figure") lists them.

A row names a check only where the check reads the figure (or the counts it is made of) against
evidence the figure was not made from; "partly" in its note says what part is not covered (a check
for one workload only, a bound rather than a second measurement).
"""

from __future__ import annotations

import fnmatch
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel


@dataclass(frozen=True)
class FigureDef:
    """Summary figures matching `pattern`: the checks verifying them, or why there is none."""

    pattern: str                    # fnmatch glob over figure paths (`KEY` a dict key, `[]` list items)
    checks: tuple[str, ...] = ()    # registry check names (checks.CHECKS) that verify it
    note: str = ""                  # "no check: why" when `checks` is empty; what they leave out otherwise


def _no(why: str) -> str:
    return f"no check: {why}"


_PLAYER_LOG = "the player's own record (its log/events); no second collector sees it"
_STALLS = ("stalls_vs_element_buffered", "playback_within_media_and_stalls")
_STALL_NOTE = ("partly: stalls_vs_element_buffered (dash.js only) checks each stall against the <video> element's "
               "buffered ranges; playback_within_media_and_stalls bounds playback by media + stalls (fidelity); the "
               "GStreamer and own clients' stall record has no independent source")
_RTP_NOTE_HARD = "; the run also ends (RunFailed) unless captured = on time + late + lost (rtp/README.md hard checks)"
_VOIP = ("the VoIP probe's own CSV (kernel send and receive stamps) is the only record of its packets; "
         "probe_delay_within_queue_bound bounds its largest delay from the configuration (one-path runs)")

FIGURES: tuple[FigureDef, ...] = (
    # --- run head and timing ---
    FigureDef("seed", note=_no("the scenario's configuration, not a measurement")),
    FigureDef("run_wall_s", note=_no("the runner's own wall clock around the run; a cost, not a result")),
    FigureDef("host_steal_during_playback.*", note=_no("/proc/stat steal time read by the runner; the kernel's count is "
                                                       "the only source")),
    FigureDef("video_length_s", note=_no("the scenario's media length (configuration)")),
    FigureDef("http.port", note=_no("configuration")),
    # --- per path: interface counters against the scheduler trace / the UDP socket ---
    FigureDef("paths.KEY.rx_bytes", ("bytes_{path}_interface_vs_collector", "bytes_{path}_interface_vs_udp_socket"),
              "TCP: against the scheduler trace's handed bytes; RTP: against the receiver's socket"),
    FigureDef("paths.KEY.rx_packets", ("bytes_{path}_interface_vs_collector", "bytes_{path}_interface_vs_udp_socket"),
              "the per-packet header allowance of the same checks"),
    FigureDef("paths.KEY.payload_bytes_handed", ("bytes_{path}_interface_vs_collector",)),
    FigureDef("paths.KEY.share", ("bytes_{path}_interface_vs_collector",),
              "the ratio of checked per-path rx_bytes"),
    FigureDef("bytes_total", ("bytes_{path}_interface_vs_collector", "bytes_{path}_interface_vs_udp_socket"),
              "the sum of the checked per-path rx_bytes"),
    FigureDef("paths.KEY.mean_throughput_bps", ("bytes_{path}_interface_vs_collector",),
              "partly: its bytes are checked; its divisor is the workload's own playback time"),
    FigureDef("paths.KEY.quiet_intervals_s*", note=_no("read from the client interface's sampled counters (links.csv), "
                                                       "the only per-time record of the path's bytes")),
    FigureDef("paths.KEY.outages_configured_s*", note=_no("configuration")),
    FigureDef("paths.KEY.rtt_by_phase[].configured_rtt_ms", note=_no("configuration")),
    FigureDef("paths.KEY.rtt_by_phase[].*", note=_no("the server's ss srtt samples per configured delay phase; the "
                                                     "kernel's RTT estimate has no second source here (the pre-run "
                                                     "probe checks the delay line, fidelity_table)")),
    FigureDef("clients.KEY.rx_*", ("bytes_{path}_interface_vs_udp_socket",),
              "the RTP viewer's interface counters (shared bottleneck), against its socket"),
    FigureDef("bottleneck.*", note=_no("the bottleneck's qdisc and interface counters and its configuration, read "
                                         "once; the RTP viewer's share of them is checked through clients.*")),
    # --- the scheduler trace, the capture ---
    FigureDef("scheduler_decisions", ("collector_saw_every_connection", "collector_lost_events"),
              "partly: the trace's completeness (every connection, no lost event), not each decision"),
    FigureDef("path_switches", ("collector_saw_every_connection", "collector_lost_events"),
              "partly: the trace's completeness; the wire-order count (path_switches_wire) is a second view"),
    FigureDef("path_switches_wire", ("pcap_bytes_{point}_{interface}",),
              "partly: the capture it is counted from holds the bytes the interface counted; the count itself has "
              "no second source"),
    FigureDef("wire_switches.subflows.KEY.seq_data_bytes", ("pcap_path_bytes_vs_subflow_counters",),
              "summed per path against the same subflows' ss bytes_acked"),
    FigureDef("wire_switches.subflows.KEY.subflow_id", note=_no("an identifier (the order the capture saw the "
                                                                 "subflows' handshakes), not a measurement")),
    FigureDef("wire_switches.*.decision_path_switches", ("collector_saw_every_connection", "collector_lost_events"),
              "partly: the scheduler trace's count beside the wire count (path_switches); the trace's completeness"),
    FigureDef("wire_switches.*", ("pcap_bytes_{point}_{interface}",),
              "partly: the capture they are counted from holds the bytes the interface counted; the counts "
              "themselves are the capture's own"),
    FigureDef("capture.snaplen", note=_no("configuration (observe.pcap.snaplen)")),
    FigureDef("capture.max_bytes", note=_no("configuration (observe.pcap.max_mb)")),
    FigureDef("capture.*", ("pcap_bytes_{point}_{interface}",)),
    FigureDef("steering.*", note=_no("the steering scheduler's own BPF record of its data assignments; "
                                       "schedulers/README.md")),
    FigureDef("mptcp.*", note=_no("the kernel's MPTCP MIB counters, read before and after: the source itself")),
    FigureDef("ecn_marks.KEY.*", note=_no("the ECN marker qdisc's own counters (links/ecn), the only record of marks")),
    # --- the CC's state model ---
    FigureDef("bbr_diag.*", note=_no("kernel BBR's own gains read over INET_DIAG (observe.bbr_modes_hz); the "
                                       "ss sampler reads the same gains for cc_state, but the two are not compared "
                                       "in the run (tests/test_bbr_diag.py compares their connections)")),
    FigureDef("cc_state.mode_share_time_weighted.KEY", ("mode_shares_over_workload_flows",),
              "which flows are in the shares, against Apache's log / ss bytes; the mode durations are the CC's own "
              "state samples"),
    FigureDef("cc_state.mode_share_per_sample.KEY", ("mode_shares_over_workload_flows",),
              "which flows are in the shares; the modes are the CC's own state samples"),
    FigureDef("cc_state.mode_share_time_weighted_all_workload_flows.KEY", ("mode_shares_over_workload_flows",),
              "the flow list the check reads; modes are the CC's own samples"),
    FigureDef("cc_state.flows[].mode_share_*", ("mode_shares_over_workload_flows",),
              "each flow's role and bytes against Apache's log; modes are the CC's own samples"),
    FigureDef("cc_state.flows[].http_*", note=_no("Apache's access log per connection: raw evidence itself")),
    FigureDef("cc_state.flows[].bytes_acked", note=_no("the last ss sample of the flow: raw evidence itself "
                                                       "(the mode-share check reads it)")),
    FigureDef("cc_state.flows_by_role.KEY", ("mode_shares_over_workload_flows",),
              "the roles the check compares with what each flow carried"),
    FigureDef("cc_state.*", note=_no("the CC's own state samples (ss or its BPF export: bandwidth and min-RTT "
                                     "estimates, sample counts, windows): the CC's internal model has no other "
                                     "source")),
    # --- the players ---
    FigureDef("players.KEY.bytes_received", ("player_bytes_vs_access_log",)),
    FigureDef("players.KEY.interface_rx_bytes", note=_no("the player's client interface counters (shared bottleneck), "
                                                         "read before and after: the source itself")),
    FigureDef("players.KEY.mean_throughput_bps", ("player_bytes_vs_access_log",),
              "partly: its bytes; the divisor is the player's own playback time"),
    FigureDef("players.KEY.playback_s", ("playback_within_media_and_stalls",),
              "an upper bound (media + stalls + 2 s), not a second measurement"),
    FigureDef("players.KEY.underflow*", _STALLS, _STALL_NOTE),
    FigureDef("underflow*", _STALLS, _STALL_NOTE),
    FigureDef("players.KEY.stall_ratio", _STALLS, _STALL_NOTE),
    FigureDef("stall_ratio", _STALLS, _STALL_NOTE),
    FigureDef("players.KEY.dash.rebuffer_*", ("stalls_vs_element_buffered",),
              "dash.js only; the own DASH client's rebuffer record has no independent source"),
    FigureDef("dash.rebuffer_*", ("stalls_vs_element_buffered",),
              "dash.js only; the own DASH client's rebuffer record has no independent source"),
    FigureDef("players.KEY.dash.stall_rate", ("stalls_vs_element_buffered",), "dash.js only"),
    FigureDef("dash.stall_rate", ("stalls_vs_element_buffered",), "dash.js only"),
    FigureDef("players.KEY.dash.quality_avg", note=_no("mean quality level: derived from the player's own log of the "
                                                       "representations it chose; no independent source")),
    FigureDef("dash.quality_avg", note=_no("mean quality level: derived from the player's own log of the "
                                           "representations it chose; no independent source")),
    FigureDef("players.KEY.dash.*", note=_no(f"{_PLAYER_LOG} (segments and representations requested: Apache's log "
                                             "has the requests, but no check compares them yet)")),
    FigureDef("dash.*", note=_no(f"{_PLAYER_LOG} (segments and representations requested: Apache's log has the "
                                 "requests, but no check compares them yet)")),
    FigureDef("players.KEY.start.*", note=_no("configured_s is the scenario's (client index × "
                                              "topology.client_stagger); actual_s and qoe_window_s are the player's "
                                              "own start and end-of-stream events (Apache's log has its first request "
                                              "to the second, wall clock)")),
    FigureDef("players.KEY.startup_delay_s", note=_no(_PLAYER_LOG)),
    FigureDef("startup_delay_s", note=_no(_PLAYER_LOG)),
    FigureDef("players.KEY.frames_*", note=_no("GStreamer's own frame counters (rendered, late, expected)")),
    FigureDef("frames_*", note=_no("GStreamer's own frame counters (rendered, late, expected)")),
    FigureDef("players.KEY.picture_discards*", note=_no("the decoder's own discard count, split by the player's stall "
                                                       "record")),
    FigureDef("picture_discards*", note=_no("the decoder's own discard count, split by the player's stall record")),
    FigureDef("players.KEY.cpu.*", note=_no("the player process's CPU time from /proc: the kernel's count itself")),
    FigureDef("player_cpu.*", note=_no("the player process's CPU time from /proc: the kernel's count itself")),
    FigureDef("duration_s", ("playback_within_media_and_stalls",),
              "video: an upper bound on playback; rtp and bulk: the workload's own first/last packet times, "
              "no check"),
    FigureDef("aggregate.stall_rate_*", _STALLS, "means over the players' stall figures: " + _STALL_NOTE),
    FigureDef("aggregate.rebuffer_ratio_mean", _STALLS, "means over the players' stall figures: " + _STALL_NOTE),
    FigureDef("aggregate.*", note=_no("means over the players' own bitrate, quality and switch records (and the "
                                      "player count); no independent source")),
    # --- bulk ---
    FigureDef("bulk.bytes_received", note=_no("the bulk receiver's own count; the per-path interface checks cover "
                                              "its bytes on the wire")),
    FigureDef("bulk.*", note=_no("the bulk endpoints' own record (sizes, times, goodput) or configuration")),
    # --- rtp ---
    FigureDef("rtp.encoder_per_second[].t_s", note=_no("a window's start: the first captured frame + whole seconds "
                                                       "(definition, not a measurement)")),
    FigureDef("rtp.encoder_per_second[].frames", ("rtp_encoder_per_second_vs_frames",)),
    FigureDef("rtp.encoder_per_second[].achieved_bps", ("rtp_encoder_vs_setting", "rtp_encoder_per_second_vs_frames")),
    FigureDef("rtp.encoder_per_second[].achieved_wire_bps", ("rtp_encoder_wire_vs_packets",),
              "partly: the sum over the windows"),
    FigureDef("rtp.encoder_per_second[].encoder_set_bps", ("rtp_encoder_targets_vs_log", "rtp_encoder_vs_setting")),
    FigureDef("rtp.encoder_per_second[].target_bps", ("rtp_encoder_targets_vs_log",)),
    FigureDef("rtp.target_bps.steady_mean", ("rtp_steady_target_vs_frames",)),
    FigureDef("rtp.target_bps.*", note=_no("initial is configuration, final and updates the sender's own record "
                                           "(targets.csv), steady_window_s and steady_paused_s the steady mean's "
                                           "definition over targets.csv (tests/test_rtp_checks.py checks them by hand)")),
    FigureDef("rtp.received_per_second[].second", note=_no("the bin's second on the run's clock (definition)")),
    FigureDef("rtp.received_per_second[].audio_bps", ("rtp_audio_vs_logs",),
              "partly: the sum over the seconds against the viewer's audio bytes"),
    FigureDef("rtp.received_per_second[].*", ("rtp_received_per_second_vs_totals",),
              "partly: the sum over the seconds"),
    FigureDef("rtp.latency_ms.*", ("rtp_latency_vs_frames",)),
    FigureDef("rtp.packets_sent", ("rtp_packets_vs_frames",)),
    FigureDef("rtp.rtp_bytes_sent", ("rtp_packets_vs_frames",)),
    FigureDef("rtp.frames_captured", ("rtp_packets_vs_frames", "rtp_viewer_counts_vs_frames"),
              "frames.csv rows" + _RTP_NOTE_HARD),
    FigureDef("rtp.frames_*", ("rtp_viewer_counts_vs_frames",), "receiver/frames.csv status" + _RTP_NOTE_HARD),
    FigureDef("rtp.decode.frames_*", ("rtp_viewer_counts_vs_frames",)),
    FigureDef("rtp.decode.decoder.*", note=_no("the viewer's decoder's own account (frames fed and refused, "
                                               "pictures out, warnings, CPU time); no second source")),
    FigureDef("rtp.rtp_bytes_received", ("rtp_received_per_second_vs_totals", "bytes_{path}_interface_vs_udp_socket"),
              "partly: the per-second series sums to it; the socket's datagrams (video + padding) against the "
              "interface"),
    FigureDef("rtp.padding_bytes_received", ("rtp_received_per_second_vs_totals",
                                             "bytes_{path}_interface_vs_udp_socket"),
              "partly: as rtp_bytes_received"),
    FigureDef("rtp.packets_received", ("bytes_{path}_interface_vs_udp_socket",),
              "partly: the socket's datagrams against the interface's packets; the run ends unless sent = received "
              "+ lost (hard check)"),
    FigureDef("rtp.packets_lost", note=_no("the viewer's sequence-number gaps; the run ends unless sent = received + "
                                           "lost (hard check, rtp/README.md), no collector beside the two ends")),
    FigureDef("rtp.padding_*", note=_no("the sender's and viewer's own padding counts (rtp/README.md)")),
    *(FigureDef(f"rtp.repair.{name}", ("rtp_repair_vs_logs",)) for name in (
        "retransmissions_sent", "retransmission_bytes_sent", "retransmissions_received", "retransmissions_in_time",
        "retransmissions_too_late", "retransmissions_duplicate", "packets_repaired", "packets_lost_unrepaired",
        "frames_repaired", "frames_repaired_on_time", "keyframes_forced")),
    FigureDef("rtp.repair.*", note=_no("the two ends' own counts of NACKs and PLIs sent and read and of resends "
                                       "skipped (rtp/README.md \"Losses were repaired\"); no collector beside them")),
    *(FigureDef(f"rtp.audio.{name}", ("rtp_audio_vs_logs",)) for name in (
        "packets_sent", "bytes_sent", "packets_received", "packets_lost", "bytes_received", "packets_on_time",
        "packets_late")),
    FigureDef("rtp.audio.received_mean_bps", ("rtp_audio_vs_logs",),
              "partly: the mean of the per-second audio_bps bins that check sums against the viewer's audio bytes"),
    FigureDef("rtp.audio.*", note=_no("configuration (enabled, bitrate, frame length, signal, payload type, clock), "
                                      "the window and its count of seconds (definition), the sender's own frame and "
                                      "unsent counts, and the viewer's own latencies and their on-time share "
                                      "(rtp/README.md \"The call had audio\")")),
    FigureDef("rtp.freezes.*", note=_no("WebRTC's freeze rule over receiver/frames.csv, the viewer's own log")),
    FigureDef("rtp.rendered_fps.*", note=_no("rendered frames per second from receiver/frames.csv, the viewer's own "
                                             "log")),
    FigureDef("rtp.on_time_per_second*", note=_no(
        "the viewer's frames.csv (status, decode, rtp_bytes) is its own log; no run-time check — "
        "tests/test_rtp_run.py recomputes it exactly on a real run from the viewer's statuses and the sender's "
        "per-packet bytes (sender/packets.csv)")),
    FigureDef("rtp.video_bitrate_bps.on_time_mean", note=_no("as on_time_per_second, whose sum ÷ the window's seconds "
                                                             "it is (tests/test_rtp_run.py recomputes it exactly)")),
    FigureDef("rtp.video_bitrate_bps.received_mean", ("rtp_received_per_second_vs_totals",),
              "partly: the mean of the per-second bins that check sums against the viewer's totals"),
    FigureDef("rtp.video_bitrate_bps.*", note=_no("the window (from the viewer's capture times) and its count of "
                                                  "seconds: definition, not a measurement")),
    FigureDef("rtp.feedback_rtt_ms.*", note=_no(
        "the sender's own reading of TWCC feedback (sender/feedback_rtt.csv); no second collector sees the "
        "feedback's timing — tests/test_rtp_run.py bounds it by the configured path delay and queue")),
    FigureDef("rtp.playout_deadline_ms", note=_no("configuration of the viewer")),
    FigureDef("rtp.feedback.interval_*", note=_no("the viewer's configuration (its own target and the interval "
                                                  "derived from it)")),
    FigureDef("rtp.feedback.*", note=_no("the sender's record of TWCC feedback it received")),
    FigureDef("competition.link_bps", note=_no("configuration")),
    FigureDef("competition.rtp_received_bps", ("rtp_received_per_second_vs_totals",),
              "partly: the stream's per-second bins it is made of are checked against the viewer's totals"),
    FigureDef("competition.*", note=_no("the bulk flow's goodput is its receiver's own count (and the share a ratio "
                                        "with it)")),
    # --- cross traffic: the VoIP probe ---
    FigureDef("cross_traffic.voip.windows.t0_ns", note=_no("the run's time zero (the runner's clock)")),
    FigureDef("cross_traffic.voip.windows.*.start_s", note=_no("a window's edge: configuration or the SABRE player's "
                                                               "phase log")),
    FigureDef("cross_traffic.voip.windows.*.end_s", note=_no("a window's edge: configuration or the SABRE player's "
                                                             "phase log")),
    FigureDef("cross_traffic.voip.windows.*.packets", note=_no("rows of the probe's CSV in the window")),
    FigureDef("cross_traffic.voip.*", ("probe_delay_within_queue_bound",), "partly: " + _VOIP),
    # --- fidelity ---
    FigureDef("fidelity_table[].configured_rate_bps", note=_no("configuration")),
    FigureDef("fidelity_table[].*", note=_no("the emulator's own evidence (delay lines' stamps, shapers' counters, "
                                             "the pre-run probe), judged in mpvlab/runner/fidelity.py; what it "
                                             "judges, not a figure to judge")),
    FigureDef("fidelity_checks.*", note=_no("the checks' own records")),
)


def _walk(tp: Any, path: str, out: dict[str, str]) -> None:
    origin = get_origin(tp)
    if origin is typing.Annotated:
        _walk(get_args(tp)[0], path, out)
    elif origin in (typing.Union, types.UnionType):
        for a in get_args(tp):
            if a is not type(None):
                _walk(a, path, out)
    elif origin in (list, tuple):
        for a in get_args(tp):
            if a is not Ellipsis:
                _walk(a, path + "[]", out)
    elif origin is dict:
        _walk(get_args(tp)[1], path + ".KEY", out)
    elif origin is Literal or tp in (bool, str, type(None)):
        return
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, f in tp.model_fields.items():
            _walk(f.annotation, f"{path}.{name}" if path else name, out)
    elif tp in (int, float):
        out[path] = "number" if out.get(path, tp.__name__) != tp.__name__ else tp.__name__
    else:                               # Any, an untyped dict's values: the producer's contents
        out[path] = "block"


def figures() -> dict[str, str]:
    """Every numeric figure path of the summary model → "int", "float", "number" (either) or "block"
    (a field the model leaves untyped, listed as one)."""
    from mpvlab.results.summary import Summary
    out: dict[str, str] = {}
    _walk(Summary, "", out)
    return dict(sorted(out.items()))


def row_of(path: str) -> FigureDef | None:
    """The first row whose pattern matches the figure path."""
    return next((f for f in FIGURES if fnmatch.fnmatchcase(path, f.pattern)), None)


def table() -> list[str]:
    """The docs page's section: one row per figure."""
    def cell(s: str) -> str:
        return s.replace("|", "\\|")
    figs = figures()
    rows, checked = [], 0
    for path, kind in figs.items():
        f = row_of(path)
        if f is None:
            raise ValueError(f"summary figure {path} has no row in mpvlab/results/figures.py FIGURES")
        checked += bool(f.checks)
        rows.append(f"| `{path}` | {kind} | {', '.join(f'`{c}`' for c in f.checks) or '—'} | {cell(f.note)} |")
    return [f"{len(figs)} figures: {checked} with a check, {len(figs) - checked} without. `KEY` stands for a dict "
            "key (a path, a role, a mode), `[]` for a list's items; a `block` is a field the model leaves untyped "
            "(its numbers are the producer's). Generated from the summary model and FIGURES in "
            "mpvlab/results/figures.py; a figure the model gains without a row there fails tests/test_figures.py.",
            "", "| figure | type | checked by | note |", "|---|---|---|---|", *rows]
