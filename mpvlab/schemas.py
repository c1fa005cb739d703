"""JSON Schemas of the scenario and sweep-spec files and the reference pages, generated from the
pydantic models — never written by hand (`python -m mpvlab.schemas` rewrites them; tests/test_docs.py
fails when a committed file differs from what the models give).

- docs/schemas/scenario.schema.json, docs/schemas/sweep.schema.json: for editors (a
  `# yaml-language-server: $schema=…` line in a YAML file gives completion and checks). They check
  keys, types, enumerations, each quantity's unit family, the registries' names and parameters (cc,
  scheduler, ABR) and each topology's path count (mpvlab/schema_rules.py); `mpvlab validate` checks everything else (the rules
  a JSON Schema cannot state: tests/test_bad_inputs.py BEYOND_THE_SCHEMA, docs/robustness.md).
- docs/reference/scenario.md, sweep.md, summary.md: every field with its type, unit, default,
  allowed values and meaning (rendered by mpvlab/reference_pages.py). The meaning is the field's
  `description`, else the comment on the field's line in the model's source (the project writes its
  field documentation there), else it says that the model has none.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mpvlab.core.paths import checkout_root
# The registries' rules and the sweep's dotted keys (schema_rules.py) and the reference pages
# (reference_pages.py) are their own modules (issue 46); this one shapes the models' schemas and
# writes every generated file. NO_MEANING is re-exported: tests/test_docs.py asks for it here.
from mpvlab.reference_pages import NO_MEANING as NO_MEANING, models_below, reference_page, summary_page
from mpvlab.schema_rules import with_dotted_values, with_registry_rules

REPO = checkout_root()
SCHEMA_DIR = REPO / "docs" / "schemas"
REFERENCE_DIR = REPO / "docs" / "reference"


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

    models = models_below(root)
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


def file_schema(model: type[BaseModel], what: str, source: str) -> dict[str, Any]:
    v = model.model_json_schema(mode="validation")
    s = model.model_json_schema(mode="serialization")
    out = with_registry_rules(_with_shorthands(_with_written_defaults(v, s), model))
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$comment"] = f"generated from {source} by `python -m mpvlab.schemas`; do not edit"
    out["title"] = what
    return out


def generated_files() -> dict[Path, str]:
    from mpvlab.input.scenario import Scenario
    from mpvlab.input.sweep import SweepSpec
    from mpvlab.results import checks
    sc = file_schema(Scenario, "mpvlab scenario", "mpvlab/input/scenario.py")
    sw = with_dotted_values(file_schema(SweepSpec, "mpvlab sweep spec", "mpvlab/input/sweep.py"), sc)
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
