"""Result directories as tidy pandas DataFrames (the reading side of the results layout, mpvlab/core/rundir.py).

    import mpvlab
    res = mpvlab.results.load("results/wifi-lte-study")
    res.runs                       # one row per run: keys + summary.json flattened ("paths.wifi.share", …)
    res.links                      # client interface counters per path over time, with run keys
    res.to_parquet("tables/")      # every table as Parquet

Every folder below DIR with a `status.json` is a run (a single run directory works too). `runs` has
every run, with `state` (complete | failed | running …); the time series come from every run that has
them. Time series share the run's clock — seconds since run time zero, the instant the player started
(`t_s`; the scheduler trace's `t` and BBR-S's CLOCK_MONOTONIC `t_ns` are converted to it) — and carry
the run keys `run_id, config, scenario, cc, scheduler, trial, seed` so they join on `run_id` (a source
column with a key's name keeps its value as `<name>_observed`: `subflows.cc_observed` is the CC `ss`
saw on the subflow, `cc` the configured one).

Tables (each a DataFrame; the time series are read on first access):

| name | source in the run directory | one row per |
|---|---|---|
| runs | summary.json, status.json, sweep header of scenario.yaml | run |
| subflows | data/subflows.csv (ss), + `path` from provenance topology.paths.*.client_addr | subflow sample |
| links | data/links.csv | client interface sample (path) |
| queues | data/queues/<path>/qdisc.csv, + `path` | qdisc sample on the path's router |
| queue_links | data/queues/<path>/link.csv, + `path` | router interface sample |
| scheduler | data/schedtrace/subflow_samples.csv (BPF), + `path`, `t_s` | scheduler-side subflow sample |
| switches | data/schedtrace/switches.csv, + `from_path`, `to_path`, `t_s` | path switch |
| player | logs/player-events.jsonl (flattened; `type` names the event) | player event |
| cc | the CC's state file as mpvlab/cc/registry.py names it (BBR-S data/bbrs_state.csv, BBRv3 bbr3_state.csv, …), + `path`, `t_s`, `state`, `source` | CC state sample |

Every per-flow series (subflows, scheduler, cc) also carries the flow's identity and role
(mpvlab/results/flows.py): `flow` ("saddr:sport-daddr:dport" from the server's side), `mptcp_token` (the
MPTCP connection, where `ss` showed it) and `role` (workload | probe | check | cross | other). Select
`role == "workload"` before averaging: a CC state file holds the fidelity probe, the loopback
readiness check and the preflight request too.

Shared-bottleneck runs keep per-player files under data/clientN/ and logs/clientN/: those rows carry
`client` = "clientN" (empty for the single player of the other kinds).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from mpvlab.results import flows as flowids
from mpvlab.results.aggregate import Collection, Run, aggregate, flatten

KEYS = ["run_id", "config", "scenario", "cc", "scheduler", "trial", "seed"]
TIME_SERIES = ["subflows", "links", "queues", "queue_links", "scheduler", "switches", "player", "cc"]
TABLES = ["runs", *TIME_SERIES]


def host_of(endpoint: str) -> str:
    """'[::ffff:10.0.1.2]:59128', '10.0.1.2:59128' or '10.0.1.2' → '10.0.1.2'."""
    e = str(endpoint).strip()
    if e.count(":") == 1 or (e.startswith("[") and "]:" in e):
        e = e.rsplit(":", 1)[0]
    return e.strip("[]").removeprefix("::ffff:")


def addr_to_path(provenance: dict[str, Any]) -> dict[str, str]:
    """Client address → path name, from the run's provenance (topology.paths.<name>.client_addr)."""
    paths = ((provenance.get("topology") or {}).get("paths") or {})
    return {str(v.get("client_addr")): name for name, v in paths.items() if isinstance(v, dict) and v.get("client_addr")}


def _read_csv(p: Path) -> pd.DataFrame | None:
    try:
        df = pd.read_csv(p)
    except (OSError, pd.errors.EmptyDataError, pd.errors.ParserError):
        return None
    return df


def t0_ns(run_dir: Path, client: str) -> int | None:
    """Run time zero (CLOCK_MONOTONIC ns), as the player recorded it. For the run as a whole (client
    "") of a shared-bottleneck run, whose players write under logs/clientN/: the first player's
    (every player of a run starts at the run's one time zero)."""
    names = [f"{client}/player-summary.json"] if client else \
        ["player-summary.json", *sorted(str(p.relative_to(run_dir / "logs"))
                                        for p in (run_dir / "logs").glob("client*/player-summary.json"))]
    for name in names:
        try:
            v = json.loads((run_dir / "logs" / name).read_text()).get("t0_ns")
        except (OSError, ValueError):
            continue
        if isinstance(v, (int, float)):
            return int(v)
    return None


def _subflow_remote(s: str) -> str:
    """Scheduler-trace subflow '10.0.100.1:80-10.0.1.2:52248' → '10.0.1.2' (the client's address)."""
    return host_of(str(s).split("-", 1)[1]) if "-" in str(s) else ""


@dataclass
class Results:
    """The tables of the runs below `root`. `collection` is the report's view of the complete runs
    (configurations, metric definitions)."""

    root: Path
    collection: Collection
    _all_runs: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)

    # -- runs ------------------------------------------------------------------------------------

    def _run_keys(self) -> dict[Path, dict[str, Any]]:
        out: dict[Path, dict[str, Any]] = {}
        for cfg in self.collection.configs:
            for r in cfg.runs:
                out[r.run_dir] = {"run_id": r.run_id, "config": cfg.label, "scenario": r.scenario, "cc": r.cc,
                                  "scheduler": r.scheduler, "trial": (r.sweep or {}).get("trial"),
                                  "seed": r.summary.get("seed")}
        return out

    @cached_property
    def keys(self) -> dict[Path, dict[str, Any]]:
        return self._run_keys()

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per run (every state): the keys, `state`, `reason`, `run_dir`, the parameters that
        define its configuration (`param.<field>`), the metrics as the report reads them (clamped where
        the metric's definition says so) and summary.json flattened (dotted column names)."""
        rows = []
        complete = {r.run_dir: r for r in self.collection.runs}
        for d, status in self._all_runs:
            row: dict[str, Any] = {"run_dir": str(d.relative_to(self.root)) if d != self.root else d.name,
                                   "state": status.get("state"), "reason": status.get("reason") or ""}
            r = complete.get(d)
            if r is not None:
                row.update(self.keys[d])
                row.update({f"param.{k}": v for k, v in r.extra.items()})
                flat = flatten(r.summary)
                flat.update({k: v for k, v in r.metrics.items()})   # the clamped/normalised values win
                row.update({k: v for k, v in flat.items() if k not in row})
            else:
                row["run_id"] = d.name
            rows.append(row)
        df = pd.DataFrame(rows)
        lead = [c for c in [*KEYS, "state", "reason", "run_dir"] if c in df.columns]
        return df[lead + [c for c in df.columns if c not in lead]]

    # -- time series -----------------------------------------------------------------------------

    def _complete(self) -> Iterable[Run]:
        return self.collection.runs

    def _series(self, rel: str, per_path_dir: str | None = None) -> pd.DataFrame:
        """A CSV of every complete run (and of every player of shared-bottleneck runs), with keys."""
        frames = []
        for r in self._complete():
            bases = [("", r.run_dir / "data")] + [(p.name, p) for p in sorted((r.run_dir / "data").glob("client*"))
                                                   if p.is_dir()]
            for client, base in bases:
                if per_path_dir is not None:
                    for pdir in sorted((base / per_path_dir).glob("*/")):
                        df = _read_csv(pdir / rel)
                        if df is not None and len(df):
                            frames.append(self._keyed(df.assign(path=pdir.name), r, client))
                else:
                    df = _read_csv(base / rel)
                    if df is not None and len(df):
                        frames.append(self._keyed(df, r, client))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*KEYS, "client"])

    def _keyed(self, df: pd.DataFrame, r: Run, client: str) -> pd.DataFrame:
        keys = self.keys[r.run_dir]
        # A source column named like a key is what was observed, not the configuration (ss's `cc` is the
        # CC the subflow really ran): keep it as <name>_observed.
        df = df.rename(columns={c: f"{c}_observed" for c in df.columns if c in KEYS or c == "client"})
        front = pd.DataFrame({k: [keys[k]] * len(df) for k in KEYS})
        front["client"] = client
        return pd.concat([front, df.reset_index(drop=True)], axis=1)

    def _path_from(self, df: pd.DataFrame, col: str, parse: Any, out: str = "path") -> pd.DataFrame:
        if df.empty or col not in df.columns:
            df[out] = pd.Series(dtype=str)
            return df
        by_run = {self.keys[r.run_dir]["run_id"]: addr_to_path(r.provenance) for r in self._complete()}
        hosts = df[col].map(parse)
        df[out] = [by_run.get(rid, {}).get(h) for rid, h in zip(df["run_id"], hosts)]
        return df

    @cached_property
    def _rules(self) -> dict[str, flowids.RoleRules]:
        return {self.keys[r.run_dir]["run_id"]: flowids.rules_for_run(r.run_dir, r.summary) for r in self._complete()}

    def _identify(self, df: pd.DataFrame, ends: Any, cols: list[str]) -> pd.DataFrame:
        """Adds `flow` and `role` (and an empty `mptcp_token` where the source has none): `ends(row)`
        gives the (saddr, sport, daddr, dport) from the server's side of a row's `cols`; worked out
        once per distinct flow of a run, not per row."""
        if df.empty or any(c not in df.columns for c in cols):
            for c in ("flow", "role", "mptcp_token"):
                if c not in df.columns:
                    df[c] = pd.Series(dtype=str)
            return df
        named: dict[tuple[Any, ...], tuple[str | None, str | None]] = {}
        for key in df[["run_id", *cols]].drop_duplicates().itertuples(index=False, name=None):
            try:
                sa, sp, da, dp = ends(dict(zip(cols, key[1:])))
            except (KeyError, ValueError, TypeError):
                named[key] = (None, None)
                continue
            rules = self._rules.get(key[0])
            named[key] = (flowids.flow_key(sa, sp, da, dp), rules.role(sa, sp, da, dp) if rules else None)
        both = [named[k] for k in df[["run_id", *cols]].itertuples(index=False, name=None)]
        df["flow"] = [b[0] for b in both]
        df["role"] = [b[1] for b in both]
        if "mptcp_token" not in df.columns:
            df["mptcp_token"] = None
        return df

    @staticmethod
    def _ends_local_peer(row: dict[str, Any]) -> tuple[str, int, str, int]:
        (sa, sp), (da, dp) = flowids.split_endpoint(row["local"]), flowids.split_endpoint(row["peer"])
        return sa, sp, da, dp

    @staticmethod
    def _ends_tuple(row: dict[str, Any]) -> tuple[str, int, str, int]:
        return str(row["saddr"]), int(row["sport"]), str(row["daddr"]), int(row["dport"])

    @staticmethod
    def _ends_subflow(row: dict[str, Any]) -> tuple[str, int, str, int]:
        a, b = str(row["subflow"]).split("-", 1)
        (sa, sp), (da, dp) = flowids.split_endpoint(a), flowids.split_endpoint(b)
        return sa, sp, da, dp

    @cached_property
    def subflows(self) -> pd.DataFrame:
        """`ss` samples per subflow (server side); `path` from the peer (client) address; `flow`, `role`."""
        return self._identify(self._path_from(self._series("subflows.csv"), "peer", host_of), self._ends_local_peer,
                              ["local", "peer"])

    @cached_property
    def links(self) -> pd.DataFrame:
        return self._series("links.csv")

    @cached_property
    def queues(self) -> pd.DataFrame:
        return self._series("qdisc.csv", per_path_dir="queues")

    @cached_property
    def queue_links(self) -> pd.DataFrame:
        return self._series("link.csv", per_path_dir="queues")

    @cached_property
    def scheduler(self) -> pd.DataFrame:
        df = self._path_from(self._series("schedtrace/subflow_samples.csv"), "subflow", _subflow_remote)
        df = self._identify(df, self._ends_subflow, ["subflow"])
        if "conn" in df.columns:              # the trace's connection is the MPTCP token
            df["mptcp_token"] = df["conn"]
        if "t" in df.columns:
            df["t_s"] = df["t"]
        return df

    @cached_property
    def switches(self) -> pd.DataFrame:
        df = self._series("schedtrace/switches.csv")
        df = self._path_from(df, "from_subflow", _subflow_remote, "from_path")
        df = self._path_from(df, "to_subflow", _subflow_remote, "to_path")
        if "t" in df.columns:
            df["t_s"] = df["t"]
        return df

    @cached_property
    def player(self) -> pd.DataFrame:
        """Every player event (logs/player-events.jsonl), one column per field; `t_s` = the event's `t`."""
        frames = []
        for r in self._complete():
            files = [("", r.run_dir / "logs" / "player-events.jsonl")] + [
                (p.parent.name, p) for p in sorted((r.run_dir / "logs").glob("client*/player-events.jsonl"))]
            for client, f in files:
                try:
                    lines = f.read_text().splitlines()
                except OSError:
                    continue
                recs = []
                for ln in lines:
                    try:
                        v = json.loads(ln)
                    except ValueError:
                        continue            # a line cut by a killed player
                    if isinstance(v, dict):
                        recs.append({k: (json.dumps(x) if isinstance(x, (list, dict)) else x) for k, x in v.items()})
                if recs:
                    df = pd.DataFrame(recs)
                    if "t" in df.columns:
                        df["t_s"] = df["t"]
                    frames.append(self._keyed(df, r, client))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*KEYS, "client"])

    @cached_property
    def cc(self) -> pd.DataFrame:
        """Each run's CC state samples from the file its CC's registry entry names (`source`); `t_s`
        on the run's clock, `path` from the client address, `flow`, `role`, and `state` (the mode
        with its PROBE_BW sub-phase, mpvlab/results/flows.py mode_label)."""
        from mpvlab.cc import registry
        frames = []
        for r in self._complete():
            entry = registry.REGISTRY.get(r.cc)
            spec = entry.state if entry is not None else None
            if spec is None or spec.time != "t_ns":      # kernel BBR's ss state is the subflows table
                continue
            df = _read_csv(r.run_dir / "data" / spec.file)
            if df is None or not len(df):
                continue
            df = self._keyed(df, r, "")
            t0 = t0_ns(r.run_dir, "")
            df["t_s"] = [(t - t0) / 1e9 if t0 is not None else math.nan for t in df["t_ns"]]
            df["source"] = f"data/{spec.file}"
            modes = df[spec.mode] if spec.mode and spec.mode in df.columns else [None] * len(df)
            phases = df[spec.phase] if spec.phase and spec.phase in df.columns else [None] * len(df)
            df["state"] = [flowids.mode_label(m, None if p is None or (isinstance(p, float) and math.isnan(p))
                                              else str(p), spec.phase) for m, p in zip(modes, phases)]
            frames.append(df)
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*KEYS, "client", "t_s"])
        df = self._identify(df, self._ends_tuple, ["saddr", "sport", "daddr", "dport"])
        return self._path_from(df, "daddr", host_of)

    # -- export ----------------------------------------------------------------------------------

    def table(self, name: str) -> pd.DataFrame:
        if name not in TABLES:
            raise KeyError(f"no table {name!r}; tables: {', '.join(TABLES)}")
        return getattr(self, name)

    def to_parquet(self, folder: str | Path, tables: Iterable[str] = TABLES) -> list[Path]:
        """Each table as <folder>/<name>.parquet (empty tables too, so a script finds every file)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name in tables:
            df = self.table(name)
            # Parquet needs one type per column: mixed object columns (a field that is a number in one
            # run and text in another) are written as text.
            for col in df.columns:
                if df[col].dtype == object:
                    kinds = {type(v) for v in df[col].dropna()}
                    if len(kinds) > 1:
                        df[col] = df[col].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                                              else str(v))
            p = out / f"{name}.parquet"
            df.to_parquet(p, index=False)
            written.append(p)
        return written


def load(directory: str | Path) -> Results:
    """The runs below `directory` (or the one run it is) as tidy tables; nothing is read from a
    kernel or network, so any machine with the result directories can do it."""
    from mpvlab.core import rundir
    from mpvlab.results.aggregate import find_run_dirs
    from mpvlab.core.errors import InputError
    from mpvlab.input.apiargs import path_arg
    root = path_arg(directory, "mpvlab.results.load: directory")
    assert root is not None
    if not root.is_dir():     # an MpvlabError, as every refusal of the API (docs/python-api.md)
        raise InputError(f"{root}: no such results directory")
    # tidy tables are data, not statistics: every complete run, its fidelity_ok a column to filter on
    c = aggregate(root, stats=False, include_warned=True)
    all_runs = [(d, rundir.read_status(d) or {"state": "unreadable"}) for d in find_run_dirs(root)]
    return Results(root, c, all_runs)
