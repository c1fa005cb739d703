"""Quantity types for every configuration model: rates, sizes, durations, probabilities and queue
limits parsed from their written form (mpvlab/core/units.py) to integers (bit/s, bytes, ns) and written
back in canonical unit form; and the strict base model every configuration model derives from
(unknown keys are errors, values are frozen)."""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, PlainSerializer, WithJsonSchema, model_validator

from mpvlab.core import units



def _wrap(fn: Any) -> Any:
    def parse(v: Any) -> Any:
        try:
            return fn(v)
        except units.UnitError as e:
            raise ValueError(str(e)) from None
    return parse


# The JSON Schema of each quantity is what a scenario file may *write* (a number with a unit, as a
# string), not the integer it is parsed to: editors check files against it (docs/schemas/). Each
# family's pattern is generated from its unit table in mpvlab/core/units.py, so a rate written in ms or a
# delay in mbit is refused in the editor as by `mpvlab validate` (issue 49). The bounds of each field
# (8kbit … 100gbit and the like) compare values across units: `mpvlab validate` checks those.
_NUM = r"[0-9]+(\.[0-9]+)?"
_NONZERO = r"(?=[0-9.]*[1-9])"          # at least one non-zero digit: the number is positive


def _any_case(word: str) -> str:
    """`word` in a pattern matching it in any letter case (ECMA-262 patterns have no inline flag)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


def _units(names: Any, fold: bool = False) -> str:
    return "(" + "|".join(_any_case(n) if fold else n for n in sorted(names, key=len, reverse=True)) + ")"


RATE_PATTERN = rf"^\s*{_NONZERO}{_NUM}\s*{_units(units.RATE_UNITS, fold=True)}\s*$"
SIZE_PATTERN = rf"^\s*{_NUM}\s*{_units(units.SIZE_UNITS)}\s*$"
DURATION_PATTERN = rf"^\s*{_NUM}\s*{_units(units.TIME_UNITS_NS)}\s*$"
PACKETS_PATTERN = r"^\s*0*[1-9][0-9]*\s*(pkt|pkts|packets)\s*$"
PERCENT_PATTERN = r"^\s*0*[0-9]{1,2}(\.[0-9]+)?\s*%\s*$"       # below 100 %


def _schema(unit: str, written: str, examples: list[Any], *alternatives: dict[str, Any]) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": list(alternatives), "x-unit": unit, "x-written": written, "examples": examples})


def _text(pattern: str) -> dict[str, Any]:
    return {"type": "string", "pattern": pattern}


Rate = Annotated[int, BeforeValidator(_wrap(units.parse_rate)), PlainSerializer(units.format_rate, return_type=str),
                 _schema("bit/s", "a rate: number + bit, kbit, mbit, gbit", ["3mbit", "500kbit"],
                         _text(RATE_PATTERN))]
Size = Annotated[int, BeforeValidator(_wrap(units.parse_size)), PlainSerializer(units.format_size, return_type=str),
                 _schema("bytes", "a size: number + B, KB, MB, GB, KiB, MiB, GiB", ["100KB", "1MB"],
                         _text(SIZE_PATTERN))]
Duration = Annotated[
    int, BeforeValidator(_wrap(units.parse_duration_ns)), PlainSerializer(units.format_duration, return_type=str),
    _schema("ns", "a duration: number + us, ms, s, min (or 0)", ["20ms", "10s"], _text(DURATION_PATTERN),
            {"type": "number", "const": 0}),
]


def _positive_period(ns: int) -> int:
    if ns <= 0:
        raise ValueError("period must be positive")
    return ns


# The length of one cycle of a square wave (of delay or of capacity): a Duration that must be > 0.
Period = Annotated[Duration, AfterValidator(_positive_period)]
Probability = Annotated[float, BeforeValidator(_wrap(units.parse_probability)),
                        _schema("fraction 0..1", "a probability: a number 0 ≤ p < 1 or a percentage below 100 %",
                                [0.01, "1%"], _text(PERCENT_PATTERN),
                                {"type": "number", "minimum": 0, "exclusiveMaximum": 1})]
QueueLimitT = Annotated[
    units.QueueLimit, BeforeValidator(_wrap(units.parse_queue_limit)), PlainSerializer(str, return_type=str),
    _schema("bytes or packets", "a queue limit: a size (100KB) or packets (64pkt)", ["100KB", "64pkt"],
            _text(SIZE_PATTERN), _text(PACKETS_PATTERN)),
]


def written_as(form: Any) -> Any:
    """Marks a shorthand validator (`delay: 20ms` for `{kind: constant, value: 20ms}`) with the type
    whose written form it takes: the JSON Schema then allows exactly that form (mpvlab/schemas.py)
    instead of any string or number."""
    def mark(func: Any) -> Any:
        setattr(func, "written_form", form)   # noqa: B010 — an attribute on a function
        return func
    return mark


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
