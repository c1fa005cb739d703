"""The typed result: what `summary.json` holds, as pydantic models.

One model per topology kind (the discriminator is `topology`), built from shared parts defined once,
each part in its module under mpvlab/results/summary_parts/ (this module gathers their public names):
the player's QoE (`PlayerQoE`, flat in single-client runs, per player in shared-bottleneck runs),
per-path bytes (`PathRecord`), subflows, the HTTP record, the host's CPU steal, MPTCP counters.
The runner builds each part as its model where it makes it (summary_parts/base.py `build`: a wrong
key, type or a NaN fails there, naming the part and the field) and validates the whole summary against
this model before writing it, so a summary on disk always has this shape; `docs/summary.schema.json` is the JSON Schema generated from it
(`python -m mpvlab.results.summary > docs/summary.schema.json`; a test checks that the committed file is
current). Free-form parts (cross-checks, queue views, MIB counters) stay dicts of named records.

Every metric the report aggregates is declared in the parts, once, on the field that holds it: a `MetricDef`
in the field's annotation gives its label, unit, possible range, which direction is better, its
definition and where the convention comes from, the interval and test the report uses, and where the
report shows it (mpvlab/results/metricdef.py). mpvlab/results/metrics.py collects them from the model; a new field
with a MetricDef appears in the report's tables (and in the views it names) with nothing else to edit.
"""

from __future__ import annotations

import json
import sys
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Field, TypeAdapter

from mpvlab.topologies import registry as topologies

from mpvlab.results.summary_parts.base import (
    SKEWED, OpenRecord, Record, SummaryPartError, UnderflowEpisode, build, build_each, build_list, nonfinite_value)
from mpvlab.results.summary_parts.cross import (
    CrossTraffic, VoipQueuingDelay, VoipRecord, VoipSteadyWindow, VoipWindow, VoipWindows)
from mpvlab.results.summary_parts.kinds import (
    BytesTotal, DurationS, EmulatedFields, EmulatedSummary, KindFields, PathSwitches, PhysicalFields, PhysicalSummary,
    RunHead, SharedFields, SharedSummary, kind_fields)
from mpvlab.results.summary_parts.network import (
    BottleneckRecord, CCStateView, ClientCounters, CrossCheck, EcnMarks, FidelityRow, FlowStateRecord, HttpRecord,
    Mptcp, PathRecord, QueueDevice, RttPhase, Steal, Subflow, TbfCounters)
from mpvlab.results.summary_parts.observe import (
    BbrConnection, BbrDiagRecord, CaptureCrossCheckDefinition, CaptureFile, CaptureRecord, LatencyStats, LostEvents,
    SetFlagsCalls, StartupEpisode, SteeringConformance, SteeringLatency, SteeringRecord, WireConnection, WireCounts,
    WireNotCollected, WireParse, WireSubflow, WireSwitchesRecord, WireTotals)
from mpvlab.results.summary_parts.runchecks import (
    FidelityChecks, PlaybackCheck, PlaybackPlayerCheck, ProbeDelayCheck, SilenceCheck)
from mpvlab.results.summary_parts.player import CpuUse, DashView, PlayerQoE, PlayerStart, SharedAggregate, SharedPlayer
from mpvlab.results.summary_parts.workload import (
    BulkRecord, Competition, RtpDecodeRecord, RtpFpsRecord, RtpFreezeRecord, RtpRecord)

SCHEMA_VERSION = 1

__all__ = [
    "SCHEMA_VERSION", "SKEWED", "SUMMARY", "BbrConnection", "BbrDiagRecord", "BottleneckRecord", "BulkRecord",
    "BytesTotal", "CCStateView", "CaptureCrossCheckDefinition", "CaptureFile", "CaptureRecord", "ClientCounters",
    "Competition", "CpuUse", "CrossCheck", "CrossTraffic", "DashView", "DurationS", "EcnMarks", "EmulatedFields",
    "EmulatedSummary", "FidelityChecks", "FidelityRow", "FlowStateRecord", "HttpRecord", "KindFields", "LatencyStats",
    "LostEvents", "Mptcp", "OpenRecord", "PathRecord", "PathSwitches", "PhysicalFields", "PhysicalSummary",
    "PlaybackCheck", "PlaybackPlayerCheck", "PlayerQoE", "PlayerStart", "ProbeDelayCheck", "QueueDevice", "Record", "RtpDecodeRecord", "RtpFpsRecord", "RtpFreezeRecord", "RtpRecord", "RttPhase", "RunHead",
    "SetFlagsCalls", "SharedAggregate", "SharedFields", "SharedPlayer", "SharedSummary", "SilenceCheck",
    "StartupEpisode", "Steal", "SteeringConformance", "SteeringLatency", "SteeringRecord", "Subflow", "Summary",
    "SummaryPartError", "TbfCounters", "UnderflowEpisode", "VoipQueuingDelay", "VoipRecord", "VoipSteadyWindow",
    "VoipWindow", "VoipWindows", "WireConnection", "WireCounts", "WireNotCollected", "WireParse", "WireSubflow",
    "WireSwitchesRecord", "WireTotals", "build", "build_each", "build_list", "json_schema", "kind_fields", "kind_model",
    "nonfinite_value", "parts", "run_fields", "validated", "validated_by_part",
]

Summary = Annotated[EmulatedSummary | PhysicalSummary | SharedSummary, Field(discriminator="topology")]
SUMMARY = TypeAdapter(Summary)


def validated(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as the model reads it back (raises pydantic.ValidationError naming the field; a NaN or
    ±Infinity anywhere, free-form records included, is refused as the reader refuses it). The dict
    written is the one given: validation checks its shape, it never rewrites values."""
    SUMMARY.validate_python(summary)
    return summary


def _records(model: Any) -> tuple[str, type[BaseModel]] | None:
    """('one' | 'each', the part's model) when a field's type is a part: a model, or a mapping or list of
    models (None allowed); None for plain values."""
    args = [a for a in get_args(model) if a is not type(None)] if get_origin(model) in (Union, UnionType) else [model]
    if len(args) != 1:
        return None
    t = args[0]
    if isinstance(t, type) and issubclass(t, BaseModel):
        return "one", t
    inner = get_args(t)[-1:] if get_origin(t) in (dict, list) else ()
    if inner and isinstance(inner[0], type) and issubclass(inner[0], BaseModel):
        return "each", inner[0]
    return None


def kind_model(topology: str) -> type[BaseModel]:
    """The summary model of a topology kind (its registry entry's `summary`)."""
    model: type[BaseModel] = getattr(sys.modules[__name__], topologies.get(topology).summary)
    return model


def run_fields(topology: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The kind's plain fields of `summary` (kinds.py KindFields) built as the part `run fields`: a wrong
    type fails naming the field. Returns `summary` itself."""
    fields = kind_fields(kind_model(topology))
    build(fields, "run fields", {k: summary[k] for k in fields.model_fields if k in summary})
    return summary


def parts(summary: dict[str, Any]) -> list[tuple[str, type[BaseModel], dict[str, Any]]]:
    """The summary cut into the parts the runner builds: (part name as `build` names it, its model, its
    data). The run head, the kind's plain fields and, in single-client runs, the flat player QoE are
    parts of the top level."""
    kind = kind_model(str(summary.get("topology")))
    out: list[tuple[str, type[BaseModel], dict[str, Any]]] = []
    for flat, name in ((RunHead, "run head"), (kind_fields(kind), "run fields"), (PlayerQoE, "player QoE")):
        if issubclass(kind, flat):
            out.append((name, flat, {k: summary[k] for k in flat.model_fields if k in summary}))
    for key, info in kind.model_fields.items():
        part, value = _records(info.annotation), summary.get(key)
        if part is None or value is None:
            continue
        if part[0] == "one":
            out.append((key, part[1], value))
        elif isinstance(value, dict):
            out += [(f"{key}.{k}", part[1], v) for k, v in value.items()]
        else:
            out += [(f"{key}[{i}]", part[1], v) for i, v in enumerate(value)]
    return out


def validated_by_part(summary: dict[str, Any]) -> list[str]:
    """Every part of `summary` built as its model (SummaryPartError naming the first wrong part), then
    the whole; returns the parts' names."""
    for name, model, data in parts(summary):
        build(model, name, data)
    validated(summary)
    return [name for name, _, _ in parts(summary)]


def json_schema() -> dict[str, Any]:
    schema = SUMMARY.json_schema()
    schema["title"] = "mpvlab summary.json"
    schema["$comment"] = f"generated from mpvlab/results/summary.py (schema version {SCHEMA_VERSION}); do not edit"
    return schema


if __name__ == "__main__":
    json.dump(json_schema(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
