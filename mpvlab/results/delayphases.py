"""The RTT each path actually had in each phase of its delay schedule (summary.json
`paths.<name>.rtt_by_phase`).

A scenario's delay pattern says what the delay lines add; whether an extra 60 ms landed on one
direction or on both (the Wi-Fi/LTE study does not say, docs/studies.md §1) and how much queueing
sat on top of it are visible only in the RTT the transport saw. So per path:

  * the configured RTT at time t is the down delay plus the up delay the schedules give at t (the
    delay lines' only contribution: the emulated links add no propagation of their own);
  * a *phase* is a configured-RTT level; its intervals are the stretches of [0, end) at that level;
  * the evidence is the server's own RTT estimate of each MPTCP subflow on the path (`srtt_ms` of
    data/subflows.csv, `ss` on the server, ~4 samples a second), taken only from
    `SETTLE_S` after each interval begins: srtt is a moving average and carries the previous level
    for a few round trips after a step;
  * per phase: the seconds it lasted, the samples used, and srtt min / p50 / p90. The minimum is
    the closest the samples came to the bare path (configured RTT + serialisation); p50 and p90
    include the bottleneck queue.

Pure functions of the schedules and the sampler's rows, so a test can plant both.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from mpvlab.links.schedule import Schedule

SETTLE_S = 0.5
DEFINITION = ("per configured-RTT level (down + up delay of the path's schedules): its seconds in [0, end) and the "
              "srtt (ss on the server) of the path's MPTCP subflows sampled from 0.5 s after each step to the next; "
              "min is the nearest the samples came to the bare path, p50/p90 include the bottleneck queue")


def phase_intervals(down: Schedule, up: Schedule, end_s: float) -> dict[int, list[tuple[float, float]]]:
    """Configured RTT (ns) → the [start, end) intervals (s) of [0, end_s) at that RTT."""
    end_ns = int(end_s * 1e9)
    if end_ns <= 0:
        return {}
    edges = sorted({0, *(t for t, _ in down.steps_between(0, end_ns)), *(t for t, _ in up.steps_between(0, end_ns))})
    out: dict[int, list[tuple[float, float]]] = {}
    for a, b in zip(edges, [*edges[1:], end_ns]):
        rtt = down.delay_at(a) + up.delay_at(a)
        ivs = out.setdefault(rtt, [])
        if ivs and math.isclose(ivs[-1][1], a / 1e9):
            ivs[-1] = (ivs[-1][0], b / 1e9)       # the same level across an edge of the other direction
        else:
            ivs.append((a / 1e9, b / 1e9))
    return out


def _quantile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of sorted values (every value was measured)."""
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def rtt_by_phase(down: Schedule, up: Schedule, end_s: float, srtt_samples: Iterable[tuple[float, float]],
                 settle_s: float = SETTLE_S) -> list[dict[str, Any]]:
    """One record per configured-RTT level, lowest first. `srtt_samples`: (t_s, srtt_ms) of the path's
    subflows on the run's clock."""
    samples = sorted(srtt_samples)
    out = []
    for rtt_ns, ivs in sorted(phase_intervals(down, up, end_s).items()):
        used = sorted(v for t, v in samples if any(a + settle_s <= t < b for a, b in ivs))
        rec: dict[str, Any] = {"configured_rtt_ms": round(rtt_ns / 1e6, 3),
                               "seconds": round(sum(b - a for a, b in ivs), 3), "intervals": len(ivs),
                               "samples": len(used)}
        for key, q in (("srtt_min_ms", 0.0), ("srtt_p50_ms", 0.5), ("srtt_p90_ms", 0.9)):
            rec[key] = round(used[0] if q == 0.0 else _quantile(used, q), 3) if used else None
        out.append(rec)
    return out


def path_srtt_samples(rows: Iterable[Mapping[str, str]], client_addr: str) -> list[tuple[float, float]]:
    """(t_s, srtt_ms) of the MPTCP subflows whose peer (the client's end) is `client_addr`, from
    data/subflows.csv rows."""
    out = []
    for r in rows:
        host = r.get("peer", "").rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
        if host == client_addr and r.get("mptcp") == "1" and r.get("srtt_ms"):
            out.append((float(r["t_s"]), float(r["srtt_ms"])))
    return out
