"""A run on physical hosts (topology.kind physical): the same video session as an emulated run, with
roles on real machines — this one (LocalHost) or others over SSH (SshHost) — and paths on the
interfaces the scenario names. Every command goes through Host.run/popen, so the code is the same
for local and remote hosts.

Life cycle (each change is journalled in the ledger BEFORE it is made, with the command that undoes
it; teardown runs the journal backwards, and so does a later cleanup after a crash):

  plan      hosts + key files checked (topologies/physical.py)               nothing runs yet
  preflight ssh verified (quoting, setsid), every named interface exists, programs and files
            present on each host, content checksum on the server, emulator forwards, no ingress
            qdisc already on an interface we would shape at
  guard     interface_guard on every named interface of every host (snapshot)
  settings  client/server sysctls and MPTCP limits (old values restored), client MPTCP `subflow`
            endpoints and per-source-address policy routing (tables/rules removed after)
  links     on emulator hosts only, on the named interfaces only: tbf (IFB at ingress) + NFQUEUE
            delay line per direction (links/emulator.py's design); no emulator role: the real path
  probes    ping before/after the emulation (added RTT vs configured), curl per path (goodput vs
            configured rate)
  play      Apache on the server host (under the MPTCP wrapper + CC shim), the GStreamer player on the
            client host at run time zero (translated to each host's CLOCK_MONOTONIC), `ss` on the
            server for the subflows, client interface counters for bytes per path
  results   remote files pulled into the local run directory; provenance lists hosts, interfaces,
            every change and its undo result, the guard's verdict, and what was not collected

Not collected on physical hosts (recorded as such in summary.json and provenance.json): the BPF
scheduler trace (path switches, bytes handed per subflow), qdisc samplers, BBR-S, steering schedulers
— they need a BPF loader in the server's namespace on this machine.

Requirements on every host: the mpvlab checkout (built) at the same path as here, Debian's
/usr/bin/python3 with PyGObject (client), apache2 + mptcpize (server), tc/iptables/ip (emulators,
with net.ipv4.ip_forward=1 already — a router is the emulator's job, we do not turn it on), and the
video at the same cache path on the server (checked by SHA-256).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from links.emulator import DELAYLINE_BIN, FRAME_BYTES, DirectionPlan, tbf_argv
from mpvlab import content, fidelity, naming, proc, sampling, server
from mpvlab.scenario import LinkDirection, Scenario
from topologies.hosts import (
    Host, InterfaceError, LocalHost, RemoteProcess, SshHost, check_interface, interface_guard, ssh_master,
)
from topologies.physical import PathPlan, PhysicalPlan, host_record, key_dir_default, make_plan

if TYPE_CHECKING:
    from mpvlab.runner import RunContext

REPO = Path(__file__).resolve().parent.parent
PLAYER = REPO / "player" / "mpvlab_player.py"
PLAYER_PYTHON = "/usr/bin/python3"          # Debian's python3: the one with PyGObject (gi)
REMOTE_BASE = Path("/run/mpvlab/remote")    # per-run working folders on every host (tmpfs)
SSH_CONTROL_DIR = Path("/run/mpvlab/ssh")
# Policy-routing tables and rule priorities on the client: searched upwards from here for free ones.
TABLE_BASE = 27100
RULE_PRIO_BASE = 27100
# NFQUEUE numbers on emulator hosts: away from 0, which other software on a real box may use.
QUEUE_BASE = 27100
NOT_COLLECTED = {
    "scheduler_trace": "not collected on physical hosts (BPF observer runs in a local server namespace only): "
                       "no path switches, no bytes handed per subflow",
    "queue_samples": "not collected on physical hosts (qdiscstat samples local namespaces only)",
    "link_counters_series": "not collected on physical hosts (client counters are read before/after only)",
}


class PhysicalRunFailed(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# Small helpers that work the same on every Host


def write_file(host: Host, path: str, text: str) -> None:
    host.run(["sh", "-c", 'cat > "$1"', "mpvlab-write", path], input_text=text)


def read_file(host: Host, path: str) -> bytes | None:
    """A file's bytes (base64 over the channel, so any content survives), None if it is absent."""
    cp = host.run(["sh", "-c", 'test -f "$1" || exit 3; base64 -w0 "$1"', "mpvlab-read", path], check=False,
                  timeout=60)
    if cp.returncode == 3:
        return None
    if cp.returncode != 0:
        raise proc.CommandError(f"{host.name}: cannot read {path}: {cp.stderr.strip()}")
    return base64.b64decode(cp.stdout)


def exists(host: Host, path: str) -> bool:
    return host.run(["test", "-e", path], check=False).returncode == 0


def clock_offset_ns(host: Host) -> tuple[int, int]:
    """(offset, bound): the host's CLOCK_MONOTONIC minus ours. The remote reading happens between
    sending and receiving; taking the receipt time makes the estimate early by at most the return
    leg; `bound` is the whole round trip of the best of 3 tries (the true offset lies within
    [estimate, estimate + bound])."""
    if isinstance(host, LocalHost):
        return 0, 0
    best: tuple[int, int] | None = None
    for _ in range(3):
        t_send = time.monotonic_ns()
        out = host.run([PLAYER_PYTHON, "-c", "import time; print(time.monotonic_ns())"]).stdout
        t_recv = time.monotonic_ns()
        est = (int(out.strip()) - t_recv, t_recv - t_send)
        if best is None or est[1] < best[1]:
            best = est
    assert best is not None
    return best


# --------------------------------------------------------------------------------------------
# The run's state on hosts


@dataclass
class Journal:
    """Changes made on hosts and how to undo them; mirrored into the ledger before each change."""

    ctx: "RunContext"
    hosts: dict[str, Host]
    entries: list[dict[str, Any]] = field(default_factory=list)

    def will(self, host_name: str, undo_argv: list[str], what: str) -> None:
        host = self.hosts[host_name]
        self.ctx.ledger.add_undo(host_record(host), undo_argv, what)
        self.entries.append({"host": host_name, "what": what, "undo": list(undo_argv)})

    def undo_all(self) -> None:
        for e in reversed(self.entries):
            if "undo_exit" in e:
                continue
            try:
                cp = self.hosts[e["host"]].run(e["undo"], check=False, timeout=30)
                e["undo_exit"] = cp.returncode
                if cp.returncode != 0 and cp.stderr.strip():
                    e["undo_stderr"] = cp.stderr.strip()[-300:]
            except proc.CommandError as err:
                e["undo_exit"] = None
                e["undo_stderr"] = str(err)[-300:]
        self.ctx.ledger.clear_undo()


@dataclass
class Started:
    host_name: str
    label: str
    process: subprocess.Popen[bytes]


@dataclass
class PhysicalRun:
    ctx: "RunContext"
    plan: PhysicalPlan
    journal: Journal
    dirs: dict[str, str] = field(default_factory=dict)        # role -> working folder on its host
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    client_addrs: dict[str, str] = field(default_factory=dict)  # path -> client source address
    prov: dict[str, Any] = field(default_factory=dict)
    started: list[Started] = field(default_factory=list)

    def start(self, host_name: str, argv: list[str], log: Path, label: str,
              env: dict[str, str] | None = None) -> Started:
        """Start a long-running command on a host; its pid (remote pid + start time over SSH) goes
        into the ledger at once, so a crash of the runner still gets it stopped."""
        host = self.plan.host(host_name)
        with log.open("wb") as out:
            p = host.popen(argv, stdout=out, stderr=out, env=env)
        where = "ssh client" if isinstance(p, RemoteProcess) else "local"
        self.ctx.ledger.add_proc(proc.ProcRef.of(p.pid, f"{label} ({where})"))
        if isinstance(p, RemoteProcess):
            self.ctx.ledger.add_remote_proc(host_record(host), p.remote_pid, p.remote_start, label)
        s = Started(host_name, label, p)
        self.started.append(s)
        return s

    def t0_on(self, host_name: str) -> int:
        return self.ctx.t0_ns + self.offsets[host_name][0]


# --------------------------------------------------------------------------------------------
# Preflight: everything checked before anything is changed


def _programs_missing(host: Host, names: list[str]) -> list[str]:
    cp = host.run(["sh", "-c", 'for p; do command -v "$p" >/dev/null 2>&1 || echo "$p"; done', "mpvlab-which",
                   *names], check=False)
    return cp.stdout.split()


def _files_missing(host: Host, paths: list[str]) -> list[str]:
    cp = host.run(["sh", "-c", 'for f; do test -e "$f" || echo "$f"; done', "mpvlab-files", *paths], check=False)
    return cp.stdout.splitlines()


def _ipv4_of(host: Host, ifname: str) -> str:
    info = json.loads(host.run(["ip", "-j", "-4", "addr", "show", "dev", ifname]).stdout or "[]")
    addrs = [a["local"] for i in info for a in i.get("addr_info", []) if a.get("family") == "inet"]
    if not addrs:
        raise InterfaceError(f"{host.name}: interface {ifname!r} has no IPv4 address (the subflow's source)")
    return str(addrs[0])


def preflight(run: PhysicalRun, sc: Scenario, video: content.ContentInfo) -> dict[str, Any]:
    plan = run.plan
    report: dict[str, Any] = {}
    problems: list[str] = []
    for name, host in plan.hosts.items():
        if isinstance(host, SshHost):
            host.verify()
        report[name] = {"roles": plan.roles_of(name), **host_record(host),
                        "kernel": host.run(["uname", "-r"]).stdout.strip()}
    for name, ifs in plan.interfaces_by_host().items():
        for i in ifs:
            check_interface(plan.host(name), i)
    needs: dict[str, tuple[list[str], list[str]]] = {}   # host -> (programs, files)

    def need(host_name: str, programs: list[str], files: list[str]) -> None:
        p, f = needs.setdefault(host_name, ([], []))
        p += [x for x in programs if x not in p]
        f += [x for x in files if x not in f]

    need(plan.client, ["ip", "ping", "curl", "mptcpize", "sysctl", "cat"] + (["taskset"] if sc.player.cpu is not None
                                                                                else []), [PLAYER_PYTHON, str(PLAYER)])
    need(plan.server, ["sha256sum", "curl", "ss", "sysctl", "ip"],
         [server.APACHE_BIN, str(server.MPTCPWRAP), str(server.CCWRAP)])
    for e in plan.emulator_hosts():
        need(e, ["tc", "iptables", "ip", "sysctl"], [str(DELAYLINE_BIN), PLAYER_PYTHON])
    for name, (progs, files) in needs.items():
        host = plan.host(name)
        missing = _programs_missing(host, progs) + _files_missing(host, files)
        if missing:
            problems.append(f"{host.name} ({', '.join(plan.roles_of(name))}): missing {', '.join(missing)}")
    if problems:
        raise PhysicalRunFailed("preflight: " + "; ".join(problems) +
                                " (each host needs the mpvlab checkout, built, at " + str(REPO) + ")")
    client = plan.host(plan.client)
    if client.run([PLAYER_PYTHON, "-c", "import gi"], check=False).returncode != 0:
        raise PhysicalRunFailed(f"preflight: {client.name}: {PLAYER_PYTHON} cannot import gi (python3-gi)")
    srv = plan.host(plan.server)
    cp = srv.run(["sha256sum", str(video.path)], check=False, timeout=120)
    got = cp.stdout.split()[0] if cp.returncode == 0 and cp.stdout else None
    if got != video.sha256:
        raise PhysicalRunFailed(
            f"preflight: {srv.name} (server) has no valid copy of the video {video.path} "
            f"({'absent' if got is None else f'sha256 {got}'}; want sha256 {video.sha256}): copy it there, "
            "e.g. run `mpvlab prepare SCENARIO` on the server")
    cc_avail = srv.read_sysctl("net.ipv4.tcp_available_congestion_control").split()
    if sc.transport.cc not in cc_avail:
        raise PhysicalRunFailed(f"preflight: {srv.name} (server) has no congestion control {sc.transport.cc!r} "
                                f"(available: {', '.join(cc_avail)})")
    for p in plan.paths:
        run.client_addrs[p.name] = _ipv4_of(client, p.client_if)
        if p.emulator is None:
            continue
        emu = plan.host(p.emulator)
        if emu.read_sysctl("net.ipv4.ip_forward") != "1":
            raise PhysicalRunFailed(f"preflight: {emu.name} (emulator of {p.name}) does not forward IPv4 "
                                    "(net.ipv4.ip_forward=0); configure it as the router between its interfaces")
        spec = sc.paths[p.name]
        for direction, d, in_if in (("down", spec.down, p.emulator_server_if),
                                    ("up", spec.up, p.emulator_client_if)):
            if d.rate is not None and d.order == "shape-then-delay":
                q = json.loads(emu.run(["tc", "-j", "qdisc", "show", "dev", str(in_if), "ingress"]).stdout or "[]")
                if q:
                    raise PhysicalRunFailed(
                        f"preflight: {emu.name}: {in_if} already has an ingress qdisc; paths.{p.name}.{direction} "
                        "shapes there and would replace it — remove it first or use order: delay-then-shape")
    offloads: dict[str, Any] = {}
    for name, ifs in plan.interfaces_by_host().items():
        host = plan.host(name)
        for i in ifs:
            cp = host.run(["ethtool", "-k", i], check=False)
            offloads[f"{name}:{i}"] = {k: line.split(":", 1)[1].strip() for line in cp.stdout.splitlines()
                                       for k in ("tcp-segmentation-offload", "generic-segmentation-offload",
                                                 "generic-receive-offload") if line.startswith(k + ":")}
    return {"hosts": report, "client_addresses": dict(run.client_addrs),
            "offloads_read_only": offloads}


# --------------------------------------------------------------------------------------------
# Changes on hosts (each journalled first)


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
    plan, rec = run.plan, {}
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
            raise PhysicalRunFailed(f"{host.name}: an MPTCP endpoint for {addr} ({p.client_if}) already exists; "
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


@dataclass
class LinkHandle:
    label: str
    host_name: str
    plan: DirectionPlan
    files: dict[str, str] = field(default_factory=dict)
    started: Started | None = None
    qdiscs: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        return self.started is None or self.started.process.poll() is None


def apply_link(run: PhysicalRun, p: PathPlan, direction: str, d: LinkDirection, schedule: Any,
               seed: int) -> LinkHandle:
    """links/emulator.py's two orders, on an emulator host's named interfaces, journalled."""
    assert p.emulator is not None and p.emulator_server_if and p.emulator_client_if
    h = p.emulator
    host = run.plan.host(h)
    in_if, out_if = ((p.emulator_server_if, p.emulator_client_if) if direction == "down"
                     else (p.emulator_client_if, p.emulator_server_if))
    qnum = QUEUE_BASE + p.index * 2 + (0 if direction == "down" else 1)
    ifb = naming.ifname(run.ctx.run_id, f"{'ab'[p.index]}i{0 if direction == 'down' else 1}")
    plan = DirectionPlan(p.name, direction, host, in_if, out_if, ifb, qnum, d, schedule, seed)  # type: ignore[arg-type]
    handle = LinkHandle(plan.label, h, plan)
    if d.rate is not None:
        if d.order == "shape-then-delay":
            run.journal.will(h, ["ip", "link", "del", ifb], f"IFB {ifb}")
            host.run(["ip", "link", "add", ifb, "type", "ifb"])
            host.run(["ip", "link", "set", ifb, "up"])
            run.journal.will(h, ["tc", "qdisc", "del", "dev", in_if, "ingress"], f"ingress qdisc on {in_if}")
            host.run(["tc", "qdisc", "add", "dev", in_if, "handle", "ffff:", "ingress"])
            host.run(["tc", "filter", "add", "dev", in_if, "parent", "ffff:", "protocol", "all", "u32",
                      "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb])
            host.run(tbf_argv(ifb, d))
            handle.qdiscs = [ifb]
        else:
            run.journal.will(h, ["tc", "qdisc", "del", "dev", out_if, "root"], f"root qdisc on {out_if}")
            host.run(tbf_argv(out_if, d))
            handle.qdiscs = [out_if]
    if plan.needs_delay_line:
        _start_delay_line(run, handle)
        rule = ["FORWARD", "-i", in_if, "-o", out_if, "-j", "NFQUEUE", "--queue-num", str(qnum)]
        run.journal.will(h, ["iptables", "-w", "-D", *rule], f"iptables {' '.join(rule)}")
        # Inserted first: on a real router an earlier ACCEPT rule would otherwise bypass the delay.
        host.run(["iptables", "-w", "-I", rule[0], "1", *rule[1:]])
    return handle


def _start_delay_line(run: PhysicalRun, handle: LinkHandle) -> None:
    plan, h = handle.plan, handle.host_name
    host = run.plan.host(h)
    d = run.dirs[f"emu-{h}"]
    files = {k: f"{d}/delay-{plan.label}.{ext}" for k, ext in
             (("schedule", "schedule"), ("ready", "ready"), ("stats", "stats.json"), ("steps", "steps.csv"))}
    write_file(host, files["schedule"], plan.schedule.to_text())
    argv = [str(DELAYLINE_BIN), "--queue", str(plan.queue_num), "--schedule", files["schedule"],
            "--t0-ns", str(run.t0_on(h)), "--maxlen", str(plan.queue_maxlen()), "--ready-file", files["ready"],
            "--stats", files["stats"], "--step-log", files["steps"]]
    if plan.spec.loss > 0:
        argv += ["--loss", repr(plan.spec.loss), "--seed", str(plan.seed)]
    handle.files = files
    handle.started = run.start(h, argv, run.ctx.logs / f"delay-{plan.label}.log", f"delayline {plan.label}")
    deadline = time.monotonic() + 15.0
    while not exists(host, files["ready"]):
        if handle.started.process.poll() is not None:
            raise PhysicalRunFailed(f"delay line {plan.label} on {host.name} exited with code "
                                    f"{handle.started.process.returncode} (see logs/delay-{plan.label}.log)")
        if time.monotonic() > deadline:
            raise PhysicalRunFailed(f"delay line {plan.label} on {host.name} not ready within 15 s")
        time.sleep(0.05)


def stop_link(run: PhysicalRun, handle: LinkHandle) -> dict[str, Any]:
    if handle.started is None:
        return {"delay_line": "none (no delay or loss configured)"}
    rc = proc.stop_child(handle.started.process)
    host = run.plan.host(handle.host_name)
    raw = read_file(host, handle.files["stats"])
    for k in ("stats", "steps", "schedule"):
        data = raw if k == "stats" else read_file(host, handle.files[k])
        if data is not None:
            (run.ctx.logs / Path(handle.files[k]).name).write_bytes(data)
    try:
        stats: dict[str, Any] = json.loads(raw or b"")
    except ValueError:
        stats = {"error": "no stats written"}
    stats["exit_code"] = rc
    return stats


# --------------------------------------------------------------------------------------------
# Apache, probes, player


def start_apache(run: PhysicalRun, sc: Scenario, video: content.ContentInfo) -> Started:
    h = run.plan.server
    host = run.plan.host(h)
    d = run.dirs["server"]
    root, docroot = f"{d}/apache", f"{d}/www"
    for sub in (root, f"{root}/run", docroot):
        host.run(["install", "-d", "-m", "0755", sub])
    host.run(["ln", "-s", str(video.path), f"{docroot}/video.mp4"])
    conf = f"{root}/httpd.conf"
    write_file(host, conf, server.render_config(Path(root), Path(docroot)))
    chk = host.run([server.APACHE_BIN, "-t", "-f", conf], check=False)
    if chk.returncode != 0:
        raise PhysicalRunFailed(f"{host.name}: apache config test failed: {chk.stderr.strip()}")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C",
           "LD_PRELOAD": f"{server.MPTCPWRAP} {server.CCWRAP}", "MPVLAB_CC": sc.transport.cc}
    (run.ctx.logs / "apache").mkdir(exist_ok=True)
    started = run.start(h, [server.APACHE_BIN, "-f", conf, "-DFOREGROUND"], run.ctx.logs / "apache" / "stdout.log",
                        "apache", env=env)
    url = f"http://127.0.0.1:{server.PORT}/video.mp4"
    deadline = time.monotonic() + 10
    while True:
        if started.process.poll() is not None:
            err = read_file(host, f"{root}/error.log") or b""
            raise PhysicalRunFailed(f"apache on {host.name} exited: {err.decode(errors='replace')[-1000:]}")
        cp = host.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-I", url], check=False, timeout=10)
        if cp.stdout.strip() == "200":
            return started
        if time.monotonic() > deadline:
            raise PhysicalRunFailed(f"apache on {host.name} did not serve {url} within 10 s")
        time.sleep(0.05)


def ping_min_ms(run: PhysicalRun, p: PathPlan, count: int = 5) -> float | None:
    """Minimum RTT to the server over one path (ping bound to the path's source address)."""
    cp = run.plan.host(run.plan.client).run(
        ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2", "-I", run.client_addrs[p.name],
         p.server_address], check=False, timeout=30)
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", cp.stdout)
    return float(m.group(1)) if m else None


def rate_probe(run: PhysicalRun, sc: Scenario, p: PathPlan) -> dict[str, Any]:
    """Plain-TCP download over one path for probe_duration; goodput vs the configured down rate."""
    secs = sc.fidelity.probe_duration / 1e9
    url = f"http://{p.server_address}:{server.PORT}/video.mp4"
    cp = run.plan.host(run.plan.client).run(
        ["curl", "-sS", "-o", "/dev/null", "--interface", run.client_addrs[p.name], "--max-time", f"{secs:g}",
         "-w", "%{size_download} %{time_starttransfer} %{time_total}", url], check=False, timeout=secs + 30)
    try:
        size, t_first, t_total = (float(x) for x in cp.stdout.split())
    except ValueError:
        return {"ok": False, "error": f"curl exit {cp.returncode}: {cp.stderr.strip()}"}
    goodput = size * 8 / (t_total - t_first) if t_total > t_first else 0.0
    rate = sc.paths[p.name].down.rate
    out: dict[str, Any] = {"bytes": int(size), "seconds": round(t_total - t_first, 3), "goodput_bps": round(goodput)}
    if rate is not None:
        expected = rate * fidelity.GOODPUT_FACTOR
        out |= {"expected_goodput_bps": round(expected), "ratio": round(goodput / expected, 4),
                "tolerance": sc.fidelity.rate_tolerance,
                "ok": abs(goodput / expected - 1) <= sc.fidelity.rate_tolerance}
    return out


def start_player(run: PhysicalRun, sc: Scenario, video_url: str, frames: int) -> Started:
    d = run.dirs["client"]
    argv = ["mptcpize", "run", PLAYER_PYTHON, str(PLAYER), "--url", video_url,
            "--events", f"{d}/player-events.jsonl", "--summary", f"{d}/player-summary.json",
            "--mode", sc.player.mode, "--max-lateness-ms", f"{sc.player.max_lateness / 1e6:g}",
            "--buffer-ms", f"{sc.playout_buffer_ns / 1e6:g}",
            "--rebuffer-resume-ms", f"{sc.player.rebuffer_resume / 1e6:g}",
            "--startup-buffer-ms", f"{sc.player.startup_buffer / 1e6:g}",
            "--t0-ns", str(run.t0_on(run.plan.client)),
            "--timeout-s", f"{sc.video.duration / 1e9 * sc.player.timeout_factor + 30:g}",
            "--frames-expected", str(frames)]
    if not sc.player.decode:
        argv.append("--no-decode")
    if sc.player.cpu is not None:
        argv = ["taskset", "-c", str(sc.player.cpu), *argv]
    return run.start(run.plan.client, argv, run.ctx.logs / "player.log", "player")


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


# --------------------------------------------------------------------------------------------
# The run


def execute(ctx: "RunContext", key_dir: Path | None = None) -> dict[str, Any]:
    from mpvlab.runner import ensure_content  # runner imports this module lazily

    sc, phase = ctx.scenario, ctx.opts.progress
    started_at = time.monotonic()
    plan = make_plan(sc, key_dir or key_dir_default())           # key files checked: nothing has run yet
    phase("content")
    video = ensure_content(sc)
    assert isinstance(video, content.ContentInfo)
    ctx.extra_prov["content"] = {"kind": "progressive", **video.to_json()}
    prov: dict[str, Any] = {"roles": {"client": plan.client, "server": plan.server,
                                      "emulator": {p.name: p.emulator for p in plan.paths}},
                            "paths": {p.name: {"client_if": p.client_if, "server_address": p.server_address,
                                               "gateway": p.gateway, "emulator": p.emulator,
                                               "emulator_server_if": p.emulator_server_if,
                                               "emulator_client_if": p.emulator_client_if} for p in plan.paths},
                            "not_collected": NOT_COLLECTED}
    ctx.extra_prov["physical"] = prov
    try:
        summary, run, guards, journal = _run(ctx, plan, video, prov)
    except BaseException as e:
        # interface_guard attaches what it found left on the interfaces to the failure as a note.
        if getattr(e, "__notes__", None):
            prov["guard_problems"] = list(e.__notes__)
        raise
    prov["guard"] = {name: {"interfaces": g.ifnames, "problems": []} for name, g in guards}
    if all(s.process.poll() is not None for s in run.started):
        ctx.ledger.remote_procs = []      # all stopped: a later cleanup need not reach the hosts again
        ctx.ledger.save()
    prov["undo_failures"] = [e for e in journal.entries if e.get("undo_exit") != 0]
    summary["run_wall_s"] = round(time.monotonic() - started_at, 2)
    return summary


def _run(ctx: "RunContext", plan: PhysicalPlan, video: content.ContentInfo,
         prov: dict[str, Any]) -> tuple[dict[str, Any], PhysicalRun, list[tuple[str, interface_guard]], Journal]:
    from mpvlab.runner import RunFailed, schedule_for

    sc, phase, log = ctx.scenario, ctx.opts.progress, ctx.opts.log
    with contextlib.ExitStack() as stack:
        SSH_CONTROL_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name, host in list(plan.hosts.items()):
            if isinstance(host, SshHost):
                phase(f"ssh {host.name}")
                def record_master(pid: int) -> None:
                    ctx.ledger.add_proc(proc.ProcRef.of(pid, "ssh master"))
                plan.hosts[name] = stack.enter_context(ssh_master(host, SSH_CONTROL_DIR, on_start=record_master))
        journal = Journal(ctx, plan.hosts)
        run = PhysicalRun(ctx, plan, journal, prov=prov)
        prov["changes"] = journal.entries               # the same list: undo results appear in it

        phase("preflight")
        prov["preflight"] = preflight(run, sc, video)
        guards: list[tuple[str, interface_guard]] = []
        for name, ifs in plan.interfaces_by_host().items():
            g = interface_guard(plan.host(name), ifs)
            stack.enter_context(g)
            guards.append((name, g))
        prov["guarded_interfaces"] = plan.interfaces_by_host()

        def undo() -> None:
            journal.undo_all()
        stack.callback(undo)                            # runs before the guards check
        phase("host settings")
        make_dirs(run)
        for name in {plan.client, *plan.emulator_hosts()}:      # where a process runs on run time
            run.offsets[name] = clock_offset_ns(plan.host(name))
        prov["clock_offsets_ns"] = {n: {"offset": o, "bound": b} for n, (o, b) in run.offsets.items()}
        prov["transport"] = configure_transport(run, sc)
        base_rtt = {p.name: ping_min_ms(run, p) for p in plan.paths} if sc.fidelity.probe else {}

        n = len(plan.paths)
        lead_s = (sc.fidelity.probe_duration / 1e9 * n + 2.0 * n + 4.0) if sc.fidelity.probe else 3.0
        ctx.t0_ns = time.monotonic_ns() + int(lead_s * 1e9)

        phase("links")
        links: list[LinkHandle] = []
        schedules: dict[str, fidelity.PathSchedules] = {}
        for p in plan.paths:
            spec = sc.paths[p.name]
            sched = fidelity.PathSchedules(down=schedule_for(spec.down, ctx.scenario_file.parent),
                                           up=schedule_for(spec.up, ctx.scenario_file.parent))
            schedules[p.name] = sched
            if p.emulator is None:
                continue
            for k, (direction, d) in enumerate((("down", spec.down), ("up", spec.up))):
                h = apply_link(run, p, direction, d, getattr(sched, direction), sc.seed * 1000 + p.index * 2 + k)
                links.append(h)
                stack.callback(lambda h=h: prov.setdefault("delay_lines", {}).__setitem__(h.label, stop_link(run, h)))
        prov["links"] = {
            h.label: {"host": h.host_name, "in_if": h.plan.in_if, "out_if": h.plan.out_if, "order": h.plan.spec.order,
                      "burst_bytes": h.plan.spec.effective_burst(),
                      "limit_bytes": h.plan.spec.buffer.to_bytes(FRAME_BYTES),
                      "delay_backend": "nfqueue-delayline" if h.plan.needs_delay_line else "none",
                      "schedule": h.plan.schedule.to_text().splitlines()[1:],
                      "qdiscs": {dev: json.loads(plan.host(h.host_name).run(["tc", "-j", "qdisc", "show", "dev", dev])
                                                 .stdout or "[]") for dev in h.qdiscs}}
            for h in links}

        def check_links() -> None:
            for h in links:
                if not h.alive():
                    raise RunFailed(f"delay line {h.label} on {plan.host(h.host_name).name} died — the path lost "
                                    "all packets from then on")

        phase("server")
        apache = start_apache(run, sc, video)
        stack.callback(lambda: proc.stop_child(apache.process))

        fid: dict[str, Any] = {"ok": None, "skipped": True, "warnings": []}
        if sc.fidelity.probe:
            phase("probes")
            fid = _probes(run, sc, schedules, base_rtt)
            check_links()
        ctx.extra_prov["fidelity"] = fid
        for w in fid.get("warnings", []):
            log(f"fidelity warning: {w}")

        phase("waiting for time zero")
        while (wait := ctx.t0_ns - time.monotonic_ns()) > 0:
            check_links()
            time.sleep(min(wait / 1e9, 0.1))
        poller = SubflowPoller(run, ctx.data / "subflows.csv")
        before = read_counters(run)
        phase("playing")
        url = f"http://{plan.paths[0].server_address}:{server.PORT}/video.mp4"
        player = start_player(run, sc, url, round(sc.video.duration / 1e9 * sc.video.fps))
        poller.start()
        stack.callback(poller.stop)
        timeout_s = sc.video.duration / 1e9 * sc.player.timeout_factor + 30
        deadline = time.monotonic() + timeout_s + 10
        while player.process.poll() is None:
            check_links()
            if apache.process.poll() is not None:
                raise RunFailed(f"apache exited with code {apache.process.returncode} during playback")
            if time.monotonic() > deadline:
                player.process.kill()
                raise RunFailed(f"player did not finish within {timeout_s:.0f} s")
            phase(f"playing ({(time.monotonic_ns() - ctx.t0_ns) / 1e9:5.1f} s of {sc.video.duration / 1e9:g} s video)")
            time.sleep(0.2)
        poller.stop()
        after = read_counters(run)

        phase("collecting")
        _pull(run)
        proc.stop_child(apache.process)
        _pull_apache(run)
        player_summary = _read_json(ctx.logs / "player-summary.json")
        if player.process.returncode != 0:
            reason = (player_summary.get("reason") or player_summary.get("error")) if player_summary else None
            raise RunFailed(f"player exited with code {player.process.returncode}: {reason or 'see logs/player.log'}")
        summary = _summarise(run, sc, player_summary, before, after, poller, fid)
    # Everything undone; the guards have compared the interfaces with their snapshots (they raise on
    # a difference).
    return summary, run, guards, journal


def _probes(run: PhysicalRun, sc: Scenario, schedules: dict[str, fidelity.PathSchedules],
            base_rtt: dict[str, float | None]) -> dict[str, Any]:
    out: dict[str, Any] = {"paths": {}, "warnings": []}
    ok = True
    for p in run.plan.paths:
        t_rel = time.monotonic_ns() - run.ctx.t0_ns
        after = ping_min_ms(run, p)
        sched = schedules[p.name]
        expected_ms = fidelity.expected_rtt_ns(t_rel, sched) / 1e6
        steps = sched.up.steps_between(t_rel, t_rel + 2 * 10**9) + sched.down.steps_between(t_rel, t_rel + 2 * 10**9)
        r: dict[str, Any] = {"base_rtt_min_ms": base_rtt.get(p.name), "rtt_min_ms": after,
                             "added_expected_ms": expected_ms}
        if after is None or base_rtt.get(p.name) is None:
            r["rtt_ok"] = False
            out["warnings"].append(f"{p.name}: ping to {p.server_address} got no answer")
        elif steps:
            r["rtt_ok"] = None
            r["note"] = "delay changed during the probe: not checked"
        else:
            added = after - (base_rtt[p.name] or 0.0)
            r["added_ms"] = round(added, 3)
            r["rtt_ok"] = abs(added - expected_ms) <= sc.fidelity.rtt_tolerance / 1e6
            if not r["rtt_ok"]:
                out["warnings"].append(f"{p.name}: added RTT {added:.2f} ms, configured {expected_ms:.2f} ms")
        r["rate"] = rate_probe(run, sc, p)
        if r["rate"].get("ok") is False:
            out["warnings"].append(f"{p.name}: goodput {r['rate'].get('goodput_bps')} bit/s vs expected "
                                   f"{r['rate'].get('expected_goodput_bps')}")
        ok = ok and r["rtt_ok"] is not False and r["rate"].get("ok") is not False
        out["paths"][p.name] = r
    out["ok"] = ok
    return out


def _pull(run: PhysicalRun) -> None:
    client = run.plan.host(run.plan.client)
    for name in ("player-events.jsonl", "player-summary.json"):
        data = read_file(client, f"{run.dirs['client']}/{name}")
        if data is not None:
            (run.ctx.logs / name).write_bytes(data)


def _pull_apache(run: PhysicalRun) -> None:
    srv = run.plan.host(run.plan.server)
    for name in ("access.log", "error.log"):
        data = read_file(srv, f"{run.dirs['server']}/apache/{name}")
        if data is not None:
            (run.ctx.logs / "apache" / name).write_bytes(data)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _summarise(run: PhysicalRun, sc: Scenario, ps: dict[str, Any], before: dict[str, dict[str, int]],
               after: dict[str, dict[str, int]], poller: SubflowPoller, fid: dict[str, Any]) -> dict[str, Any]:
    from mpvlab.runner import RunFailed

    per_path: dict[str, dict[str, Any]] = {}
    total = 0
    playback_s = ps.get("playback_s") or 0
    for p in run.plan.paths:
        rx = after[p.name]["rx_bytes"] - before[p.name]["rx_bytes"]
        per_path[p.name] = {"interface": p.client_if, "client_address": run.client_addrs[p.name], "rx_bytes": rx,
                            "rx_packets": after[p.name]["rx_packets"] - before[p.name]["rx_packets"]}
        total += rx
    for v in per_path.values():
        v["share"] = round(v["rx_bytes"] / total, 4) if total else 0.0
        v["mean_throughput_bps"] = round(v["rx_bytes"] * 8 / playback_s) if playback_s else None
    subflows = [{"local": k[0], "peer": k[1], "cc": v} for k, v in sorted(poller.seen.items())]
    wrong_cc = [s for s in subflows if s["cc"] != sc.transport.cc]
    if wrong_cc:
        raise RunFailed(f"subflows not running {sc.transport.cc}: {wrong_cc}")
    if len(subflows) < sc.expected_subflows:
        raise RunFailed(f"expected {sc.expected_subflows} MPTCP subflows (one per path), saw {len(subflows)}: "
                        f"{subflows}")
    if sc.expected_subflows > 1:
        thin = {n: v["share"] for n, v in per_path.items() if v["share"] < sc.observe.min_path_share}
        if thin:
            raise RunFailed(f"path(s) carried less than {sc.observe.min_path_share:.0%} of the bytes although the "
                            f"scenario expects every path: {thin} (per path: "
                            f"{ {n: v['rx_bytes'] for n, v in per_path.items()} })")
    warnings = []
    if ps.get("picture_discards_no_underflow"):
        warnings.append(f"{ps['picture_discards_no_underflow']} picture discard(s) while the playout buffer had "
                        "data: the client's CPU was late, not the network")
    return {
        "run_id": run.ctx.run_id, "scenario": sc.name, "topology": "physical", "cc": sc.transport.cc,
        "scheduler": sc.transport.scheduler, "seed": sc.seed, "video_length_s": sc.video.duration / 1e9,
        "duration_s": playback_s, "bytes_total": total, "paths": per_path, "subflows": subflows,
        "underflows": ps.get("underflows"), "underflow_total_s": ps.get("underflow_total_s"),
        "picture_discards": ps.get("picture_discards"),
        "picture_discards_no_underflow": ps.get("picture_discards_no_underflow"),
        "frames_expected": ps.get("frames_expected"), "frames_rendered": ps.get("frames_rendered"),
        "startup_delay_s": ps.get("startup_delay_s"), "stall_ratio": ps.get("stall_ratio"),
        "player_mode": sc.player.mode,
        "path_switches": None, "not_collected": NOT_COLLECTED,
        "warnings": warnings, "fidelity_ok": fid.get("ok"), "fidelity_warnings": fid.get("warnings", []),
        "sampler_errors": poller.errors,
    }
