"""Fidelity probes of a physical run, from the client over each path: ping before and after the
emulation (added RTT vs configured) and a plain-TCP curl download (goodput vs the configured rate)."""

from __future__ import annotations

import re
import time
from typing import Any

from mpvlab.runner import fidelity, server
from mpvlab.runner.physical.state import PhysicalRun
from mpvlab.input.scenario import Scenario
from mpvlab.topologies.physical import PathPlan


def ping_min_ms(run: PhysicalRun, p: PathPlan, count: int = 5) -> float | None:
    """Minimum RTT to the server over one path (ping bound to the path's source address)."""
    cp = run.plan.host(run.plan.client).run(
        ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2", "-I", run.client_addrs[p.name],
         p.server_address], check=False, timeout=30)
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", cp.stdout)
    return float(m.group(1)) if m else None


def rate_probe(run: PhysicalRun, sc: Scenario, p: PathPlan) -> dict[str, Any]:
    """Plain-TCP download over one path for probe_duration; goodput vs the configured down rate."""
    secs = sc.fidelity.probe_duration / 1e9
    url = f"http://{p.server_address}:{server.PORT}/video.mp4"
    cp = run.plan.host(run.plan.client).run(
        ["curl", "-sS", "-o", "/dev/null", "--interface", run.client_addrs[p.name], "--max-time", f"{secs:g}",
         "-w", "%{size_download} %{time_starttransfer} %{time_total}", url], check=False, timeout=secs + 30)
    try:
        size, t_first, t_total = (float(x) for x in cp.stdout.split())
    except ValueError:
        return {"ok": False, "error": f"curl exit {cp.returncode}: {cp.stderr.strip()}"}
    goodput = size * 8 / (t_total - t_first) if t_total > t_first else 0.0
    rate = sc.paths[p.name].down.rate
    out: dict[str, Any] = {"bytes": int(size), "seconds": round(t_total - t_first, 3), "goodput_bps": round(goodput)}
    if rate is not None:
        expected = rate * fidelity.GOODPUT_FACTOR
        out |= {"expected_goodput_bps": round(expected), "ratio": round(goodput / expected, 4),
                "tolerance": sc.fidelity.rate_tolerance,
                "ok": abs(goodput / expected - 1) <= sc.fidelity.rate_tolerance}
    return out



def run_probes(run: PhysicalRun, sc: Scenario, schedules: dict[str, fidelity.PathSchedules],
            base_rtt: dict[str, float | None]) -> dict[str, Any]:
    """Per path: the RTT after the emulation against `base_rtt` (before it) and the configured delay
    at this time (not checked when the schedule steps within the probe), then the rate probe."""
    out: dict[str, Any] = {"paths": {}, "warnings": []}
    ok = True
    for p in run.plan.paths:
        t_rel = time.monotonic_ns() - run.ctx.t0_ns
        after = ping_min_ms(run, p)
        sched = schedules[p.name]
        expected_ms = fidelity.expected_rtt_ns(t_rel, sched) / 1e6
        steps = sched.up.steps_between(t_rel, t_rel + 2 * 10**9) + sched.down.steps_between(t_rel, t_rel + 2 * 10**9)
        r: dict[str, Any] = {"base_rtt_min_ms": base_rtt.get(p.name), "rtt_min_ms": after,
                             "added_expected_ms": expected_ms}
        if after is None or base_rtt.get(p.name) is None:
            r["rtt_ok"] = False
            out["warnings"].append(f"{p.name}: ping to {p.server_address} got no answer")
        elif steps:
            r["rtt_ok"] = None
            r["note"] = "delay changed during the probe: not checked"
        else:
            added = after - (base_rtt[p.name] or 0.0)
            r["added_ms"] = round(added, 3)
            r["rtt_ok"] = abs(added - expected_ms) <= sc.fidelity.rtt_tolerance / 1e6
            if not r["rtt_ok"]:
                out["warnings"].append(f"{p.name}: added RTT {added:.2f} ms, configured {expected_ms:.2f} ms")
        r["rate"] = rate_probe(run, sc, p)
        if r["rate"].get("ok") is False:
            out["warnings"].append(f"{p.name}: goodput {r['rate'].get('goodput_bps')} bit/s vs expected "
                                   f"{r['rate'].get('expected_goodput_bps')}")
        ok = ok and r["rtt_ok"] is not False and r["rate"].get("ok") is not False
        out["paths"][p.name] = r
    out["ok"] = ok
    return out

