"""The cross-field rules of a physical topology (topology.kind physical): hosts, roles, each path's
interfaces, and what cannot run on a remote host yet.

Split out of mpvlab/input/scenario.py (issue 46) because these rules concern one topology kind only;
the scenario's validator calls `check_physical` for every kind with real hosts."""

from __future__ import annotations

from mpvlab.cc import registry as cc_registry
from mpvlab.input.sections import TransportSpec
from mpvlab.schedulers import registry as scheduler_registry
from mpvlab.topologies.spec import LocalHostSpec, PathSpec, SshHostSpec, TopologySpec
from mpvlab.workloads.video import ServerSpec, VideoSpec


def check_physical(topo: TopologySpec, paths: dict[str, PathSpec], transport: TransportSpec, video: VideoSpec,
                   server: ServerSpec) -> None:
    """Cross-field rules of a physical topology; each message names the field and what is allowed. It
    takes the scenario's sections it reads, not the scenario, which imports this module."""
    if not topo.hosts:
        raise ValueError("topology.hosts: a physical topology needs at least one host "
                         "(kind: local, or kind: ssh with address, user, port, identity_file, known_hosts)")
    if topo.roles is None:
        raise ValueError("topology.roles: required for kind: physical (client, server, optional emulator per path)")
    defined = ", ".join(sorted(topo.hosts))
    locals_ = [n for n, h in topo.hosts.items() if isinstance(h, LocalHostSpec)]
    if len(locals_) > 1:
        raise ValueError(f"topology.hosts: {locals_} are all kind: local (this machine); name it once")
    seen: dict[tuple[str, int], str] = {}
    for n, h in topo.hosts.items():
        if isinstance(h, SshHostSpec):
            if (h.address, h.port) in seen:
                raise ValueError(f"topology.hosts.{n}: same address and port as {seen[(h.address, h.port)]}")
            seen[(h.address, h.port)] = n
    r = topo.roles
    for field_, name in (("client", r.client), ("server", r.server),
                         *((f"emulator.{p}", h) for p, h in r.emulator.items())):
        if name not in topo.hosts:
            raise ValueError(f"topology.roles.{field_}: host {name!r} is not in topology.hosts (defined: {defined})")
    for pname in r.emulator:
        if pname not in paths:
            raise ValueError(f"topology.roles.emulator.{pname}: no such path (paths: {', '.join(paths)})")
    used: dict[tuple[str, str], str] = {}   # (host, interface) -> field that named it

    def claim(host: str, ifname: str, where: str) -> None:
        if (host, ifname) in used:
            raise ValueError(f"{where}: interface {ifname!r} on host {host!r} is already named by "
                             f"{used[(host, ifname)]}; every path needs its own interfaces")
        used[(host, ifname)] = where

    for name, p in paths.items():
        ph = p.physical
        if ph is None:
            raise ValueError(f"paths.{name}.physical: required for topology.kind physical "
                             "(client_if, server_address; emulator_server_if/emulator_client_if with an emulator)")
        claim(r.client, ph.client_if, f"paths.{name}.physical.client_if")
        emu = r.emulator.get(name)
        ifs = (ph.emulator_server_if, ph.emulator_client_if)
        if emu is None:
            if any(ifs):
                raise ValueError(f"paths.{name}.physical: emulator interfaces given but topology.roles.emulator "
                                 f"has no host for path {name!r}")
            if p.emulated():
                raise ValueError(f"paths.{name}: rate/delay/loss configured but no emulator for this path: add "
                                 f"topology.roles.emulator.{name}, or remove them to use the real path as it is")
            continue
        if not all(ifs):
            raise ValueError(f"paths.{name}.physical: emulator_server_if and emulator_client_if are required "
                             f"(path {name!r} has emulator host {emu!r})")
        if ph.emulator_server_if == ph.emulator_client_if:
            raise ValueError(f"paths.{name}.physical: emulator_server_if and emulator_client_if must differ")
        claim(emu, ph.emulator_server_if or "", f"paths.{name}.physical.emulator_server_if")
        claim(emu, ph.emulator_client_if or "", f"paths.{name}.physical.emulator_client_if")
    # What needs a local BPF object or namespace on the server cannot run on a remote host (yet).
    if transport.cc_entry.bpf:
        raise ValueError(f"transport.cc: {transport.cc} is not available with topology.kind physical (its BPF "
                         "loader runs on this machine); allowed: "
                         + ", ".join(n for n, e in cc_registry.REGISTRY.items() if not e.bpf))
    if not scheduler_registry.REGISTRY[transport.scheduler].physical_ok:
        raise ValueError("transport.scheduler: only " + ", ".join(
            n for n, e in scheduler_registry.REGISTRY.items() if e.physical_ok) + " is available with topology.kind "
            "physical (the steering schedulers run a BPF observer in the server's namespace)")
    if video.kind != "progressive":
        raise ValueError("video.kind: only progressive is available with topology.kind physical")
    if server.protocol != "http/1.1" or server.tls is True:
        raise ValueError("server: only plain HTTP/1.1 (protocol: http/1.1, tls: auto or false) is available with "
                         "topology.kind physical (its remote Apache has no per-run certificate yet)")
