"""What a physical run observes and keeps: the client's interface counters (bytes per path), `ss` on
the server during playback (which subflows, which CC), the hosts' files pulled into the local run
directory, and summary.json — with what physical hosts cannot collect said as such."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from mpvlab.core import proc
from mpvlab.runner import sampling, server
from mpvlab.runner.physical.hostops import pull_files
from mpvlab.runner.physical.state import PhysicalRun
from mpvlab.runner.workloads.base import Outcome
from mpvlab.input.scenario import Scenario
from mpvlab.runner.steps import check_subflows
from mpvlab.results.summary_parts.base import build_each, build_list
from mpvlab.results.summary_parts.network import PathRecord, Subflow

NOT_COLLECTED = {
    "scheduler_trace": "not collected on physical hosts (BPF observer runs in a local server namespace only): "
                       "no path switches, no bytes handed per subflow",
    "queue_samples": "not collected on physical hosts (qdiscstat samples local namespaces only)",
    "link_counters_series": "not collected on physical hosts (client counters are read before/after only)",
}


def read_counters(run: PhysicalRun) -> dict[str, dict[str, int]]:
    host = run.plan.host(run.plan.client)
    out = {}
    for p in run.plan.paths:
        base = f"/sys/class/net/{p.client_if}/statistics"
        vals = host.run(["cat", f"{base}/rx_bytes", f"{base}/rx_packets"]).stdout.split()
        out[p.name] = {"rx_bytes": int(vals[0]), "rx_packets": int(vals[1])}
    return out


class SubflowPoller:
    """`ss` on the server host every `period` s during playback: which subflows exist, their CC."""

    def __init__(self, run: PhysicalRun, out: Path, period: float = 0.5) -> None:
        self.host = run.plan.host(run.plan.server)
        self.t0 = run.ctx.t0_ns
        self.out = out
        self.period = period
        self.seen: dict[tuple[str, str], str] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ss-poller")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        with self.out.open("w") as f:
            f.write("t_s,local,peer,cc,mptcp,cwnd,srtt_ms,bytes_acked\n")
            while not self._stop.is_set():
                try:
                    cp = self.host.run(["ss", "-tinH", "state", "established", f"sport = :{server.PORT}"],
                                       check=False, timeout=10)
                except proc.CommandError as e:
                    self.errors.append(str(e))
                    cp = None
                t = (time.monotonic_ns() - self.t0) / 1e9
                for r in sampling.parse_ss(cp.stdout if cp else ""):
                    if r["peer"].startswith("127."):
                        continue
                    self.seen[(r["local"], r["peer"])] = r["cc"]
                    f.write(f"{t:.3f},{r['local']},{r['peer']},{r['cc']},{int(r['mptcp'])},{r['cwnd'] or ''},"
                            f"{r.get('srtt_ms') or ''},{r['bytes_acked'] or ''}\n")
                f.flush()
                self._stop.wait(self.period)



def pull_player_files(run: PhysicalRun) -> None:
    pull_files(run.plan.host(run.plan.client), run.dirs["client"], ("player-events.jsonl", "player-summary.json"),
               run.ctx.logs)


def pull_apache_logs(run: PhysicalRun) -> None:
    pull_files(run.plan.host(run.plan.server), f"{run.dirs['server']}/apache", ("access.log", "error.log"),
               run.ctx.logs / "apache")


def summarise(run: PhysicalRun, sc: Scenario, outcome: Outcome, before: dict[str, dict[str, int]],
              after: dict[str, dict[str, int]], poller: SubflowPoller) -> dict[str, Any]:
    """The physical kind's part of summary.json (the run head comes from lifecycle.py); raises
    RunFailed when the subflows are not what the scenario asks (steps.check_subflows, the same checks
    as an emulated run)."""
    per_path: dict[str, dict[str, Any]] = {}
    total = 0
    playback_s = outcome.duration_s
    for p in run.plan.paths:
        rx = after[p.name]["rx_bytes"] - before[p.name]["rx_bytes"]
        per_path[p.name] = {"interface": p.client_if, "client_address": run.client_addrs[p.name], "rx_bytes": rx,
                            "rx_packets": after[p.name]["rx_packets"] - before[p.name]["rx_packets"]}
        total += rx
    for v in per_path.values():
        v["share"] = round(v["rx_bytes"] / total, 4) if total else 0.0
        v["mean_throughput_bps"] = round(v["rx_bytes"] * 8 / playback_s) if playback_s else None
    build_each(PathRecord, "paths", per_path)
    subflows = build_list(Subflow, "subflows",
                          [{"local": k[0], "peer": k[1], "cc": v} for k, v in sorted(poller.seen.items())])
    check_subflows(sc, subflows, sc.transport.cc, per_path)
    return {
        "scheduler": sc.transport.scheduler, **outcome.fields,
        "bytes_total": total, "paths": per_path, "subflows": subflows,
        "path_switches": None, "not_collected": NOT_COLLECTED,
        "warnings": [], "sampler_errors": poller.errors,
    }
