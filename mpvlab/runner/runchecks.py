"""Whole-run plausibility checks that catch a broken run the emulator's own counters cannot see.

A host stall (the hypervisor or a SIGSTOP freezing the delay line, the shaper's softirq or the player)
leaves the delay line's lateness small, since the line stamps a packet when it reads it, not when it
arrived, and it leaves every counter consistent; what it cannot hide is a result the configured
network cannot produce. Each check here compares such a result with a bound from the configuration
and, when it fails, adds a warning that starts with the check's name to the fidelity warnings (so
fidelity_ok turns false) and its record to summary["fidelity_checks"][name]. The run calls them through
mpvlab/runner/crosschecks.py, the one entry point of every check:

  probe_delay_within_queue_bound — the VoIP probe's largest one-way delay (kernel receive stamp − send
      stamp) against what the configured path can hold: the bottleneck queue's bytes ÷ its rate, plus
      the largest scheduled one-way propagation delay, plus PROBE_DELAY_MARGIN_S. A probe packet later
      than that waited somewhere the scenario has no queue.
  playback_within_media_and_stalls — each player's playback time (first frame to end of stream)
      against the media's length plus the stalls it recorded, plus PLAYBACK_MARGIN_S. Playback that
      took longer than that was frozen without the player seeing a stall.
  no_simultaneous_silence — within the probe's sending window, no interval of at least
      silence_threshold_s in which neither the probe nor any client interface (links.csv) received
      anything. While the probe sends every 15 ms, a working path delivers either the probe's packet
      (within queue ÷ rate + propagation) or, when the queue is full and drops it, the queue's own
      packets at the link's rate; either way the receivers see bytes. Everything silent for longer
      means the emulator itself stopped forwarding.

Paths with a capacity trace, a loss model or outages are not judged by the probe check (their
service times are the trace's, which this bound does not model).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from mpvlab.input.scenario import Scenario

# The probe check's margin over queue ÷ rate + propagation, from what the bound leaves out: the delay
# line may release a packet up to fidelity.LATENESS_MAX_US (20 ms) late, one full frame is in service
# at the shaper (2 ms at 6 Mbit/s), and the probe's sender stamps its clock just before sendto, so a
# descheduling between the two (tens of ms under 50 % CPU steal) adds to the measured delay. 100 ms
# covers these with room; a host stall this check exists for lasts seconds.
PROBE_DELAY_MARGIN_S = 0.100
# The playback check's margin: the end-of-stream handshake after the last frame and the stall
# detector's resolution under CPU load (each a fraction of a second).
PLAYBACK_MARGIN_S = 2.0
# The silence check's floor: the longest silence a working run may show is the probe's delay bound
# (queue ÷ rate + propagation + margin, probe_delay_bound_s), plus one links.csv sample period
# (a sample only says bytes arrived since the one before). A configured path whose bound is short
# still gets SILENCE_FLOOR_S: 1 s is 66 of the probe's 15 ms intervals in a row with nothing at all
# received, far beyond the few consecutive probe losses a full tail-drop queue gives while the
# link keeps delivering, and far shorter than the seconds a host stall lasts.
SILENCE_FLOOR_S = 1.0
# links.csv rows whose rx_bytes grew by less than this since the row before are link chatter (ARP),
# not delivery (mpvlab/runner/views.py DATA_STEP_BYTES).
SILENCE_STEP_BYTES = 1000


def probe_delay_bound_s(queue_bytes: int, rate_bps: float, max_one_way_delay_s: float) -> float:
    """The largest one-way delay the configured path allows a packet: queue drain + propagation + margin."""
    return queue_bytes * 8 / rate_bps + max_one_way_delay_s + PROBE_DELAY_MARGIN_S


def max_owd_s(csv_path: Path) -> tuple[float | None, int]:
    """The probe record's largest one-way delay (s) and its packet count."""
    worst, n = None, 0
    with csv_path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            owd = int(row["owd_ns"]) / 1e9
            n += 1
            worst = owd if worst is None or owd > worst else worst
    return worst, n


def check_probe_delay(scenario: Scenario, summary: dict[str, Any], queue_bytes: int | None,
                      max_one_way_delay_s: float | None) -> dict[str, Any] | None:
    """probe_delay_within_queue_bound; None when the run had no probe or no shaped, unimpaired path."""
    voip = (summary.get("cross_traffic") or {}).get("voip")
    if not voip or not voip.get("csv") or queue_bytes is None or max_one_way_delay_s is None:
        return None
    (spec,) = scenario.paths.values() if len(scenario.paths) == 1 else (None,)
    if spec is None or spec.down.rate is None or spec.down.has_impairments:
        return None
    bound = probe_delay_bound_s(queue_bytes, spec.down.rate, max_one_way_delay_s)
    worst, n = max_owd_s(Path(voip["csv"]))
    rec: dict[str, Any] = {
        "ok": worst is None or worst <= bound, "probe_owd_max_ms": None if worst is None else round(worst * 1e3, 3),
        "bound_ms": round(bound * 1e3, 3), "queue_bytes": queue_bytes, "rate_bps": spec.down.rate,
        "propagation_max_ms": round(max_one_way_delay_s * 1e3, 3), "margin_ms": PROBE_DELAY_MARGIN_S * 1e3,
        "packets": n}
    return rec


def check_playback(scenario: Scenario, summary: dict[str, Any]) -> dict[str, Any] | None:
    """playback_within_media_and_stalls over every player the summary names (none: None, and the
    media's length is not asked for, so workloads without one pass through)."""
    players = {role: v for role, v in (summary.get("players") or {}).items() if isinstance(v, dict)}
    if "underflow_total_s" in summary and ("playback_s" in summary or "duration_s" in summary):
        # one player on a dual-path/dumbbell run: its playback time is the summary's duration_s
        # (workloads/video.py), which a bulk or rtp run also has but without underflow_total_s
        players["player"] = {"playback_s": summary.get("playback_s", summary.get("duration_s")),
                             "underflow_total_s": summary["underflow_total_s"]}
    per: dict[str, Any] = {}
    media_s = scenario.media_s if players else 0.0
    for role, v in players.items():
        pb, stalls = v.get("playback_s"), v.get("underflow_total_s")
        if not isinstance(pb, (int, float)) or not isinstance(stalls, (int, float)):
            continue
        bound = media_s + stalls + PLAYBACK_MARGIN_S
        per[role] = {"ok": pb <= bound, "playback_s": round(pb, 3), "bound_s": round(bound, 3),
                     "media_s": media_s, "stalls_s": round(stalls, 3)}
    if not per:
        return None
    return {"ok": all(p["ok"] for p in per.values()), "margin_s": PLAYBACK_MARGIN_S, "players": per}


def _link_activity(data: Path, t0_ns: int) -> list[tuple[int, int]]:
    """[from, to] (CLOCK_MONOTONIC ns) of every links.csv sample period in which a client interface
    received at least SILENCE_STEP_BYTES; every links.csv under the run's data folder (one per client
    on a shared bottleneck)."""
    out: list[tuple[int, int]] = []
    for f in sorted(data.rglob("links.csv")):
        prev: dict[tuple[str, str], tuple[int, int]] = {}
        with f.open(newline="") as fh:
            for row in csv.DictReader(fh):
                key, t = (row["path"], row["interface"]), t0_ns + round(float(row["t_s"]) * 1e9)
                b = int(row["rx_bytes"])
                if key in prev and b - prev[key][1] >= SILENCE_STEP_BYTES:
                    out.append((prev[key][0], t))
                prev[key] = (t, b)
    return out


def silences(probe_recv_ns: list[int], links: list[tuple[int, int]], threshold_ns: int) -> list[tuple[int, int]]:
    """The intervals, between the probe's first and last received packet, of at least threshold_ns with
    no probe packet received and no links.csv period that saw bytes overlapping them."""
    if not probe_recv_ns:
        return []
    lo, hi = min(probe_recv_ns), max(probe_recv_ns)
    busy = sorted([(t, t) for t in probe_recv_ns] + [(a, b) for a, b in links if b >= lo and a <= hi])
    out, reach = [], lo
    for a, b in busy:
        if a - reach >= threshold_ns:
            out.append((reach, a))
        reach = max(reach, b)
    return out


def check_silence(scenario: Scenario, summary: dict[str, Any], data: Path, t0_ns: int,
                  queue_bytes: int | None, max_one_way_delay_s: float | None,
                  sample_hz: float) -> dict[str, Any] | None:
    """no_simultaneous_silence; None without a probe record (without the probe nothing says the run
    should have been sending: a player with a full buffer rightly pauses for seconds) or with a
    path whose trace, loss model or outages may silence it by design."""
    voip = (summary.get("cross_traffic") or {}).get("voip")
    if not voip or not voip.get("csv") or not Path(voip["csv"]).exists():
        return None
    if any(spec.down.has_impairments or spec.up.has_impairments for spec in scenario.paths.values()):
        return None
    (spec,) = scenario.paths.values() if len(scenario.paths) == 1 else (None,)
    drain = (probe_delay_bound_s(queue_bytes, spec.down.rate, max_one_way_delay_s)
             if spec is not None and spec.down.rate and queue_bytes is not None and max_one_way_delay_s is not None
             else 0.0)
    threshold = max(SILENCE_FLOOR_S, drain + 1.0 / sample_hz)
    with Path(voip["csv"]).open(newline="") as fh:
        recv = [int(r["t_recv_ns"]) for r in csv.DictReader(fh)]
    gaps = silences(recv, _link_activity(data, t0_ns), round(threshold * 1e9))
    longest = max((b - a for a, b in gaps), default=0) / 1e9
    return {"ok": not gaps, "silence_threshold_s": round(threshold, 3), "silences": len(gaps),
            "longest_silence_s": round(longest, 3),
            "intervals_s": [[round((a - t0_ns) / 1e9, 3), round((b - t0_ns) / 1e9, 3)] for a, b in gaps[:10]],
            "probe_packets": len(recv)}


def warnings_of(checks: dict[str, dict[str, Any]]) -> list[str]:
    """One named warning per failed check."""
    out = []
    p = checks.get("probe_delay_within_queue_bound")
    if p is not None and not p["ok"]:
        out.append(f"probe_delay_within_queue_bound: a VoIP probe packet took {p['probe_owd_max_ms']:.1f} ms one way, "
                   f"more than the configured path can hold ({p['bound_ms']:.1f} ms = queue {p['queue_bytes']} B ÷ "
                   f"{p['rate_bps'] / 1e6:g} Mbit/s + propagation {p['propagation_max_ms']:g} ms + margin "
                   f"{p['margin_ms']:g} ms): the packet waited where the scenario has no queue (a host stall?)")
    pl = checks.get("playback_within_media_and_stalls")
    if pl is not None and not pl["ok"]:
        bad = [f"{role} {v['playback_s']:g} s > {v['bound_s']:g} s" for role, v in pl["players"].items() if not v["ok"]]
        out.append("playback_within_media_and_stalls: playback took longer than the media plus its recorded stalls "
                   f"plus {pl['margin_s']:g} s (" + "; ".join(bad) + "): the player was frozen without seeing a stall")
    si = checks.get("no_simultaneous_silence")
    if si is not None and not si["ok"]:
        more = "" if si["silences"] == 1 else f" and {si['silences'] - 1} more"
        out.append(f"no_simultaneous_silence: up to {si['longest_silence_s']:g} s (first at run time {si['intervals_s'][0]} s{more}) "
                   "neither the probe nor any client interface received anything while the probe was sending "
                   f"(threshold {si['silence_threshold_s']:g} s): the emulator stopped forwarding (a host stall?)")
    return out
