"""Quantity types for every configuration model: rates, sizes, durations, probabilities and queue
limits parsed from their written form (core/units.py) to integers (bit/s, bytes, ns) and written
back in canonical unit form; and the strict base model every configuration model derives from
(unknown keys are errors, values are frozen)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer

from core import units



def _wrap(fn: Any) -> Any:
    def parse(v: Any) -> Any:
        try:
            return fn(v)
        except units.UnitError as e:
            raise ValueError(str(e)) from None
    return parse


Rate = Annotated[int, BeforeValidator(_wrap(units.parse_rate)), PlainSerializer(units.format_rate, return_type=str)]
Size = Annotated[int, BeforeValidator(_wrap(units.parse_size)), PlainSerializer(units.format_size, return_type=str)]
Duration = Annotated[
    int, BeforeValidator(_wrap(units.parse_duration_ns)), PlainSerializer(units.format_duration, return_type=str)
]
Probability = Annotated[float, BeforeValidator(_wrap(units.parse_probability))]
QueueLimitT = Annotated[
    units.QueueLimit, BeforeValidator(_wrap(units.parse_queue_limit)), PlainSerializer(str, return_type=str)
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
