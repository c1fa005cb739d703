"""What the generated JSON Schemas spell out beyond the schema pydantic gives the models: the
registries' decisions (the allowed CC, scheduler and ABR names with each one's parameter model, each
topology kind's path count, a DASH video's non-zero buffer) and, for a sweep spec, the scenario's
schema at each dotted key its grid and overrides may set.

Split out of mpvlab/schemas.py (issue 46), which shapes the models' schemas and writes the files
(`python -m mpvlab.schemas`); it calls `with_registry_rules` and `with_dotted_values`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel


# --- rules from the registries (issue 45 item 6, issue 49 item 2) ----------------------------------
# The models keep cc, scheduler and abr as names and their parameters as mappings (the registries
# decide, at validation); the schema spells out the same decisions, generated from the same
# registries: the allowed names, each one's parameter model, and each topology kind's path count.


def _is(field: str, value: Any, default: Any) -> dict[str, Any]:
    """A condition: `field` equals `value` (written, or left out when `value` is its default)."""
    given = {"required": [field], "properties": {field: {"const": value}}}
    return {"anyOf": [{"not": {"required": [field]}}, given]} if value == default else given


def _inline(model: type[BaseModel], defs: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`model`'s JSON Schema, its own $defs moved into `defs` under `prefix` (names stay unique)."""
    schema = model.model_json_schema(mode="validation")
    own = schema.pop("$defs", {})

    def rename(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (f"#/$defs/{prefix}{v.rsplit('/', 1)[1]}" if k == "$ref" else rename(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [rename(x) for x in node]
        return node
    for name, d in own.items():
        defs[f"{prefix}{name}"] = rename(d)
    return rename(schema)


NO_PARAMS = {"type": "object", "maxProperties": 0}


def _params_by_name(names: dict[str, type[BaseModel] | None], field: str, default: str, params: str,
                    defs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """One if/then per name: when `field` is that name, `params` follows its parameter model (none: empty)."""
    return [{"if": _is(field, name, default),
             "then": {"properties": {params: _inline(model, defs, f"{prefix}{name}-") if model else NO_PARAMS}}}
            for name, model in names.items()]


def _transport_rules(t: dict[str, Any], defs: dict[str, Any]) -> None:
    from mpvlab.cc import registry as cc_registry
    from mpvlab.input.scenario import TransportSpec
    from mpvlab.schedulers import registry as scheduler_registry
    cc_default = TransportSpec.model_fields["cc"].default
    sched_default = TransportSpec.model_fields["scheduler"].default
    ccs = {n: e.params for n, e in cc_registry.REGISTRY.items()}
    bpf_model = ccs["bpf"]
    assert bpf_model is not None
    props = t["properties"]
    props["cc"] = {
        "anyOf": [{"type": "string", "enum": list(ccs)},
                  {"type": "string", "pattern": cc_registry.KERNEL_CC_RE.pattern,
                   "description": "a congestion control the running kernel lists "
                                  f"({cc_registry.AVAILABLE_FILE}); `mpvlab validate` checks it on that machine"},
                  _inline(bpf_model, defs, "cc-bpf-form-")],
        **{k: props["cc"][k] for k in ("default", "description", "title") if k in props["cc"]},
        "x-type": "string or mapping",
        "x-allowed": ", ".join(f"`{n}`" for n in ccs) + ", a CC the kernel lists, or `{bpf: FILE, params: {NAME: INT}}`",
    }
    props["scheduler"] = {**props["scheduler"], "enum": list(scheduler_registry.REGISTRY)}
    rules = _params_by_name(ccs, "cc", cc_default, "cc_params", defs, "cc-")
    rules.append({"if": {"required": ["cc"], "properties": {"cc": {"type": "object"}}},
                  "then": {"properties": {"cc_params": NO_PARAMS}}})     # the bpf form carries its own
    rules += _params_by_name({n: e.params for n, e in scheduler_registry.REGISTRY.items()}, "scheduler",
                             sched_default, "scheduler_params", defs, "scheduler-")
    t["allOf"] = rules


def _player_rules(p: dict[str, Any], defs: dict[str, Any]) -> None:
    """The ABRs (and their abr_params) each player kind takes, from its registry entry."""
    from mpvlab.player.dashjs.kind import DASHJS, DASHJS_ABRS
    from mpvlab.player.gstreamer.kind import GST_DASH, OWN_DASH
    from mpvlab.workloads.video import PlayerSpec
    default = PlayerSpec.model_fields["abr"].default            # gst: dash.js reads it as dynamic
    dashjs: dict[str, type[BaseModel] | None] = {default: None, **DASHJS.abrs()}
    own: dict[str, type[BaseModel] | None] = dict(OWN_DASH.abrs())
    dashdemux = GST_DASH.abr_names()
    p["allOf"] = [{
        "if": {"required": ["kind"], "properties": {"kind": {"const": DASHJS.player_kind}}},
        # dash.js has no one playout buffer: its targets are the dashjs_* fields (issue 47)
        "then": {"properties": {"abr": {"enum": list(dashjs)}, "buffer": {"type": "null"}},
                 "allOf": _params_by_name(dashjs, "abr", default, "abr_params", defs, "abr-dashjs-")},
        "else": {
            "if": {"required": ["fetcher"], "properties": {"fetcher": {"const": OWN_DASH.fetcher}}},
            "then": {"required": ["abr"], "properties": {"abr": {"enum": list(own)}},
                     "allOf": _params_by_name(own, "abr", default, "abr_params", defs, "abr-own-")},
            "else": {"properties": {"abr": {"enum": list(dashdemux)}, "abr_params": NO_PARAMS}},
        },
    }]
    p["properties"]["abr"]["x-allowed"] = (
        "dashdemux: " + ", ".join(f"`{n}`" for n in dashdemux) + "; fetcher own: " + ", ".join(f"`{n}`" for n in own)
        + "; kind dashjs: " + ", ".join(f"`{n}`" for n in DASHJS_ABRS))


def _path_count_rules(root: dict[str, Any]) -> None:
    from mpvlab.topologies.spec import TopologySpec
    from mpvlab.topologies import registry as topologies
    default = TopologySpec.model_fields["kind"].default
    rules = []
    for kind in topologies.ENTRIES:
        cond = _is("kind", kind.name, default)
        topo = {"required": ["topology"], "properties": {"topology": cond}}
        lo, hi = kind.paths
        rules.append({"if": {"anyOf": [{"not": {"required": ["topology"]}}, topo]} if kind.name == default else topo,
                      "then": {"properties": {"paths": {"minProperties": lo, "maxProperties": hi}}}})
    root["allOf"] = [*root.get("allOf", []), *rules]


def _dash_buffer_rule(root: dict[str, Any]) -> None:
    """A DASH video needs a playout buffer above zero (mpvlab/input/scenario.py): zero written any way."""
    from mpvlab.core import units
    zero = {"anyOf": [{"type": "number", "const": 0},
                      {"type": "string", "pattern": rf"^\s*0+(\.0+)?\s*({'|'.join(units.TIME_UNITS_NS)})\s*$"}]}
    dash = {"required": ["video"], "properties": {"video": {"required": ["kind"], "properties": {"kind": {"const": "dash"}}}}}
    root["allOf"] = [*root.get("allOf", []), {
        "if": dash, "then": {"properties": {"player": {"properties": {"buffer": {"not": zero}}}}}}]


def with_registry_rules(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.setdefault("$defs", {})
    extra: dict[str, Any] = {}
    if "TransportSpec" in defs:
        _transport_rules(defs["TransportSpec"], extra)
    if "PlayerSpec" in defs:
        _player_rules(defs["PlayerSpec"], extra)
    if "paths" in schema.get("properties", {}) and "topology" in schema.get("properties", {}):
        _path_count_rules(schema)
    if "video" in schema.get("properties", {}) and "player" in schema.get("properties", {}):
        _dash_buffer_rule(schema)
    defs.update(extra)
    return schema


# --- a sweep's grid and override values: the scenario's schema at each dotted key ---------------------


def _pointer(*parts: str) -> str:
    """A JSON Pointer URI fragment (RFC 6901, then percent-encoded: a pattern holds ^ [ ] { } \\)."""
    from urllib.parse import quote
    return "#" + "".join("/" + quote(p.replace("~", "~0").replace("/", "~1"), safe="$") for p in parts)


def _dotted_fields(scenario: dict[str, Any]) -> dict[str, list[str]]:
    """Every dotted key a sweep may set (`paths.<name>.down.rate`, `transport.cc`; a path name may be
    `*`), as a regex, with references to the scenario schema's alternatives for the value there (the
    scenario's root is $defs/Scenario in the sweep's schema). The keys inside a registry's parameters
    (`transport.cc_params.window`) depend on another field: left to `validate`."""
    defs = scenario.get("$defs", {})
    out: dict[str, list[str]] = {}

    def walk(node: dict[str, Any], at: tuple[str, ...], prefix: str, seen: tuple[str, ...]) -> None:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            if name not in seen and name in defs:
                walk(defs[name], ("$defs", name), prefix, (*seen, name))
            return
        for union in ("anyOf", "oneOf"):
            for i, alt in enumerate(node.get(union, [])):
                walk(alt, (*at, union, str(i)), prefix, seen)
        children = [(re.escape(k), ("properties", k), v) for k, v in node.get("properties", {}).items()]
        children += [(f"({p.strip('^$')}|\\*)", ("patternProperties", p), v)
                     for p, v in node.get("patternProperties", {}).items()]
        for key, where, sub in children:
            dotted = f"{prefix}{key}"
            out.setdefault(dotted, []).append(_pointer(*at, *where))
            walk(sub, (*at, *where), dotted + "\\.", seen)

    walk(scenario, ("$defs", "Scenario"), "", ())
    return out


def with_dotted_values(sweep: dict[str, Any], scenario: dict[str, Any]) -> dict[str, Any]:
    """The sweep's `grid` (lists) and `overrides` (values), and the same under `quick`, check the value at
    each known dotted key against the scenario's schema there (a value replaces what is at its key,
    mpvlab/input/scenario.py `override`); an unknown key is left to `validate`."""
    from mpvlab.input.sweep import RESERVED
    fields = _dotted_fields(scenario)
    defs = sweep.setdefault("$defs", {})
    defs.update({n: d for n, d in scenario.get("$defs", {}).items() if n not in defs})
    defs["Scenario"] = {k: v for k, v in scenario.items() if not k.startswith("$") and k != "title"}
    value_at = {f"^{k}$": ({"$ref": refs[0]} if len(refs) == 1 else {"anyOf": [{"$ref": r} for r in refs]})
                for k, refs in fields.items() if k.split("\\.")[0] not in RESERVED}
    said = ("a dotted scenario path (docs/reference/scenario.md; a path name may be `*`), not `name` or `seed`; "
            "each value is checked as that field's")
    # `name` and `seed` are never varied (they decide the results folder and the derived seeds)
    not_reserved = {"not": {"pattern": f"^({'|'.join(map(re.escape, RESERVED))})(\\.|$)"}}
    for holder in [sweep, defs.get("QuickSpec", {})]:
        props = holder.get("properties", {})
        if "grid" in props:
            props["grid"]["patternProperties"] = {k: {"type": "array", "items": v, "minItems": 1}
                                                  for k, v in value_at.items()}
            props["grid"]["additionalProperties"] = {**props["grid"].get("additionalProperties", {}), "minItems": 1}
            props["grid"]["propertyNames"] = not_reserved
            props["grid"]["x-allowed"] = said + ", in a list of at least one"
        if "overrides" in props:
            props["overrides"]["patternProperties"] = value_at
            props["overrides"]["propertyNames"] = not_reserved
            props["overrides"]["x-allowed"] = said
    return sweep
