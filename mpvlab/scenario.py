"""The scenario: a researcher's YAML, validated strictly before anything touches the kernel.

Every field has a documented default, every quantity carries its unit (mpvlab/units.py), and unknown
keys are errors. `load_scenario()` returns the validated model; `resolved_dict()` gives the same
scenario with every default filled in, which is what each run stores next to the file as given.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from cc import registry as cc_registry
from core.quantities import Duration, Rate, Size, Strict
from mpvlab.run.workloads.spec import VideoWorkloadSpec, WorkloadSpec
from links.spec import ConstantDelay, PiecewiseDelay, SquareDelay, TraceDelay
from schedulers import registry as scheduler_registry
from topologies.spec import PATH_NAME_RE, LocalHostSpec, PathSpec, SshHostSpec, TopologySpec
from core.errors import InputError
from mpvlab import inputs, limits, messages  # issue 15: safe loading, limits, messages in words

NAME_RE = r"^[a-z][a-z0-9-]{0,39}$"
MAX_PATHS = 8               # dual-path: one subflow per path, at most 8 per MPTCP connection here


class HostSpec(Strict):
    """Per-namespace TCP settings, recorded in provenance. The client's receive buffer matters: new
    namespaces here default to a 32 MB maximum, which hides a whole throttle from a player."""

    client_tcp_rmem: tuple[Size, Size, Size] = (4096, 131072, 6291456)
    server_tcp_wmem: tuple[Size, Size, Size] = (4096, 16384, 4194304)
    tcp_no_metrics_save: bool = True
    offloads: bool = Field(
        False, description="TSO/GSO/GRO on the emulated links; off by default so rate samples see real packets"
    )


class TransportSpec(Strict):
    """scheduler: `default` is the kernel's own; the others are steering policies on the sender
    (schedulers/registry.py lists them, schedulers/README.md explains them). scheduler_params are that
    scheduler's (schedulers/params.py), with every default filled in when resolved."""

    cc: str = "cubic"
    cc_params: dict[str, Any] = Field(default_factory=dict)
    scheduler: str = "default"
    scheduler_params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("cc")
    @classmethod
    def _known_cc(cls, v: str) -> str:
        cc_registry.get(v)      # ValueError naming the registry's CCs and the kernel's list
        return v

    @model_validator(mode="before")
    @classmethod
    def _resolve_cc_params(cls, data: Any) -> Any:
        """cc_params are the chosen CC's (cc/registry.py), with every default filled in. A CC without
        parameters resolves them to {} (a sweep may vary cc over CCs with and without parameters)."""
        if not isinstance(data, dict):
            return data
        if isinstance(data.get("cc"), dict):
            # `cc: {bpf: FILE, params: {...}}` is the registry's `bpf` entry with those as its cc_params
            if data.get("cc_params"):
                raise ValueError("cc: {bpf: ...} carries its own params; remove cc_params")
            data = {**data, "cc": "bpf", "cc_params": data["cc"]}
        name = data.get("cc", "cubic")
        try:
            entry = cc_registry.get(name) if isinstance(name, str) else None
        except ValueError:
            entry = None
        if entry is None:
            return data  # the field check reports it
        values = data.get("cc_params") or {}
        if not isinstance(values, dict):
            raise ValueError("cc_params must be a mapping")
        if entry.params is None:
            if values:  # issue 15: refused, not silently ignored
                raise ValueError(f"cc_params: cc {name!r} takes no parameters; remove cc_params (CCs with "
                                 "parameters: " + ", ".join(n for n, e in cc_registry.REGISTRY.items() if e.params)
                                 + ")")
            return {**data, "cc_params": {}}
        try:
            params = entry.params.model_validate(values)
        except ValidationError as e:
            # each in words as any other field's (mpvlab/messages.py), not pydantic's `Value error, …`
            raise ValueError("; ".join(
                f"cc_params.{messages.field_name(tuple(err['loc']))}: "
                + (f"unknown key for cc {name!r}; allowed: {', '.join(entry.params.model_fields)}"
                   if err["type"] == "extra_forbidden"
                   else messages.describe_error(err, entry.params).split(": ", 1)[-1])
                for err in e.errors())) from None
        return {**data, "cc_params": params.model_dump()}

    @property
    def cc_entry(self) -> "cc_registry.CongestionControl":
        return cc_registry.get(self.cc)

    @model_validator(mode="before")
    @classmethod
    def _resolve_scheduler_params(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        name = data.get("scheduler", "default")
        if not isinstance(name, str) or name not in scheduler_registry.REGISTRY:
            raise ValueError(f"scheduler: {name!r} is not an MPTCP scheduler here; available: "
                             f"{', '.join(scheduler_registry.REGISTRY)}")
        entry = scheduler_registry.REGISTRY[name]
        values = data.get("scheduler_params") or {}
        if not isinstance(values, dict):
            raise ValueError("scheduler_params must be a mapping")
        try:
            params = entry.parse_params(values)
        except ValidationError as e:
            problems = "; ".join(
                f"scheduler_params.{'.'.join(str(x) for x in err['loc'])}: "
                + ("unknown key for scheduler " + repr(name) + "; allowed: " + ", ".join(sorted(entry.params.model_fields))
                   if err["type"] == "extra_forbidden" else err["msg"])
                for err in e.errors())
            raise ValueError(problems) from None
        return {**data, "scheduler_params": params.model_dump()}
    subflows: int | None = Field(None, ge=1, le=2, description="MPTCP subflows expected; default: one per path")


STUDY_DASH_LADDER = [1_000_000] + [2_500_000 * i for i in range(1, 11)]  # docs/studies.md §2: 1 … 25 Mbit/s


class VideoSpec(Strict):
    """progressive: one H.264 MP4 at `bitrate`. dash: a ladder of representations at `bitrates`
    (default: the BBR-S study's 11 levels, 1 … 25 Mbit/s), `segment` long each."""

    kind: Literal["progressive", "dash"] = "progressive"
    duration: Duration = 30 * 10**9
    bitrate: Rate = 5_240_000
    bitrates: list[Rate] | None = Field(None, min_length=1, max_length=16)
    segment: Duration = 5 * 10**9
    width: int = Field(1280, ge=64, le=3840)
    height: int = Field(720, ge=64, le=2160)
    fps: int = Field(30, ge=1, le=120)

    @field_validator("duration")
    @classmethod
    def _duration_range(cls, v: int) -> int:
        if not 1 * 10**9 <= v <= 3600 * 10**9:
            raise ValueError("video duration must lie between 1s and 60min")
        return v


class ServerSpec(Strict):
    """The video server (Apache httpd). protocol: `http/1.1`, or `h2` (HTTP/2, mod_http2, negotiated by
    TLS ALPN). tls: `auto` is TLS exactly when the protocol is h2; `true` also serves HTTP/1.1 over TLS
    (to separate TLS's cost from HTTP/2's effect); `false` is plain HTTP. With TLS the run makes a
    self-signed certificate of its own and the player trusts exactly that one."""

    protocol: Literal["http/1.1", "h2"] = "http/1.1"
    tls: Literal["auto"] | bool = "auto"

    @model_validator(mode="after")
    def _h2_needs_tls(self) -> "ServerSpec":
        if self.protocol == "h2" and self.tls is False:
            raise ValueError(
                "protocol h2 needs TLS (tls: auto or true): the player's HTTP client (GStreamer souphttpsrc "
                "with libsoup 3) negotiates HTTP/2 only through TLS ALPN and cannot speak cleartext h2c")
        return self

    @property
    def tls_enabled(self) -> bool:
        return self.protocol == "h2" if self.tls == "auto" else bool(self.tls)


class PlayerSpec(Strict):
    """buffer: the playout buffer (default 2 s progressive, 30 s DASH). abr (DASH only): `gst` is
    dashdemux's own rate adaptation, `bba` a buffer-based BBA-0 map (reservoir, cushion)."""

    mode: Literal["discard", "rebuffer"] = "discard"
    max_lateness: Duration = 20 * 10**6
    buffer: Duration | None = None
    abr: str = Field("gst", pattern=r"^[a-z][a-z0-9-]{0,31}$",
                     description="dashdemux: gst | bba; fetcher own: an ABR of player/abr (throughput, bba, "
                                 "bola, dynamic, festive, sabre, on-off)")
    fetcher: Literal["dashdemux", "own"] = Field(
        "dashdemux", description="DASH: GStreamer's dashdemux, or mpvlab's own client (player/dash_client.py: "
                                 "MPTCP socket, pipelining, paced reads; HTTP/1.1 without TLS)")
    abr_params: dict[str, Any] = Field(default_factory=dict, description="fetcher own: the ABR's parameters")
    rcvbuf: Size | None = Field(None, description="fetcher own: the socket's SO_RCVBUF request (SABRE sizes its "
                                                   "pipeline from it)")
    bba_reservoir: Duration = 5 * 10**9
    bba_cushion: Duration = 15 * 10**9
    gst_bitrate_limit: float = Field(0.8, gt=0.0, le=1.0)
    rebuffer_resume: Duration = 1 * 10**9
    startup_buffer: Duration = Field(1 * 10**9, description="playback starts once this much video is buffered")
    cpu: int | None = Field(None, ge=0, le=1023, description="pin the player to this CPU (taskset); None: any")
    decode: bool = Field(True, description="False: count bytes and underflows without decoding (light; no "
                                           "picture discards then)")
    timeout_factor: float = Field(3.0, ge=1.2, le=20.0, description="give up after this × video length + 30 s")

    @model_validator(mode="after")
    def _abr_known(self) -> "PlayerSpec":
        if self.fetcher == "dashdemux":
            if self.abr not in ("gst", "bba"):
                raise ValueError(f"abr {self.abr!r} needs fetcher: own (dashdemux knows gst and bba)")
            if self.abr_params or self.rcvbuf is not None:
                raise ValueError("abr_params and rcvbuf are for fetcher: own")
            return self
        from player.abr import REGISTRY as ABRS
        if self.abr not in ABRS:
            raise ValueError(f"abr {self.abr!r}: with fetcher own, one of {', '.join(sorted(ABRS))}")
        model = ABRS[self.abr].Params
        try:
            model.model_validate(self.abr_params)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(all)'}: "
                                 + ("unknown key" if err["type"] == "extra_forbidden" else err["msg"])
                                 for err in e.errors())
            raise ValueError(f"abr_params for {self.abr}: {problems} (keys: "
                             f"{', '.join(model.model_fields) or 'none'})") from None
        if self.rcvbuf is not None and not 4096 <= self.rcvbuf <= 1 << 30:
            raise ValueError("rcvbuf must be 4 KiB … 1 GiB")
        return self


class BulkTrafficSpec(Strict):
    """A competing bulk TCP flow (iperf3) from the server to the cross-traffic host through the
    bottleneck. start: run time at which it begins; duration: None = until the last player finishes."""

    cc: Literal["cubic", "bbr", "reno"] = "cubic"
    start: Duration = 0
    duration: Duration | None = None

    @field_validator("duration")
    @classmethod
    def _duration_positive(cls, v: int | None) -> int | None:
        if v is not None and v <= 0:
            raise ValueError("duration must be positive (leave it out to run until the last player finishes)")
        return v


class VoipTrafficSpec(Strict):
    """A VoIP-like constant-bit-rate UDP probe from the server to the cross-traffic host, whose
    one-way queuing delay is recorded per packet (SABRE, docs/studies.md §4)."""

    rate: Rate = 80_000
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

    bulk: BulkTrafficSpec | None = None
    voip: VoipTrafficSpec | None = None


class FidelitySpec(Strict):
    probe: bool = True
    rtt_tolerance: Duration = 2 * 10**6
    rate_tolerance: float = Field(0.05, gt=0.0, lt=1.0)
    # Physical runs' probes. Emulated runs use the fixed, kernel-measured pre-check instead
    # (mpvlab/precheck.py: 300 RTT samples per path, ~0.6 s of backlogged tbf) and the whole-run verdict.
    probe_duration: Duration = 3 * 10**9


class PcapSpec(Strict):
    """Packet capture (collectors/pcap.py): tcpdump on every interface of each named point, for the whole
    run (started before time zero, stopped after playback), into data/pcap/<point>-<if>.pcap. A
    capture at `server` also gives the wire-order path-switch count (collectors/wire_switches.py)."""

    points: list[str] = Field(min_length=1, description="client, server, router-<path> (one per path)")
    snaplen: int = Field(128, ge=64, le=65535, description="bytes kept per packet; 128 keeps every header "
                         "and the MPTCP DSS option")
    max_mb: int = Field(200, ge=1, le=4096, description="per file, MB (10^6 B): the capture stops there and the "
                        "summary marks it truncated")

    @field_validator("points")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        dup = sorted({p for p in v if v.count(p) > 1})
        if dup:
            raise ValueError(f"observe.pcap.points names {', '.join(dup)} more than once")
        return v


class ObserveSpec(Strict):
    sample_hz: int = Field(100, ge=1, le=1000, description="time-series sampling rate of the collectors")
    min_path_share: float = Field(0.05, ge=0.0, lt=0.5, description="fail the run if a path carries less")
    pcap: PcapSpec | None = Field(None, description="packet capture; off unless given")


class Scenario(Strict):
    name: str = Field(pattern=NAME_RE)
    description: str = ""
    seed: int = Field(1, ge=0, lt=2**31)
    topology: TopologySpec = TopologySpec()
    paths: dict[Annotated[str, Field(pattern=PATH_NAME_RE)], PathSpec]
    hosts: HostSpec = HostSpec()
    transport: TransportSpec = TransportSpec()
    workload: WorkloadSpec = VideoWorkloadSpec()
    video: VideoSpec = VideoSpec()
    server: ServerSpec = ServerSpec()
    player: PlayerSpec = PlayerSpec()
    cross_traffic: CrossTrafficSpec | None = None
    fidelity: FidelitySpec = FidelitySpec()
    observe: ObserveSpec = ObserveSpec()

    @model_validator(mode="after")
    def _paths_fit_topology(self) -> "Scenario":
        if self.topology.kind == "physical":
            _check_physical(self)
        else:
            if self.topology.hosts or self.topology.roles is not None:
                raise ValueError(f"topology.hosts and topology.roles are for kind: physical, not {self.topology.kind}")
            named = [n for n, p in self.paths.items() if p.physical is not None]
            if named:
                raise ValueError(f"paths.{named[0]}.physical is for topology.kind: physical, "
                                 f"not {self.topology.kind}")
        # dual-path: 2 to 8 paths, one subflow each (8: the steering policy's and the kernel's
        # per-connection subflow limit, MPTCP_PM_ADDR_MAX / POL_MAX_SF).
        want = {"dual-path": min(max(len(self.paths), 2), MAX_PATHS), "dumbbell": 1, "shared-bottleneck": 1,
                "physical": len(self.paths)}[self.topology.kind]
        if self.topology.kind == "physical" and not 1 <= len(self.paths) <= 2:
            raise ValueError(f"paths: topology physical takes 1 or 2 paths, got {len(self.paths)}: {list(self.paths)}")
        if self.topology.kind == "dual-path" and len(self.paths) != want:
            raise ValueError(f"paths: topology dual-path takes 2 to {MAX_PATHS} paths, got {len(self.paths)}: "
                             f"{list(self.paths)}")
        if len(self.paths) != want:
            raise ValueError(f"paths: topology {self.topology.kind} needs exactly {want} path{'s' if want > 1 else ''}, "
                             f"got {len(self.paths)}: {list(self.paths)}")
        if self.transport.subflows is not None and self.transport.subflows > len(self.paths):
            raise ValueError("transport.subflows cannot exceed the number of paths")
        self._addressing_fits()
        if self.workload.kind != "video" and self.topology.kind not in ("dual-path", "dumbbell"):
            raise ValueError(f"workload.kind {self.workload.kind} runs on topology dual-path or dumbbell, "
                             f"not {self.topology.kind} (yet)")
        return self

    def _addressing_fits(self) -> None:
        if self.topology.server_addressing == "single":
            return
        if self.topology.kind != "dual-path":
            raise ValueError("topology.server_addressing: per-path is only for kind dual-path "
                             f"(this is {self.topology.kind}; allowed here: single)")

    @model_validator(mode="after")
    def _pcap_points_exist(self) -> "Scenario":
        """Capture points are the topology's nodes: client, server and one router per path."""
        if self.observe.pcap is None:
            return self
        if self.topology.kind not in ("dual-path", "dumbbell"):
            raise ValueError(f"observe.pcap is for topology dual-path or dumbbell, not {self.topology.kind} (yet)")
        known = ["client", "server", *(f"router-{p}" for p in self.paths)]
        bad = [p for p in self.observe.pcap.points if p not in known]
        if bad:
            raise ValueError(f"observe.pcap.points: unknown point {', '.join(map(repr, bad))}; "
                             f"this topology has {', '.join(known)}")
        return self

    @model_validator(mode="after")
    def _shared_fits(self) -> "Scenario":
        """What only the shared-bottleneck topology has, and what it cannot do (yet)."""
        kind = self.topology.kind
        if kind != "shared-bottleneck":
            if self.topology.clients is not None:
                raise ValueError(f"topology.clients is only for kind shared-bottleneck (this is {kind}: one client)")
            if self.cross_traffic is not None:
                raise ValueError(f"cross_traffic is only for topology kind shared-bottleneck (this is {kind})")
            return self
        if self.transport.scheduler != "default":
            raise ValueError("transport.scheduler: shared-bottleneck players use MPTCP with one subflow, so only "
                             f"'default' is allowed (got {self.transport.scheduler!r})")
        (pname, path), = self.paths.items()
        if path.down.rate is not None and path.down.order != "shape-then-delay":
            raise ValueError(f"paths.{pname}.down.order: shared-bottleneck allows only shape-then-delay when "
                             "down has a rate (one tbf where all flows enter the router is the shared queue)")
        if path.up.rate is not None and path.up.order != "delay-then-shape":
            raise ValueError(f"paths.{pname}.up.order: shared-bottleneck allows only delay-then-shape when up "
                             "has a rate (the up flows enter the router through one interface per client)")
        return self

    @property
    def n_clients(self) -> int:
        """Players: topology.clients for shared-bottleneck (default 2), else 1."""
        if self.topology.kind != "shared-bottleneck":
            return 1
        return self.topology.clients or 2

    @model_validator(mode="after")
    def _dash_fits(self) -> "Scenario":
        v, p = self.video, self.player
        if v.kind == "dash" and v.segment <= 0:
            raise ValueError("video.segment must be positive")
        if v.kind == "dash" and p.abr == "bba" and p.bba_reservoir + p.bba_cushion >= self.playout_buffer_ns:
            raise ValueError("player.bba_reservoir + player.bba_cushion must be smaller than player.buffer "
                             f"({self.playout_buffer_ns / 1e9:g} s)")
        if v.kind == "progressive" and v.bitrates is not None:
            raise ValueError("video.bitrates is for kind: dash; a progressive video has one `bitrate`")
        return self

    @model_validator(mode="after")
    def _own_fetcher_fits(self) -> "Scenario":
        if self.player.fetcher == "own":
            if self.video.kind != "dash":
                raise ValueError("player.fetcher: own is a DASH client; video.kind must be dash")
            if self.server.protocol != "http/1.1" or self.server.tls_enabled:
                raise ValueError("player.fetcher: own speaks HTTP/1.1 without TLS (server: {protocol: http/1.1, "
                                 "tls: false})")
        return self

    @model_validator(mode="after")
    def _protocol_fits_player(self) -> "Scenario":
        if self.server.protocol == "h2" and self.video.kind == "progressive":
            # Measured (player/README.md): over HTTP/2, libsoup 3.2 keeps reading a response to its end
            # whatever the player consumes (a 118 MB file arrived in 3 s while the player had taken
            # 4 MB), so nothing bounds what the client holds and player.buffer would be fiction. DASH
            # requests one segment at a time, which bounds it to a segment as over HTTP/1.1.
            raise ValueError(
                "server.protocol h2 with video.kind progressive is not supported: over HTTP/2 the player's "
                "HTTP client (libsoup 3.2) downloads the whole file into memory regardless of playback, so the "
                "playout buffer (player.buffer) would bound nothing; use video.kind: dash with h2, or "
                "server.protocol: http/1.1 (tls: true gives HTTPS)")
        return self

    @property
    def playout_buffer_ns(self) -> int:
        if self.player.buffer is not None:
            return self.player.buffer
        return 30 * 10**9 if self.video.kind == "dash" else 2 * 10**9

    @property
    def dash_ladder(self) -> list[int]:
        return list(self.video.bitrates or STUDY_DASH_LADDER)

    @property
    def expected_subflows(self) -> int:
        return self.transport.subflows or len(self.paths)


def _check_physical(sc: "Scenario") -> None:
    """Cross-field rules of a physical topology; each message names the field and what is allowed."""
    topo = sc.topology
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
    for p in r.emulator:
        if p not in sc.paths:
            raise ValueError(f"topology.roles.emulator.{p}: no such path (paths: {', '.join(sc.paths)})")
    used: dict[tuple[str, str], str] = {}   # (host, interface) -> field that named it

    def claim(host: str, ifname: str, where: str) -> None:
        if (host, ifname) in used:
            raise ValueError(f"{where}: interface {ifname!r} on host {host!r} is already named by "
                             f"{used[(host, ifname)]}; every path needs its own interfaces")
        used[(host, ifname)] = where

    for name, p in sc.paths.items():
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
    if sc.transport.cc_entry.bpf:
        raise ValueError(f"transport.cc: {sc.transport.cc} is not available with topology.kind physical (its BPF "
                         "loader runs on this machine); allowed: "
                         + ", ".join(n for n, e in cc_registry.REGISTRY.items() if not e.bpf))
    if not scheduler_registry.REGISTRY[sc.transport.scheduler].physical_ok:
        raise ValueError("transport.scheduler: only " + ", ".join(
            n for n, e in scheduler_registry.REGISTRY.items() if e.physical_ok) + " is available with topology.kind "
            "physical (the steering schedulers run a BPF observer in the server's namespace)")
    if sc.video.kind != "progressive":
        raise ValueError("video.kind: only progressive is available with topology.kind physical")
    if sc.server.protocol != "http/1.1" or sc.server.tls is True:
        raise ValueError("server: only plain HTTP/1.1 (protocol: http/1.1, tls: auto or false) is available with "
                         "topology.kind physical (its remote Apache has no per-run certificate yet)")


# ---------------------------------------------------------------------------------------------
# Loading, with errors that name the file, the field and what is allowed


class ScenarioError(InputError):
    """A scenario that cannot be run; str() is the full, user-facing explanation."""


def format_validation_error(source: str, err: ValidationError, quote: bool = True) -> str:
    """Each problem in words: the field, what is allowed, a short excerpt of what was given
    (mpvlab/messages.py; quote=False: no excerpt, for files the user did not name directly)."""
    return messages.describe(source, "scenario", err, Scenario, quote=quote)


def parse_scenario(data: Any, source: str = "<scenario>", quote: bool = True) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario must be a YAML mapping at the top level")
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(source, e, quote)) from None
    _raise_problems(source, limits.scenario_problems(sc))   # issue 15: the limits the run would hit
    return sc


def _raise_problems(source: str, problems: list[str]) -> None:
    if problems:
        n = len(problems)
        raise ScenarioError("\n".join([f"{source}: invalid scenario ({n} problem{'s' if n > 1 else ''})",
                                       *(f"  {p}" for p in problems)]))


def load_scenario(path: Path, quote: bool = True) -> tuple[Scenario, str]:
    """Returns the validated scenario and the file's text exactly as given (stored with each run).
    Read with mpvlab/inputs.py (regular file, size limit, UTF-8, strict YAML); its trace files are
    checked by mpvlab/limits.py. quote=False: messages carry no excerpt of the file's values."""
    try:
        data, text = inputs.load_yaml_file(path, "scenario")
    except inputs.InputFileError as e:
        raise ScenarioError(str(e)) from None
    scenario = parse_scenario(data, str(path), quote)
    _raise_problems(str(path), limits.file_problems(scenario, path))
    return scenario, text


def resolved_dict(scenario: Scenario) -> dict[str, Any]:
    """The scenario with every default filled in, in the same units a user writes."""
    return scenario.model_dump(mode="json")


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def override(scenario: Scenario, assignments: dict[str, Any], source: str = "<override>") -> Scenario:
    """Apply dotted-path overrides (e.g. {'transport.cc': 'bbr'}) and re-validate: how sweeps vary a scenario."""
    data = resolved_dict(scenario)
    if "transport.scheduler" in assignments and not any(k.startswith("transport.scheduler_params")
                                                        for k in assignments):
        # The resolved parameters belong to the old scheduler (each has its own set): a changed
        # scheduler starts from its own defaults unless the same override gives its parameters.
        if assignments["transport.scheduler"] != data["transport"]["scheduler"]:
            data["transport"]["scheduler_params"] = {}
    if "transport.cc" in assignments and not any(k.startswith("transport.cc_params") for k in assignments):
        if assignments["transport.cc"] != data["transport"]["cc"]:   # the same for cc_params (issue 15)
            data["transport"]["cc_params"] = {}
    for dotted, value in assignments.items():
        if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z0-9_-]+)*", dotted):
            raise ScenarioError(f"{source}: bad parameter path {dotted!r}")
        node: Any = data
        keys = dotted.split(".")
        for k in keys[:-1]:
            if not isinstance(node, dict) or k not in node:
                raise ScenarioError(f"{source}: {dotted}: no field {k!r} in the scenario")
            node = node[k]
        node[keys[-1]] = value
    return parse_scenario(data, source)
