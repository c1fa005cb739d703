"""Host settings of a physical run, each journalled before it is made: a working folder per role,
client/server sysctls and MPTCP limits (old values restored after), the client's MPTCP `subflow`
endpoints and per-source-address policy routing (tables and rules removed after)."""

from __future__ import annotations

import json
import re
from typing import Any

from mpvlab.runner.physical.hostops import REMOTE_BASE, exists
from mpvlab.runner.physical.state import PhysicalRun
from mpvlab.input.scenario import Scenario
from mpvlab.core.hosts import Host
from mpvlab.core.errors import RunFailed

# Policy-routing tables and rule priorities on the client: searched upwards from here for free ones.
TABLE_BASE = 27100
RULE_PRIO_BASE = 27100


def make_dirs(run: PhysicalRun) -> None:
    """A working folder per role on its host: /run/mpvlab/remote/<run id>/<role>."""
    roles = {"client": run.plan.client, "server": run.plan.server}
    for e in run.plan.emulator_hosts():
        roles[f"emu-{e}"] = e
    for role, h in roles.items():
        host = run.plan.host(h)
        base = REMOTE_BASE / run.ctx.run_id
        for d in (REMOTE_BASE.parent, REMOTE_BASE, base):
            if not exists(host, str(d)):
                run.journal.will(h, ["rmdir", "--ignore-fail-on-non-empty", str(d)], f"folder {d}")
                host.run(["install", "-d", "-m", "0755", str(d)])
        d = base / role
        run.journal.will(h, ["rm", "-rf", "--", str(d)], f"folder {d}")
        host.run(["install", "-d", "-m", "0755", str(d)])
        run.dirs[role] = str(d)


def _set_sysctl(run: PhysicalRun, h: str, key: str, value: str) -> dict[str, str]:
    host = run.plan.host(h)
    old = host.read_sysctl(key)
    if old.split() != value.split():
        run.journal.will(h, ["sysctl", "-q", "-w", f"{key}={old}"], f"sysctl {key} back to {old!r}")
        host.sysctl(key, value)
    return {"before": old, "set": value}


def _mptcp_limits(host: Host) -> dict[str, str]:
    words = host.run(["ip", "mptcp", "limits", "show"]).stdout.split()
    return dict(zip(words[0::2], words[1::2]))


def configure_transport(run: PhysicalRun, sc: Scenario) -> dict[str, Any]:
    """Sysctls and MPTCP limits on client and server, MPTCP endpoints and policy routing on the client."""
    plan = run.plan
    rec: dict[str, Any] = {}
    hs = sc.hosts
    for role, h in (("client", plan.client), ("server", plan.server)):
        r: dict[str, Any] = {}
        r["net.mptcp.enabled"] = _set_sysctl(run, h, "net.mptcp.enabled", "1")
        r["net.ipv4.tcp_no_metrics_save"] = _set_sysctl(run, h, "net.ipv4.tcp_no_metrics_save",
                                                        "1" if hs.tcp_no_metrics_save else "0")
        if role == "client":
            r["net.ipv4.tcp_rmem"] = _set_sysctl(run, h, "net.ipv4.tcp_rmem", " ".join(map(str, hs.client_tcp_rmem)))
        else:
            r["net.ipv4.tcp_wmem"] = _set_sysctl(run, h, "net.ipv4.tcp_wmem", " ".join(map(str, hs.server_tcp_wmem)))
        host = plan.host(h)
        old = _mptcp_limits(host)
        want = str(len(plan.paths))
        if old.get("subflows") != want or old.get("add_addr_accepted") != want:
            run.journal.will(h, ["ip", "mptcp", "limits", "set", "subflow", old.get("subflows", "2"),
                                 "add_addr_accepted", old.get("add_addr_accepted", "0")],
                             f"MPTCP limits back to {old}")
            host.run(["ip", "mptcp", "limits", "set", "subflow", want, "add_addr_accepted", want])
        r["mptcp_limits"] = {"before": old, "set": _mptcp_limits(host)}
        rec[role] = r
    rec["client_endpoints"] = _client_endpoints(run, sc)
    rec["client_routing"] = _client_routing(run)
    return rec


def _client_endpoints(run: PhysicalRun, sc: Scenario) -> list[str]:
    host = run.plan.host(run.plan.client)
    existing = host.run(["ip", "mptcp", "endpoint", "show"]).stdout
    used_ids = {int(m) for m in re.findall(r"\bid (\d+)", existing)}
    for p in run.plan.paths[1:sc.expected_subflows]:
        addr = run.client_addrs[p.name]
        if re.search(rf"^{re.escape(addr)} ", existing, re.M):
            raise RunFailed(f"{host.name}: an MPTCP endpoint for {addr} ({p.client_if}) already exists; "
                                    "remove it (ip mptcp endpoint delete id N) so the run controls its flags")
        eid = next(i for i in range(100, 256) if i not in used_ids)
        used_ids.add(eid)
        run.journal.will(run.plan.client, ["ip", "mptcp", "endpoint", "delete", "id", str(eid)],
                         f"MPTCP endpoint {addr} id {eid}")
        host.run(["ip", "mptcp", "endpoint", "add", addr, "id", str(eid), "dev", p.client_if, "subflow"])
    return host.run(["ip", "mptcp", "endpoint", "show"]).stdout.strip().splitlines()


def _client_routing(run: PhysicalRun) -> dict[str, Any]:
    """One table per path (server address via that path's interface/gateway), a rule `from <path's
    address>` to it, and `to <first path's server address>` to the first table so that the initial
    subflow takes the first path whatever the client's main table says."""
    h = run.plan.client
    host = run.plan.host(h)
    rules = json.loads(host.run(["ip", "-j", "rule", "show"]).stdout or "[]")
    used_prio = {int(r.get("priority", -1)) for r in rules}
    used_tables = {str(r.get("table")) for r in rules}
    out: dict[str, Any] = {}
    table = TABLE_BASE
    prio = RULE_PRIO_BASE
    first_table = None
    def table_in_use(t: int) -> bool:
        # A table that was never created: `ip` fails ("FIB table does not exist") — free.
        cp = host.run(["ip", "-j", "route", "show", "table", str(t)], check=False)
        return cp.returncode == 0 and bool(json.loads(cp.stdout or "[]"))

    for p in run.plan.paths:
        while str(table) in used_tables or table_in_use(table):
            table += 1
        while prio in used_prio or prio + 1 in used_prio:
            prio += 2
        route = [f"{p.server_address}/32", "dev", p.client_if, "table", str(table)]
        if p.gateway:
            route[1:1] = ["via", p.gateway]
        run.journal.will(h, ["ip", "route", "del", *route], f"route {' '.join(route)}")
        host.run(["ip", "route", "add", *route])
        rule = ["from", run.client_addrs[p.name], "table", str(table), "priority", str(prio)]
        run.journal.will(h, ["ip", "rule", "del", *rule], f"rule {' '.join(rule)}")
        host.run(["ip", "rule", "add", *rule])
        out[p.name] = {"table": table, "route": " ".join(route), "rule": " ".join(rule)}
        if first_table is None:
            first_table = table
        used_prio |= {prio}
        used_tables.add(str(table))
        table += 1
        prio += 2
    p0 = run.plan.paths[0]
    rule = ["to", f"{p0.server_address}/32", "table", str(first_table), "priority", str(prio)]
    run.journal.will(h, ["ip", "rule", "del", *rule], f"rule {' '.join(rule)}")
    host.run(["ip", "rule", "add", *rule])
    out["initial"] = " ".join(rule)
    return out

