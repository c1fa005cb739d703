"""Interfaces a scenario names on physical hosts: the existence check, and the guard that snapshots
an interface's qdiscs, addresses, routes and firewall rules before a run and proves afterwards that
the run left it exactly as it was."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Literal

from mpvlab.core import proc
from mpvlab.core.hosts import Host
from mpvlab.core.validators import HostConfigError, validate_ifname
from mpvlab.core.errors import MpvlabError

# --------------------------------------------------------------------------------------------
# Interfaces named by a scenario
# --------------------------------------------------------------------------------------------


class InterfaceError(MpvlabError, RuntimeError):
    pass


def list_interfaces(host: Host) -> list[str]:
    links = json.loads(host.run(["ip", "-j", "link", "show"]).stdout or "[]")
    return sorted(str(link["ifname"]) for link in links)


def check_interface(host: Host, ifname: str) -> None:
    """The interface exists on `host` and is not loopback (the only interfaces a scenario may name)."""
    ifname = validate_ifname(ifname)
    if ifname == "lo":
        raise InterfaceError(f"{host.name}: interface 'lo' cannot carry a path; name the NIC of the path")
    cp = host.run(["ip", "-j", "link", "show", "dev", ifname], check=False)
    if cp.returncode != 0:
        have = ", ".join(n for n in list_interfaces(host) if n != "lo") or "none"
        raise InterfaceError(f"{host.name}: interface {ifname!r} does not exist (interfaces there: {have})")
    info = json.loads(cp.stdout)
    if info and "LOOPBACK" in info[0].get("flags", []):
        raise InterfaceError(f"{host.name}: interface {ifname!r} is a loopback interface")


_STAT_KEYS = {"bytes", "packets", "drops", "overlimits", "requeues", "backlog", "qlen", "refcnt", "stats",
              "stats64", "xstats"}
_IPT_TABLES = ("filter", "nat", "mangle", "raw")


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in sorted(obj.items()) if k not in _STAT_KEYS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


@dataclass
class InterfaceState:
    """The configuration of one interface that a run could change (no counters)."""

    ifname: str
    qdiscs: list[str]
    filters: list[str]
    iptables: list[str]
    sysctls: dict[str, str]


def _names_interface(rule: str, ifname: str) -> bool:
    toks = shlex.split(rule)
    for i, t in enumerate(toks[:-1]):
        if t in ("-i", "-o", "--in-interface", "--out-interface", "--physdev-in", "--physdev-out"):
            pat = toks[i + 1]
            if pat == ifname or (pat.endswith("+") and ifname.startswith(pat[:-1])):
                return True
    return False


# One remote command per snapshot (each SSH session costs a handshake): a constant script, the
# interface name only as "$1". Sections are separated by marker lines.
_SNAPSHOT_SCRIPT = r"""
i=$1
echo @@qdisc; tc -j qdisc show dev "$i" || exit 4
echo; echo @@filter ingress; tc -j filter show dev "$i" ingress 2>/dev/null
echo; echo @@filter egress; tc -j filter show dev "$i" egress 2>/dev/null
for p in iptables ip6tables; do
  for t in filter nat mangle raw; do
    echo; echo "@@ipt $p $t"; "$p" -w -t "$t" -S 2>/dev/null || echo "@@unavailable"
  done
done
echo; echo @@sysctl
grep -rs ^ /proc/sys/net/ipv4/conf/"$i" /proc/sys/net/ipv6/conf/"$i" \
  /proc/sys/net/ipv4/neigh/"$i" /proc/sys/net/ipv6/neigh/"$i"
exit 0
"""


def snapshot_interface(host: Host, ifname: str) -> InterfaceState:
    """Read-only: qdiscs, ingress/egress tc filters, iptables/ip6tables rules naming the interface
    (-i/-o, also '+' wildcards), and its per-interface sysctls (net.ipv{4,6}.{conf,neigh}.IF.*)."""
    ifname = validate_ifname(ifname)
    check_interface(host, ifname)
    out = host.run(["sh", "-c", _SNAPSHOT_SCRIPT, "mpvlab-snapshot", ifname]).stdout
    sections: dict[str, list[str]] = {}
    cur: list[str] = []
    for line in out.splitlines():
        if line.startswith("@@") and line != "@@unavailable":
            cur = sections.setdefault(line[2:], [])
        else:
            cur.append(line)

    def js(name: str) -> list[Any]:
        text = "\n".join(sections.get(name, [])).strip()
        return json.loads(text) if text else []

    qdiscs = sorted(json.dumps(_strip(q), sort_keys=True) for q in js("qdisc"))
    filters: list[str] = []
    for where in ("ingress", "egress"):
        filters += sorted(f"{where} " + json.dumps(_strip(f), sort_keys=True) for f in js(f"filter {where}"))
    rules: list[str] = []
    for prog in ("iptables", "ip6tables"):
        for table in _IPT_TABLES:
            # "@@unavailable": not installed or table absent; nothing can have been added through it.
            rules += [f"{prog} -t {table} {r}" for r in sections.get(f"ipt {prog} {table}", [])
                      if r.startswith("-") and _names_interface(r, ifname)]
    sysctls: dict[str, str] = {}
    for line in sections.get("sysctl", []):
        path, _, value = line.partition(":")
        if path.startswith("/proc/sys/"):
            sysctls[path[len("/proc/sys/"):]] = value
    return InterfaceState(ifname, qdiscs, filters, sorted(rules), sysctls)


def diff_interface(before: InterfaceState, after: InterfaceState) -> list[str]:
    out: list[str] = []
    for label, a, b in (("qdisc", before.qdiscs, after.qdiscs), ("tc filter", before.filters, after.filters),
                        ("iptables rule", before.iptables, after.iptables)):
        out += [f"{before.ifname}: {label} left behind: {x}" for x in b if x not in a]
        out += [f"{before.ifname}: {label} removed: {x}" for x in a if x not in b]
    for k in sorted(set(before.sysctls) | set(after.sysctls)):
        if before.sysctls.get(k) != after.sysctls.get(k):
            out.append(f"{before.ifname}: sysctl {k} was {before.sysctls.get(k)!r}, now {after.sysctls.get(k)!r}")
    return out


class InterfaceLeftoverError(MpvlabError, RuntimeError):
    def __init__(self, host: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{host}: the run left changes on its interfaces:\n  " + "\n  ".join(problems))


class interface_guard:
    """Context manager: record exactly the named interfaces before, verify after that they are as
    they were (nothing the run added is left, nothing pre-existing was removed or changed).

        with interface_guard(host, ["wlan0", "wwan0"]) as g:
            ...                                    # apply emulation, run, remove emulation
        # raises InterfaceLeftoverError listing every difference

    If the body raised, the differences are attached to that exception as a note instead."""

    def __init__(self, host: Host, ifnames: list[str]) -> None:
        names = [validate_ifname(n) for n in ifnames]
        if len(set(names)) != len(names):
            raise HostConfigError(f"interface names repeated: {names}")
        self.host = host
        self.ifnames = names
        self.before: dict[str, InterfaceState] = {}

    def __enter__(self) -> interface_guard:
        self.before = {n: snapshot_interface(self.host, n) for n in self.ifnames}
        return self

    def problems(self) -> list[str]:
        out: list[str] = []
        for n in self.ifnames:
            try:
                after = snapshot_interface(self.host, n)
            except (InterfaceError, proc.CommandError) as e:
                out.append(f"{n}: cannot be read back: {e}")
                continue
            out += diff_interface(self.before[n], after)
        return out

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        problems = self.problems()
        if problems:
            if exc is not None:
                exc.add_note(str(InterfaceLeftoverError(self.host.name, problems)))
                return False
            raise InterfaceLeftoverError(self.host.name, problems)
        return False
