"""topology.kind physical: a scenario's roles mapped to real hosts and its paths to named interfaces.

Nothing here runs a command. `make_plan()` turns a validated scenario into Host objects (LocalHost or
SshHost, topologies/hosts.py) and per-path interface names, checking the SSH key files against the key
directory — which comes from the command line or MPVLAB_KEY_DIR, never from the scenario, so a
scenario cannot point the runner (root) at arbitrary files. mpvlab/runner/physical/ runs the plan.

Hosts are also written to the run ledger as plain records (`core.hosts.host_record`), so that a later cleanup
can reach them again after a crash (`host_from_record`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from mpvlab.topologies import registry as kinds
from mpvlab.topologies.spec import LocalHostSpec, PathSpec, SshHostSpec, TopologySpec
from mpvlab.core.hosts import Host, LocalHost, SshHost
from mpvlab.core.validators import HostConfigError, validate_key_path

DEFAULT_KEY_DIR = Path("/etc/mpvlab/keys")


def key_dir_default() -> Path:
    """The key directory when `mpvlab run --key-dir` is not given: MPVLAB_KEY_DIR or /etc/mpvlab/keys."""
    return Path(os.environ.get("MPVLAB_KEY_DIR") or DEFAULT_KEY_DIR)


@dataclass(frozen=True)
class PathPlan:
    name: str
    index: int
    client_if: str
    server_address: str
    gateway: str | None
    emulator: str | None            # host name, None: the real path as it is
    emulator_server_if: str | None  # faces the server: `down` enters here
    emulator_client_if: str | None  # faces the client: `up` enters here


@dataclass
class PhysicalPlan:
    hosts: dict[str, Host]
    client: str
    server: str
    paths: list[PathPlan]

    def host(self, name: str) -> Host:
        return self.hosts[name]

    def interfaces_by_host(self) -> dict[str, list[str]]:
        """Every interface the scenario names, per host name (what the guard watches)."""
        out: dict[str, list[str]] = {}
        for p in self.paths:
            out.setdefault(self.client, []).append(p.client_if)
            if p.emulator is not None:
                out.setdefault(p.emulator, []).extend([p.emulator_server_if or "", p.emulator_client_if or ""])
        return out

    def emulator_hosts(self) -> list[str]:
        return sorted({p.emulator for p in self.paths if p.emulator is not None})

    def roles_of(self, name: str) -> list[str]:
        roles = [r for r, h in (("client", self.client), ("server", self.server)) if h == name]
        roles += [f"emulator.{p.name}" for p in self.paths if p.emulator == name]
        return roles


def _key_file(value: str, key_dir: Path, where: str, private: bool) -> Path:
    path = Path(value) if value.startswith("/") else key_dir / value
    try:
        return validate_key_path(path, key_dir, private=private)
    except HostConfigError as e:
        raise HostConfigError(f"{where}: {e} (key directory: {key_dir}; set it with mpvlab run --key-dir "
                              "or MPVLAB_KEY_DIR)") from None


def make_plan(topo: TopologySpec, path_specs: Mapping[str, PathSpec], key_dir: Path) -> PhysicalPlan:
    """Hosts and paths of a physical scenario; raises HostConfigError naming the field."""
    if not kinds.get(topo.kind).real_hosts or topo.roles is None:
        raise ValueError(f"make_plan needs a scenario with topology.kind {kinds.PHYSICAL.name}")
    hosts: dict[str, Host] = {}
    for name, h in topo.hosts.items():
        if isinstance(h, LocalHostSpec):
            hosts[name] = LocalHost(name=f"local ({name})")
        else:
            assert isinstance(h, SshHostSpec)
            where = f"topology.hosts.{name}"
            ident = _key_file(h.identity_file, key_dir, f"{where}.identity_file", private=True)
            known = _key_file(h.known_hosts, key_dir, f"{where}.known_hosts", private=False)
            hosts[name] = SshHost(h.user, h.address, h.port, ident, known, key_dir=key_dir)
    paths = []
    for i, (name, spec) in enumerate(path_specs.items()):
        ph = spec.physical
        assert ph is not None  # the schema requires it for kind physical
        paths.append(PathPlan(name, i, ph.client_if, ph.server_address, ph.gateway, topo.roles.emulator.get(name),
                              ph.emulator_server_if, ph.emulator_client_if))
    return PhysicalPlan(hosts, topo.roles.client, topo.roles.server, paths)
