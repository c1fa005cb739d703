"""Runs from many nodes (a sweep on a cluster): what kind of host made each run, configurations whose
trials come from different kernels, and sweep runs present twice (one run key complete in two result
roots — two nodes' folders merged) so a trial is never counted twice."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpvlab.results.aggregate import Collection, Run


def host_kind(prov: dict[str, Any]) -> str:
    """Hardware and OS, not the node's name: runs on identical nodes share a kind."""
    h = prov.get("host") or {}
    mem = h.get("mem_total_kb")
    return (f"{h.get('machine', '?')}, {h.get('cpus', '?')} CPUs, "
            f"{round(mem / 2**20) if isinstance(mem, (int, float)) else '?'} GiB, {h.get('os', '?')}")


def package_fingerprint(prov: dict[str, Any]) -> str:
    pk = prov.get("packages") or {}
    return ", ".join(f"{n} {v}" for kind in sorted(pk) for n, v in sorted((pk[kind] or {}).items()))


def mixed_configs(c: Collection) -> list[tuple[str, str, list[str]]]:
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


def by_host(runs: list[Run]) -> dict[str, list[str]]:
    """host kind → the node names of that kind (sorted)."""
    kinds: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        kinds[host_kind(r.provenance)].add(str((r.provenance.get("host") or {}).get("hostname")))
    return {k: sorted(v) for k, v in sorted(kinds.items())}
