"""The emulator's own fidelity check, run before the video in every run: probe each path and compare
achieved RTT and rate with what the scenario configured. The verdict goes into provenance.json; a
run beyond tolerance is marked with a fidelity warning (its numbers still stand, flagged).

RTT: 100-byte UDP echoes at 100 Hz from each client address; expected RTT of a probe sent at t is
  d_up(t) + d_down(t + d_up(t)).
A token bucket does not delay such sparse probes (142-byte frames every 10 ms): its bucket (burst
>= 3028 B) stays full as long as the rate exceeds 142 B / 10 ms = 114 kbit/s, and for 100 probes
even below that, so no serialization time is added.
Rate: a TCP download per path from the server; goodput over the last (duration − 1 s) against the
token bucket's ideal rate × 1448/1514 (TCP payload per full frame with timestamps).
Host: the CPU time the hypervisor took during each probe phase is recorded beside the figures.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from links.schedule import Schedule
from core.hoststeal import StealMeter, StealWindow
from mpvlab.probe import PROBE_CC
from mpvlab.scenario import Scenario
from topologies.dual_path import DualPath

PROBE_PORT = 5201
GOODPUT_FACTOR = 1448 / 1514
# Above this share of CPU time taken by the hypervisor during a probe phase, a fidelity warning
# names it: such a stall alone can explain a shortfall of that size (mpvlab/hoststeal.py).
HOST_STEAL_NOTE = 0.02


@dataclass
class PathSchedules:
    down: Schedule
    up: Schedule


def expected_rtt_ns(t_send_rel: int, sched: PathSchedules) -> int:
    up_ns = sched.up.delay_at(t_send_rel)
    return up_ns + sched.down.delay_at(t_send_rel + up_ns)


def _percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def run_probes(topo: DualPath, scenario: Scenario, schedules: dict[str, PathSchedules], t0_ns: int,
               workdir: Path) -> dict[str, Any]:
    f = scenario.fidelity
    dur_s = f.probe_duration / 1e9
    rtt_count = 100
    py = sys.executable
    # One probe server per server address, bound to it, so replies come from the address probed
    # (under `per-path` addressing each path's probes go to that path's own server address).
    cwd = Path(__file__).resolve().parent.parent
    servers = [topo.server.ns.popen([py, "-m", "mpvlab.probe", "serve", "--bind", addr, "--port", str(PROBE_PORT),
                                     "--duration", str(dur_s + 4.0)], cwd=cwd)
               for addr in topo.server_addrs()]
    steal: dict[str, StealWindow] = {}
    try:
        _wait_listening(topo)
        with StealMeter() as rtt_meter:
            procs = [topo.client.ns.popen(
                [py, "-m", "mpvlab.probe", "rtt", "--src", p.client_addr, "--dst", p.server_addr,
                 "--port", str(PROBE_PORT), "--count", str(rtt_count), "--interval-ms", "10",
                 "--out", str(workdir / f"probe-rtt-{p.name}.csv")], cwd=cwd) for p in topo.paths]
            for pr in procs:
                pr.wait(timeout=30)
        steal["rtt_probes"] = rtt_meter.window
        with StealMeter() as rate_meter:
            procs = [topo.client.ns.popen(
                [py, "-m", "mpvlab.probe", "bulk", "--src", p.client_addr, "--dst", p.server_addr,
                 "--port", str(PROBE_PORT), "--duration", str(dur_s),
                 "--out", str(workdir / f"probe-rate-{p.name}.csv")], cwd=cwd) for p in topo.paths]
            for pr in procs:
                pr.wait(timeout=dur_s + 30)
        steal["rate_probes"] = rate_meter.window
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=5)
    return evaluate(topo, scenario, schedules, t0_ns, workdir, steal)


def _wait_listening(topo: DualPath) -> None:
    import time
    want = set(topo.server_addrs())
    for _ in range(200):
        ss = topo.server.ns.run(["ss", "-Htln", f"sport = :{PROBE_PORT}"]).stdout
        bound = {line.split()[3].rsplit(":", 1)[0] for line in ss.splitlines() if len(line.split()) > 3}
        if want <= bound:
            return
        time.sleep(0.01)
    raise RuntimeError("fidelity probe server did not start listening")


def evaluate(topo: DualPath, scenario: Scenario, schedules: dict[str, PathSchedules], t0_ns: int,
             workdir: Path, steal: dict[str, StealWindow] | None = None) -> dict[str, Any]:
    """`steal`: CPU time the hypervisor took during each probe phase (mpvlab/hoststeal.py); it is
    recorded, and a warning raised while the host stole more than HOST_STEAL_NOTE says so."""
    f = scenario.fidelity
    steal = steal or {}
    result: dict[str, Any] = {"paths": {}, "warnings": [],
                              "host_steal": {k: w.as_dict() for k, w in steal.items()}}

    def host_note(phase: str) -> str:
        w = steal.get(phase)
        if w is None or w.lost <= HOST_STEAL_NOTE:
            return ""
        return (f"; the host stole {w.lost:.1%} of the CPU time during these probes, which alone can "
                f"cost a tbf path that share of its rate and delay packets by the length of a stall")
    for p in topo.paths:
        spec = scenario.paths[p.name]
        errors: list[float] = []
        lost = 0
        with (workdir / f"probe-rtt-{p.name}.csv").open() as fh:
            for row in csv.DictReader(fh):
                rtt = int(row["rtt_ns"])
                if rtt < 0:
                    lost += 1
                    continue
                exp = expected_rtt_ns(int(row["t_send_ns"]) - t0_ns, schedules[p.name])
                errors.append((rtt - exp) / 1e6)
        rtt_res: dict[str, Any] = {
            "samples": len(errors), "lost": lost,
            "error_ms_mean": round(sum(errors) / len(errors), 4) if errors else None,
            "error_ms_p50": round(_percentile(errors, 50), 4) if errors else None,
            "error_ms_p99": round(_percentile(errors, 99), 4) if errors else None,
            "error_ms_max": round(max(errors), 4) if errors else None,
            "tolerance_ms": f.rtt_tolerance / 1e6,
        }
        ok_rtt = bool(errors) and max(abs(_percentile(errors, 1)), abs(_percentile(errors, 99))) <= f.rtt_tolerance / 1e6
        expected_loss = 1 - (1 - spec.down.loss) * (1 - spec.up.loss)
        impaired = spec.down.has_impairments or spec.up.has_impairments
        if impaired:
            # A capacity trace serves packets only at its delivery opportunities (gaps of 100+ ms in
            # recorded LTE traces), and outages and loss models drop probes by design: the RTT is then
            # the delay schedule plus the trace's service time, which this check does not model. The
            # delay line's departures are checked against Mahimahi's own model in tests/test_capacity.py.
            rtt_res["check"] = "not applicable: capacity, loss model or outages on this path"
            ok_rtt = True
        if not ok_rtt:
            result["warnings"].append(f"path {p.name}: RTT error beyond ±{f.rtt_tolerance / 1e6:g} ms "
                                      f"(p99 {rtt_res['error_ms_p99']} ms, samples {len(errors)})"
                                      + host_note("rtt_probes"))
        if lost and expected_loss == 0 and not impaired:
            result["warnings"].append(f"path {p.name}: {lost} RTT probes lost on a loss-free path")
        rows = list(csv.DictReader((workdir / f"probe-rate-{p.name}.csv").open()))
        rate_res: dict[str, Any] = {"configured_bps": spec.down.rate, "probe_cc": PROBE_CC.decode()}
        if len(rows) >= 4:
            t_first = int(rows[0]["t_ns"])
            window = [r for r in rows if int(r["t_ns"]) - t_first >= 1_000_000_000]
            if len(window) >= 2:
                b0, b1 = int(window[0]["bytes_cumulative"]), int(window[-1]["bytes_cumulative"])
                dt = (int(window[-1]["t_ns"]) - int(window[0]["t_ns"])) / 1e9
                achieved = (b1 - b0) * 8 / dt
                rate_res["achieved_goodput_bps"] = round(achieved)
                if spec.down.rate is not None:
                    ideal = spec.down.rate * GOODPUT_FACTOR
                    rate_res["ideal_goodput_bps"] = round(ideal)
                    rate_res["ratio"] = round(achieved / ideal, 4)
                    rate_res["tolerance"] = f.rate_tolerance
                    if spec.down.loss == 0 and abs(achieved / ideal - 1) > f.rate_tolerance:
                        result["warnings"].append(
                            f"path {p.name}: goodput {achieved / 1e6:.3f} Mbit/s vs ideal {ideal / 1e6:.3f} Mbit/s "
                            f"(ratio {achieved / ideal:.3f}, tolerance ±{f.rate_tolerance:.0%})"
                            + host_note("rate_probes"))
        result["paths"][p.name] = {"rtt": rtt_res, "rate_down": rate_res}
    result["ok"] = not result["warnings"]
    return result
