"""Arguments of the Python API (mpvlab.run, sweep, report, results.load) as untrusted input (issue 45).

docs/python-api.md promises that any error other than an MpvlabError is a bug. So each argument is
checked before use, with the limits files have (mpvlab/input/files.py), and refused as InputError
naming the function, the argument and what is allowed:
- a path argument is a str or os.PathLike (`key_dir=12` was a TypeError inside pathlib);
- a scenario dict is walked (iteratively: a deeply nested dict was a RecursionError) within the
  depth (MAX_YAML_DEPTH) and node (MAX_YAML_NODES) limits of a scenario file, holds only what YAML
  can say (mappings with text keys, lists, text, numbers, booleans, null: `{'name': object()}` was a
  yaml RepresenterError), and its text is counted against the scenario size limit before anything is
  written (a 50 MB string did not return in 90 s).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mpvlab.core.errors import InputError
from mpvlab.input.files import MAX_SCENARIO_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES


def path_arg(value: object, where: str, *, optional: bool = False) -> Path | None:
    """`value` as a Path if it is a str or os.PathLike (None when `optional`), else InputError."""
    if value is None and optional:
        return None
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        p = Path(value)
        if "\0" in str(p):
            raise InputError(f"{where}: a path holds no NUL character")
        return p
    allowed = "a path (str or os.PathLike)" + (" or None" if optional else "")
    raise InputError(f"{where}: {type(value).__name__} given; allowed: {allowed}")


_SCALARS = (str, bool, int, float, type(None))


def check_scenario_dict(doc: dict[Any, Any], where: str = "<scenario dict>") -> None:
    """InputError unless `doc` is what a scenario file could hold, within a scenario file's limits."""
    # (value, depth, place) — a stack, not recursion
    stack: list[tuple[Any, int, str]] = [(doc, 1, "")]
    nodes = 0
    text_bytes = 0
    while stack:
        value, depth, place = stack.pop()
        nodes += 1
        if nodes > MAX_YAML_NODES:
            raise InputError(f"{where}: more than {MAX_YAML_NODES:,} values, the limit of a scenario file")
        if depth > MAX_YAML_DEPTH:
            raise InputError(f"{where}: {place or 'the top level'}: nested deeper than {MAX_YAML_DEPTH} levels, "
                             "the limit of a scenario file")
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise InputError(f"{where}: {place or 'the top level'}: a key of type {type(k).__name__}; "
                                     "keys are text")
                text_bytes += len(k)
                stack.append((v, depth + 1, f"{place}.{k}" if place else k))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1, f"{place}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, _SCALARS):
            if isinstance(value, str):
                text_bytes += len(value)
        else:
            raise InputError(f"{where}: {place or 'the top level'}: a {type(value).__name__}; allowed: mappings, "
                             "lists, text, numbers, true/false, null (what a YAML scenario holds)")
        if text_bytes > MAX_SCENARIO_BYTES:
            raise InputError(f"{where}: more than {MAX_SCENARIO_BYTES >> 20} MiB of text, the size limit of a "
                             "scenario file")
