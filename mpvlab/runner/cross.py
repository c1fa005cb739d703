"""Cross traffic on the shared bottleneck (mpvlab/topologies/cross_traffic.py does the sending): a bulk
TCP flow with its own congestion control, started at t0 + `start`, and a VoIP-like UDP probe whose
one-way delays give the bottleneck's queuing delay. Started and stopped exactly once by the run."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpvlab.core.errors import RunFailed
from mpvlab.runner.context import RunContext
from mpvlab.topologies.spec import BulkTrafficSpec, VoipTrafficSpec
from mpvlab.topologies import cross_traffic as ct
from mpvlab.topologies import shared_bottleneck as sb

VOIP_PORT, BULK_PORT = ct.VOIP_PORT, ct.BULK_PORT




@dataclass
class CrossTraffic:
    topo: sb.SharedBottleneck
    workdir: Path
    ctx: RunContext
    bulk_spec: BulkTrafficSpec | None
    voip_spec: VoipTrafficSpec | None
    drain_s: float
    probe: ct.Probe | None = None
    bulk: ct.BulkFlow | None = None
    bulk_t_start: int = 0
    bulk_cc_seen: str | None = None
    bulk_bytes_last: tuple[int, int] = (0, 0)   # (t, bytes_received) last read while the flow ran
    result: dict[str, Any] = field(default_factory=dict)
    stopped: bool = False

    @property
    def cross(self) -> sb.Leaf:
        assert self.topo.cross is not None
        return self.topo.cross

    def start_voip(self) -> None:
        if self.voip_spec is None:
            return
        v = self.voip_spec
        self.probe = ct.start_probe(self.topo.server.ns, self.cross.node.ns, self.cross.addr, VOIP_PORT,
                                    self.workdir, "probe", self.ctx.ledger.add_proc, rate_bps=float(v.rate),
                                    ip_size=v.packet_size)

    def bulk_due(self) -> bool:
        return (self.bulk_spec is not None and self.bulk is None
                and time.monotonic_ns() >= self.ctx.t0_ns + self.bulk_spec.start)

    def start_bulk(self, run_s: float) -> None:
        assert self.bulk_spec is not None
        dur_s = self.bulk_spec.duration / 1e9 if self.bulk_spec.duration is not None else run_s
        self.bulk_t_start = time.monotonic_ns()
        self.bulk = ct.start_bulk(self.topo.server.ns, self.cross.node.ns, self.cross.addr, BULK_PORT,
                                  self.bulk_spec.cc, dur_s, self.workdir, "bulk", self.ctx.ledger.add_proc)

    def poll(self) -> None:
        """While the bulk flow runs: its receiver's byte count (kept, as the connection's counters
        vanish when iperf3 ends) and, once, the congestion control its data socket really uses."""
        if self.bulk is None or self.bulk.client is None or self.bulk.client.poll() is not None:
            return
        self.bulk_bytes_last = ct.bulk_bytes_received(self.cross.node.ns)
        if self.bulk_cc_seen is None and time.monotonic_ns() - self.bulk_t_start > 1e9:
            self.bulk_cc_seen = ct.bulk_cc(self.topo.server.ns, self.cross.addr)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.bulk is not None:
            self.poll()
            info = ct.stop_bulk(self.bulk)
            if self.bulk_spec is not None and self.bulk_spec.duration is None:
                # Ended by the run when the last player finished: iperf3 then reports an "interrupt"
                # and no totals; the goodput below is the receiving kernel's count.
                info["stopped_by_run"] = True
            t_last, got = self.bulk_bytes_last
            secs = (t_last - self.bulk_t_start) / 1e9 if t_last else 0.0
            # iperf3 ended by itself (bulk.duration): its own count is the complete one, over its own
            # receive interval (which runs past the sender's end by the queue's drain time).
            if info.get("client_exit") == 0 and self.bulk_spec and self.bulk_spec.duration is not None:
                got, secs = _iperf3_received(self.bulk.client_log) or (got, secs)
            self.result["bulk"] = {
                "cc_requested": self.bulk.cc, "cc_seen": self.bulk_cc_seen, "iperf3": info,
                "start_s": round((self.bulk_t_start - self.ctx.t0_ns) / 1e9, 3), "seconds": round(secs, 3),
                "bytes_received": got, "goodput_bps": round(got * 8 / secs) if secs > 0 else None}
        elif self.bulk_spec is not None:
            self.result["bulk"] = {"cc_requested": self.bulk_spec.cc, "started": False,
                                   "note": "the players finished before bulk.start"}
        if self.probe is not None:
            res = ct.stop_probe(self.probe, drain_s=self.drain_s)
            self.result["voip"] = _voip_view(res, self.probe, self.voip_spec)

    def checked_result(self) -> dict[str, Any]:
        """The cross traffic's record for the summary, once the bulk flow is known to have run the
        congestion control asked for (its socket's CC, read while it ran): a run whose cross flow ran
        another CC measured something else and fails."""
        bulk = self.result.get("bulk")
        if bulk and bulk.get("cc_seen") not in (None, bulk["cc_requested"]):
            raise RunFailed(f"bulk flow ran {bulk['cc_seen']}, not {bulk['cc_requested']}")
        return self.result


def _iperf3_received(client_log: Path) -> tuple[int, float] | None:
    """(bytes, seconds) the iperf3 receiver counted, from the client's end-of-test JSON."""
    try:
        r = json.loads(client_log.read_text())["end"]["sum_received"]
        return int(r["bytes"]), float(r["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _quantile(xs: list[float], q: float) -> float | None:
    """Nearest-rank quantile (no interpolation: every value reported was measured)."""
    if not xs:
        return None
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, math.ceil(q * len(ys)) - 1))]


def _voip_view(res: ct.ProbeResult, probe: ct.Probe, spec: VoipTrafficSpec | None) -> dict[str, Any]:
    assert spec is not None
    send = json.loads(probe.files["send.json"].read_text())
    send_s = (int(send["t_last_ns"]) - int(send["t0_ns"])) / 1e9
    qd = [r["queuing_delay_ns"] / 1e6 for r in res.rows]
    ds = [r["d_study_ns"] / 1e6 for r in res.rows]
    owd_min = min((r["owd_ns"] for r in res.rows), default=None)

    def pcts(xs: list[float]) -> dict[str, float | None]:
        return {k: (None if (v := _quantile(xs, q)) is None else round(v, 3))
                for k, q in (("p50", .5), ("p95", .95), ("p99", .99), ("max", 1.0))}

    return {
        "rate_configured_bps": spec.rate, "packet_size": spec.packet_size, "csv": str(res.csv),
        "sent": res.sent, "received": res.received, "lost": res.lost, "duplicates": res.duplicates,
        "loss_rate": round(res.loss_rate, 5), "send_s": round(send_s, 3),
        # IP bytes delivered per second of sending: what the receiver got of the configured rate
        "delivered_bps": round(res.received * spec.packet_size * 8 / send_s) if send_s > 0 else None,
        "owd_min_ms": None if owd_min is None else round(owd_min / 1e6, 3),
        "queuing_delay_ms": pcts(qd),      # owd − min owd (all namespaces share CLOCK_MONOTONIC)
        "rx_timestamp": res.rx_timestamp, "user_stamped": res.user_stamped,
        "d_study_ms": pcts(ds),            # docs/studies.md §4: relative to the first packet, no clock sync
    }


# ---------------------------------------------------------------------------------------------
