"""What a scenario says about its topology and its paths: the kind, the server addressing, physical
hosts and their roles, and per path the two link directions (mpvlab/links/spec.py) and, on real hosts, the
interfaces that carry it. Validated strictly (mpvlab/core/validators.py) before anything runs."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from mpvlab.core import validators as hostval
from mpvlab.core.quantities import Duration, Rate, Size, Strict
from mpvlab.links.spec import ConstantDelay, LinkDirection, PathDelaySpec
from mpvlab.topologies.registry import DUAL_PATH, NAMES

PATH_NAME_RE = r"^[a-z][a-z0-9]{0,7}$"


def _hostcheck(fn: Any) -> Any:
    """A topologies/hosts.py validator as a pydantic one (its message names what is allowed)."""
    def check(v: Any) -> Any:
        try:
            return fn(v)
        except hostval.HostConfigError as e:
            raise ValueError(str(e)) from None
    return check


IfName = Annotated[str, BeforeValidator(_hostcheck(hostval.validate_ifname))]
HostAddr = Annotated[str, BeforeValidator(_hostcheck(hostval.validate_host))]
PortNum = Annotated[int, BeforeValidator(_hostcheck(hostval.validate_port))]
UserName = Annotated[str, BeforeValidator(_hostcheck(hostval.validate_user))]
HOST_NAME_RE = r"^[a-z][a-z0-9-]{0,31}$"
KEY_FILE_RE = r"^[A-Za-z0-9_./-]{1,255}$"


def _ipv4(v: Any) -> str:
    try:
        return str(ipaddress.IPv4Address(v))
    except (ipaddress.AddressValueError, ValueError, TypeError):
        raise ValueError(f"{v!r} is not an IPv4 address (give e.g. 192.0.2.10)") from None


IPv4 = Annotated[str, BeforeValidator(_ipv4)]


class PhysicalPath(Strict):
    """topology.kind physical: where a path is on real hosts. `client_if` is the client's NIC of the
    path (its IPv4 address is the subflow's source); `server_address` the server address reached over
    it; `gateway` the next hop on that NIC (omit when the server or the emulator is on-link there).
    With an emulator on this path (topology.roles.emulator.<path>): `emulator_server_if` faces the
    server (the video enters here: `down` shaping sits at its ingress), `emulator_client_if` faces the
    client (`up` enters here)."""

    client_if: IfName = Field(description="The client's NIC of this path; its IPv4 address is the subflow's source.")
    server_address: IPv4 = Field(description="Server address reached over this path.")
    gateway: IPv4 | None = Field(None, description="Next hop on client_if; null = the server or emulator is on-link.")
    emulator_server_if: IfName | None = Field(None, description="With an emulator on this path: its NIC facing the server (`down` shaping at its ingress).")
    emulator_client_if: IfName | None = Field(None, description="With an emulator on this path: its NIC facing the client (`up` shaping at its ingress).")


class PathSpec(Strict):
    """A path between the client and the server: `down` is server → client (the video), `up` the ACKs.
    `physical` only with topology.kind physical (which interfaces carry the path)."""

    down: LinkDirection = Field(LinkDirection(), description="Server → client direction (the video); default: unshaped, no delay.")
    up: LinkDirection = Field(LinkDirection(), description="Client → server direction (requests, ACKs); default: unshaped, no delay.")
    delay: PathDelaySpec | None = Field(None, description="A delay pattern for the path with the direction(s) it applies to (`direction: down | up | both`, required); it becomes that direction's `delay` (so that one must not be given too). null = each direction's own `delay`.")
    physical: PhysicalPath | None = Field(None, description="topology.kind physical only: the interfaces that carry this path.")

    @model_validator(mode="after")
    def _path_delay_into_directions(self) -> PathSpec:
        """`delay` (path level) is copied into each direction it names. A direction that also has a
        delay of its own is an error, unless it is that same pattern (a resolved scenario, which
        holds both the path-level form and its copies, reads back unchanged)."""
        if self.delay is None:
            return self
        pattern = self.delay.pattern()
        update: dict[str, LinkDirection] = {}
        for name in self.delay.targets():
            d: LinkDirection = getattr(self, name)
            if d.delay not in (ConstantDelay(), pattern):
                raise ValueError(f"{name}.delay and delay (direction {self.delay.direction}) both set the {name} "
                                 f"direction's delay: give it once")
            update[name] = d.model_copy(update={"delay": pattern})
        return self.model_copy(update=update)

    def emulated(self) -> bool:
        """Anything for an emulator to do on this path (shaping, delay or loss in either direction)?"""
        return any(d.rate is not None or d.loss > 0 or d.delay != ConstantDelay() for d in (self.down, self.up))


class LocalHostSpec(Strict):
    """This machine's root network namespace (where `mpvlab run` runs)."""

    kind: Literal["local"] = Field(description="This machine's root network namespace.")


class SshHostSpec(Strict):
    """A remote machine over SSH (key only, strict host-key checking). identity_file / known_hosts:
    file names inside the key directory (default /etc/mpvlab/keys; set only with `mpvlab run
    --key-dir` or MPVLAB_KEY_DIR, never by a scenario), or absolute paths that lie inside it."""

    kind: Literal["ssh"] = Field(description="A remote machine reached over SSH.")
    address: HostAddr = Field(description="Host name or IP address to connect to.")
    user: UserName = Field("root", description="SSH login user.")
    port: PortNum = Field(22, description="SSH port.")
    identity_file: str = Field(pattern=KEY_FILE_RE, description="Private key: a file name in the key directory, or an absolute path inside it.")
    known_hosts: str = Field(pattern=KEY_FILE_RE, description="known_hosts file for strict host-key checking, in the key directory.")


HostEntry = Annotated[LocalHostSpec | SshHostSpec, Field(discriminator="kind")]
HostRef = Annotated[str, Field(pattern=HOST_NAME_RE)]


class RolesSpec(Strict):
    """Which host (a name from topology.hosts) plays which role. `emulator`: path name → host; a path
    without an emulator is used as it is (no shaping, delay or loss may be configured on it)."""

    client: HostRef = Field(description="Host (a name in topology.hosts) that runs the player.")
    server: HostRef = Field(description="Host that runs the server.")
    emulator: dict[Annotated[str, Field(pattern=PATH_NAME_RE)], HostRef] = Field(default_factory=dict, description="Path name → host that shapes it; a path without one is used as it is.")


class TopologySpec(Strict):
    """dual-path: client with one interface per path, one router per path, server (2 to 8 paths).
    dumbbell: server — router — client (1 path): the single-bottleneck studies.
    shared-bottleneck: `clients` players (and the cross-traffic host, if any) behind ONE router whose
    one path (`paths:` has exactly one entry) is the bottleneck they all share (topologies/README.md).
    physical: real hosts (`hosts`, `roles`) and interfaces (`paths.<name>.physical`), 1 or 2 paths."""

    kind: Literal[NAMES] = Field(DUAL_PATH.name, description="Network to build: dual-path (2 to 8 paths, one router each), dumbbell (one path), shared-bottleneck (one bottleneck shared by several clients) or physical (real hosts); mpvlab/topologies/registry.py lists each kind's rules.")  # type: ignore[valid-type]
    clients: int | None = Field(None, ge=1, le=8, description="shared-bottleneck only: players, each in "
                                                              "its own client namespace (default 2)")
    # Duration, not a list: a sweep varies `clients` (sweeps/sabre-study.yaml: 1 and 2) and one
    # stagger holds for every client count, where a per-client list would have to change length with it.
    client_stagger: Duration = Field(0, description="shared-bottleneck only: client i's player starts at run "
                                                    "time i × this (client0 at 0 s; SABRE's study: 20s); 0 … 1 h "
                                                    "for the last client; default 0 = all at once")
    # `single`: the server has one address, reached over every path (client policy routing picks the path
    # by source address); the MPTCP subflows differ in their client address only.
    # `per-path` (dual-path only): the server has one address per path, each routed over its path only
    # (as in the published testbed, server behind two L3 switches), so a subflow's server address names
    # its path too; the server's path manager signals the second address (ADD_ADDR): the in-kernel PM
    # under `default`, the steering controller (userspace PM) under a steering scheduler.
    server_addressing: Literal["single", "per-path"] = Field("single", description="single: one server address reached over every path; per-path (dual-path only): one address per path, signalled by ADD_ADDR.")
    hosts: dict[HostRef, HostEntry] = Field(default_factory=dict, description="physical only: host name → local or ssh machine.")
    roles: RolesSpec | None = Field(None, description="physical only: which host is client, server and emulator.")


# --- cross traffic on the shared bottleneck (`cross_traffic:`) -----------------------------------

class BulkTrafficSpec(Strict):
    """A competing bulk TCP flow (iperf3) from the server to the cross-traffic host through the
    bottleneck. start: run time at which it begins; duration: None = until the last player finishes."""

    cc: Literal["cubic", "bbr", "reno"] = Field("cubic", description="Congestion control of the competing flow.")
    start: Duration = Field(0, description="Run time at which the flow begins.")
    duration: Duration | None = Field(None, description="How long it runs; null = until the last player finishes.")

    @field_validator("duration")
    @classmethod
    def _duration_positive(cls, v: int | None) -> int | None:
        if v is not None and v <= 0:
            raise ValueError("duration must be positive (leave it out to run until the last player finishes)")
        return v


class VoipTrafficSpec(Strict):
    """A VoIP-like constant-bit-rate UDP probe from the server to the cross-traffic host, whose
    one-way queuing delay is recorded per packet (SABRE, docs/studies.md §4)."""

    rate: Rate = Field(80_000, description="Constant bit rate of the probe, 1kbit … 10mbit.")
    packet_size: Size = Field(150, description="IP packet size; 36 B (IP+UDP+probe header) … 1500 B (one MTU)")

    @field_validator("rate")
    @classmethod
    def _rate_range(cls, v: int) -> int:
        if not 1_000 <= v <= 10_000_000:
            raise ValueError("rate must lie between 1kbit and 10mbit")
        return v

    @field_validator("packet_size")
    @classmethod
    def _size_range(cls, v: int) -> int:
        if not 36 <= v <= 1500:
            raise ValueError("packet_size must lie between 36B and 1500B (one packet per MTU, no fragments)")
        return v


class CrossTrafficSpec(Strict):
    """shared-bottleneck only. Either or both; each starts at run time zero (bulk: at `start`)."""

    bulk: BulkTrafficSpec | None = Field(None, description="A competing bulk TCP flow (iperf3); null = none.")
    voip: VoipTrafficSpec | None = Field(None, description="A VoIP-like UDP probe whose one-way delay is recorded; null = none.")
