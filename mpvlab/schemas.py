"""JSON Schemas of the scenario and sweep-spec files and the reference pages, generated from the
pydantic models — never written by hand (`python -m mpvlab.schemas` rewrites them; tests/test_docs.py
fails when a committed file differs from what the models give).

- docs/schemas/scenario.schema.json, docs/schemas/sweep.schema.json: for editors (a
  `# yaml-language-server: $schema=…` line in a YAML file gives completion and checks). They check
  keys, types, enumerations, each quantity's unit family, the registries' names and parameters (cc,
  scheduler, ABR) and each topology's path count; `mpvlab validate` checks everything else (the rules
  a JSON Schema cannot state: tests/test_bad_inputs.py BEYOND_THE_SCHEMA, docs/robustness.md).
- docs/reference/scenario.md, sweep.md, summary.md: every field with its type, unit, default,
  allowed values and meaning. The meaning is the field's `description`, else the comment on the
  field's line in the model's source (the project writes its field documentation there), else it
  says that the model has none.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mpvlab.core.paths import checkout_root

REPO = checkout_root()
SCHEMA_DIR = REPO / "docs" / "schemas"
REFERENCE_DIR = REPO / "docs" / "reference"
NO_MEANING = "(no description in the model yet)"


def _models_below(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from `root`'s fields, by class name (the JSON Schema's $defs keys)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ not in found:
                found[tp.__name__] = tp
                for f in tp.model_fields.values():
                    visit(f.annotation)
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(root)
    return found


def _field_comments(model: type[BaseModel]) -> dict[str, str]:
    """`name: type = default  # comment` → {name: comment}, from the class's own source lines (a
    continuation line starting with `#` right after extends it)."""
    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    last: str | None = None
    above: list[str] = []        # a comment block right above a field documents it too
    for line in lines:
        m = re.match(r"^\s{4}(\w+)\s*:[^#]*#\s?(.*)$", line)
        if m and m.group(1) in model.model_fields:
            out[m.group(1)] = " ".join([*above, m.group(2).strip()])
            last, above = m.group(1), []
            continue
        plain = re.match(r"^\s{4}(\w+)\s*:", line)
        if plain and plain.group(1) in model.model_fields:
            if above:
                out[plain.group(1)] = " ".join(above)
            last, above = plain.group(1), []
            continue
        block = re.match(r"^\s{4}#\s?(.*)$", line)
        if block:
            above.append(block.group(1).strip())
            last = None
            continue
        above = []
        cont = re.match(r"^\s{8,}#\s?(.*)$", line)
        if cont and last is not None:
            out[last] += " " + cont.group(1).strip()
            continue
        last = None
    return out


def _with_written_defaults(validation: dict[str, Any], serialization: dict[str, Any]) -> dict[str, Any]:
    """A quantity's default as written in a file ("30s", not 30000000000 ns): from the serialization
    schema (pydantic applies the field's serializer there), at the same place."""
    def fix(v: dict[str, Any], s: dict[str, Any]) -> None:
        for name, prop in v.get("properties", {}).items():
            sp = s.get("properties", {}).get(name, {})
            if "x-unit" in prop and "default" in sp:
                prop["default"] = sp["default"]
    fix(validation, serialization)
    for name, d in validation.get("$defs", {}).items():
        fix(d, serialization.get("$defs", {}).get(name, {}))
    return validation


class SchemaMismatch(RuntimeError):
    """A generated schema would accept a value that the model refuses."""


def _admits_mapping(prop: dict[str, Any]) -> bool:
    """Whether a property's schema accepts a JSON object (a referenced model, or type object)."""
    if "$ref" in prop or prop.get("type") == "object":
        return True
    return any(_admits_mapping(p) for p in [*prop.get("anyOf", []), *prop.get("oneOf", [])])


def _passes_mapping_through(func: Any) -> bool:
    """Whether a before-validator hands a mapping on to the type's own validation (a shorthand such
    as `delay: 20ms` does; a parser of written strings does not). Called on an empty dict: the
    project's shorthand validators are pure functions of their argument."""
    probe: dict[str, Any] = {}
    try:
        return func(probe) is probe
    except Exception:    # noqa: BLE001 — any refusal means "not passed through"
        return False


def _shorthand_form(func: Any) -> dict[str, Any]:
    """What a shorthand may write: its declared form's schema (core/quantities.written_as), else any
    string or number (the validator's own check decides)."""
    form = getattr(func, "written_form", None)
    if form is None:
        return {"type": ["string", "number"]}
    from pydantic import TypeAdapter
    written = TypeAdapter(form).json_schema(mode="validation")
    return {k: v for k, v in written.items() if k not in ("x-unit", "examples")}


def _with_shorthands(schema: dict[str, Any], root: type[BaseModel]) -> dict[str, Any]:
    """A field with a BeforeValidator accepts a shorthand the schema of its type does not show
    (`delay: 20ms` for `{kind: constant, value: 20ms}`): its property also allows a string or number,
    described by the validator's docstring. Quantities (x-unit) already say what is written."""
    from pydantic.functional_validators import BeforeValidator

    models = _models_below(root)
    for name, d in [(root.__name__, schema), *schema.get("$defs", {}).items()]:
        cls = models.get(name)
        if cls is None:
            continue
        for fname, info in cls.model_fields.items():
            prop = d.get("properties", {}).get(fname)
            shorthand = next((m for m in info.metadata if isinstance(m, BeforeValidator)), None)
            if prop is None or shorthand is None or "x-unit" in prop:
                continue
            if _admits_mapping(prop) and not _passes_mapping_through(shorthand.func):
                # pydantic's schema here is the parsed type's (an object), but the validator refuses
                # that form: the schema would accept what `mpvlab validate` refuses (ecn_mark.threshold
                # once published {ns, bytes}). The type must declare what a file writes.
                raise SchemaMismatch(
                    f"{name}.{fname}: its validator {shorthand.func.__qualname__} refuses a mapping, but the "
                    "schema pydantic gives its type accepts one; declare the written form with WithJsonSchema "
                    "(as mpvlab/core/quantities.py does)")
            doc = (inspect.getdoc(shorthand.func) or "a shorthand").splitlines()[0]
            kept = {k: prop.pop(k) for k in ("default", "title", "description") if k in prop}
            d["properties"][fname] = {"anyOf": [prop, _shorthand_form(shorthand.func)], "x-shorthand": doc, **kept}
    return schema


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


def _with_registry_rules(schema: dict[str, Any]) -> dict[str, Any]:
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


def _with_dotted_values(sweep: dict[str, Any], scenario: dict[str, Any]) -> dict[str, Any]:
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


def file_schema(model: type[BaseModel], what: str, source: str) -> dict[str, Any]:
    v = model.model_json_schema(mode="validation")
    s = model.model_json_schema(mode="serialization")
    out = _with_registry_rules(_with_shorthands(_with_written_defaults(v, s), model))
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$comment"] = f"generated from {source} by `python -m mpvlab.schemas`; do not edit"
    out["title"] = what
    return out


def _type_text(prop: dict[str, Any]) -> str:
    if "x-type" in prop:
        return str(prop["x-type"])
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "x-unit" in prop:
        return "quantity"
    if "anyOf" in prop:
        parts = [_type_text(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(dict.fromkeys(parts)) + (" or null" if any(p.get("type") == "null" for p in prop["anyOf"]) else "")
    if "oneOf" in prop:
        return " or ".join(_type_text(p) for p in prop["oneOf"])
    t = prop.get("type", "any")
    if t == "array":
        return f"list of {_type_text(prop.get('items', {}))}"
    if t == "object" and ("additionalProperties" in prop or "patternProperties" in prop):
        inner: Any = prop.get("additionalProperties") or next(iter(prop.get("patternProperties", {}).values()), {})
        return f"map of name → {_type_text(inner) if isinstance(inner, dict) else 'any'}"
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    return str(t)


def _allowed_text(prop: dict[str, Any]) -> str:
    if "x-allowed" in prop:          # generated from a registry (cc, abr): said once, in words
        return prop["x-allowed"].replace("|", "\\|")
    bits: list[str] = []
    for p in [prop, *prop.get("anyOf", [])]:
        if "enum" in p:
            bits.append(", ".join(f"`{e}`" for e in p["enum"]))
        if "const" in p and p is not prop:
            bits.append(f"`{p['const']}`")
        for k, sym in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"),
                       ("minItems", "items ≥"), ("maxItems", "items ≤"), ("minLength", "length ≥"),
                       ("maxLength", "length ≤")):
            if k in p and not (k == "minimum" and "x-unit" in prop):
                bits.append(f"{sym} {p[k]}")
        if "pattern" in p and "x-unit" not in prop:
            bits.append(f"pattern `{p['pattern']}`")
        if "patternProperties" in p:
            bits.append("names: " + ", ".join(f"`{k}`" for k in p["patternProperties"]))
    if "x-written" in prop:
        bits.append(prop["x-written"])
    if "x-shorthand" in prop:
        bits.append("shorthand: " + prop["x-shorthand"])
    return "; ".join(bits).replace("|", "\\|") or "—"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def reference_page(title: str, intro: str, schema: dict[str, Any], root: type[BaseModel]) -> str:
    models = _models_below(root)
    out = [f"# {title}", "", "<!-- generated by `python -m mpvlab.schemas` from the pydantic models; do not edit -->",
           "", intro, ""]
    # only the root model's own: the registries' parameter models (`cc-…`, `abr-…` $defs) are documented
    # with their registries, and the scenario's models a sweep's schema borrows in the scenario reference
    sections = [(root.__name__, schema)] + sorted((n, d) for n, d in schema.get("$defs", {}).items() if n in models)
    for name, d in sections:
        cls = models.get(name)
        comments = _field_comments(cls) if cls else {}
        out += [f"## {name}", ""]
        if d.get("description"):
            out += [_cell(d["description"]), ""]
        required = set(d.get("required", []))
        out += ["| field | type | unit | default | allowed values | meaning |", "|---|---|---|---|---|---|"]
        for fname, prop in d.get("properties", {}).items():
            meaning = prop.get("description") or comments.get(fname) or NO_MEANING
            default = "required" if fname in required else (f"`{json.dumps(prop['default'])}`" if "default" in prop else "—")
            out.append(f"| `{fname}` | {_type_text(prop)} | {prop.get('x-unit', '—')} | {_cell(default)} | "
                       f"{_allowed_text(prop)} | {_cell(meaning)} |")
        out.append("")
    return "\n".join(out)


def summary_page() -> str:
    """Every summary.json field with its unit and source, from the summary model's MetricDef (mpvlab/results/summary.py)."""
    from mpvlab.results import summary
    schema = summary.json_schema()
    out = ["# summary.json reference", "", "<!-- generated by `python -m mpvlab.schemas` from mpvlab/results/summary.py; do not edit -->",
           "", "Every field of a run's `summary.json`: type, unit and where the number comes from (the metric's "
           "definition on the summary model). The machine-readable form is `docs/summary.schema.json`.", ""]
    for name, d in sorted(schema.get("$defs", {}).items()):
        if not d.get("properties"):
            continue
        out += [f"## {name}", ""]
        if d.get("description"):
            out += [_cell(d["description"]), ""]
        out += ["| field | type | unit | meaning | source |", "|---|---|---|---|---|"]
        for fname, prop in d.get("properties", {}).items():
            metric = prop.get("x-metric", {})
            unit = metric.get("unit") or "—"
            meaning = metric.get("definition") or prop.get("description") or NO_MEANING
            source = metric.get("source") or "—"
            out.append(f"| `{fname}` | {_type_text(prop)} | {_cell(str(unit))} | {_cell(meaning)} | {_cell(source)} |")
        out.append("")
    return "\n".join(out)


def generated_files() -> dict[Path, str]:
    from mpvlab.input.scenario import Scenario
    from mpvlab.input.sweep import SweepSpec
    from mpvlab.results import checks
    sc = file_schema(Scenario, "mpvlab scenario", "mpvlab/input/scenario.py")
    sw = _with_dotted_values(file_schema(SweepSpec, "mpvlab sweep spec", "mpvlab/input/sweep.py"), sc)
    dump = lambda d: json.dumps(d, indent=1, sort_keys=True, ensure_ascii=False) + "\n"  # noqa: E731
    return {
        SCHEMA_DIR / "scenario.schema.json": dump(sc),
        SCHEMA_DIR / "sweep.schema.json": dump(sw),
        REFERENCE_DIR / "scenario.md": reference_page(
            "Scenario reference", "Every field of a scenario file (`scenarios/*.yaml`). Quantities are written with "
            "their unit (`3mbit`, `100KB`, `20ms`); the unit column is what they are stored in. JSON Schema: "
            "`docs/schemas/scenario.schema.json`.", sc, Scenario),
        REFERENCE_DIR / "sweep.md": reference_page(
            "Sweep spec reference", "Every field of a sweep spec (`sweeps/*.yaml`). JSON Schema: "
            "`docs/schemas/sweep.schema.json`.", sw, SweepSpec),
        REFERENCE_DIR / "summary.md": summary_page(),
        REFERENCE_DIR / "cross-checks.md": checks.table_page(),
    }


def main() -> int:
    for path, text in generated_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
