"""The scenario JSON Schema and `mpvlab validate` agree on `ecn_mark.threshold` (issue 34): the schema
once published the parsed form `{ns, bytes}`, which validate refuses. Each value is fed to both, in
a copy of the shipped ECN scenario; and the generator refuses to write a schema of that kind again."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import jsonschema
import pytest
import yaml
from pydantic import BeforeValidator

from mpvlab.core.quantities import Strict
from mpvlab import schemas
from mpvlab.input.validation import validate_file
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
ECN_SCENARIO = REPO / "scenarios" / "ecn-bbr3-bulk.yaml"

# (value, why): both must refuse. The link is 25 Mbit/s with a 125 KB buffer, so every refusal here is
# about the form of the value, not its size against the link.
REFUSED = [
    ({"ns": 2_000_000}, "the parsed form, as a time"),
    ({"bytes": 12_500}, "the parsed form, as a size"),
    ({"ns": 2_000_000, "bytes": 12_500}, "the parsed form, both"),
    ({}, "an empty mapping"),
    (12_500, "a number without a unit"),
    (2.5, "a float"),
    (True, "a boolean"),
    (None, "null"),
    ("2min", "a duration unit the threshold does not take"),
    ("12kb", "a size unit in the wrong case"),
    ("2 parsecs", "no unit at all"),
    ("ms", "no number"),
]
# Both must accept: times and sizes as written in the docs and the shipped scenario.
ACCEPTED = ["2ms", "500us", "2 ms", "12500B", "12KB", "64KiB", "0.5ms", "0.1MB"]


def _scenario_with(threshold: Any) -> dict[str, Any]:
    data = yaml.safe_load(ECN_SCENARIO.read_text())
    data = copy.deepcopy(data)
    data["paths"]["wan"]["down"]["ecn_mark"] = {"threshold": threshold}
    return data


def _schema_ok(data: dict[str, Any]) -> bool:
    schema = json.loads((schemas.SCHEMA_DIR / "scenario.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema).is_valid(data)


def _validate_ok(data: dict[str, Any], tmp_path: Path) -> tuple[bool, str]:
    f = tmp_path / "ecn.yaml"
    f.write_text(yaml.safe_dump(data))
    v = validate_file(f)
    return v.ok, v.text


@pytest.mark.parametrize("value,why", REFUSED, ids=[w for _, w in REFUSED])
def test_schema_and_validate_both_refuse(value: Any, why: str, tmp_path: Path) -> None:
    data = _scenario_with(value)
    ok, text = _validate_ok(data, tmp_path)
    assert not ok, f"validate accepted {why}: {value!r}"
    assert "threshold" in text, text
    assert not _schema_ok(data), f"the JSON Schema accepts {why} ({value!r}), which validate refuses: {text}"


@pytest.mark.parametrize("value", ACCEPTED)
def test_schema_and_validate_both_accept(value: str, tmp_path: Path) -> None:
    data = _scenario_with(value)
    ok, text = _validate_ok(data, tmp_path)
    assert ok, text
    assert _schema_ok(data), f"the JSON Schema refuses {value!r}, which validate accepts"


def test_the_shipped_scenario_passes_both(tmp_path: Path) -> None:
    data = yaml.safe_load(ECN_SCENARIO.read_text())
    assert _schema_ok(data)
    assert validate_file(ECN_SCENARIO).ok


def test_bounds_are_left_to_validate_and_said_in_its_message(tmp_path: Path) -> None:
    """The schema checks the shape only (as for every quantity): 5us is well formed but under the
    10 us floor; validate names the field and the bound."""
    data = _scenario_with("5us")
    assert _schema_ok(data)
    ok, text = _validate_ok(data, tmp_path)
    assert not ok and "outside 10us" in text, text


@dataclass(frozen=True)
class _Parsed:
    n: int


def _parse_string(v: Any) -> _Parsed:
    if not isinstance(v, str):
        raise ValueError(f"{v!r}: give a string")
    return _Parsed(int(v))


class _ParsesStringsOnly(Strict):
    # The shape that produced the bug: a dataclass type behind a validator that takes strings only.
    value: Annotated[_Parsed, BeforeValidator(_parse_string)]


def test_generator_refuses_a_schema_that_would_accept_what_the_model_refuses() -> None:
    with pytest.raises(schemas.SchemaMismatch, match=r"_ParsesStringsOnly\.value"):
        schemas.file_schema(_ParsesStringsOnly, "probe", "tests")
