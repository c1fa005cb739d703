"""Runs from many nodes (a sweep on a cluster): what kind of host made each run, configurations whose
trials come from different kernels, and sweep runs present twice (one run key complete in two result
roots — two nodes' folders merged) so a trial is never counted twice."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpvlab.report.aggregate import Collection, NotAggregated, Run


def host_kind(prov: dict[str, Any]) -> str:
    """Hardware and OS, not the node's name: runs on identical nodes share a kind."""
    h = prov.get("host") or {}
    mem = h.get("mem_total_kb")
    return (f"{h.get('machine', '?')}, {h.get('cpus', '?')} CPUs, "
            f"{round(mem / 2**20) if isinstance(mem, (int, float)) else '?'} GiB, {h.get('os', '?')}")


def package_fingerprint(prov: dict[str, Any]) -> str:
    pk = prov.get("packages") or {}
    return ", ".join(f"{n} {v}" for kind in sorted(pk) for n, v in sorted((pk[kind] or {}).items()))


def mixed_configs(c: "Collection") -> list[tuple[str, str, list[str]]]:
    """(configuration label, what differs: 'kernels' | 'package versions', the distinct values) for
    every configuration whose trials come from different kernels or package versions."""
    out = []
    for cfg in c.configs:
        kernels = sorted({str((r.provenance.get("host") or {}).get("kernel")) for r in cfg.runs})
        if len(kernels) > 1:
            out.append((cfg.label, "kernels", kernels))
        pkgs = {package_fingerprint(r.provenance) for r in cfg.runs}
        if len(pkgs) > 1:
            out.append((cfg.label, "package versions", [f"{len(pkgs)} different sets"]))
    return out


def by_host(runs: list["Run"]) -> dict[str, list[str]]:
    """host kind → the node names of that kind (sorted)."""
    kinds: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        kinds[host_kind(r.provenance)].add(str((r.provenance.get("host") or {}).get("hostname")))
    return {k: sorted(v) for k, v in sorted(kinds.items())}


def drop_duplicate_sweep_runs(runs: list["Run"], bad: list["NotAggregated"]) -> list["Run"]:
    """Keep one complete run per (sweep, run key) — the latest; list the others in `bad` as duplicates."""
    from mpvlab.report.aggregate import NotAggregated

    import json

    # Same sweep, run key and effective scenario (seed included): the same run made twice.
    groups: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    keep: list[Run] = []
    for r in runs:
        if r.sweep and r.sweep.get("key"):
            groups[(str(r.sweep.get("sweep")), str(r.sweep["key"]),
                    json.dumps(r.resolved, sort_keys=True, default=str))].append(r)
        else:
            keep.append(r)
    for (sweep, key, _), rs in groups.items():
        rs.sort(key=lambda r: (r.run_dir / "status.json").stat().st_mtime)
        keep.append(rs[-1])
        for r in rs[:-1]:
            bad.append(NotAggregated(r.rel, "duplicate", f"sweep {sweep} run {key} is complete again in "
                                                         f"{rs[-1].rel}; that one is counted"))
    order = {id(r): i for i, r in enumerate(runs)}
    return sorted(keep, key=lambda r: order[id(r)])
