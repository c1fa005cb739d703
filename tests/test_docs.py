"""The documentation site and the generated files: the site builds with `mkdocs build --strict` (a broken
link, anchor or nav entry fails), the JSON Schemas and reference pages are what the models give
today, every scenario field is in the reference, and the schemas accept every shipped file and reject
a misspelt key."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from mpvlab import schemas
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))
SWEEPS = sorted((REPO / "sweeps").glob("*.yaml"))


@functools.cache
def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((REPO / "docs" / "schemas" / f"{kind}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_generated_files_are_current() -> None:
    stale = [str(p.relative_to(REPO)) for p, text in schemas.generated_files().items()
             if not p.exists() or p.read_text() != text]
    assert not stale, f"stale generated files {stale}: run .venv/bin/python -m mpvlab.schemas"


def test_every_scenario_and_sweep_field_is_in_the_reference() -> None:
    from mpvlab.input.scenario import Scenario
    from mpvlab.input.sweep import SweepSpec
    for root, page in ((Scenario, "scenario.md"), (SweepSpec, "sweep.md")):
        text = (REPO / "docs" / "reference" / page).read_text()
        sections = {s.split("\n", 1)[0]: s for s in text.split("\n## ")[1:]}
        models = schemas.models_below(root)
        assert set(models) <= set(sections), set(models) - set(sections)
        missing = [f"{name}.{field}" for name, model in models.items() for field in model.model_fields
                   if f"\n| `{field}` |" not in sections[name]]
        assert not missing, missing


def test_every_scenario_and_sweep_field_has_a_description() -> None:
    """Issue 34: the reference gives every field a meaning, from the model's `description=` (a source
    comment is not enough: the JSON Schema an editor shows carries descriptions only)."""
    from mpvlab.input.scenario import Scenario
    from mpvlab.input.sweep import SweepSpec
    bare = [f"{name}.{field}" for root in (Scenario, SweepSpec)
            for name, model in schemas.models_below(root).items()
            for field, info in model.model_fields.items() if not (info.description or "").strip()]
    assert not bare, f"fields without a description: {bare}"
    for page in ("scenario.md", "sweep.md"):
        assert schemas.NO_MEANING not in (REPO / "docs" / "reference" / page).read_text(), page


def test_every_summary_field_has_a_description() -> None:
    """Issue 34: every summary.json field says what it means, its unit and its source, either as the
    `definition` of its MetricDef (metrics the report aggregates) or as its `description=`."""
    from mpvlab.results.metricdef import MetricDef
    from mpvlab.results.summary import EmulatedSummary, PhysicalSummary, SharedSummary
    bare = sorted({f"{name}.{field}" for root in (EmulatedSummary, PhysicalSummary, SharedSummary)
                   for name, model in schemas.models_below(root).items()
                   for field, info in model.model_fields.items()
                   if not (info.description or "").strip()
                   and not any(isinstance(m, MetricDef) and m.definition.strip() for m in info.metadata)})
    assert not bare, f"summary fields without a description: {bare}"
    assert schemas.NO_MEANING not in (REPO / "docs" / "reference" / "summary.md").read_text()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_schema_accepts_shipped_scenario(path: Path) -> None:
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=../docs/schemas/scenario.schema.json\n")
    errors = [f"{list(e.path)}: {e.message}" for e in validator("scenario").iter_errors(yaml.safe_load(text))]
    assert not errors, errors


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_schema_accepts_shipped_sweep(path: Path) -> None:
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=../docs/schemas/sweep.schema.json\n")
    errors = [f"{list(e.path)}: {e.message}" for e in validator("sweep").iter_errors(yaml.safe_load(text))]
    assert not errors, errors


def _misspelt(data: dict[str, Any], dotted: str, wrong: str) -> dict[str, Any]:
    *parents, key = dotted.split(".")
    node = data
    for p in parents:
        node = node[p]
    node[wrong] = node.pop(key)
    return data


@pytest.mark.parametrize("dotted,wrong", [("transport.scheduler", "schedular"), ("paths.wifi.down.buffer", "bufer"),
                                          ("video", "vidoe")])
def test_schema_rejects_a_misspelt_scenario_key(dotted: str, wrong: str) -> None:
    data = _misspelt(yaml.safe_load((REPO / "scenarios" / "smoke.yaml").read_text()), dotted, wrong)
    errors = list(validator("scenario").iter_errors(data))
    assert any(wrong in e.message and "Additional properties" in e.message for e in errors), \
        [e.message for e in errors]


def test_schema_rejects_a_misspelt_sweep_key_and_a_bad_quantity() -> None:
    data = _misspelt(yaml.safe_load((REPO / "sweeps" / "rtp-competition.yaml").read_text()), "trials", "trails")
    assert any("trails" in e.message for e in validator("sweep").iter_errors(data))
    sc = yaml.safe_load((REPO / "scenarios" / "smoke.yaml").read_text())
    sc["paths"]["wifi"]["down"]["rate"] = "fast"           # a rate must be a number with a unit
    assert list(validator("scenario").iter_errors(sc))


def test_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cp = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                         "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    for page in ("index.html", "getting-started/index.html", "reference/scenario/index.html",
                 "components/player/index.html", "how-to/traces/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def _size(ref: str) -> int:
    """Lines of a file, or of one class/function in it (`path:Name`), as the docs state sizes."""
    import ast
    path, _, name = ref.partition(":")
    text = (REPO / path).read_text()
    if not name:
        return len(text.splitlines())
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            assert node.end_lineno is not None
            return node.end_lineno - node.lineno + 1
    raise AssertionError(f"{ref}: no class or function {name}")


def test_code_sizes_stated_in_the_docs_are_measured() -> None:
    """Every "`file`: N lines" / "`file:Class`: N lines" in docs/*.md is the size today."""
    import re
    claims = [(page.name, ref, int(n)) for page in sorted((REPO / "docs").glob("*.md"))
              for ref, n in re.findall(r"`([\w./-]+\.(?:py|go|c)(?::\w+)?)`: (\d+) lines", page.read_text())]
    assert len(claims) >= 9, claims       # extending.md's worked examples
    wrong = [f"{page}: {ref} is {_size(ref)} lines, the page says {n}" for page, ref, n in claims if _size(ref) != n]
    assert not wrong, wrong


def test_extension_costs_in_the_docs_are_measured() -> None:
    """docs/extending.md's cost table is what bench/extension_cost.py measures: each worked-example
    patch still applies to the tree, and each row's cells are the measured ones."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("extension_cost", REPO / "bench" / "extension_cost.py")
    assert spec is not None and spec.loader is not None
    cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cost)
    page = (REPO / "docs" / "extending.md").read_text()
    patches = sorted((REPO / "docs" / "examples").glob("*.patch"))
    assert len(patches) >= 2, patches
    rows = {p.name: cost.measure(p) for p in patches}     # raises if a patch no longer applies
    rows |= {name: r for name, rev in cost.COMMITS.items() if (r := cost.measure_commit(rev)) is not None}
    for name, measured in rows.items():
        line = next((ln for ln in page.splitlines() if ln.startswith(f"| `{name}")), None)
        assert line is not None, f"docs/extending.md has no row for {name}"
        assert line.endswith(f"| {cost.table_row(measured)} |"), (name, line, cost.table_row(measured))
