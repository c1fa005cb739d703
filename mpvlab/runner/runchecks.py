"""Whole-run plausibility checks that catch a broken run the emulator's own counters cannot see.

A host stall (the hypervisor or a SIGSTOP freezing the delay line, the shaper's softirq or the player)
leaves the delay line's lateness small, since the line stamps a packet when it reads it, not when it
arrived, and it leaves every counter consistent; what it cannot hide is a result the configured
network cannot produce. Each check here compares such a result with a bound from the configuration
and, when it fails, adds a warning that starts with the check's name to the fidelity warnings (so
fidelity_ok turns false) and its record to summary["fidelity_checks"][name]:

  probe_delay_within_queue_bound — the VoIP probe's largest one-way delay (kernel receive stamp − send
      stamp) against what the configured path can hold: the bottleneck queue's bytes ÷ its rate, plus
      the largest scheduled one-way propagation delay, plus PROBE_DELAY_MARGIN_S. A probe packet later
      than that waited somewhere the scenario has no queue.
  playback_within_media_and_stalls — each player's playback time (first frame to end of stream)
      against the media's length plus the stalls it recorded, plus PLAYBACK_MARGIN_S. Playback that
      took longer than that was frozen without the player seeing a stall.

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
    if "playback_s" in summary and "underflow_total_s" in summary:
        players["player"] = summary
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
    return out


def run(scenario: Scenario, summary: dict[str, Any], queue_bytes: int | None,
        max_one_way_delay_s: float | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every check that applies to this run: (records by name, warnings)."""
    checks: dict[str, dict[str, Any]] = {}
    p = check_probe_delay(scenario, summary, queue_bytes, max_one_way_delay_s)
    if p is not None:
        checks["probe_delay_within_queue_bound"] = p
    pl = check_playback(scenario, summary)
    if pl is not None:
        checks["playback_within_media_and_stalls"] = pl
    return checks, warnings_of(checks)
