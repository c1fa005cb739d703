"""JSON Schemas of the scenario and sweep-spec files and the reference pages, generated from the
pydantic models — never written by hand (`python -m mpvlab.schemas` rewrites them; tests/test_docs.py
fails when a committed file differs from what the models give).

- docs/schemas/scenario.schema.json, docs/schemas/sweep.schema.json: for editors (a
  `# yaml-language-server: $schema=…` line in a YAML file gives completion and checks). They check
  keys, types, enumerations and the shape of quantities; `mpvlab validate` checks everything else.
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
            d["properties"][fname] = {"anyOf": [prop, {"type": ["string", "number"]}], "x-shorthand": doc, **kept}
    return schema


def file_schema(model: type[BaseModel], what: str, source: str) -> dict[str, Any]:
    v = model.model_json_schema(mode="validation")
    s = model.model_json_schema(mode="serialization")
    out = _with_shorthands(_with_written_defaults(v, s), model)
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$comment"] = f"generated from {source} by `python -m mpvlab.schemas`; do not edit"
    out["title"] = what
    return out


def _type_text(prop: dict[str, Any]) -> str:
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
    sections = [(root.__name__, schema)] + sorted(schema.get("$defs", {}).items())
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
    sw = file_schema(SweepSpec, "mpvlab sweep spec", "mpvlab/input/sweep.py")
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
