"""The shared-bottleneck kind's part of the summary (shared.py is the kind's backend; this is what it
reports): each player's QoE and their aggregate, the bottleneck's counters, the cross traffic and the
server's subflows for video (summarise), or a UDP workload's record beside the bulk flow it competed
with (summarise_udp). Every part is checked against its typed model (results/summary.py) as it is built.
"""

from __future__ import annotations

import csv
import math
from typing import Any

from mpvlab.core.errors import RunFailed
from mpvlab.links.emulator import FRAME_BYTES
from mpvlab.results import delaywindows, metrics
from mpvlab.results.summary import (BottleneckRecord, ClientCounters, Competition, CrossTraffic as CrossTrafficPart,
                                    SharedAggregate, SharedPlayer, Subflow, build, build_each, build_list)
from mpvlab.runner import sampling, steps
from mpvlab.runner.context import RunContext
from mpvlab.runner.workloads.base import Ends, Outcome
from mpvlab.runner.workloads.video import dash_view, network_discards
from mpvlab.topologies import shared_bottleneck as sb

PATH_LABEL = "shared"       # the delay lines' and queue folder's label (the path's name is the user's)
TCP_PAYLOAD = 1448          # per full frame: 1500 − IP 20 − TCP 20 − timestamps 12


def summarise_udp(ctx: RunContext, ends: Ends, outcome: Outcome, bottleneck: dict[str, Any], cross: dict[str, Any],
                  before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
                  samplers: list[sampling.Sampler]) -> dict[str, Any]:
    """The kind's part of the summary for a UDP workload (rtp: one viewer in client0): its own record,
    the bottleneck and the cross traffic, and the viewer's interface counters checked against the
    datagrams its receiver read (views.udp_wire_check) — its own interface, as the bottleneck's also
    carries the cross traffic."""
    (viewer,) = ends.clients
    assert viewer.iface is not None
    counters = build_each(ClientCounters, "clients", {viewer.role: {
        "interface": viewer.iface, "rx_bytes": after[viewer.role]["rx_bytes"] - before[viewer.role]["rx_bytes"],
        "rx_packets": after[viewer.role]["rx_packets"] - before[viewer.role]["rx_packets"]}})
    bulk = cross.get("bulk")
    build(CrossTrafficPart, "cross_traffic", cross)
    return {
        "transport": f"udp, {ctx.scenario.workload.kind} to one client ({viewer.role})",
        **outcome.fields,
        "competition": competition_view(bottleneck["rate_bps"], outcome.fields.get("rtp") or {}, bulk),
        "clients": counters,
        "bottleneck": bottleneck,
        "cross_traffic": cross,
        "cross_checks": {},         # filled by the cross-checks (crosschecks.py) at the run's end
        "subflows": [],
        "warnings": [],
        "sampler_errors": [e for s in samplers for e in s.errors],
    }


def competition_view(link_bps: int | None, rtp: dict[str, Any], bulk: dict[str, Any] | None) -> dict[str, Any] | None:
    """Both flows' rates over the bulk flow's interval (null when no bulk flow ran): the viewer's 1 s
    received bins that lie wholly inside it (a bin half inside would mix in the stream alone) and the
    bulk flow's goodput over the same interval."""
    if not bulk or not bulk.get("seconds") or bulk.get("goodput_bps") is None:
        return None
    lo, hi = bulk["start_s"], bulk["start_s"] + bulk["seconds"]
    bins = [x["received_bps"] for x in rtp.get("received_per_second", [])
            if x["second"] >= math.ceil(lo) and x["second"] + 1 <= hi]
    rtp_bps = round(sum(bins) / len(bins)) if bins else None
    total = (rtp_bps or 0) + bulk["goodput_bps"]
    return build(Competition, "competition", {
        "link_bps": link_bps, "interval_s": [lo, round(hi, 3)], "rtp_bins": len(bins),
        "rtp_received_bps": rtp_bps, "bulk_goodput_bps": bulk["goodput_bps"],
        "rtp_share": round(rtp_bps / total, 4) if rtp_bps is not None and total else None,
        "definition": "over the bulk flow's interval: the mean of the viewer's whole 1 s received bins "
                      "inside it (RTP bytes, UDP payload) and the bulk flow's goodput (TCP payload)"})


def bottleneck_view(ctx: RunContext, leaf_rx: dict[str, int], tbf_before: dict[str, int] | None,
                    tbf_after: dict[str, int] | None, window_s: float, workload_payload: int,
                    cross: dict[str, Any]) -> dict[str, Any]:
    """The shared link over the collectors' window: its configuration, what each leaf received, the
    tbf's counters and utilisation, and the payload every flow got beside the ideal."""
    (pname, spec), = ctx.scenario.paths.items()
    bottleneck: dict[str, Any] = {
        "path": pname, "rate_bps": spec.down.rate, "limit_bytes": spec.down.queue_byte_bound(), "buffer_counting": spec.down.buffer_counting,
        "burst_bytes": spec.down.effective_burst(), "window_s": round(window_s, 3),
        "leaf_rx_bytes": leaf_rx, "leaf_rx_bytes_total": sum(leaf_rx.values()),
        "queue": steps.queue_view(ctx.data / "queues" / PATH_LABEL, ctx.queue_rows),
    }
    if tbf_before and tbf_after:
        tbf = {k: tbf_after[k] - tbf_before[k] for k in tbf_before}
        bottleneck["tbf"] = tbf
        assert spec.down.rate is not None
        bottleneck["utilisation"] = round(tbf["bytes"] * 8 / (spec.down.rate * window_s), 4)
    # Payload the bottleneck carried in the window: the workload's (players' HTTP bodies, RTP
    # datagrams), the bulk flow's goodput and the probe's UDP payload (an upper bound: rate × window
    # × 1448/1514 for full TCP frames).
    payload = workload_payload
    if "bulk" in cross:
        payload += cross["bulk"].get("bytes_received") or 0
    if "voip" in cross:
        payload += cross["voip"]["received"] * (cross["voip"]["packet_size"] - 28)
    bottleneck["payload_bytes"] = payload
    if spec.down.rate:
        bottleneck["payload_ideal_bytes"] = round(spec.down.rate / 8 * window_s * TCP_PAYLOAD / FRAME_BYTES)
    return build(BottleneckRecord, "bottleneck", bottleneck)


PLAYER_KEYS = ("underflows", "underflow_total_s", "picture_discards", "picture_discards_no_underflow",
               "frames_rendered_late", "frames_accounted", "underflow_episodes", "frames_expected",
               "frames_rendered", "startup_delay_s", "stall_ratio", "playback_s", "bytes_received",
               "download_complete", "cpu")


def player_start(configured_ns: int, ps: dict[str, Any]) -> dict[str, Any]:
    """A player's configured start (topology.client_stagger), its actual one (its own `start` event,
    already on the run's clock) and the window its QoE covers."""
    actual, end = ps.get("t_start"), ps.get("t_eos")
    return {"configured_s": configured_ns / 1e9,
            "actual_s": round(float(actual), 6) if isinstance(actual, (int, float)) else None,
            "qoe_window_s": ([round(float(actual), 6), round(float(end), 6)]
                             if isinstance(actual, (int, float)) and isinstance(end, (int, float)) else None)}


def _sum(vals: list[Any]) -> Any:
    return sum(vals) if vals and all(isinstance(v, (int, float)) for v in vals) else None


def summarise(ctx: RunContext, topo: sb.SharedBottleneck, outcome: Outcome,
              before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
              tbf_before: dict[str, int] | None, tbf_after: dict[str, int] | None, window_s: float,
              samplers: list[sampling.Sampler], cross: dict[str, Any]) -> dict[str, Any]:
    """The kind's part of the summary: each player's QoE, their aggregate, the bottleneck's counters
    and the cross traffic (the run head and the workload's warnings come from lifecycle.py)."""
    summaries = outcome.per_client
    leaf_bytes = {role: {"rx_bytes": after[role]["rx_bytes"] - before[role]["rx_bytes"],
                         "rx_packets": after[role]["rx_packets"] - before[role]["rx_packets"]} for role in before}
    players = _players(ctx, topo, summaries, leaf_bytes)
    warnings: list[str] = []
    aggregate = _aggregate(players)
    build(SharedAggregate, "aggregate", aggregate)
    voip = cross.get("voip")
    if voip and voip.get("csv"):
        # the probe's delays over named windows (whole run, steady state, SABRE's modes): mpvlab/results/delaywindows.py
        with open(voip["csv"], newline="") as fh:
            rows = list(csv.DictReader(fh))
        voip["windows"] = delaywindows.windows(rows, ctx.t0_ns, summaries, ctx.scenario.playout_buffer_ns / 1e9)
    build(CrossTrafficPart, "cross_traffic", cross)
    bottleneck = bottleneck_view(ctx, {r: b["rx_bytes"] for r, b in leaf_bytes.items()}, tbf_before, tbf_after,
                                 window_s, _sum([v["bytes_received"] for v in players.values()]) or 0, cross)
    subflows = _subflows(ctx, topo, samplers)
    return {
        "transport": "mptcp, one subflow per player",
        "video_length_s": outcome.fields["video_length_s"],
        "player_mode": outcome.fields["player_mode"],
        "http": outcome.fields["http"],
        "players": players,
        "aggregate": aggregate,
        "bottleneck": bottleneck,
        "cross_traffic": cross,
        "subflows": subflows,
        "warnings": warnings,
        "sampler_errors": [e for s in samplers for e in s.errors],
    }


def _players(ctx: RunContext, topo: sb.SharedBottleneck, summaries: dict[str, dict[str, Any]],
             leaf_bytes: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """Each player's QoE (PLAYER_KEYS of its own summary), its start, DASH view and throughput."""
    players: dict[str, dict[str, Any]] = {}
    configured = dict(zip([lf.role for lf in topo.clients], ctx.scenario.client_starts_ns))
    for role, ps in summaries.items():
        v: dict[str, Any] = {k: ps.get(k) for k in PLAYER_KEYS}
        v["start"] = player_start(configured.get(role, 0), ps)
        v["picture_discards_network"] = network_discards(ps.get("picture_discards"),
                                                         ps.get("picture_discards_no_underflow"))
        v["dash"] = dash_view(ps) if ps.get("dash") else None
        v["interface_rx_bytes"] = leaf_bytes[role]["rx_bytes"]
        v["mean_throughput_bps"] = (round(ps["bytes_received"] * 8 / ps["playback_s"])
                                    if ps.get("playback_s") and ps.get("bytes_received") else None)
        players[role] = build(SharedPlayer, f"players.{role}", v)
    return players


def _aggregate(players: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The players' totals, means and fairness (not yet checked against SharedAggregate)."""
    thr = [v["mean_throughput_bps"] for v in players.values() if v["mean_throughput_bps"]]
    stalls = [v["stall_ratio"] for v in players.values() if v["stall_ratio"] is not None]
    startups = [v["startup_delay_s"] for v in players.values() if v["startup_delay_s"] is not None]

    def dash_mean(key: str) -> float | None:
        # the study's per-run QoE: defined only when every player ran DASH and reported it
        vals = [(v["dash"] or {}).get(key) for v in players.values()]
        nums = [x for x in vals if isinstance(x, (int, float))]
        return round(sum(nums) / len(nums), 6) if vals and len(nums) == len(vals) else None

    def dash_all(key: str) -> list[float] | None:
        # every player's value, when at least two players ran DASH and all reported it (fairness is
        # about how players differ: one player has none)
        vals = [(v["dash"] or {}).get(key) for v in players.values()]
        nums = [float(x) for x in vals if isinstance(x, (int, float))]
        return nums if len(vals) >= 2 and len(nums) == len(vals) else None

    rates, stall_rates = dash_all("bitrate_avg_bps"), dash_all("stall_rate")
    return {
        "players": len(players),
        **{f"{k}_mean": dash_mean(k) for k in ("quality_avg", "bitrate_avg_bps", "bitrate_switches", "stall_rate",
                                               "rebuffer_ratio")},
        "bitrate_fairness_jain": round(metrics.jain_index(rates), 6) if rates and any(rates) else None,
        "bitrate_avg_bps_min": min(rates) if rates else None,
        "bitrate_avg_bps_max": max(rates) if rates else None,
        "stall_rate_max": max(stall_rates) if stall_rates else None,
        "frames_accounted_all": all(v["frames_accounted"] for v in players.values()),
        **{k: _sum([v[k] for v in players.values()]) for k in (
            "frames_expected", "frames_rendered", "picture_discards", "underflows", "underflow_total_s",
            "bytes_received", "interface_rx_bytes")},
        "stall_ratio_mean": round(sum(stalls) / len(stalls), 6) if stalls else None,
        "stall_ratio_max": max(stalls) if stalls else None,
        "startup_delay_s_mean": round(sum(startups) / len(startups), 6) if startups else None,
        # Jain's index of the players' mean throughputs: 1 = equal shares, 1/N = one player took all
        # (metrics.jain_index, the report's one formula; undefined, so None, when every player got 0)
        "throughput_fairness_jain": (round(metrics.jain_index(thr), 4)
                                     if len(thr) == len(players) and thr and any(thr) else None),
    }


def _subflows(ctx: RunContext, topo: sb.SharedBottleneck, samplers: list[sampling.Sampler]) -> list[dict[str, Any]]:
    """The server's subflows the samplers saw: every one must run the run's CC, and every player must
    have one (a player whose video went elsewhere, or nowhere, fails the run)."""
    seen: dict[tuple[str, str], str] = {}
    for s in samplers:
        seen.update(s.subflows_seen)
    subflows = build_list(Subflow, "subflows", [{"local": k[0], "peer": k[1], "cc": v} for k, v in sorted(seen.items())])
    expected_cc = ctx.extra_prov["cc"]["kernel_name"]
    wrong = [s for s in subflows if s["cc"] != expected_cc]
    if wrong:
        raise RunFailed(f"player subflows not running {expected_cc}: {wrong}")
    peers = {s["peer"].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:") for s in subflows}
    missing = [lf.role for lf in topo.clients if lf.addr not in peers]
    if missing:
        raise RunFailed(f"no video connection to {missing} was seen on the server (subflows: {subflows})")
    return subflows
