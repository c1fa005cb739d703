"""pydantic's validation errors in words a person understands.

pydantic reports `String should match pattern '^[a-z][a-z0-9-]{0,39}$'` or `Input should be a valid
dictionary or object to extract fields from`; a researcher needs `name: use 1–40 characters:
lowercase letters, digits and '-', starting with a letter; got 'Bad Name'`. `describe()` walks the
model along each error's location to find what the field takes (a duration, a rate, one of a few
words, a delay in any of its forms) and says that, followed by a short excerpt of what was given —
or no excerpt at all when the file is not one the user named directly (`quote=False`).
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

EXCERPT_CHARS = 40

# Every pattern a model uses, in words (tests/test_bad_input.py checks that none is missing).
PATTERN_WORDS: dict[str, str] = {
    r"^[a-z][a-z0-9-]{0,39}$": "use 1–40 characters: lowercase letters, digits and '-', starting with a letter",
    r"^[a-z][a-z0-9]{0,7}$": "use 1–8 characters: lowercase letters and digits, starting with a letter",
    r"^[a-z][a-z0-9-]{0,31}$": "use 1–32 characters: lowercase letters, digits and '-', starting with a letter",
    r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,200}$": (
        "a file name relative to the scenario's folder: 1–201 characters from A–Z a–z 0–9 _ . / -, "
        "starting with a letter, digit or _"),
    r"^[A-Za-z0-9_./-]{1,255}$": "a file name of 1–255 characters from A–Z a–z 0–9 _ . / -",
}

DELAY_WORDS = ("a delay such as 20ms or {kind: square, base: 5ms, amplitude: 60ms, period: 10s} "
               "(kinds: constant, square, piecewise, trace)")
_SERIALIZER_WORDS = {
    "format_rate": "a rate such as 3mbit (units: bit, kbit, mbit, gbit)",
    "format_size": "a size such as 100KB (units: B, KB, MB, GB, KiB, MiB, GiB)",
    "format_duration": "a duration such as 20ms (units: us, ms, s, min)",
}


def excerpt(value: Any) -> str:
    """A short, single-line rendering of a given value (never more than EXCERPT_CHARS)."""
    text = repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


# --- what a field takes -----------------------------------------------------------------------------


def _strip_annotated(tp: Any) -> tuple[Any, list[Any]]:
    meta: list[Any] = []
    while typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        tp, meta = args[0], meta + list(args[1:])
    return tp, meta


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _words_for(tp: Any, meta: list[Any]) -> str | None:
    """What a value of this annotation looks like, in words (None: nothing better than pydantic's)."""
    tp, more = _strip_annotated(tp)
    meta = meta + more
    for m in meta:
        func = getattr(m, "func", None)
        name = getattr(func, "__name__", "")
        if name in _SERIALIZER_WORDS:
            return _SERIALIZER_WORDS[name]
        if getattr(m, "discriminator", None) == "kind" and _delay_union(tp):
            return DELAY_WORDS
        if name == "_delay_shorthand":
            return DELAY_WORDS
    if getattr(tp, "__name__", "") == "QueueLimit":
        return "a size such as 100KB, or a packet count such as 256pkt"
    if _is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if _delay_union(tp):
            return DELAY_WORDS
        parts = [w for a in args if (w := _words_for(a, []))]
        if parts:
            s = " or ".join(dict.fromkeys(parts))
            return s + (" (or leave it out)" if len(args) < len(typing.get_args(tp)) else "")
        return None
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(str(a).lower() if isinstance(a, bool) else str(a) for a in typing.get_args(tp))
    if tp is bool:
        return "true or false"
    if tp is int:
        return "a whole number"
    if tp is float:
        return "a number"
    if tp is str:
        return "text"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "a mapping with keys " + ", ".join(tp.model_fields)
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return "a list"
    if origin is dict:
        return "a mapping (key: value)"
    return None


def _delay_union(tp: Any) -> bool:
    tp, _ = _strip_annotated(tp)
    names = {getattr(a, "__name__", "") for a in typing.get_args(tp)}
    return {"ConstantDelay", "SquareDelay"} <= names


def _field_at(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, list[Any], tuple[Any, ...]]:
    """(annotation, metadata, location as the user writes it) of the value at `loc`. pydantic inserts
    union member labels (`literal['auto']`, `bool`, `function-before[...]`) and discriminator tags
    (`square`) into locations; they are skipped, so `server.tls.bool` is reported as `server.tls`.
    The annotation is None where the walk cannot follow (then only pydantic's words are used)."""
    tp: Any = model
    meta: list[Any] = []
    clean: list[Any] = []
    for part in loc:
        if tp is None:
            clean.append(part)
            continue
        tp, more = _strip_annotated(tp)
        meta = meta + more
        if isinstance(part, str) and part.startswith(("function-", "literal[", "Annotated[", "nullable[")):
            continue
        if _is_union(tp):
            options = [_strip_annotated(a)[0] for a in typing.get_args(tp) if a is not type(None)]
            models = [o for o in options if isinstance(o, type) and issubclass(o, BaseModel)]
            if isinstance(part, str):
                tagged = [m for m in models if _tag_of(m) == part]
                if tagged:
                    tp, meta = tagged[0], []
                    continue
                if len(models) == 1 and part in models[0].model_fields:
                    tp = models[0]
                elif part in ("bool", "int", "float", "str", "none") or "[" in part:
                    continue                            # a union member's label
                else:
                    tp = None
                    clean.append(part)
                    continue
            else:
                containers = [o for o in options if typing.get_origin(o) in (list, tuple)]
                if len(containers) != 1:
                    tp = None
                    clean.append(part)
                    continue
                tp = containers[0]
        clean.append(part)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            fields: dict[str, FieldInfo] = tp.model_fields
            if part not in fields:
                tp = None
                continue
            info = fields[part]
            tp, meta = info.annotation, list(info.metadata)
            continue
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is dict:
            tp, meta = (args[0] if part == "[key]" else args[1]), []
        elif origin is list and isinstance(part, int):
            tp, meta = args[0], []
        elif origin is tuple and isinstance(part, int):
            tp, meta = (args[0] if len(args) == 2 and args[1] is Ellipsis else
                        args[part] if part < len(args) else None), []
        else:
            tp = None
    return tp, meta, tuple(clean)


def _tag_of(model: type[BaseModel]) -> str | None:
    f = model.model_fields.get("kind")
    if f is None:
        return None
    args = typing.get_args(f.annotation)
    return str(args[0]) if typing.get_origin(f.annotation) is Literal and len(args) == 1 else None


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    tp, _, _ = _field_at(model, loc[:-1])
    tp, _ = _strip_annotated(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return sorted(tp.model_fields)
    if _is_union(tp):
        models = [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)]
        if len(models) == 1:
            return sorted(models[0].model_fields)
    return None


# --- one error -------------------------------------------------------------------------------------


# A key is named in a message only if it looks like a key a person would write: a file that is not a
# scenario at all (e.g. /etc/shadow given by mistake) parses into keys that are its lines, and a
# message must never print a file's contents back.
_SHOWABLE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,40}")


def _field_name(loc: tuple[Any, ...]) -> str:
    out = ""
    for p in loc:
        if isinstance(p, str) and p != "[key]" and not _SHOWABLE_KEY.fullmatch(p):
            p = "(a key that is not a name; not shown)"
        if p == "[key]":
            out += " (as a name)"
        elif isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "(top level)"


def field_name(loc: tuple[Any, ...]) -> str:
    """A location as a message names it (keys that are not names are not shown: see _SHOWABLE_KEY)."""
    return _field_name(loc)


def describe_error(e: ErrorDetails, model: type[BaseModel], quote: bool = True) -> str:
    """`field: what is allowed; got <excerpt>` for one entry of ValidationError.errors()."""
    loc = tuple(e["loc"])
    tp, meta, clean = _field_at(model, loc)
    field = _field_name(clean)
    kind = e["type"]
    given = e.get("input")
    got = f"; got {excerpt(given)}" if quote and kind not in ("missing", "extra_forbidden") else ""
    words = _words_for(tp, meta) if tp is not None else None
    ctx = e.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, loc)
        return f"{field}: unknown key" + (f"; allowed here: {', '.join(allowed)}" if allowed else "")
    if kind == "missing":
        return f"{field}: required, missing" + (f"; give {words}" if words else "")
    if kind == "string_pattern_mismatch":
        pat = str(ctx.get("pattern", ""))
        rule = PATTERN_WORDS.get(pat, "characters or length not allowed here")
        return f"{field}: {rule}{got}"
    if kind == "value_error":
        msg = str(e["msg"]).removeprefix("Value error, ")
        head = msg.split(":", 1)[0]
        if not clean and ":" in msg and all(c.isalnum() or c in "._-[]" for c in head):
            return msg                      # a cross-field rule whose message starts with its field
        # unit parsers quote what they were given: keep that to a short excerpt (or drop it)
        full = repr(given)
        if full in msg:
            msg = msg.replace(full, excerpt(given) if quote else "the given value")
        return f"{field}: {msg}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tags = ctx.get("expected_tags", "")
        if words == DELAY_WORDS or "square" in str(tags):
            return f"{field}: expected {DELAY_WORDS}{got}"
        return f"{field}: 'kind' must be one of {str(tags).replace(chr(39), '')}{got}"
    if kind == "literal_error":
        return f"{field}: allowed: {str(ctx.get('expected', '')).replace(chr(39), '')}{got}"
    if kind.endswith(("_type", "_parsing")) or kind in ("model_attributes_type", "model_type", "dict_type",
                                                         "list_type", "tuple_type"):
        if words:
            return f"{field}: expected {words}{got}"
    bounds = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
              "greater_than": ("more than", "gt"), "less_than": ("less than", "lt")}
    if kind in bounds and bounds[kind][1] in ctx:
        what = f" ({words})" if words in _SERIALIZER_WORDS.values() else ""
        return f"{field}: must be {bounds[kind][0]} {ctx[bounds[kind][1]]}{what}{got}"
    if kind in ("too_short", "too_long") and ("min_length" in ctx or "max_length" in ctx):
        # pydantic says `List should have at least 1 item after validation, not 0`
        n = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        return f"{field}: give {'at least' if kind == 'too_short' else 'at most'} {n} item{'s' if n != 1 else ''}{got}"
    if kind in ("too_long", "too_short", "string_too_long", "string_too_short"):
        return f"{field}: {str(e['msg']).replace('Input should', 'must').replace('Value should', 'must')}{got}"
    msg = str(e["msg"]).removeprefix("Value error, ")
    if words and not any(w in msg for w in ("greater", "less", "at least", "at most", "should have")):
        msg = f"expected {words} ({msg[0].lower() + msg[1:]})"
    elif msg.startswith("Input should be "):
        msg = "must be " + msg.removeprefix("Input should be ")
    return f"{field}: {msg}{got}"


def describe(source: str, what: str, err: ValidationError, model: type[BaseModel], quote: bool = True) -> str:
    """The whole error as printed: `FILE: invalid WHAT (N problems)` and one line per problem."""
    problems: dict[str, str] = {}                   # field -> line; a union's members report once
    for e in err.errors():
        line = describe_error(e, model, quote)
        tp, meta, clean = _field_at(model, tuple(e["loc"]))
        key = _field_name(clean)
        if key in problems and clean != tuple(e["loc"]):
            words = _words_for(tp, meta) if tp is not None else None
            got = f"; got {excerpt(e.get('input'))}" if quote else ""
            problems[key] = f"{key}: expected {words}{got}" if words else problems[key]
            continue
        problems.setdefault(key, line)
    n = len(problems)
    lines = [f"{source}: invalid {what} ({n} problem{'s' if n != 1 else ''})"]
    lines += [f"  {line}" for line in problems.values()]
    return "\n".join(lines)
