"""observe.pcap in an emulated run (issues 22, 23): which interfaces each capture point means, the
capture around the run, and its part of the summary — the capture record with its byte cross-check
against the interface counters, and the wire-order path-switch count from the server's capture."""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path
from typing import Any

from mpvlab.collectors import pcap, wire_switches
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.observe import CaptureRecord, WireNotCollected, WireSwitchesRecord
from mpvlab.runner.context import RunContext
from mpvlab.topologies import dual_path

# What the summary says when there is no server capture to count wire-order switches from.
WIRE_NOT_COLLECTED = "not collected: observe.pcap.points has no `server`"


def taps(topo: dual_path.DualPath, points: list[str]) -> list[pcap.Tap]:
    """Every interface of each point: the client's one per path, the server's one, a router's two."""
    by_point: dict[str, tuple[str, list[str]]] = {
        "client": (topo.client.ns.name, [p.client_if for p in topo.paths]),
        "server": (topo.server.ns.name, [topo.server_if]),
    }
    for p in topo.paths:
        by_point[f"router-{p.name}"] = (p.router.ns.name, [p.router_client_if, p.router_server_if])
    return [pcap.Tap(pt, by_point[pt][0], ifname) for pt in points for ifname in by_point[pt][1]]


def start(ctx: RunContext, stack: contextlib.ExitStack, topo: dual_path.DualPath) -> pcap.Capture | None:
    """Start the captures (None without observe.pcap); they stop when `stack` closes."""
    spec = ctx.scenario.observe.pcap
    if spec is None:
        return None
    ctx.opts.progress("packet capture")
    return stack.enter_context(pcap.capture(taps(topo, spec.points), ctx.data / "pcap", spec.snaplen,
                                            spec.max_mb * 1_000_000, register=ctx.ledger.add_proc))


def view(topo: dual_path.DualPath, cap: pcap.Capture | None, sched: dict[str, Any]) -> dict[str, Any]:
    """Summary fields: `capture`, `path_switches_wire`, `wire_switches`, and warnings to merge. The
    capture's cross-checks (pcap_bytes_check, pcap_vs_subflow_check) are run by crosschecks.py."""
    out: dict[str, Any] = {"capture": None, "path_switches_wire": None,
                           "wire_switches": build(WireNotCollected, "wire_switches", {"not_collected": WIRE_NOT_COLLECTED}),
                           "warnings": []}
    if cap is None:
        return out
    out["capture"] = build(CaptureRecord, "capture", cap.summary())
    for r in cap.results:
        if r.dropped_by_kernel:
            out["warnings"].append(f"capture {r.file}: {r.dropped_by_kernel} packets dropped by kernel")
        if r.truncated:
            out["warnings"].append(f"capture {r.file} reached max_mb and was stopped early (truncated)")
    server = [r for r in cap.results if r.point == "server"]
    if server:
        wire = wire_switches.analyse(cap.out_dir / server[0].file)
        wire["truncated"] = server[0].truncated
        _join_decisions(wire, topo, sched)
        out["wire_switches"] = build(WireSwitchesRecord, "wire_switches", wire)
        out["path_switches_wire"] = wire["totals"]["wire_switches"]
    return out


def pcap_bytes_check(r: pcap.TapResult) -> dict[str, Any]:
    """cross-check pcap_bytes_{point}_{interface}: the capture's bytes against the captured interface's
    kernel counters over the capture's window (mpvlab/collectors/pcap.py judges the allowance)."""
    return {"capture_bytes": r.bytes, "counter_bytes": r.counter_bytes, "ratio": r.ratio, "ok": bool(r.ok)}


DELACK_MAX_S = 0.2      # Linux's TCP_DELACK_MAX: the longest a receiver holds back an ACK
SEQ_SLACK_BYTES = 2     # per subflow: the SYN's and the FIN's sequence numbers, which ss may count as acked


def _endpoint(e: str) -> str:
    """ss's and the capture's spelling of an address:port alike ([::ffff:10.0.1.2]:443 → 10.0.1.2:443)."""
    host, _, port = e.rpartition(":")
    return f"{host.strip('[]').removeprefix('::ffff:')}:{port}"


class SubflowCounters:
    """The run's samples the per-path byte check reads: data/subflows.csv (ss on the server, each
    subflow's bytes_acked, srtt and rttvar) and data/links.csv (each client interface's rx bytes),
    both on the run clock. `margin_s`: one ss period plus one interface-sample period."""

    def __init__(self, data: Path, margin_s: float) -> None:
        self.data, self.margin_s = data, margin_s

    def last_ss(self) -> dict[tuple[str, str], dict[str, float]]:
        """(server addr:port, client addr:port) → its last sample: t_s, bytes_acked, srtt_ms, rttvar_ms."""
        out: dict[tuple[str, str], dict[str, float]] = {}
        with contextlib.suppress(OSError), (self.data / "subflows.csv").open(newline="") as fh:
            for r in csv.DictReader(fh):
                if r.get("bytes_acked"):
                    out[(_endpoint(r["local"]), _endpoint(r["peer"]))] = {
                        "t_s": float(r["t_s"]), "bytes_acked": int(r["bytes_acked"]),
                        "srtt_ms": float(r["srtt_ms"] or 0), "rttvar_ms": float(r["rttvar_ms"] or 0)}
        return out

    def links_rx(self) -> dict[str, list[tuple[float, int]]]:
        """Path → [(t_s, rx_bytes)] of its client interface, in time order."""
        out: dict[str, list[tuple[float, int]]] = {}
        with contextlib.suppress(OSError), (self.data / "links.csv").open(newline="") as fh:
            for r in csv.DictReader(fh):
                out.setdefault(r["path"], []).append((float(r["t_s"]), int(r["rx_bytes"])))
        return out


def counters_of(data: Path, sampler: Any) -> SubflowCounters:
    """The run's samples (a sampling.Sampler's files in `data`), with one period of each sampler as margin."""
    return SubflowCounters(data, 1.0 / min(sampler.ss_hz, sampler.hz) + 1.0 / sampler.hz)


def _rx_after(series: list[tuple[float, int]], t_s: float) -> int:
    """Bytes the interface received after `t_s` (from its last sample at or before it; all of them
    when there is none)."""
    if not series:
        return 0
    before = [rx for t, rx in series if t <= t_s]
    return series[-1][1] - (before[-1] if before else 0)


def pcap_vs_subflow_check(wire_subflows: dict[str, dict[str, Any]], ss_last: dict[tuple[str, str], dict[str, float]],
                          links: dict[str, list[tuple[float, int]]], path_of: dict[str, str],
                          margin_s: float) -> dict[str, Any]:
    """cross-check pcap_path_bytes_vs_subflow_counters: per path, the data bytes the server's capture
    saw its subflows send, each byte once (the highest sequence number reached: a retransmission is
    not counted again; wire_switches `seq_data_bytes`), against the same subflows' bytes_acked in
    their last ss sample. What each counts: the capture every byte sent, the counter every byte
    acknowledged by that sample. So capture ≥ counter − 2 per subflow (the SYN's and FIN's sequence
    numbers), and capture − counter ≤ 2 per subflow + what the subflow sent after the sample or had
    unacknowledged at it, which reached the path's client interface after the sample's time less
    one ACK's delay (srtt + 4 rttvar + 200 ms delayed ACK) and one period of each sampler: bounded
    by the interface's rx bytes after that time (links.csv; headers and other flows make it loose,
    never short). Subflows the capture saw but ss never sampled (closed before its first sample)
    are listed and not compared."""
    paths: dict[str, dict[str, Any]] = {}
    unsampled: list[str] = []
    by_pair = {(_endpoint(a), _endpoint(b)): v for (a, b), v in ss_last.items()}
    for key, sf in sorted(wire_subflows.items()):
        src, _, dst = key.partition("-")
        ss = by_pair.get((_endpoint(src), _endpoint(dst)))
        name = path_of.get(str(sf.get("peer")))
        if ss is None or name is None:
            unsampled.append(key)
            continue
        p = paths.setdefault(name, {"capture_bytes": 0, "counter_bytes": 0, "subflows": 0, "tail_allowance": 0})
        p["capture_bytes"] += int(sf.get("seq_data_bytes") or 0)
        p["counter_bytes"] += int(ss["bytes_acked"])
        p["subflows"] += 1
        ack_delay = (ss["srtt_ms"] + 4 * ss["rttvar_ms"]) / 1000 + DELACK_MAX_S
        p["tail_allowance"] += _rx_after(links.get(name, []), ss["t_s"] - ack_delay - margin_s)
    for p in paths.values():
        slack = SEQ_SLACK_BYTES * p["subflows"]
        p["difference"] = p["capture_bytes"] - p["counter_bytes"]
        p["ok"] = -slack <= p["difference"] <= slack + p["tail_allowance"]
    return {"paths": paths, "unsampled_subflows": unsampled,
            "tolerance": f"−{SEQ_SLACK_BYTES} B per subflow ≤ capture − counter ≤ {SEQ_SLACK_BYTES} B per subflow + "
                         "the client interface's rx bytes after each subflow's last ss sample less one ACK delay "
                         f"and {margin_s:g} s", "ok": bool(paths) and all(p["ok"] for p in paths.values())}


def _join_decisions(wire: dict[str, Any], topo: dual_path.DualPath, sched: dict[str, Any]) -> None:
    """Beside each connection's wire count, the BPF trace's decision-level count (same token), the ratio,
    and each subflow's path (its client address)."""
    decisions = {c["conn"]: c for c in sched["connections"]}    # conn: the token, 8 hex digits
    for token, c in wire["connections"].items():
        d = decisions.get(token)
        c["decision_path_switches"] = None if d is None else d["path_switches"]
        c["wire_per_decision_switch"] = (round(c["wire_switches"] / d["path_switches"], 3)
                                         if d is not None and d["path_switches"] else None)
    t = wire["totals"]
    t["decision_path_switches"] = sched["totals"]["path_switches"]
    t["wire_per_decision_switch"] = (round(t["wire_switches"] / t["decision_path_switches"], 3)
                                     if t["decision_path_switches"] else None)
    path_of = {p.client_addr: p.name for p in topo.paths}
    for sf in wire["subflows"].values():
        sf["path"] = path_of.get(sf["peer"])
