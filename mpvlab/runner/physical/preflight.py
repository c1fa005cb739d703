"""Preflight of a physical run: everything checked before anything is changed — SSH verified,
every named interface exists, programs and files present on each host, python3-gi on the client, the
video's checksum and the congestion control on the server, IPv4 forwarding on emulators, no
ingress qdisc where we would shape before the delay and no configured root qdisc where we would shape
after it (teardown restores only the kernel's default); the client's per-path source addresses are read here."""

from __future__ import annotations

import json
from typing import Any

from mpvlab.links.emulator import DELAYLINE_BIN
import mpvlab.content as content
from mpvlab.runner import server
from mpvlab.runner.physical.hostops import PLAYER, PLAYER_PYTHON, REPO
from mpvlab.runner.physical.state import PhysicalRun
from mpvlab.input.scenario import Scenario
from mpvlab.core.hosts import Host, SshHost
from mpvlab.core.ifguard import InterfaceError, check_interface
from mpvlab.core.hosts import host_record
from mpvlab.core.errors import RunFailed


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

    need(plan.client, ["ip", "ping", "curl", "mptcpize", "sysctl", "cat", "env"] + (["taskset"] if sc.player.cpu is not None
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
        raise RunFailed("preflight: " + "; ".join(problems) +
                                " (each host needs the mpvlab checkout, built, at " + str(REPO) + ")")
    client = plan.host(plan.client)
    if client.run([PLAYER_PYTHON, "-c", "import gi"], check=False).returncode != 0:
        raise RunFailed(f"preflight: {client.name}: {PLAYER_PYTHON} cannot import gi (python3-gi)")
    srv = plan.host(plan.server)
    cp = srv.run(["sha256sum", str(video.path)], check=False, timeout=120)
    got = cp.stdout.split()[0] if cp.returncode == 0 and cp.stdout else None
    if got != video.sha256:
        raise RunFailed(
            f"preflight: {srv.name} (server) has no valid copy of the video {video.path} "
            f"({'absent' if got is None else f'sha256 {got}'}; want sha256 {video.sha256}): copy it there, "
            "e.g. run `mpvlab prepare SCENARIO` on the server")
    cc_avail = srv.read_sysctl("net.ipv4.tcp_available_congestion_control").split()
    if sc.transport.cc not in cc_avail:
        raise RunFailed(f"preflight: {srv.name} (server) has no congestion control {sc.transport.cc!r} "
                                f"(available: {', '.join(cc_avail)})")
    for p in plan.paths:
        run.client_addrs[p.name] = _ipv4_of(client, p.client_if)
        if p.emulator is None:
            continue
        emu = plan.host(p.emulator)
        if emu.read_sysctl("net.ipv4.ip_forward") != "1":
            raise RunFailed(f"preflight: {emu.name} (emulator of {p.name}) does not forward IPv4 "
                                    "(net.ipv4.ip_forward=0); configure it as the router between its interfaces")
        spec = sc.paths[p.name]
        for direction, d, in_if, out_if in (("down", spec.down, p.emulator_server_if, p.emulator_client_if),
                                            ("up", spec.up, p.emulator_client_if, p.emulator_server_if)):
            if d.rate is not None and d.order == "shape-then-delay":
                q = json.loads(emu.run(["tc", "-j", "qdisc", "show", "dev", str(in_if), "ingress"]).stdout or "[]")
                if q:
                    raise RunFailed(
                        f"preflight: {emu.name}: {in_if} already has an ingress qdisc; paths.{p.name}.{direction} "
                        "shapes there and would replace it — remove it first or use order: delay-then-shape")
            elif d.rate is not None:
                _refuse_configured_root(emu, str(out_if), f"paths.{p.name}.{direction}")
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


def _refuse_configured_root(emu: Host, dev: str, where: str) -> None:
    """delay-then-shape puts its tbf at `dev`'s root and teardown deletes it, which gives the device
    back the kernel's default qdisc (handle 0:). A root qdisc someone configured (any other handle)
    would be lost, so the run refuses before changing anything."""
    roots = json.loads(emu.run(["tc", "-j", "qdisc", "show", "dev", dev, "root"]).stdout or "[]")
    configured = [q for q in roots if q.get("root") and q.get("handle") != "0:"]
    if configured:
        q = configured[0]
        raise RunFailed(
            f"preflight: {emu.name}: {dev} has a configured root qdisc ({q.get('kind')} {q.get('handle')}); "
            f"{where} (order: delay-then-shape) shapes there with a tbf that would replace it, and teardown "
            "can restore only the kernel's default qdisc — remove it first or use order: shape-then-delay")
