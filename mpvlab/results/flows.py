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

Summary figures (`cc_state` in summary.json) are computed over the workload flows that carried the
workload's bytes, within their active window (first request → last byte). A workload-port flow need
not carry any: dash.js's Chromium keeps a second connection (an HTTP/2 preconnect of 1.4 KB, an
HTTP/1.1 page connection of 13 KB) that never leaves STARTUP; time-weighted like the video's, it
made STARTUP 32–51 % of a dash.js run against 1.5–2.4 % on the video's connection. So each workload
flow is told what it `carried` (flow_ids.carried: Apache's access log per client connection, an MPTCP
subflow by its connection's token; without HTTP, its acknowledged bytes), and `flow_activity` finds
the active window from the `ss` samples' bytes_acked. Each flow's own shares (active window, whole
run) are listed beside it; `mode_share_check` is the cross-check (mpvlab/results/checks.py). Means:
- `*_per_sample`: the plain mean over the rows (one row per flow per loader sample);
- `*_time_weighted`: each row's value held until its flow's next row (a flow's last row for the
  flow's median row interval): a mean over time, robust to irregular sampling;
- `*_per_update` (CC state files with `updated_ns`): the mean over the distinct records the CC wrote,
  which it does on ACKs (at most every 1/(2·HZ) s): weights busy periods, as a per-ACK view does.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from mpvlab.results.flow_ids import (  # noqa: F401 — re-exported: the pandas-free half (flow_ids.py)
    CARRIED_WORKLOAD, CROSS_PORT, FLOWS_CSV, FLOWS_JSON, PREFLIGHT_QUERY, PROBE_PORT, ROLES, SCHED_SAMPLES, RoleRules,
    carried, flow_index, flow_key, http_by_token, http_connections, is_loopback, mptcp_tokens, preflight_ports,
    split_endpoint, write_flow_index)
from mpvlab.topologies import registry as topologies
from mpvlab.workloads import registry as workloads


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
    work = workloads.REGISTRY.get(s.get("workload") or "")
    if port is None and work is not None and work.port is not None:
        port = work.port
    kind = topologies.REGISTRY.get(s.get("topology") or "")
    # an emulated run without an HTTP record still served over Apache's default port
    if port is None and (s.get("topology") is None or (kind is not None and not kind.real_hosts)):
        port = 80 if not (s.get("http") or {}).get("tls") else 443
    return RoleRules(port, preflight_ports(run_dir / "logs" / "apache" / "access.log"))


# ---------------------------------------------------------------------------------------------
# CC state series (the registry's StateSeries names file and columns). A state file has one row per
# flow per loader sample: 100 Hz × 180 s × 2 subflows is 36,000 rows per run, so rows are handled as
# columns (pandas/numpy), never one Python object per row.

FRAME_COLUMNS = ["t_s", "flow", "role", "bw_bps", "min_rtt_ms", "state", "updated", "closed"]


@dataclass
class StateRow:
    """One row, for building a frame by hand (tests): `frame_of([StateRow(...), ...])`."""

    t_s: float
    flow: str
    role: str
    bw_bps: float | None
    min_rtt_ms: float | None
    state: str | None          # "STARTUP", "DRAIN", "PROBE_BW:UP", …, "PROBE_RTT"
    updated: str | None        # the CC's own write time (a new value marks a new record)
    closed: bool = False


def frame_of(rows: Iterable[StateRow]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in rows], columns=FRAME_COLUMNS)


def mode_label(mode: str | None, phase_value: str | None, phase_col: str | None) -> str | None:
    """The mode with its PROBE_BW sub-phase: BBRv3's phase column as is; BBR v1 (BBR-S, kernel BBR)
    from its pacing gain, whose cycle is 1.25 (UP, probing), 0.75 (DOWN, draining), then 1 (CRUISE)."""
    out = mode_labels(pd.Series([mode], dtype=object), pd.Series([phase_value], dtype=object), phase_col)
    v = out.iloc[0]
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def mode_labels(mode: pd.Series, phase: pd.Series | None, phase_col: str | None) -> pd.Series:
    """`mode_label` for whole columns."""
    m = mode.astype(object).where(mode.notna() & (mode.astype(str) != ""), None)
    if phase is None or not phase_col:
        return m
    in_bw = (m == "PROBE_BW")
    if phase_col.endswith("pacing_gain"):       # BBR-S "pacing_gain", kernel BBR (ss) "bbr_pacing_gain"
        g = pd.to_numeric(phase, errors="coerce")
        sub = np.where(g > 1.0 + 1e-3, "UP", np.where(g < 1.0 - 1e-3, "DOWN", "CRUISE"))
        ok = in_bw & g.notna()
    else:
        sub = phase.astype(str).to_numpy()
        ok = in_bw & phase.notna() & (phase.astype(str) != "")
    return m.where(~ok, "PROBE_BW:" + pd.Series(sub, index=m.index).astype(str))


def _names(df: pd.DataFrame, spec: Any, rules: RoleRules) -> tuple[np.ndarray, np.ndarray]:
    """Each row's flow key and role, worked out once per distinct 4-tuple."""
    cols = list(spec.tuple_cols)
    codes, uniq = pd.MultiIndex.from_arrays([df[c] for c in cols]).factorize()
    keys: list[str | None] = []
    roles: list[str | None] = []
    for tup in uniq:
        if cols == ["local", "peer"]:
            (sa, sp), (da, dp) = split_endpoint(str(tup[0])), split_endpoint(str(tup[1]))
        else:
            try:
                sa, sp, da, dp = str(tup[0]), int(tup[1]), str(tup[2]), int(tup[3])
            except (TypeError, ValueError):
                keys.append(None)
                roles.append(None)
                continue
        keys.append(flow_key(sa, sp, da, dp))
        roles.append(rules.role(sa, sp, da, dp))
    # code -1 (a missing address or port) picks the None appended last
    return np.asarray([*keys, None], dtype=object)[codes], np.asarray([*roles, None], dtype=object)[codes]


def read_state(path: Path, spec: Any, rules: RoleRules, t0_ns: int | None) -> pd.DataFrame:
    """Every row of a CC state file (spec: cc.registry.StateSeries) on the run's clock, named by flow
    and role (columns FRAME_COLUMNS); empty when the file is missing or has no time base
    (CLOCK_MONOTONIC without t0)."""
    empty = pd.DataFrame(columns=FRAME_COLUMNS)
    if spec.time == "t_ns" and t0_ns is None:
        return empty
    want = {spec.time, spec.bw, *spec.tuple_cols, "updated_ns", "closed",
            *(c for c in (spec.min_rtt, spec.mode, spec.phase) if c)}
    try:
        df = pd.read_csv(path, usecols=lambda c: c in want, dtype={c: str for c in ("saddr", "daddr", "local", "peer",
                                                                                     "updated_ns", "mode", "phase")})
    except (OSError, ValueError, pd.errors.EmptyDataError, pd.errors.ParserError):
        return empty
    if df.empty or any(c not in df.columns for c in (spec.time, *spec.tuple_cols)):
        return empty
    if spec.time == "t_ns":
        t = pd.to_numeric(df["t_ns"], errors="coerce")
        df = df[t.notna()]
        # integer ns first: float64 cannot hold CLOCK_MONOTONIC ns exactly
        t_s = (df["t_ns"].astype("int64") - int(t0_ns)) / 1e9      # type: ignore[arg-type]
    else:
        t_s = pd.to_numeric(df[spec.time], errors="coerce")
        df, t_s = df[t_s.notna()], t_s[t_s.notna()]
    # a row that lacks an endpoint names no flow (it would read as "…-nan:-1")
    named = df[list(spec.tuple_cols)].notna().all(axis=1)
    df, t_s = df[named], t_s[named]
    if df.empty:
        return empty
    keys, roles = _names(df, spec, rules)
    out = pd.DataFrame({
        "t_s": t_s.to_numpy(dtype=float), "flow": keys, "role": roles,
        "bw_bps": pd.to_numeric(df[spec.bw], errors="coerce").to_numpy() if spec.bw in df.columns else np.nan,
        "min_rtt_ms": (pd.to_numeric(df[spec.min_rtt], errors="coerce") * spec.min_rtt_to_ms).to_numpy()
        if spec.min_rtt and spec.min_rtt in df.columns else np.nan,
        "state": (mode_labels(df[spec.mode], df[spec.phase] if spec.phase and spec.phase in df.columns else None,
                              spec.phase).to_numpy() if spec.mode and spec.mode in df.columns else None),
        "updated": df["updated_ns"].to_numpy() if "updated_ns" in df.columns else None,
        "closed": (pd.to_numeric(df["closed"], errors="coerce") == 1).to_numpy() if "closed" in df.columns else False,
    })
    return out[out.flow.notna()].reset_index(drop=True)


def _weights(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """Per row (sorted by flow, then time; flow f is rows starts[f]:ends[f]): how long its value held —
    to its flow's next row; a flow's last row for the flow's median row interval (0 for a flow seen
    once, or for a closed socket's final row)."""
    w = np.empty_like(t)
    for a, b in zip(starts, ends):
        steps = np.diff(t[a:b])
        w[a:b - 1] = steps
        w[b - 1] = 0.0 if closed[b - 1] or not len(steps) else float(np.median(steps))
    return w


def _mean(v: np.ndarray, w: np.ndarray | None = None) -> float | None:
    """Mean of the finite values, weighted by w if given; None without values (or weight)."""
    ok = np.isfinite(v)
    if w is None:
        return float(v[ok].mean()) if ok.any() else None
    tot = float(w[ok].sum())
    return float((v[ok] * w[ok]).sum() / tot) if tot > 0 else None


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
    carried: str | None               # media / page / idle / data (flow_ids.carried); None: not a workload flow
    bytes_acked: int | None           # the flow's acknowledged bytes (ss bytes_acked at its last sample)
    http_requests: int | None         # requests its connection made (Apache's access log)
    http_bytes: int | None            # response bytes of those requests (Apache's %B)
    in_shares: bool                   # whether its rows are in the view's headline figures
    mode_share_active_time_weighted: dict[str, float]      # its own modes over the active window
    mode_share_whole_run_time_weighted: dict[str, float]   # its own modes over all its rows


@dataclass(frozen=True)
class Activity:
    """Which workload flows carried the workload and when (flow_activity): the headline window."""

    flows: dict[str, tuple[str, int, Any]]   # flow → (carried, bytes acked, its HttpConnection or None)
    active_s: tuple[float, float] | None     # first request → last byte over the carrying flows
    evidence: str                            # what `carried` was read from


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
    window: str                          # "active" (first request → last byte) or "playback" (no activity known)
    window_definition: str
    carried_evidence: str                # where each flow's `carried` comes from
    flows_in_shares: list[str]
    mode_share_time_weighted_all_workload_flows: dict[str, float]   # every workload-port flow, playback window
    playback_window_s: tuple[float, float]
    flows: list[FlowState] = field(default_factory=list)
    definition: str = ("over the flows that carried the workload's bytes (carried media or data: Apache's access log, "
                       "else ss bytes_acked; roles: mpvlab/results/flows.py), rows with run time in window_s; "
                       "per_sample: plain mean over rows; time_weighted: each row held until its flow's next "
                       "row; per_update: mean over the distinct records the CC wrote (on ACKs)")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["window_s"] = list(self.window_s)
        d["playback_window_s"] = list(self.playback_window_s)
        return d



def _shares(state: np.ndarray, w: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    """(time-weighted, per-sample) share of each mode over rows with a mode."""
    has = np.array([isinstance(x, str) for x in state], dtype=bool)
    if not has.any():
        return {}, {}
    labels, inv = np.unique(state[has].astype(str), return_inverse=True)
    by_t = np.bincount(inv, weights=w[has], minlength=len(labels))
    by_n = np.bincount(inv, minlength=len(labels))
    tot_t, tot_n = float(by_t.sum()), int(by_n.sum())
    return ({str(k): float(v) / tot_t for k, v in zip(labels, by_t)} if tot_t > 0 else {},
            {str(k): int(v) / tot_n for k, v in zip(labels, by_n)} if tot_n else {})


def _sorted_in(rows: pd.DataFrame, lo: float, hi: float) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """Rows in [lo, hi] sorted by flow then time, with each flow's start/end index and the rows' weights."""
    win = rows[(rows.t_s >= lo) & (rows.t_s <= hi)].sort_values(["flow", "t_s"], kind="stable")
    flow = win.flow.to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, flow[1:] != flow[:-1]]) if len(flow) else np.zeros(0, dtype=int)
    ends = np.r_[starts[1:], len(flow)].astype(int)
    w = _weights(win.t_s.to_numpy(dtype=float), starts, ends, win.closed.to_numpy(dtype=bool))
    return win, starts, ends, w


def _flow_shares(rows: pd.DataFrame, lo: float, hi: float) -> dict[str, dict[str, float]]:
    """Each flow's own time-weighted mode shares over the rows in [lo, hi]."""
    win, starts, ends, w = _sorted_in(rows, lo, hi)
    flow, state = win.flow.to_numpy(dtype=object), win.state.to_numpy(dtype=object)
    return {str(flow[a]): _shares(state[a:b], w[a:b])[0] for a, b in zip(starts, ends)}


def state_view(rows: pd.DataFrame, source: str, window: tuple[float, float],
               tokens: dict[str, str] | None = None, activity: Activity | None = None) -> StateView:
    """The model over the flows that carried the workload (`activity`: which flows, over which
    window; without it, every workload-role flow over `window`); a per-flow breakdown of every flow
    with rows in the window (what it carried, its bytes, its own mode shares over the active window
    and the whole run); `flows_by_role` counts every flow of the file. Columns as numpy arrays, a
    loop only over flows (a handful per run), never over rows."""
    roles: dict[str, int] = {}
    for r in rows.drop_duplicates("flow").role:
        roles[str(r)] = roles.get(str(r), 0) + 1
    if activity is not None and activity.active_s is not None:
        lo, hi = activity.active_s
        name, words = "active", ("active: from the carrying flows' first request (their last ss sample before "
                                 "the first acknowledged data byte) to their last byte (their first ss sample at "
                                 "the final bytes_acked), at the ss sampling interval")
    else:
        (lo, hi), name, words = window, "playback", "playback: from run time 0 to the playback's duration"
    info = activity.flows if activity is not None else {}
    in_shares = (lambda f, role: info.get(f, ("", 0, None))[0] in CARRIED_WORKLOAD) if activity is not None \
        else (lambda f, role: role == "workload")
    win, starts, ends, w = _sorted_in(rows, lo, hi)
    flow = win.flow.to_numpy(dtype=object)
    t = win.t_s.to_numpy(dtype=float)
    bw = win.bw_bps.to_numpy(dtype=float)
    rtt = win.min_rtt_ms.to_numpy(dtype=float)
    rtt = np.where(rtt > 0, rtt, np.nan)            # 0: the CC has no RTT sample yet
    role = win.role.to_numpy(dtype=object)
    state = win.state.to_numpy(dtype=object)
    upd = win.updated.to_numpy(dtype=object)
    whole = _flow_shares(rows, -math.inf, math.inf)
    per_flow = []
    new = np.zeros(len(flow), dtype=bool)            # a new record of the CC: its write time changed
    sel = np.zeros(len(flow), dtype=bool)
    for a, b in zip(starts, ends):
        sl = slice(a, b)
        f, rl = str(flow[a]), str(role[a])
        r = rtt[sl][np.isfinite(rtt[sl])]
        kind, acked, http = info.get(f, (None, None, None))
        sel[sl] = in_shares(f, rl)
        per_flow.append(FlowState(
            f, rl, (tokens or {}).get(f), int(b - a), round(float(t[a]), 4), round(float(t[b - 1]), 4),
            _mean(bw[sl]), _mean(bw[sl], w[sl]), float(r.min()) if len(r) else None,
            kind, acked, None if http is None else http.media_requests + http.page_requests,
            None if http is None else http.bytes, bool(sel[a]), _shares(state[sl], w[sl])[0], whole.get(f, {})))
        u = upd[sl]
        known = pd.notna(u)
        changed = np.r_[True, u[1:] != u[:-1]] if b > a else np.zeros(0, dtype=bool)
        new[sl] = known & changed
    wl = sel
    tw, ps = _shares(state[wl], w[wl])
    # every workload-port flow over the playback window: the figure before flows were told apart
    pwin, _, _, pw = _sorted_in(rows, *window)
    pwl = pwin.role.to_numpy(dtype=object) == "workload"
    all_tw = _shares(pwin.state.to_numpy(dtype=object)[pwl], pw[pwl])[0]
    rtt_w = np.isfinite(rtt) & wl
    return StateView(
        source, (lo, hi), roles, int(wl.sum()), _mean(bw[wl]), _mean(bw[wl], w[wl]), _mean(bw[wl & new]),
        _mean(rtt[rtt_w], w[rtt_w]), float(rtt[rtt_w].min()) if rtt_w.any() else None, tw, ps,
        name, words, activity.evidence if activity is not None else "role only (workload port)",
        sorted({str(f) for f in flow[wl]}), all_tw, (float(window[0]), float(window[1])),
        sorted(per_flow, key=lambda f: (ROLES.index(f.role) if f.role in ROLES else len(ROLES), f.first_t_s)))


def flow_activity(ss_path: Path, rules: RoleRules, access_log: Path, tokens: dict[str, str],
                  http_workload: bool) -> Activity:
    """What each workload-role flow carried and the active window, from the `ss` samples' bytes_acked
    (data/subflows.csv; the server's acknowledged bytes, 1 for the SYN) and Apache's access log."""
    http = http_connections(access_log) if http_workload else {}
    by_token = http_by_token(http, tokens)
    try:
        df = pd.read_csv(ss_path, usecols=["t_s", "local", "peer", "bytes_acked"], dtype={"local": str, "peer": str})
    except (OSError, ValueError, pd.errors.EmptyDataError, pd.errors.ParserError):
        df = pd.DataFrame(columns=["t_s", "local", "peer", "bytes_acked"])
    df = df.dropna(subset=["t_s", "local", "peer"])
    df["bytes_acked"] = pd.to_numeric(df.bytes_acked, errors="coerce").fillna(0)
    out: dict[str, tuple[str, int, Any]] = {}
    spans: list[tuple[float, float]] = []
    for (local, peer), g in df.sort_values("t_s", kind="stable").groupby(["local", "peer"], sort=False):
        (sa, sp), (da, dp) = split_endpoint(str(local)), split_endpoint(str(peer))
        if rules.role(sa, sp, da, dp) != "workload":
            continue
        f = flow_key(sa, sp, da, dp)
        t, ba = g.t_s.to_numpy(dtype=float), g.bytes_acked.to_numpy(dtype=float)
        final = float(ba.max())
        acked = max(int(final) - 1, 0)
        kind, rec = carried(f, tokens.get(f), http, by_token, acked, http_workload)
        out[f] = (kind, acked, rec)
        if kind in CARRIED_WORKLOAD and acked > 0:
            grew = np.flatnonzero(ba > ba[0])
            start = float(t[grew[0] - 1]) if len(grew) and ba[0] <= 1 else float(t[0])
            spans.append((start, float(t[np.flatnonzero(ba >= final)[0]])))
    active = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None
    evidence = ("Apache's access log (requests per client connection; an MPTCP subflow by its connection's token)"
                if http_workload else "ss bytes_acked (a workload without HTTP)")
    return Activity(out, active, evidence)


def mode_share_check(view: dict[str, Any], large_share: float = 0.1) -> dict[str, Any]:
    """cross-check mode_shares_over_workload_flows (mpvlab/results/checks.py): the flows the headline
    mode shares are over against what each flow carried. Fails when a flow in the shares carried no
    workload bytes, when a flow that carried them is left out, or when a workload-port flow left
    out acked more than `large_share` of the bytes the flows in the shares acked (the evidence, e.g.
    Apache's log, missed a connection that moved data)."""
    fl = [f for f in view.get("flows") or [] if f.get("role") == "workload"]
    in_shares = {f["flow"] for f in fl if f.get("in_shares")}
    idle_in = sorted(f["flow"] for f in fl if f["flow"] in in_shares and f.get("carried") not in CARRIED_WORKLOAD)
    left_out = sorted(f["flow"] for f in fl if f["flow"] not in in_shares and f.get("carried") in CARRIED_WORKLOAD)
    shared_bytes = sum(int(f.get("bytes_acked") or 0) for f in fl if f["flow"] in in_shares)
    heavy_out = sorted(f["flow"] for f in fl if f["flow"] not in in_shares
                       and int(f.get("bytes_acked") or 0) > large_share * max(shared_bytes, 1))
    return {"flows_in_shares": sorted(in_shares), "without_workload_bytes": idle_in, "carrying_left_out": left_out,
            "bytes_acked_in_shares": shared_bytes, "left_out_with_large_bytes": heavy_out,
            "tolerance": f"exact; a flow left out may ack at most {large_share:g} × the shares' flows' bytes",
            "ok": bool(in_shares) and not idle_in and not left_out and not heavy_out}


def sched_flows(path: Path, rules: RoleRules) -> pd.DataFrame:
    """The scheduler trace's subflow samples (collectors/README.md: `t` on the run's clock, `subflow`
    = "local:port-peer:port" from the server's side) as rows named by flow and role."""
    try:
        df = pd.read_csv(path, usecols=["t", "subflow"], dtype={"subflow": str})
    except (OSError, ValueError, pd.errors.EmptyDataError, pd.errors.ParserError):
        return frame_of([])
    names: dict[str, tuple[str | None, str | None]] = {}
    for sf in df.subflow.dropna().unique():
        a, _, b = str(sf).partition("-")
        (sa, sp), (da, dp) = split_endpoint(a), split_endpoint(b)
        names[sf] = (flow_key(sa, sp, da, dp), rules.role(sa, sp, da, dp)) if b else (None, None)
    out = pd.DataFrame({"t_s": pd.to_numeric(df.t, errors="coerce"),
                        "flow": df.subflow.map(lambda x: names.get(x, (None, None))[0]),
                        "role": df.subflow.map(lambda x: names.get(x, (None, None))[1])})
    return out[out.flow.notna()].reset_index(drop=True)


def write_flows(data_dir: Path, rules: RoleRules, series: dict[str, pd.DataFrame], tokens: dict[str, str]) -> None:
    """data/flows.json (the rules and every flow) and data/flows.csv (one row per flow and series):
    the identity and role of every flow of the run's per-flow series. The files are flow_ids' own
    (one writer whether a run read its series with pandas or row by row); rows without a flow name
    are left out, as a groupby on `flow` left them out."""
    named = {name: [(str(f), str(r), float(t)) for f, r, t in zip(df.flow, df.role, df.t_s) if isinstance(f, str)]
             for name, df in series.items() if len(df)}
    write_flow_index(data_dir, rules, flow_index(named, tokens))
