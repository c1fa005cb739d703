"""The scenario's own sections: the namespaces' TCP settings (`hosts`), the congestion control and
MPTCP scheduler with their parameters (`transport`) and the pre-run link checks (`fidelity`).

Split out of mpvlab/input/scenario.py (issue 46), which composes them with the components' models;
they are imported from there as before. Each validator resolves its parameters against the
component's own registry (mpvlab/cc/registry.py, mpvlab/schedulers/registry.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from mpvlab.cc import registry as cc_registry
from mpvlab.core.quantities import Duration, Size, Strict
from mpvlab.input import messages
from mpvlab.schedulers import registry as scheduler_registry
from mpvlab.topologies import registry as topologies

class HostSpec(Strict):
    """Per-namespace TCP settings, recorded in provenance. The client's receive buffer matters: new
    namespaces here default to a 32 MB maximum, which hides a whole throttle from a player."""

    client_tcp_rmem: tuple[Size, Size, Size] = Field((4096, 131072, 6291456), description="net.ipv4.tcp_rmem (min, default, max receive buffer) in the client's namespace.")
    server_tcp_wmem: tuple[Size, Size, Size] = Field((4096, 16384, 4194304), description="net.ipv4.tcp_wmem (min, default, max send buffer) in the server's namespace.")
    tcp_no_metrics_save: bool = Field(True, description="net.ipv4.tcp_no_metrics_save in the namespaces: true = no TCP metrics carried from one connection to the next.")
    offloads: bool = Field(
        False, description="TSO/GSO/GRO on the emulated links; off by default so rate samples see real packets"
    )


class TransportSpec(Strict):
    """scheduler: `default` is the kernel's own; the others are steering policies on the sender
    (mpvlab/schedulers/registry.py lists them, schedulers/README.md explains them). scheduler_params are that
    scheduler's (mpvlab/schedulers/params.py), with every default filled in when resolved."""

    cc: str = Field("cubic", description="Congestion control of the video/bulk connection: a name in mpvlab/cc/registry.py, or {bpf: FILE, params: {...}}.")
    cc_params: dict[str, Any] = Field(default_factory=dict, description="That CC's parameters (mpvlab/cc/registry.py); every default filled in when resolved.")
    scheduler: str = Field("default", description="MPTCP packet scheduler: `default` (the kernel's) or a name in mpvlab/schedulers/registry.py.")
    scheduler_params: dict[str, Any] = Field(default_factory=dict, description="That scheduler's parameters (mpvlab/schedulers/params.py); every default filled in when resolved.")

    @field_validator("cc")
    @classmethod
    def _known_cc(cls, v: str) -> str:
        cc_registry.get(v)      # ValueError naming the registry's CCs and the kernel's list
        return v

    @model_validator(mode="before")
    @classmethod
    def _resolve_cc_params(cls, data: Any) -> Any:
        """cc_params are the chosen CC's (mpvlab/cc/registry.py), with every default filled in. A CC without
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
            # each in words as any other field's (mpvlab/input/messages.py), not pydantic's `Value error, …`
            raise ValueError("; ".join(
                f"cc_params.{messages.field_name(tuple(err['loc']))}: "
                + (f"unknown key for cc {name!r}; allowed: {', '.join(entry.params.model_fields)}"
                   if err["type"] == "extra_forbidden"
                   else messages.describe_error(err, entry.params).split(": ", 1)[-1])
                for err in e.errors())) from None
        return {**data, "cc_params": params.model_dump()}

    @property
    def cc_entry(self) -> cc_registry.CongestionControl:
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
    subflows: int | None = Field(None, ge=1, le=topologies.MAX_PATHS, description="MPTCP subflows expected, one per path from the first (at most the number of paths, 8); default: one per path")


class FidelitySpec(Strict):
    probe: bool = Field(True, description="Physical runs: ping and rate-probe each path before the run; emulated runs always run their pre-check.")
    rtt_tolerance: Duration = Field(2 * 10**6, description="Largest pre-run RTT error (measured vs configured) before a path gets a warning.")
    rate_tolerance: float = Field(0.05, gt=0.0, lt=1.0, description="Largest relative error of the measured vs configured rate before a warning (0.05 = ±5 %).")
    # Physical runs' probes. Emulated runs use the fixed, kernel-measured pre-check instead
    # (mpvlab/runner/precheck.py: 300 RTT samples per path, ~0.6 s of backlogged tbf) and the whole-run verdict.
    probe_duration: Duration = Field(3 * 10**9, description="Physical runs: length of each path's rate probe (a plain-TCP download), 1s … 60s.")
