"""What every part of summary.json is made of: closed and open records that refuse a number JSON cannot
hold (NaN, ±Infinity), and `build`, which the runner calls where it makes a part, so a wrong key, a
wrong type or a non-finite number fails at the line that made the part, naming the part and the field
(issue 46 item 3; issue 43 item 7, the write side: the reader refuses such a summary, so no run may
write one)."""

from __future__ import annotations

import json
import math
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from mpvlab.core.errors import MpvlabError

# One playout-buffer underflow: [start, end] in seconds on the run's clock.
UnderflowEpisode = tuple[float, float]

# Interval and test of a count or a ratio bounded by 0: skewed, piles up at its bound over few trials
# (mpvlab/results/metrics.py explains the choice).
SKEWED: dict[str, Any] = {"interval": "bootstrap", "test": "mannwhitney"}


def nonfinite_value(data: Any) -> tuple[str, str] | None:
    """(dotted key, "NaN" / "Infinity" / "-Infinity") of the first non-finite number in `data` (parsed
    JSON or a part being built: dicts, lists, tuples), else None. Iterative: a file's nesting is bounded
    by its reader, not by this."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return key or "(top level)", "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        if isinstance(v, dict):
            stack.extend((f"{key}.{k}" if key else str(k), x) for k, x in reversed(list(v.items())))
        elif isinstance(v, (list, tuple)):
            stack.extend((f"{key}[{i}]", x) for i, x in reversed(list(enumerate(v))))
    return None


class _Finite(BaseModel):
    """Typed float fields refuse NaN/±Infinity themselves (allow_inf_nan=False); the walk below also
    covers what the model does not type: free-form dicts (`Any`) and an open record's extra keys."""

    model_config = ConfigDict(allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_nonfinite(cls, data: Any) -> Any:
        if isinstance(data, dict):
            where = nonfinite_value(data)
            if where is not None:
                raise ValueError(f"{where[0]} is {where[1]}, not a number a run measures (JSON has no NaN or Infinity)")
        return data


class Record(_Finite):
    """Closed: a key the model does not name is an error (the summary and its schema cannot drift)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class OpenRecord(_Finite):
    """Named fields plus whatever else the producing component records (kept, not checked)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class SummaryPartError(MpvlabError):
    """A part of summary.json, as the runner made it, does not match its model: a bug of the code that
    made it (never the user's), raised where the part is made so the traceback points at that line."""


M = TypeVar("M", bound=BaseModel)


def problems(e: ValidationError) -> str:
    """pydantic's errors, `field.path: what is wrong` each (the walk above names its own path)."""
    out = []
    for err in e.errors():
        where, msg = ".".join(str(x) for x in err["loc"]), str(err["msg"]).removeprefix("Value error, ")
        out.append(f"{where}: {msg}" if where else msg)
    return "; ".join(out)


def build(model: type[M], part: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` checked as the part `part` of summary.json (e.g. `paths.wifi`), which `model` describes;
    returns `data` itself, unchanged (the summary holds what was measured, never a value the model
    rewrote). Raises SummaryPartError naming the part, the model and each field that is wrong."""
    try:
        read = model.model_validate(data)
    except ValidationError as e:
        raise SummaryPartError(f"summary part {part} ({model.__name__}): {problems(e)}") from None
    # pydantic's lax mode would read "900" as 900 or 1.0 as True: the written summary would hold a
    # string where its schema says number. A value the model reads as another value is a wrong type.
    # Both sides as the summary is written (mpvlab/core/rundir.py write_json: default=str).
    as_written = json.loads(json.dumps(data, default=str))
    changed = first_rewrite(as_written, json.loads(json.dumps(read.model_dump(exclude_unset=True), default=str)))
    if changed is not None:
        where, given, as_read = changed
        raise SummaryPartError(f"summary part {part} ({model.__name__}): {where}: {given!r} is not of the field's "
                               f"type (the model would read it as {as_read!r})")
    return data


def first_rewrite(given: Any, read: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """(path, given, as read) of the first value the model read as another one; None when it read
    every value as given. JSON has one kind of number, so 2 and 2.0 are the same value; a string,
    a bool or null is only itself."""
    if isinstance(given, dict) and isinstance(read, dict):
        for key, value in given.items():
            if key in read and (hit := first_rewrite(value, read[key], f"{where}.{key}" if where else str(key))):
                return hit
        return None
    if isinstance(given, list) and isinstance(read, list) and len(given) == len(read):
        for i, (g, r) in enumerate(zip(given, read)):
            if hit := first_rewrite(g, r, f"{where}.{i}" if where else str(i)):
                return hit
        return None
    numbers = (int, float)
    same = (type(given) is type(read) or (isinstance(given, numbers) and isinstance(read, numbers)
                                           and not isinstance(given, bool) and not isinstance(read, bool)))
    return None if same and given == read else (where, given, read)


def build_each(model: type[M], part: str, items: dict[str, Any]) -> dict[str, Any]:
    """A part that is a mapping of records (`paths`, `players`, `ecn_marks` …): each record built as
    `part.<key>`; returns `items` itself."""
    for key, record in items.items():
        build(model, f"{part}.{key}", record)
    return items


def build_list(model: type[M], part: str, items: list[Any]) -> list[Any]:
    """A part that is a list of records (`subflows`, `fidelity_table` …): each built as `part[i]`."""
    for i, record in enumerate(items):
        build(model, f"{part}[{i}]", record)
    return items
