"""Quantity types for every configuration model: rates, sizes, durations, probabilities and queue
limits parsed from their written form (mpvlab/core/units.py) to integers (bit/s, bytes, ns) and written
back in canonical unit form; and the strict base model every configuration model derives from
(unknown keys are errors, values are frozen)."""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, WithJsonSchema, model_validator

from mpvlab.core import units



def _wrap(fn: Any) -> Any:
    def parse(v: Any) -> Any:
        try:
            return fn(v)
        except units.UnitError as e:
            raise ValueError(str(e)) from None
    return parse


# The JSON Schema of each quantity is what a scenario file may *write* (a number with a unit, as a
# string), not the integer it is parsed to: editors check files against it (docs/schemas/). The
# pattern is the shape only; the units and bounds are checked by mpvlab/core/units.py (`mpvlab validate`).
_WITH_UNIT = r"^[0-9]+(\.[0-9]+)?\s*[a-zA-Z]+$"


def _schema(unit: str, written: str, examples: list[Any], pattern: str = _WITH_UNIT,
            number: bool = False) -> WithJsonSchema:
    text: dict[str, Any] = {"type": "string", "pattern": pattern}
    alternatives = [text, {"type": "number", "minimum": 0}] if number else [text]
    return WithJsonSchema({"anyOf": alternatives, "x-unit": unit, "x-written": written, "examples": examples})


Rate = Annotated[int, BeforeValidator(_wrap(units.parse_rate)), PlainSerializer(units.format_rate, return_type=str),
                 _schema("bit/s", "a rate: number + bit, kbit, mbit, gbit (or bps, kbps, …)", ["3mbit", "500kbit"])]
Size = Annotated[int, BeforeValidator(_wrap(units.parse_size)), PlainSerializer(units.format_size, return_type=str),
                 _schema("bytes", "a size: number + B, KB, MB, KiB, MiB, …", ["100KB", "1MB"])]
Duration = Annotated[
    int, BeforeValidator(_wrap(units.parse_duration_ns)), PlainSerializer(units.format_duration, return_type=str),
    _schema("ns", "a duration: number + ns, us, ms, s, min", ["20ms", "10s"], pattern=r"^-?[0-9]+(\.[0-9]+)?\s*[a-z]+$"),
]
Probability = Annotated[float, BeforeValidator(_wrap(units.parse_probability)),
                        _schema("fraction 0..1", "a probability: a number 0..1 or a percentage", [0.01, "1%"],
                                pattern=r"^[0-9]+(\.[0-9]+)?\s*%$", number=True)]
QueueLimitT = Annotated[
    units.QueueLimit, BeforeValidator(_wrap(units.parse_queue_limit)), PlainSerializer(str, return_type=str),
    _schema("bytes or packets", "a queue limit: a size (100KB) or packets (64pkt)", ["100KB", "64pkt"],
            pattern=r"^[0-9]+(\.[0-9]+)?\s*[a-zA-Z]+$"),
]


class Strict(BaseModel):
    # allow_inf_nan=False: no scenario number is meant to be infinite or undefined (issue 45: FESTIVE
    # `alpha: .inf` was accepted; the ABR's parameters had the rule, dash.js's copy of them did not)
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, allow_inf_nan=False)

    # pydantic's lax mode reads "no", "off", "0", 0 and 1 as booleans: `padding: "no"` (a quoted string)
    # would silently mean false. A yes/no field takes YAML's true or false only (issue 33).
    @model_validator(mode="before")
    @classmethod
    def _strict_booleans(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = None
        for name, value in data.items():
            info = cls.model_fields.get(name) if isinstance(name, str) else None
            if info is None or isinstance(value, bool):
                continue
            allowed = _bool_field_allows(info.annotation)
            if allowed is not None and not any(value is a or (a is not None and value == a and type(value) is type(a))
                                               for a in allowed):
                # Handed on as a value no boolean validator accepts, so pydantic reports it at the
                # field's own location with the field's own words (mpvlab/input/messages.py).
                out = dict(data) if out is None else out
                out[name] = NotABoolean(value)
        return strict_numbers(cls, data if out is None else out)


class NotABoolean:
    """A value given to a yes/no field that is not YAML's true or false (shown as it was given)."""

    def __init__(self, given: Any) -> None:
        self.given = given

    def __repr__(self) -> str:
        return repr(self.given)

    def __str__(self) -> str:
        return str(self.given)


def _bool_field_allows(annotation: Any) -> tuple[Any, ...] | None:
    """For a field whose type is bool, or bool combined only with None and Literal values: the non-bool
    values it also takes; None for any other field (left to its own type)."""
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    if bool not in members:
        return None
    allowed: list[Any] = []
    for m in members:
        if m is bool:
            continue
        if m is type(None):
            allowed.append(None)
        elif get_origin(m) is Literal:
            allowed.extend(get_args(m))
        else:
            return None          # bool | int and the like: the other type decides
    return tuple(allowed)


class NotANumber:
    """A text or yes/no value given to a plain number field (shown as it was given): pydantic's lax mode
    read `seed: "7"` as 7 and `seed: true` as 1, which the JSON Schema refuses (issue 45)."""

    def __init__(self, given: Any) -> None:
        self.given = given

    def __repr__(self) -> str:
        return repr(self.given)


def _plain_number_field(annotation: Any) -> bool:
    """A field typed int or float (alone or with None): not the quantities above (Annotated: they parse
    their written text), not bool, not unions with other types."""
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return any(m in (int, float) for m in members) and all(m in (int, float, type(None)) for m in members)


def strict_numbers(model: Any, data: Any) -> Any:
    """`data` with each text or bool value of a plain number field of `model` replaced by NotANumber,
    which no number validator accepts: pydantic then reports it at the field, in its own words."""
    if not isinstance(data, dict):
        return data
    out = None
    for name, value in data.items():
        info = model.model_fields.get(name) if isinstance(name, str) else None
        if info is None and isinstance(name, str):      # a field written by its alias (SABRE `lambda`)
            info = next((f for f in model.model_fields.values() if f.alias == name), None)
        if info is None or not isinstance(value, (str, bool)) or not _plain_number_field(info.annotation):
            continue
        if any(isinstance(m, BeforeValidator) for m in info.metadata):   # a quantity: parses its text
            continue
        out = dict(data) if out is None else out
        out[name] = NotANumber(value)
    return data if out is None else out
