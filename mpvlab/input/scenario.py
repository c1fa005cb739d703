"""The scenario: a researcher's YAML, validated strictly before anything touches the kernel.

Every field has a documented default, every quantity carries its unit (mpvlab/units.py), and unknown
keys are errors. The sections are composed from the components' own models: links (mpvlab/links/spec.py),
topologies and cross traffic (mpvlab/topologies/spec.py; each kind's rules in mpvlab/topologies/registry.py), the
workloads with the video, server and player sections (mpvlab/workloads/), the collectors
(mpvlab/collectors/spec.py), CCs and schedulers (their registries); the scenario's own sections (hosts,
transport, fidelity) are in mpvlab/input/sections.py and a physical topology's cross-field rules in
mpvlab/input/physical_rules.py. `load_scenario()` returns the validated model; `resolved_dict()` gives the same
scenario with every default filled in, which is what each run stores next to the file as given.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, ValidationError, model_validator

from mpvlab.core.quantities import Strict
from mpvlab.collectors.spec import ObserveSpec
from mpvlab.player import kinds
from mpvlab.player.entry import PlayerKind
from mpvlab.player.gstreamer.kind import GST_DASH
from mpvlab.workloads import registry as workloads
from mpvlab.workloads.registry import WorkloadSpec
from mpvlab.workloads.video import STUDY_DASH_LADDER, PlayerSpec, ServerSpec, VideoSpec, VideoWorkloadSpec
from mpvlab.topologies import registry as topologies
from mpvlab.topologies.spec import PATH_NAME_RE, CrossTrafficSpec, PathSpec, TopologySpec
from mpvlab.core.errors import InputError
from mpvlab.input import files as inputs, limits, messages  # issue 15: safe loading, limits, messages in words
# The scenario's own sections and the physical topology's rules live beside it (issue 46: small
# modules); the sections are imported here under their old names so `from mpvlab.input.scenario
# import TransportSpec` keeps working.
from mpvlab.input.sections import FidelitySpec, HostSpec, TransportSpec
from mpvlab.input.physical_rules import check_physical

NAME_RE = r"^[a-z][a-z0-9-]{0,39}$"


class Scenario(Strict):
    name: str = Field(pattern=NAME_RE, description="Scenario name: lowercase letters, digits and dashes.")
    description: str = Field("", description="Free text for people; the run does not read it.")
    seed: int = Field(1, ge=0, lt=2**31, description="Seed of the delay lines' random draws (loss, loss models); recorded in provenance.")
    topology: TopologySpec = Field(TopologySpec(), description="Which network the run builds; default: dual-path in namespaces.")
    paths: dict[Annotated[str, Field(pattern=PATH_NAME_RE)], PathSpec] = Field(description="The paths between client and server, by name, each with its down and up link.")
    hosts: HostSpec = Field(HostSpec(), description="TCP settings of the client and server namespaces.")
    transport: TransportSpec = Field(TransportSpec(), description="Congestion control and MPTCP scheduler.")
    workload: WorkloadSpec = Field(VideoWorkloadSpec(), description="What runs over the paths: video (default), bulk or rtp.")
    video: VideoSpec = Field(VideoSpec(), description="The DASH content the video workload serves.")
    server: ServerSpec = Field(ServerSpec(), description="The web server of the video workload.")
    player: PlayerSpec = Field(PlayerSpec(), description="The video player and its ABR.")
    cross_traffic: CrossTrafficSpec | None = Field(None, description="Competing flows on a shared bottleneck; null = none.")
    fidelity: FidelitySpec = Field(FidelitySpec(), description="How the run checks that the links do what the scenario says.")
    observe: ObserveSpec = Field(ObserveSpec(), description="Which collectors record what during the run.")

    @property
    def topology_kind(self) -> topologies.TopologyKind:
        """The topology kind's registry entry: what the checks below ask instead of its name."""
        return topologies.get(self.topology.kind)

    @property
    def workload_kind(self) -> workloads.WorkloadKind:
        """The workload's registry entry (mpvlab/workloads/registry.py)."""
        return workloads.get(self.workload.kind)

    @model_validator(mode="after")
    def _paths_fit_topology(self) -> Scenario:
        if self.topology_kind.real_hosts:
            for pname, path in self.paths.items():
                for dname in ("down", "up"):
                    if getattr(path, dname).ecn_mark is not None:
                        raise ValueError(f"paths.{pname}.{dname}.ecn_mark: not supported on topology "
                                         f"{self.topology_kind.name} (the ECN marker is attached on the run's own "
                                         "emulated links only)")
                    if getattr(path, dname).has_impairments:
                        # the remote delay line gets rate, buffer, delay and loss; a capacity model,
                        # loss model or outages read trace files and write their own on this machine
                        raise ValueError(f"paths.{pname}.{dname}: capacity, loss_model and outages are not "
                                         f"supported on topology {self.topology_kind.name} (its delay lines run "
                                         "on the emulator hosts); rate, buffer, delay and loss are")
            check_physical(self.topology, self.paths, self.transport, self.video, self.server)
        else:
            if self.topology.hosts or self.topology.roles is not None:
                raise ValueError(f"topology.hosts and topology.roles are for kind: {_real_hosts_kinds()}, "
                                 f"not {self.topology.kind}")
            named = [n for n, p in self.paths.items() if p.physical is not None]
            if named:
                raise ValueError(f"paths.{named[0]}.physical is for topology.kind: {_real_hosts_kinds()}, "
                                 f"not {self.topology.kind}")
        # one subflow per path, at most MAX_PATHS (mpvlab/topologies/registry.py)
        problem = self.topology_kind.path_count_problem(list(self.paths))
        if problem:
            raise ValueError(problem)
        if self.transport.subflows is not None and self.transport.subflows > len(self.paths):
            raise ValueError("transport.subflows cannot exceed the number of paths")
        self._addressing_fits()
        self._workload_fits_topology()
        return self

    def _workload_fits_topology(self) -> None:
        """Exactly the combinations the topology registry lists (a kind's `workloads`), with the
        workload's own limits (its transport, how many clients it serves)."""
        work, topo = self.workload_kind, self.topology_kind
        if work.name not in topo.workloads:
            allowed = [k.name for k in topologies.runs_workload(work.name)]
            why = f" ({work.topology_note})" if work.topology_note else ""
            raise ValueError(f"workload.kind {work.name} runs on topology.kind {' or '.join(allowed)}{why}, "
                             f"not {topo.name}")
        self._sections_apply_to_workload()
        if work.transport == "udp" and self.transport.scheduler != "default":
            raise ValueError(f"transport.scheduler: workload.kind {work.name} sends over UDP, so only 'default' is "
                             f"allowed (got {self.transport.scheduler!r})")
        if topo.several_clients and work.max_clients is not None and self.n_clients > work.max_clients:
            most = "exactly 1 client" if work.max_clients == 1 else f"at most {work.max_clients} clients"
            raise ValueError(f"topology.clients: workload.kind {work.name} on {topo.name} takes {most} "
                             f"({work.max_clients_why}), got {self.n_clients}")

    def _sections_apply_to_workload(self) -> None:
        """A section the workload never reads is refused, not silently ignored (issue 33): a `video:`
        block on rtp would otherwise look like it set the stream's length or bitrate. A section equal to
        its defaults (a resolved.yaml written out whole) says nothing and passes."""
        why = self.workload_kind.sections_unused
        for section, reason in why.items():
            if section in self.model_fields_set and getattr(self, section) != Scenario.model_fields[section].default:
                raise ValueError(f"{section}: does not apply to workload.kind {self.workload.kind} ({reason}); "
                                 "remove it")

    def _addressing_fits(self) -> None:
        chosen = self.topology.server_addressing
        if chosen not in self.topology_kind.addressing:
            offer = " or ".join(k.name for k in topologies.ENTRIES if chosen in k.addressing)
            raise ValueError(f"topology.server_addressing: {chosen} is only for kind {offer} "
                             f"(this is {self.topology.kind}; allowed here: {', '.join(self.topology_kind.addressing)})")

    @model_validator(mode="after")
    def _bbr_modes_reader_runs_here(self) -> Scenario:
        """observe.bbr_modes_hz: the INET_DIAG reader is started by the emulated backend only."""
        if self.observe.bbr_modes_hz is not None and self.topology_kind.backend != "emulated":
            offer = " or ".join(k.name for k in topologies.ENTRIES if k.backend == "emulated")
            raise ValueError(f"observe.bbr_modes_hz is for topology {offer}, not {self.topology.kind} (yet)")
        return self

    @model_validator(mode="after")
    def _pcap_points_exist(self) -> Scenario:
        """Capture points are the topology's nodes: client, server and one router per path."""
        if self.observe.pcap is None:
            return self
        if not self.topology_kind.pcap:
            offer = " or ".join(k.name for k in topologies.ENTRIES if k.pcap)
            raise ValueError(f"observe.pcap is for topology {offer}, not {self.topology.kind} (yet)")
        known = ["client", "server", *(f"router-{p}" for p in self.paths)]
        bad = [p for p in self.observe.pcap.points if p not in known]
        if bad:
            # at most a few names shown: a list of 10,000 made a 159 KB message (issue 33)
            shown = ", ".join(repr(p[:40]) for p in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise ValueError(f"observe.pcap.points: unknown point{'s' if len(bad) > 1 else ''} {shown}; "
                             f"this topology has {', '.join(known)}")
        return self

    @model_validator(mode="after")
    def _buffer_counting_fits(self) -> Scenario:
        """A packet-counted queue (links/README.md "Choosing how the queue counts") needs the run's own
        router (GRO is set there) and hosts whose offloads do not contradict it."""
        for pname, path in self.paths.items():
            for dname in ("down", "up"):
                c = getattr(path, dname).buffer_counting
                if c == "bytes":
                    continue
                where = f"paths.{pname}.{dname}.buffer_counting"
                if self.topology_kind.real_hosts:
                    raise ValueError(f"{where}: {c} is not supported on topology {self.topology_kind.name} (the "
                                     "router's GRO is set on the run's own namespaces only); allowed there: bytes")
                if self.topology_kind.several_clients and dname == "up":
                    raise ValueError(f"{where}: on topology {self.topology_kind.name} only the down queue can "
                                     "count packets (the up flows enter the router through one interface per "
                                     "client, and GRO is set per interface); allowed here: bytes")
                if self.topology_kind.several_clients and c == "merged_packets":
                    raise ValueError(f"{where}: merged_packets is not supported on topology {self.topology_kind.name}: "
                                     "its end-of-run drain wait needs the queue's byte bound, which a queue of merged "
                                     "packets has none of; allowed there: bytes, wire_packets")
                if c == "wire_packets" and self.hosts.offloads:
                    raise ValueError(f"{where}: wire_packets counts skbs that are each one wire frame, but "
                                     "hosts.offloads true lets the sender hand the router 64 KB GSO skbs; set "
                                     "hosts.offloads false, or use merged_packets")
        return self

    @model_validator(mode="after")
    def _shared_fits(self) -> Scenario:
        """What only a topology of several clients behind one bottleneck has, and what it cannot do (yet)."""
        kind = self.topology.kind
        if not self.topology_kind.several_clients:
            shared = " or ".join(k.name for k in topologies.ENTRIES if k.several_clients)
            if self.topology.clients is not None:
                raise ValueError(f"topology.clients is only for kind {shared} (this is {kind}: one client)")
            if self.topology.client_stagger:
                raise ValueError(f"topology.client_stagger is only for kind {shared} (this is {kind}: one client)")
            if self.cross_traffic is not None:
                raise ValueError(f"cross_traffic is only for topology kind {shared} (this is {kind})")
            return self
        if self.transport.scheduler != "default":
            raise ValueError(f"transport.scheduler: {kind} players use MPTCP with one subflow, so only "
                             f"'default' is allowed (got {self.transport.scheduler!r})")
        (pname, path), = self.paths.items()
        if path.down.rate is not None and path.down.order != "shape-then-delay":
            raise ValueError(f"paths.{pname}.down.order: {kind} allows only shape-then-delay when "
                             "down has a rate (one tbf where all flows enter the router is the shared queue)")
        if path.up.rate is not None and path.up.order != "delay-then-shape":
            raise ValueError(f"paths.{pname}.up.order: {kind} allows only delay-then-shape when up "
                             "has a rate (the up flows enter the router through one interface per client)")
        return self

    @property
    def media_s(self) -> float:
        """The stream's media length: a workload that encodes its own picture has its own duration,
        the others play the video's (the workload's `media_ns`)."""
        return self.workload_kind.media_ns(self.workload, self.video) / 1e9

    @property
    def player_timeout_s(self) -> float:
        """When a player is given up: `player.timeout_factor` × the video's length + 30 s."""
        return self.video.duration / 1e9 * self.player.timeout_factor + 30

    @property
    def n_clients(self) -> int:
        """Clients: topology.clients on a kind of several clients (default: the workload's, 2 players
        or 1 rtp viewer), else 1."""
        if not self.topology_kind.several_clients:
            return 1
        return self.topology.clients or self.workload_kind.default_clients

    @property
    def client_starts_ns(self) -> list[int]:
        """Each client's configured start on the run's clock (ns after t0), client0 first:
        i × topology.client_stagger."""
        return [i * self.topology.client_stagger for i in range(self.n_clients)]

    @model_validator(mode="after")
    def _dash_fits(self) -> Scenario:
        v = self.video
        if v.kind == "dash" and v.segment <= 0:
            raise ValueError("video.segment must be positive")
        if v.kind == "dash":
            # the content's own rules, as `run` applies them when it makes the ladder (runner/steps.py
            # ensure_content), so `validate` refuses what `run` would (issue 45)
            from mpvlab.workloads.content_rules import check_dash
            try:
                check_dash(v.duration / 1e9, self.dash_ladder, v.segment / 1e9, v.width, v.height, v.fps)
            except ValueError as e:
                raise ValueError(f"video (dash): {e}") from None
            if self.playout_buffer_ns <= 0:
                raise ValueError("player.buffer: a DASH player holds at least one segment; 0 s holds nothing")
        if v.kind == "progressive" and v.bitrates is not None:
            raise ValueError("video.bitrates is for kind: dash; a progressive video has one `bitrate`")
        return self

    @property
    def player_kind(self) -> PlayerKind:
        """The player kind that plays this scenario (mpvlab/player/kinds.py)."""
        return kinds.select(self.player.kind, self.player.fetcher, self.video.kind)

    @model_validator(mode="after")
    def _player_kind_fits(self) -> Scenario:
        """What the scenario asks of its player kind, judged by the kind's own check (the video it
        plays, where it runs, its ABR against the ladder and buffer)."""
        self.player_kind.check_scenario(self)
        return self

    @model_validator(mode="after")
    def _protocol_fits_player(self) -> Scenario:
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
        """The most media the player holds: what its kind says from its own settings (dash.js: the
        largest of its targets that applies to this video), else player.buffer or the default."""
        own = self.player_kind.playout_buffer
        if own is not None:
            return own(self.player, self.video.duration)
        if self.player.buffer is not None:
            return self.player.buffer
        return 30 * 10**9 if self.video.kind == "dash" else 2 * 10**9

    @property
    def dash_ladder(self) -> list[int]:
        return list(self.video.bitrates or STUDY_DASH_LADDER)

    @property
    def expected_subflows(self) -> int:
        return self.transport.subflows or len(self.paths)


def _real_hosts_kinds() -> str:
    return " or ".join(k.name for k in topologies.ENTRIES if k.real_hosts)


# ---------------------------------------------------------------------------------------------
# Loading, with errors that name the file, the field and what is allowed


class ScenarioError(InputError):
    """A scenario that cannot be run; str() is the full, user-facing explanation."""


def format_validation_error(source: str, err: ValidationError, quote: bool = True) -> str:
    """Each problem in words: the field, what is allowed, a short excerpt of what was given
    (mpvlab/input/messages.py; quote=False: no excerpt, for files the user did not name directly)."""
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
    Read with mpvlab/input/files.py (regular file, size limit, UTF-8, strict YAML); its trace files are
    checked by mpvlab/input/limits.py. quote=False: messages carry no excerpt of the file's values."""
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


def _expand_wildcards(data: dict[str, Any], assignments: dict[str, Any], source: str) -> dict[str, Any]:
    """`paths.*.down.buffer: 1MB` → one assignment per path (every key of the mapping at the `*`)."""
    out: dict[str, Any] = {}
    for dotted, value in assignments.items():
        keys = dotted.split(".")
        if "*" not in keys:
            out[dotted] = value
            continue
        i = keys.index("*")
        node: Any = data
        for k in keys[:i]:
            if not isinstance(node, dict) or k not in node:
                raise ScenarioError(f"{source}: {dotted}: no field {k!r} in the scenario")
            node = node[k]
        if not isinstance(node, dict) or not node:
            raise ScenarioError(f"{source}: {dotted}: `*` needs a mapping with at least one entry at "
                                f"{'.'.join(keys[:i])}")
        out.update(_expand_wildcards(data, {".".join([*keys[:i], k, *keys[i + 1:]]): value for k in node}, source))
    return out


def _unexpand_path_delays(data: dict[str, Any], assignments: dict[str, Any]) -> None:
    """A resolved path holds its path-level `delay` and the copy of it in each direction it names
    (topologies.spec.PathSpec). Before an override changes that `delay` (e.g. a sweep's
    `paths.wifi.delay.direction`), the copies go, so the new pattern or direction is copied afresh
    and no stale copy stays behind in a direction the pattern no longer names."""
    for pname, path in (data.get("paths") or {}).items():
        old = path.get("delay") if isinstance(path, dict) else None
        if not isinstance(old, dict) or not any(k == f"paths.{pname}.delay" or k.startswith(f"paths.{pname}.delay.")
                                                for k in assignments):
            continue
        targets = ("down", "up") if old.get("direction") == "both" else (old.get("direction"),)
        for name in targets:
            if isinstance(path.get(name), dict):
                path[name].pop("delay", None)


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
    if "player.kind" in assignments and assignments["player.kind"] != data["player"]["kind"]:
        # Another player starts from its own defaults (the other kind's settings are refused by it),
        # keeping what both understand: the ABR and the time limit. Not the buffer: dash.js takes its
        # own buffer targets (player.dashjs_*, from dash.js's defaults, as the study ran it) and no
        # player.buffer. Into kind gstreamer with an ABR of mpvlab/player/gstreamer/abr, that is our own client
        # (fetcher own), as in the DASH studies.
        old = data["player"]
        data["player"] = {"kind": assignments["player.kind"], "abr": old["abr"], "timeout_factor": old["timeout_factor"]}
        if assignments["player.kind"] == "gstreamer" and old["abr"] not in GST_DASH.abr_names():
            data["player"]["fetcher"] = "own"
    for dotted in assignments:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.([a-z0-9_-]+|\*))*", dotted):
            raise ScenarioError(f"{source}: bad parameter path {dotted!r}")
    assignments = _expand_wildcards(data, assignments, source)
    _unexpand_path_delays(data, assignments)
    for dotted, value in assignments.items():
        node: Any = data
        keys = dotted.split(".")
        for k in keys[:-1]:
            if not isinstance(node, dict) or k not in node:
                raise ScenarioError(f"{source}: {dotted}: no field {k!r} in the scenario")
            node = node[k]
        if not isinstance(node, dict):
            raise ScenarioError(f"{source}: {dotted}: {keys[-2]!r} is a value, not a section with fields")
        node[keys[-1]] = value
    return parse_scenario(data, source)
