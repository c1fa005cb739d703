"""Which flow is which in a run's per-flow series, and the CC model over the workload's flows only.

A run's per-flow files (the CC state CSVs of BBR-S / BBRv3 / BBRv3-S, `ss` subflow samples, the
scheduler's subflow samples) hold every connection the sending host saw: the fidelity probe, the
readiness check over loopback, the HTTP preflight request, cross traffic and the workload. A mean
over a whole file mixes them (one BBR-S run: 25.52 Mbit/s over the file against 24.80 over the
video's rows, a loopback check at 9.27 Gbit/s being one of them). So every row is named by its
flow's identity — the 4-tuple from the sending (server) side, `flow` = "saddr:sport-daddr:dport", and
the MPTCP connection (`mptcp_token`) where `ss` showed it — and by the flow's role, assigned after
the run from what the run knows (`RoleRules`):

| role | rule (first match) |
|---|---|
| check | either address is loopback (Apache's readiness check), or the client port of the HTTP preflight request (Apache's access log) |
| probe | either port is the fidelity probe's (5201) |
| cross | either port is the cross traffic's (5301) |
| workload | either port is the workload's server port |
| other | anything else |

Summary figures (`cc_state` in summary.json) are computed over workload flows only, within the
playback window. Two kinds of mean, named in the field:
- `*_per_sample`: the plain mean over the rows (one row per flow per loader sample);
- `*_time_weighted`: each row's value held until its flow's next row (a flow's last row for the
  flow's median row interval): a mean over time, robust to irregular sampling;
- `*_per_update` (CC state files with `updated_ns`): the mean over the distinct records the CC wrote,
  which it does on ACKs (at most every 1/(2·HZ) s): weights busy periods, as a per-ACK view does.
"""

from __future__ import annotations

import csv
import ipaddress
import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

PROBE_PORT = 5201       # mpvlab/fidelity.py PROBE_PORT
CROSS_PORT = 5301       # mpvlab/run/shared.py BULK_PORT (cross traffic)
BULK_WORKLOAD_PORT = 5401   # mpvlab/run/workloads/bulk.py BULK_PORT
ROLES = ("workload", "probe", "check", "cross", "other")
FLOWS_JSON = "flows.json"   # below data/: the rules the run used and its flows
FLOWS_CSV = "flows.csv"
PREFLIGHT_QUERY = "mpvlab-preflight=1"   # mpvlab/server.py PREFLIGHT_QUERY (a test checks they agree)


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.strip("[]").removeprefix("::ffff:")).is_loopback
    except ValueError:
        return False


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """'10.0.1.2:80', '[::ffff:10.0.1.2]:80' or '[2001:db8::1]:80' → (address, port)."""
    e = str(endpoint).strip()
    host, _, port = e.rpartition(":")
    try:
        return host.strip("[]").removeprefix("::ffff:"), int(port)
    except ValueError:
        return e, -1


def flow_key(saddr: str, sport: int, daddr: str, dport: int) -> str:
    def ep(a: str, p: int) -> str:
        return f"[{a}]:{p}" if ":" in a else f"{a}:{p}"
    return f"{ep(saddr, sport)}-{ep(daddr, dport)}"


@dataclass(frozen=True)
class RoleRules:
    """What a run knows to name its flows' roles (see the module's table)."""

    workload_port: int | None
    check_ports: frozenset[int] = frozenset()     # client ports of the HTTP preflight request
    probe_port: int = PROBE_PORT
    cross_port: int = CROSS_PORT

    def role(self, saddr: str, sport: int, daddr: str, dport: int) -> str:
        if is_loopback(saddr) or is_loopback(daddr):
            return "check"
        ports = {sport, dport}
        if self.workload_port in ports and ports & self.check_ports:
            return "check"
        if self.probe_port in ports:
            return "probe"
        if self.cross_port in ports:
            return "cross"
        if self.workload_port in ports:
            return "workload"
        return "other"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["check_ports"] = sorted(self.check_ports)
        return d


def preflight_ports(access_log: Path) -> frozenset[int]:
    """Client ports of the preflight requests in Apache's access log (format: host remote-port [time]
    "request" ...; mpvlab/server.py): that connection is a check, not the workload."""
    out = set()
    try:
        lines = access_log.read_text().splitlines()
    except OSError:
        return frozenset()
    for ln in lines:
        parts = ln.split(" ", 2)
        if len(parts) == 3 and PREFLIGHT_QUERY in parts[2]:
            try:
                out.add(int(parts[1]))
            except ValueError:
                pass
    return frozenset(out)


def rules_for_run(run_dir: Path, summary: dict[str, Any] | None = None) -> RoleRules:
    """The rules the run recorded (data/flows.json), or, for a run made before it did, rebuilt from
    its summary (the HTTP port, or the bulk workload's port) and Apache's access log."""
    try:
        d = json.loads((run_dir / "data" / FLOWS_JSON).read_text())["rules"]
        return RoleRules(d.get("workload_port"), frozenset(d.get("check_ports") or ()),
                         d.get("probe_port", PROBE_PORT), d.get("cross_port", CROSS_PORT))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    s = summary or {}
    port = (s.get("http") or {}).get("port") if isinstance(s.get("http"), dict) else None
    if port is None and s.get("workload") == "bulk":
        port = BULK_WORKLOAD_PORT
    if port is None and s.get("topology") in (None, "dual-path", "dumbbell", "shared-bottleneck"):
        port = 80 if not (s.get("http") or {}).get("tls") else 443
    return RoleRules(port, preflight_ports(run_dir / "logs" / "apache" / "access.log"))


# ---------------------------------------------------------------------------------------------
# CC state series (the registry's StateSeries names file and columns)


@dataclass
class StateRow:
    t_s: float
    flow: str
    role: str
    bw_bps: float | None
    min_rtt_ms: float | None
    state: str | None          # "STARTUP", "DRAIN", "PROBE_BW:UP", …, "PROBE_RTT"
    updated: str | None        # the CC's own write time (a new value marks a new record)
    closed: bool = False


def mode_label(mode: str | None, phase_value: str | None, phase_col: str | None) -> str | None:
    """The mode with its PROBE_BW sub-phase: BBRv3's phase column as is; BBR v1 (BBR-S) from its
    pacing gain, whose cycle is 1.25 (UP, probing), 0.75 (DOWN, draining), then 1 (CRUISE)."""
    if not mode:
        return None
    if mode != "PROBE_BW" or not phase_col or phase_value in (None, ""):
        return mode
    if phase_col.endswith("pacing_gain"):       # BBR-S "pacing_gain", kernel BBR (ss) "bbr_pacing_gain"
        try:
            g = float(phase_value)  # type: ignore[arg-type]
        except ValueError:
            return mode
        return "PROBE_BW:" + ("UP" if g > 1.0 + 1e-3 else "DOWN" if g < 1.0 - 1e-3 else "CRUISE")
    return f"PROBE_BW:{phase_value}"


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def read_state(path: Path, spec: Any, rules: RoleRules, t0_ns: int | None) -> list[StateRow]:
    """Every row of a CC state file (spec: cc.registry.StateSeries) on the run's clock, named by flow
    and role; [] when the file is missing or has no time base (CLOCK_MONOTONIC without t0)."""
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return []
    if spec.time == "t_ns" and t0_ns is None:
        return []
    out = []
    named: dict[tuple[str, int, str, int], tuple[str, str]] = {}    # a flow's key and role, once per flow
    for r in rows:
        try:
            t = (int(r["t_ns"]) - t0_ns) / 1e9 if spec.time == "t_ns" else float(r[spec.time])  # type: ignore[operator]
        except (KeyError, ValueError, TypeError):
            continue
        if spec.tuple_cols == ("local", "peer"):
            (sa, sp), (da, dp) = split_endpoint(r.get("local", "")), split_endpoint(r.get("peer", ""))
        else:
            try:
                sa, sp, da, dp = r["saddr"], int(r["sport"]), r["daddr"], int(r["dport"])
            except (KeyError, ValueError):
                continue
        rtt = _num(r.get(spec.min_rtt)) if spec.min_rtt else None
        tup = (sa, sp, da, dp)
        if tup not in named:
            named[tup] = (flow_key(*tup), rules.role(*tup))
        key, role = named[tup]
        out.append(StateRow(t, key, role, _num(r.get(spec.bw)),
                            None if rtt is None else rtt * spec.min_rtt_to_ms,
                            mode_label(r.get(spec.mode) if spec.mode else None,
                                       r.get(spec.phase) if spec.phase else None, spec.phase),
                            r.get("updated_ns"), r.get("closed") == "1"))
    return out


def _weights(rows: list[StateRow]) -> list[float]:
    """Per row of one flow (time order): how long its value held — to the flow's next row; the last
    row for the flow's median interval (0 for a flow seen once)."""
    ts = [r.t_s for r in rows]
    steps = [b - a for a, b in zip(ts, ts[1:])]
    last = statistics.median(steps) if steps else 0.0
    return [*steps, 0.0 if rows[-1].closed else last]


def _mean(vals: Iterable[tuple[float, float]]) -> float | None:
    """Weighted mean of (value, weight) pairs; None without weight."""
    pairs = list(vals)
    w = math.fsum(p[1] for p in pairs)
    return math.fsum(v * wt for v, wt in pairs) / w if w > 0 else None


@dataclass
class FlowState:
    flow: str
    role: str
    mptcp_token: str | None
    rows: int
    first_t_s: float
    last_t_s: float
    bw_est_bps_mean_per_sample: float | None
    bw_est_bps_mean_time_weighted: float | None
    min_rtt_ms_min: float | None


@dataclass
class StateView:
    """The CC model over a run's workload flows, within the window (the summary's `cc_state`)."""

    source: str
    window_s: tuple[float, float]
    flows_by_role: dict[str, int]
    workload_rows: int
    bw_est_bps_mean_per_sample: float | None
    bw_est_bps_mean_time_weighted: float | None
    bw_est_bps_mean_per_update: float | None
    min_rtt_ms_mean_time_weighted: float | None
    min_rtt_ms_min: float | None
    mode_share_time_weighted: dict[str, float]
    mode_share_per_sample: dict[str, float]
    flows: list[FlowState] = field(default_factory=list)
    definition: str = ("over the workload's flows only (roles: mpvlab/flows.py), rows with run time in window_s; "
                       "per_sample: plain mean over rows; time_weighted: each row held until its flow's next "
                       "row; per_update: mean over the distinct records the CC wrote (on ACKs)")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["window_s"] = list(self.window_s)
        return d


def by_flow(rows: list[StateRow]) -> dict[str, list[StateRow]]:
    out: dict[str, list[StateRow]] = {}
    for r in rows:
        out.setdefault(r.flow, []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r.t_s)
    return out


def state_view(rows: list[StateRow], source: str, window: tuple[float, float],
               tokens: dict[str, str] | None = None) -> StateView:
    """The model over the workload flows' rows in [window]; per-flow breakdown of every flow."""
    lo, hi = window
    flows = by_flow(rows)
    roles: dict[str, int] = {}
    per_flow = []
    bw_s, bw_t, bw_u, rtt_t, rtt_all = [], [], [], [], []
    mode_t: dict[str, float] = {}
    mode_n: dict[str, int] = {}
    n_rows = 0
    for key, rs in flows.items():
        role = rs[0].role
        roles[role] = roles.get(role, 0) + 1
        inwin = [r for r in rs if lo <= r.t_s <= hi]
        ws = _weights(inwin) if inwin else []
        bws = [(r.bw_bps, w) for r, w in zip(inwin, ws) if r.bw_bps is not None]
        rtts = [r.min_rtt_ms for r in inwin if r.min_rtt_ms is not None and r.min_rtt_ms > 0]
        if not inwin:
            continue            # counted in flows_by_role; nothing of it in the window
        per_flow.append(FlowState(key, role, (tokens or {}).get(key), len(inwin), round(inwin[0].t_s, 4),
                                  round(inwin[-1].t_s, 4), _mean((b, 1.0) for b, _ in bws), _mean(bws),
                                  min(rtts) if rtts else None))
        if role != "workload":
            continue
        n_rows += len(inwin)
        bw_s += [(b, 1.0) for b, _ in bws]
        bw_t += bws
        prev = None
        for r in inwin:      # a new record of the CC: its write time changed
            if r.updated is not None and r.updated != prev and r.bw_bps is not None:
                bw_u.append((r.bw_bps, 1.0))
            prev = r.updated
        rtt_t += [(r.min_rtt_ms, w) for r, w in zip(inwin, ws) if r.min_rtt_ms is not None and r.min_rtt_ms > 0]
        rtt_all += rtts
        for r, w in zip(inwin, ws):
            if r.state:
                mode_t[r.state] = mode_t.get(r.state, 0.0) + w
                mode_n[r.state] = mode_n.get(r.state, 0) + 1
    tot_t, tot_n = math.fsum(mode_t.values()), sum(mode_n.values())
    return StateView(
        source, (lo, hi), roles, n_rows, _mean(bw_s), _mean(bw_t), _mean(bw_u), _mean(rtt_t),
        min(rtt_all) if rtt_all else None,
        {k: v / tot_t for k, v in sorted(mode_t.items())} if tot_t > 0 else {},
        {k: v / tot_n for k, v in sorted(mode_n.items())} if tot_n else {},
        sorted(per_flow, key=lambda f: (ROLES.index(f.role) if f.role in ROLES else len(ROLES), f.first_t_s)))


def mptcp_tokens(subflows_csv: Path) -> dict[str, str]:
    """flow → the server's MPTCP token, from the `ss` samples (data/subflows.csv)."""
    out: dict[str, str] = {}
    try:
        with subflows_csv.open(newline="") as f:
            for r in csv.DictReader(f):
                if r.get("mptcp_token"):
                    (sa, sp), (da, dp) = split_endpoint(r["local"]), split_endpoint(r["peer"])
                    out[flow_key(sa, sp, da, dp)] = r["mptcp_token"]
    except OSError:
        pass
    return out


def write_flows(data_dir: Path, rules: RoleRules, series: dict[str, list[StateRow]],
                tokens: dict[str, str]) -> None:
    """data/flows.json (the rules and every flow) and data/flows.csv (one row per flow and series):
    the identity and role of every flow of the run's per-flow series."""
    from core import rundir
    rows = []
    for name, rs in series.items():
        for key, fr in by_flow(rs).items():
            rows.append({"flow": key, "role": fr[0].role, "mptcp_token": tokens.get(key, ""), "series": name,
                         "rows": len(fr), "first_t_s": round(fr[0].t_s, 4), "last_t_s": round(fr[-1].t_s, 4)})
    rundir.write_json(data_dir / FLOWS_JSON, {"rules": rules.to_json(), "roles": list(ROLES), "flows": rows})
    cols = ["flow", "role", "mptcp_token", "series", "rows", "first_t_s", "last_t_s"]
    text = ",".join(cols) + "\n" + "".join(",".join(str(r[c]) for c in cols) + "\n" for r in rows)
    rundir.write_text(data_dir / FLOWS_CSV, text)
