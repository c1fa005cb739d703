"""The VoIP probe's queuing delay over named windows of a run (SABRE study, docs/studies.md §4).

A whole-run figure mixes start-up, the steady state and the idle link after the last segment (the
probe keeps sending until the run ends), so the summary also gives the delays over:

  * `steady_state`: from the moment every player's playout buffer first held its target — the buffer
    less one segment, which is the on/off client's request threshold and SABRE's default backoff
    threshold and (capped) initial buffer — until the last media download of any player completed.
    The paper's steady state (the first 90 s left out) is this window's start for its 60 s buffer;
  * `sabre_<mode>`: per SABRE mode, when SABRE players ran: the probe packets sent while every SABRE
    player was in that mode (`initial` before its steady state, `refill`, `backoff`); packets sent
    while SABRE players were in different modes form `sabre_mixed`. Only inside the steady-state window.

A packet belongs to a window by its send time (the moment it entered the bottleneck queue, up to
microseconds: mpvlab/topologies/voip_probe.py). Quantiles are nearest-rank (every value was measured).
Pure functions of the probe's CSV rows and the players' own summaries.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

SHARE_ABOVE_MS = (50, 100, 200, 400, 500)
STEADY_DEFINITION = ("from when every player's playout buffer first held the buffer less one segment until "
                     "the last media download completed")


@dataclass(frozen=True)
class Sample:
    t_send_s: float      # on the run's clock (s since t0)
    delay_ms: float


def samples(rows: Iterable[Mapping[str, Any]], t0_ns: int) -> list[Sample]:
    """The probe CSV's rows (t_send_ns, queuing_delay_ns) on the run's clock, in send order."""
    out = [Sample((int(r["t_send_ns"]) - t0_ns) / 1e9, int(r["queuing_delay_ns"]) / 1e6) for r in rows]
    out.sort(key=lambda s: s.t_send_s)
    return out


def quantile(sorted_xs: Sequence[float], q: float) -> float | None:
    if not sorted_xs:
        return None
    return sorted_xs[min(len(sorted_xs) - 1, max(0, math.ceil(q * len(sorted_xs)) - 1))]


def stats(delays_ms: Sequence[float]) -> dict[str, Any]:
    xs = sorted(delays_ms)
    n = len(xs)
    return {
        "packets": n,
        **{k: (None if (v := quantile(xs, q)) is None else round(v, 3))
           for k, q in (("p50", .5), ("p95", .95), ("p99", .99), ("max", 1.0))},
        # share of packets strictly above each threshold: 1 - (count <= x) / n
        "share_above_ms": {str(x): (round(1 - bisect.bisect_right(xs, float(x)) / n, 6) if n else None)
                           for x in SHARE_ABOVE_MS},
    }


def buffer_target_reached_s(player: Mapping[str, Any], buffer_s: float) -> float | None:
    """When the player's buffer first held buffer − one segment: the end of the first media download
    after which it did (the client's own record, segments[].buffer_s_at_done); None if never."""
    seg = player.get("segment_s")
    if not seg:
        return None
    target = buffer_s - float(seg)
    for g in player.get("segments") or []:
        if g.get("buffer_s_at_done") is not None and g["buffer_s_at_done"] >= target - 1e-6:
            return float(g["t_last_byte"])
    return None


def steady_state(players: Mapping[str, Mapping[str, Any]], buffer_s: float) -> tuple[float, float] | str:
    """(start, end) in seconds since t0, or why there is none."""
    starts, ends = [], []
    for role, ps in sorted(players.items()):
        segs = ps.get("segments") or []
        if not segs:
            return f"{role} recorded no media segments (the own DASH client records them)"
        t = buffer_target_reached_s(ps, buffer_s)
        if t is None:
            return f"{role}'s buffer never held {buffer_s:g} s less one segment"
        starts.append(t)
        ends.append(max(float(g["t_last_byte"]) for g in segs))
    if not starts:
        return "no players"
    start, end = max(starts), max(ends)
    if end <= start:
        return f"the last download ended ({end:.3f} s) before every buffer was full ({start:.3f} s)"
    return start, end


def sabre_modes(player: Mapping[str, Any]) -> list[tuple[float, str]]:
    """(t, mode) from a SABRE player's periodic checks: `initial` before its steady state."""
    out: list[tuple[float, str]] = []
    for c in player.get("sabre_checks") or []:
        mode = "initial" if c.get("phase") == "initial" else str(c["mode"])
        if not out or out[-1][1] != mode:
            out.append((float(c["t"]), mode))
    return out


def _mode_at(timeline: list[tuple[float, str]], t: float) -> str | None:
    i = bisect.bisect_right([x[0] for x in timeline], t) - 1
    return timeline[i][1] if i >= 0 else None


def windows(rows: Iterable[Mapping[str, Any]], t0_ns: int, players: Mapping[str, Mapping[str, Any]],
            buffer_s: float) -> dict[str, Any]:
    """The summary's cross_traffic.voip.windows record."""
    ss = samples(rows, t0_ns)
    out: dict[str, Any] = {"t0_ns": t0_ns, "whole_run": {"start_s": ss[0].t_send_s if ss else None,
                                         "end_s": ss[-1].t_send_s if ss else None,
                                         "definition": "every probe packet received",
                                         **stats([s.delay_ms for s in ss])}}
    st = steady_state(players, buffer_s)
    if isinstance(st, str):
        out["steady_state"] = None
        out["steady_state_missing"] = st
        return out
    a, b = st
    inside = [s for s in ss if a <= s.t_send_s <= b]
    out["steady_state"] = {"start_s": round(a, 3), "end_s": round(b, 3), "definition": STEADY_DEFINITION,
                           **stats([s.delay_ms for s in inside])}
    timelines = [sabre_modes(ps) for _, ps in sorted(players.items()) if ps.get("sabre_checks")]
    if timelines:
        by_mode: dict[str, list[float]] = {}
        for s in inside:
            modes = {_mode_at(tl, s.t_send_s) for tl in timelines}
            key = modes.pop() if len(modes) == 1 else "mixed"
            by_mode.setdefault(f"sabre_{key}", []).append(s.delay_ms)
        for k in sorted(by_mode):
            out[k] = {"start_s": round(a, 3), "end_s": round(b, 3),
                      "definition": f"steady-state packets sent while every SABRE player was in mode "
                                    f"{k.removeprefix('sabre_')}" if k != "sabre_mixed" else
                                    "steady-state packets sent while SABRE players were in different modes",
                      **stats(by_mode[k])}
    return out
