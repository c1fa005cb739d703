"""The identity and role of each flow of a run's per-flow series, without pandas (mpvlab/results/flows.py
has the table of roles and the CC model over them, which needs pandas and numpy).

A run whose congestion control has no state model (CUBIC, the kernel's default) needs only which flows
its series hold — data/flows.json and data/flows.csv — and pandas' and numpy's imports alone cost
such a run ~0.5 CPU-s of its ~2.6 CPU-s fixed cost (issue 36), against ~10 ms to read its `ss` and
scheduler samples row by row here. The tokens (`mptcp_tokens`), the index rows (`flow_index`) and
the files (`write_flow_index`) live here only; flows.write_flows feeds them the frames
`flows.read_state` / `flows.sched_flows` give, and the readers here name the same flows in the same
order (tests/test_flow_ids.py compares both on the same files).
"""

from __future__ import annotations

import csv
import ipaddress
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mpvlab.topologies import cross_traffic

PROBE_PORT = 5201       # the TCP fidelity probe of runs before the kernel-timestamped pre-check (older results)
CROSS_PORT = cross_traffic.BULK_PORT     # the cross host's bulk flow (shared-bottleneck runs)
ROLES = ("workload", "probe", "check", "cross", "other")
FLOWS_JSON = "flows.json"   # below data/: the rules the run used and its flows
FLOWS_CSV = "flows.csv"
PREFLIGHT_QUERY = "mpvlab-preflight=1"   # mpvlab/runner/server.py PREFLIGHT_QUERY (a test checks they agree)


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
    "request" ...; mpvlab/runner/server.py): that connection is a check, not the workload."""
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


SCHED_SAMPLES = "schedtrace/subflow_samples.csv"   # below data/: the scheduler's per-subflow samples
SS_SAMPLES = "subflows.csv"                        # below data/: the `ss` samples (cc.registry KERNEL_BBR_STATE)
FLOW_CSV_COLUMNS = ["flow", "role", "mptcp_token", "series", "rows", "first_t_s", "last_t_s"]
# The cells pandas.read_csv reads as missing by default (pandas' STR_NA_VALUES): the same rows are
# left out here as in flows.read_state / sched_flows / mptcp_tokens.
NA_CELLS = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                      "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})


def _rows(path: Path, want: tuple[str, ...]) -> list[list[str | None]]:
    """The `want` cells of each row (None where missing or one of pandas' missing-value strings), as
    pandas.read_csv(usecols=…) reads them: nothing when the file or a wanted column is missing, or
    when a row has more cells than the header (pandas raises then, and the readers in flows.py take
    that file as empty); blank lines skipped, short rows padded."""
    try:
        f = open(path, newline="")
    except OSError:
        return []
    with f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or any(c not in header for c in want):
            return []
        idx = [header.index(c) for c in want]
        out = []
        for r in reader:
            if not r:
                continue
            if len(r) > len(header):
                return []
            out.append([(r[i] if i < len(r) and r[i] not in NA_CELLS else None) for i in idx])
        return out


def _number(cell: str | None) -> float:
    try:
        return float(cell) if cell is not None else math.nan
    except ValueError:
        return math.nan


def ss_flow_times(path: Path, rules: RoleRules) -> list[tuple[str, str, float]]:
    """(flow, role, run time) of each row of the `ss` samples (data/subflows.csv) as
    flows.read_state(path, KERNEL_BBR_STATE, …) names them: rows with a time and both endpoints."""
    out = []
    names: dict[tuple[str, str], tuple[str, str]] = {}
    for t, local, peer in _rows(path, ("t_s", "local", "peer")):
        t_s = _number(t)
        if math.isnan(t_s) or local is None or peer is None:
            continue
        if (local, peer) not in names:
            (sa, sp), (da, dp) = split_endpoint(local), split_endpoint(peer)
            names[(local, peer)] = (flow_key(sa, sp, da, dp), rules.role(sa, sp, da, dp))
        out.append((*names[(local, peer)], t_s))
    return out


def sched_flow_times(path: Path, rules: RoleRules) -> list[tuple[str, str, float]]:
    """(flow, role, run time) of each scheduler subflow sample, as flows.sched_flows names them (a
    row without a readable time is kept, as there)."""
    out = []
    names: dict[str, tuple[str, str] | None] = {}
    for t, sf in _rows(path, ("t", "subflow")):
        if sf is None:
            continue
        if sf not in names:
            a, _, b = sf.partition("-")
            (sa, sp), (da, dp) = split_endpoint(a), split_endpoint(b)
            names[sf] = (flow_key(sa, sp, da, dp), rules.role(sa, sp, da, dp)) if b else None
        name = names[sf]
        if name is not None:
            out.append((*name, _number(t)))
    return out


def mptcp_tokens(data_dir: Path) -> dict[str, str]:
    """flows.mptcp_tokens without pandas: each distinct (endpoints, token) in order of first
    appearance, the scheduler trace's after the `ss` samples' (a later one wins)."""
    out: dict[str, str] = {}
    ss = dict.fromkeys(tuple(r) for r in _rows(data_dir / SS_SAMPLES, ("local", "peer", "mptcp_token"))
                       if None not in r)
    for local, peer, tok in ss:
        (sa, sp), (da, dp) = split_endpoint(str(local)), split_endpoint(str(peer))
        out[flow_key(sa, sp, da, dp)] = str(tok)
    sched = dict.fromkeys(tuple(r) for r in _rows(data_dir / SCHED_SAMPLES, ("subflow", "conn")) if None not in r)
    for sf, conn in sched:
        a, _, b = str(sf).partition("-")
        (sa, sp), (da, dp) = split_endpoint(a), split_endpoint(b)
        out[flow_key(sa, sp, da, dp)] = str(conn)
    return out


def flow_index(series: dict[str, list[tuple[str, str, float]]], tokens: dict[str, str]) -> list[dict[str, Any]]:
    """The rows of data/flows.json's `flows` (and of flows.csv): per series, each flow in order of
    first appearance with its role, token, row count and first/last run time (NaN times left out)."""
    rows = []
    for name, items in series.items():
        per: dict[str, list[Any]] = {}
        for flow, role, t in items:
            e = per.setdefault(flow, [role, 0, math.inf, -math.inf])
            e[1] += 1
            if not math.isnan(t):
                e[2], e[3] = min(e[2], t), max(e[3], t)
        for flow, (role, n, lo, hi) in per.items():
            rows.append({"flow": flow, "role": role, "mptcp_token": tokens.get(flow, ""), "series": name,
                         "rows": n, "first_t_s": round(lo, 4) if lo <= hi else math.nan,
                         "last_t_s": round(hi, 4) if lo <= hi else math.nan})
    return rows


def write_flow_index(data_dir: Path, rules: RoleRules, rows: list[dict[str, Any]]) -> None:
    """data/flows.json (the rules, the roles, every flow) and data/flows.csv (one row per flow and series)."""
    from mpvlab.core import rundir
    rundir.write_json(data_dir / FLOWS_JSON, {"rules": rules.to_json(), "roles": list(ROLES), "flows": rows})
    text = ",".join(FLOW_CSV_COLUMNS) + "\n" + "".join(",".join(str(r[c]) for c in FLOW_CSV_COLUMNS) + "\n"
                                                       for r in rows)
    rundir.write_text(data_dir / FLOWS_CSV, text)


# The dash.js page's own requests (mpvlab/runner/workloads/video.py PAGE_REQUEST_PREFIXES; a test checks
# they agree): a connection that made only these carried the page, not the video.
PAGE_PREFIXES = ("/mpvlab-dashjs/", "/favicon.ico")


@dataclass(frozen=True)
class HttpConnection:
    """What Apache's access log says one client connection (address, port) carried."""

    media_requests: int      # requests for the workload's media (MPD, segments, the progressive file)
    page_requests: int       # the dash.js page's own requests
    bytes: int               # response body bytes of all its requests (%B)


def http_connections(access_log: Path) -> dict[tuple[str, int], HttpConnection]:
    """Per client (address, port) of Apache's access log (format: host remote-port [time] "request"
    status bytes …; mpvlab/runner/server.py): its media and page requests and response bytes. The
    preflight check's requests are left out (its connection is a `check`); {} without a log."""
    try:
        lines = access_log.read_text().splitlines()
    except OSError:
        return {}
    acc: dict[tuple[str, int], list[int]] = {}
    for ln in lines:
        parts = ln.split('"')
        head = parts[0].split()
        if len(parts) < 3 or len(head) < 2 or PREFLIGHT_QUERY in parts[1]:
            continue
        try:
            key = (head[0].strip("[]").removeprefix("::ffff:"), int(head[1]))
        except ValueError:
            continue
        req = parts[1].split()
        path = req[1] if len(req) > 1 else ""
        tail = parts[2].split()
        size = int(tail[1]) if len(tail) > 1 and tail[1].isdigit() else 0
        e = acc.setdefault(key, [0, 0, 0])
        e[1 if path.startswith(PAGE_PREFIXES) else 0] += 1
        e[2] += size
    return {k: HttpConnection(*v) for k, v in acc.items()}


# What a workload flow carried (`carried` beside its role): media (the workload's requests, Apache's
# log), page (only the dash.js page's requests), idle (no request; or, without HTTP, no data acked),
# data (a workload without HTTP whose flow had data acknowledged, ss bytes_acked).
CARRIED_WORKLOAD = ("media", "data")


def carried(flow: str, token: str | None, http: dict[tuple[str, int], HttpConnection],
            by_token: dict[str, HttpConnection], acked_bytes: int, http_workload: bool) -> tuple[str, HttpConnection | None]:
    """(what the flow carried, its connection's access-log record). An MPTCP subflow that joined a
    connection has its own client port, which Apache never sees: it takes its connection's record
    (same token)."""
    _, _, peer = flow.partition("-")
    rec = http.get(split_endpoint(peer)) or (by_token.get(token) if token else None)
    if not http_workload:
        return ("data" if acked_bytes > 0 else "idle"), rec
    if rec is None:
        return "idle", None
    return ("media" if rec.media_requests else "page" if rec.page_requests else "idle"), rec


def http_by_token(http: dict[tuple[str, int], HttpConnection], tokens: dict[str, str]) -> dict[str, HttpConnection]:
    """The access-log record of each MPTCP connection (token), through the subflow Apache saw."""
    out = {}
    for flow, tok in tokens.items():
        rec = http.get(split_endpoint(flow.partition("-")[2]))
        if rec is not None and tok:
            out[tok] = rec
    return out
