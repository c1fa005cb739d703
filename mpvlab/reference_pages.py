"""The reference pages (docs/reference/scenario.md, sweep.md, summary.md), rendered from the
generated JSON Schemas: every field with its type, unit, default, allowed values and meaning. The
meaning is the field's `description`, else the comment on the field's line in the model's source
(the project writes its field documentation there), else it says that the model has none.

Split out of mpvlab/schemas.py (issue 46), which builds the schemas and writes these pages with them
(`python -m mpvlab.schemas`)."""

from __future__ import annotations

import inspect
import json
import re
import typing
from typing import Any

from pydantic import BaseModel

NO_MEANING = "(no description in the model yet)"


def models_below(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
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
    models = models_below(root)
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
