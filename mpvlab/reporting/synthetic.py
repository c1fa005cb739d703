"""Synthetic result directories in the exact layout the runner writes (mpvlab/results/tidy.py), for the
report's tests and its benchmark (bench/bench_report.py). Never used by a run.

Each configuration's metrics come from a seeded generator, and the values written are returned
(`SyntheticSet.values`), so a test can recompute means and confidence intervals independently of
the report code. Runs are marked as synthetic in their provenance (`"synthetic": true`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpvlab.core import rundir
from mpvlab.core.rundir import HEADER_TAG
from mpvlab.topologies import registry as topologies

PATHS = {"wifi": "10.0.1.2", "lte": "10.0.2.2"}


@dataclass
class SyntheticSet:
    root: Path
    # (scenario, cc, scheduler) → one dict of summary metrics per trial, as written
    values: dict[Any, list[dict[str, float]]] = field(default_factory=dict)
    failed: list[Path] = field(default_factory=list)


def _resolved(scenario: str, cc: str, scheduler: str, seed: int, period_s: int, buffer: str) -> str:
    # The fields the report reads (delay schedule for shading, cc, scheduler); the rest of a real
    # resolved.yaml is irrelevant to it.
    return (f"name: {scenario}\nseed: {seed}\n"
            "paths:\n"
            f"  wifi:\n    down:\n      rate: 3mbit\n      buffer: {buffer}\n"
            f"      delay: {{kind: square, base: 5ms, amplitude: 60ms, period: {period_s}s, duty: 0.5, phase: 0s}}\n"
            "  lte:\n    down:\n      rate: 3mbit\n      buffer: 100KB\n      delay: {kind: constant, value: 20ms}\n"
            f"transport: {{cc: {cc}, scheduler: {scheduler}}}\n"
            "video: {kind: progressive, duration: 20s}\n")


T0_NS = 1_000_000_000_000     # synthetic run time zero on CLOCK_MONOTONIC (logs/player-summary.json)
SERVER = "10.0.100.1"


def state_modes(t: float, startup_s: float = 1.0) -> tuple[str, float, str]:
    """The synthetic BBR mode at run time t: STARTUP for `startup_s`, DRAIN 0.2 s, then PROBE_BW cycling
    UP / DOWN / CRUISE ×6 (0.1 s each; v3 names REFILL before UP), PROBE_RTT for 0.2 s every 5 s.
    Returns (mode, v1 pacing gain, v3 phase)."""
    if t < startup_s:
        return "STARTUP", 2.885, "UP"
    if t < startup_s + 0.2:
        return "DRAIN", 0.347, "DOWN"
    if (t % 5.0) >= 4.8:
        return "PROBE_RTT", 1.0, "DOWN"
    k = int(round((t - startup_s - 0.2) * 10)) % 8
    return ("PROBE_BW", 1.25, "UP") if k == 0 else ("PROBE_BW", 0.75, "DOWN") if k == 1 else \
        ("PROBE_BW", 1.0, "REFILL" if k == 7 else "CRUISE")


def _cc_state(run_dir: Path, cc: str, rng: random.Random, seconds: int, hz: int = 20) -> None:
    """The CC's state file (the registry's `state`) as its loader writes it: one row per flow per
    sample — two workload subflows (one per path, server port 80), and, as in a real run, the
    fidelity probe (port 5201), the loopback readiness check (9.27 Gbit/s) and the preflight request,
    which the report must leave out."""
    from mpvlab.cc import bbr3, registry
    entry = registry.REGISTRY.get(cc)
    spec = entry.state if entry is not None else None
    if spec is None or spec.time != "t_ns":
        return
    cols = list(bbr3.STATE_COLUMNS) if spec.phase == "phase" else [
        "t_ns", "flow_id", "saddr", "sport", "daddr", "dport", "bw_est_bps", "max_filter_bw_bps", "min_rtt_us",
        "mode", "pacing_gain", "cwnd_gain", "cwnd", "n_samples", "percentile_bw_bps", "raw_percentile_bw_bps",
        "lt_use_bw", "pacing_rate_bps", "mss", "acks", "samples", "clipped", "mismatch", "updated_ns", "closed"]
    lines = [",".join(cols)]
    flows = [(0, SERVER, 5201, "10.0.1.2", 40000, -3.0, -2.0, 50e6)]   # probe, before run time zero
    flows += [(1, "127.0.0.1", 80, "127.0.0.1", 40100, -1.5, -1.4, 9.27e9),   # readiness check
              (2, SERVER, 80, "10.0.1.2", 40200, -1.0, -0.9, 20e6)]           # preflight (its port: access log)
    # the workload's subflows on the client ports the `ss` samples show (_series), so that the flows
    # which carried the video (Apache's log, by the MPTCP token) are the state file's too
    flows += [(3 + i, SERVER, 80, a, 40000 + 1000 * i, 0.0, float(seconds), 3e6) for i, a in enumerate(PATHS.values())]
    startup_s = round(rng.uniform(0.5, 1.5), 2)      # differs per trial: the intervals have a width
    for fid, sa, sp, da, dp, start, end, bw in flows:
        t = start
        while t <= end + 1e-9:
            mode, gain, phase = state_modes(t, startup_s) if start >= 0 else ("STARTUP", 2.885, "UP")
            row = {c: "0" for c in cols}
            row.update(t_ns=str(T0_NS + int(round(t * 1e9))), flow_id=str(fid), saddr=sa, sport=str(sp), daddr=da,
                       dport=str(dp), bw_est_bps=f"{bw * rng.uniform(0.9, 1.1):.0f}", min_rtt_us=str(20000 + fid),
                       mode=mode, pacing_gain=f"{gain:.4f}", phase=phase, updated_ns=str(T0_NS + int(t * 1e9)),
                       closed="0")
            lines.append(",".join(row[c] for c in cols))
            t += 1.0 / hz
    rundir.write_text(run_dir / "data" / spec.file, "\n".join(lines) + "\n")
    rundir.write_json(run_dir / "logs" / "player-summary.json", {"t0_ns": T0_NS})


def _access_log(run_dir: Path) -> None:
    """The preflight's client port, as Apache logs it (mpvlab/runner/server.py's log format), and the
    video's request on the first subflow's connection (the second subflow joined it: same token)."""
    rundir.write_text(run_dir / "logs" / "apache" / "access.log",
                      '10.0.1.2 40200 [24/Nov/2026:10:00:00 +0000] "HEAD /video.mp4?mpvlab-preflight=1 HTTP/1.1" '
                      '200 0 100 - "-" HTTP/1.1 - -\n'
                      '10.0.1.2 40000 [24/Nov/2026:10:00:01 +0000] "GET /video.mp4 HTTP/1.1" '
                      '200 14000000 100 0 "-" HTTP/1.1 - -\n')


def _summarised_cc_state(run_dir: Path, cc: str, playback_s: float) -> dict[str, Any] | None:
    """The summary's `cc_state` as the runner computes it once when it summarises a run
    (mpvlab/runner/views.py cc_state_view: the workload's flows during playback)."""
    from mpvlab.cc import registry
    from mpvlab.results import flows
    entry = registry.REGISTRY.get(cc)
    spec = entry.state if entry is not None else None
    if spec is None:
        return None
    data = run_dir / "data"
    log = run_dir / "logs" / "apache" / "access.log"
    rules = flows.RoleRules(80, flows.preflight_ports(log))
    rows = flows.read_state(data / spec.file, spec, rules, T0_NS)
    tokens = flows.mptcp_tokens(data)
    activity = flows.flow_activity(data / "subflows.csv", rules, log, tokens, log.exists())
    return flows.state_view(rows, f"data/{spec.file}", (0.0, float(playback_s)), tokens, activity).to_json()


def _series(run_dir: Path, rng: random.Random, seconds: int, hz: int, cc: str = "cubic") -> None:
    """links.csv and subflows.csv; `ss` shows the CC's kernel name (a BPF CC's run-scoped one) and, for
    kernel BBR, its bbr:(…) block (bw, min RTT, gains: the modes of `state_modes`)."""
    from mpvlab.cc import registry
    from mpvlab.cc.bbr_modes import bbr_v1_mode
    entry = registry.REGISTRY.get(cc)
    seen = f"{cc.replace('-', '')[:8]}_synthe" if entry is not None and entry.bpf else cc
    links = ["t_s,path,interface,rx_bytes,rx_packets,tx_bytes,tx_packets"]
    subs = ["t_s,local,peer,cc,mptcp,cwnd,srtt_ms,rttvar_ms,delivery_rate_bps,pacing_rate_bps,bytes_acked,retrans,"
            "bbr_bw_bps,bbr_min_rtt_ms,mptcp_token,bbr_pacing_gain,bbr_cwnd_gain,bbr_mode"]
    cum = {p: 0 for p in PATHS}
    # drawn only for BBR, so the other CCs' synthetic values stay what they were
    startup_s = round(rng.uniform(0.5, 1.5), 2) if cc == "bbr" else 1.0
    for i in range(seconds * hz):
        t = i / hz
        for n, (p, addr) in enumerate(PATHS.items()):
            cum[p] += int(3e6 / 8 / hz * rng.uniform(0.8, 1.2))
            links.append(f"{t:.4f},{p},sx{n},{cum[p]},{cum[p] // 1514},0,0")
            bbr = ",,"
            gains = ",,"
            if cc == "bbr":
                mode, pg, _ = state_modes(t, startup_s)
                cg = 1.0 if mode == "PROBE_RTT" else 2.885 if mode in ("STARTUP", "DRAIN") else 2.0
                bbr = f"{3e6 * rng.uniform(0.9, 1.1):.0f},20.0,"
                gains = f"{pg},{cg},{bbr_v1_mode(pg, cg)}"
            subs.append(f"{t:.4f},{SERVER}:80,{addr}:4{n}000,{seen},1,{rng.randint(5, 40)},{rng.uniform(20, 90):.3f},"
                        f"5.0,3e6,3.6e6,{cum[p]},,{bbr}1a2b3c4d,{gains}")
    rundir.write_text(run_dir / "data" / "links.csv", "\n".join(links) + "\n")
    rundir.write_text(run_dir / "data" / "subflows.csv", "\n".join(subs) + "\n")


def write_run(run_dir: Path, scenario: str, cc: str, scheduler: str, trial: int, seed: int, rng: random.Random,
              series_s: int = 0, period_s: int = 10, buffer: str = "100KB", dash: bool = False) -> dict[str, float]:
    """One complete synthetic run; returns the headline metrics written to its summary.json (with
    `dash.quality_avg` and `dash.stall_rate` when `dash`)."""
    run_dir.mkdir(parents=True, exist_ok=False)
    metrics = {"underflows": float(rng.randint(0, 12)), "picture_discards": float(rng.randint(0, 400)),
               "path_switches": float(rng.randint(50, 900)), "startup_delay_s": round(rng.uniform(1.0, 3.0), 3),
               "underflow_total_s": round(rng.uniform(0, 5), 3), "stall_ratio": round(rng.uniform(0, 0.2), 4)}
    share = round(rng.uniform(0.3, 0.7), 4)
    header = {"sweep": "synthetic", "key": f"{scenario}|{cc}|{scheduler}|trial={trial}", "trial": trial, "seed": seed,
              "params": {"transport.cc": cc, "transport.scheduler": scheduler}, "token": f"{seed:012x}"}
    rundir.write_text(run_dir / "scenario.yaml", f"# synthetic\n{HEADER_TAG}{json.dumps(header)}\nname: {scenario}\n")
    rundir.write_text(run_dir / "resolved.yaml", _resolved(scenario, cc, scheduler, seed, period_s, buffer))
    rundir.write_json(run_dir / "provenance.json", {
        "synthetic": True, "run_id": run_dir.name, "seed": seed,
        "git": {"commit": "0" * 40, "dirty": False},
        "host": {"hostname": "synthetic", "kernel": "6.18.0-synthetic", "os": "Debian GNU/Linux 12", "cpus": 2},
        "packages": {"python": {"pandas": "3.1.1"}},
        "topology": {"kind": topologies.DUAL_PATH.name, "paths": {p: {"client_addr": a} for p, a in PATHS.items()}}})
    summary: dict[str, Any] = {
        "run_id": run_dir.name, "scenario": scenario, "cc": cc, "scheduler": scheduler, "seed": seed,
        "video_length_s": 20.0, "duration_s": 20.0 + metrics["underflow_total_s"], "frames_expected": 600,
        "frames_rendered": 600 - metrics["picture_discards"], "bytes_total": 14_000_000,
        # a quarter of the discards with data buffered (CPU-late), without a draw: the other values stay
        "picture_discards_no_underflow": int(metrics["picture_discards"]) // 4,
        "paths": {"wifi": {"rx_bytes": int(14e6 * share), "share": share, "mean_throughput_bps": 3e6 * share},
                  "lte": {"rx_bytes": int(14e6 * (1 - share)), "share": round(1 - share, 4),
                          "mean_throughput_bps": 3e6 * (1 - share)}},
        "fidelity_ok": True, "fidelity_warnings": [], "warnings": [], "sampler_errors": [], "run_wall_s": 33.0,
        **metrics}
    if dash:
        d = {"quality_avg": round(rng.uniform(2, 10), 3), "stall_rate": round(rng.uniform(0, 0.3), 4)}
        summary["dash"] = {**d, "bitrate_switches": rng.randint(0, 20), "segments": 24}
        metrics.update({f"dash.{k}": v for k, v in d.items()})
    rundir.write_json(run_dir / "summary.json", summary)
    if series_s:
        _series(run_dir, rng, series_s, hz=5, cc=cc)
        _access_log(run_dir)
        _cc_state(run_dir, cc, rng, series_s)
        view = _summarised_cc_state(run_dir, cc, summary["duration_s"])
        if view is not None:
            summary["cc_state"] = view
            rundir.write_json(run_dir / "summary.json", summary)
    rundir.write_status(run_dir, "complete")
    return metrics


def make_set(root: Path, scenarios: list[str], ccs: list[str], schedulers: list[str], trials: int, seed: int = 1,
             series_s: int = 0, n_failed: int = 0, dash_buffers: list[str] | None = None) -> SyntheticSet:
    """scenarios × ccs × schedulers (× dash_buffers: DASH runs with that Wi-Fi buffer) × trials complete
    runs under root/<scenario>/<run id>/, plus `n_failed` failed runs (status `failed`, no summary).
    `values` is keyed (scenario, cc, scheduler) or, with dash_buffers, (scenario, cc, scheduler, buffer)."""
    rng = random.Random(seed)
    out = SyntheticSet(root)
    n = 0
    for sc in scenarios:
        for cc in ccs:
            for sched in schedulers:
                for buf in dash_buffers or (None,):
                    key: Any = (sc, cc, sched) if buf is None else (sc, cc, sched, buf)
                    vals = out.values.setdefault(key, [])
                    for trial in range(trials):
                        n += 1
                        vals.append(write_run(root / sc / f"s{n:06d}", sc, cc, sched, trial, seed * 100_000 + n, rng,
                                              series_s=series_s, buffer=buf or "100KB", dash=buf is not None))
    for i in range(n_failed):
        d = root / scenarios[0] / f"f{i:06d}"
        d.mkdir(parents=True)
        rundir.write_status(d, "failed", f"synthetic failure {i}: the player timed out")
        out.failed.append(d)
    return out
