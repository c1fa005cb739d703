"""docs/extending.md shows code a contributor copies: every name it shows must exist, with the shape
shown (issue 46). Checked on the page:

- every `mpvlab.a.b.Name` imports (module, then attributes);
- every ```python block parses, its imports import (a name starting with `my_` is the reader's own
  module), and every name it uses without defining it exists in the module its first line names
  (`# mpvlab/runner/kinds.py: ...`), every attribute of such a name exists, and every call of one
  binds to the real signature;
- in inline code, every call `f(x, y)` and every signature `f(x, y) -> R` names a function of a
  module the page names (`mpvlab/runner/kinds.py`, `topologies/registry.py`, ...), called with an
  argument count it accepts; a signature's parameters are the real ones, in order.

A helper, a parameter or a module that no longer exists (`_on(...)`, `bring_up(ctx, stack, lead_s)`)
fails here instead of misleading the next contributor.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
from typing import Any

import pytest

from mpvlab.core.paths import checkout_root

REPO = checkout_root()
PAGE = REPO / "docs" / "extending.md"
COMPONENTS = ("core", "links", "cc", "collectors", "schedulers", "topologies", "mininet", "player", "testbed")
MODULE_PATH_RE = re.compile(r"`((?:mpvlab|" + "|".join(COMPONENTS) + r")/[\w/]+)\.py(?::\w+)?`")
DOTTED_RE = re.compile(r"(?<![\w./])(mpvlab(?:\.\w+)+)")
SIGNATURE_RE = re.compile(r"^([A-Za-z_][\w.]*)\(([^()]*)\)\s*->\s*([\w.\[\], ]+)$")
READERS_OWN = "my_"
_MISSING = object()


def _text() -> str:
    return PAGE.read_text()


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _inline_code(text: str) -> list[str]:
    """Inline code spans outside fenced and indented blocks; a span may wrap across a line."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    prose = re.sub(r"(?m)^(?: {4}|\t).*\n", "", prose)
    # a span opens and closes with the same number of backticks (``a `b` c`` is one span)
    return [" ".join(m.group(2).split()) for m in re.finditer(r"(`+)(.+?)(?<!`)\1(?!`)", prose, re.S)]


def _module_name(rel: str) -> str:
    """`mpvlab/runner/kinds.py` -> mpvlab.runner.kinds; a component folder `topologies/registry.py`
    -> mpvlab.topologies.registry (the package-dir mapping, or the folder inside mpvlab/)."""
    dotted = rel.removesuffix(".py").replace("/", ".")
    return dotted if dotted.startswith("mpvlab.") else f"mpvlab.{dotted}"


def _named_modules(text: str) -> list[Any]:
    names = sorted({_module_name(m) for m in MODULE_PATH_RE.findall(text)})
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError:
            continue   # a file a patch in docs/examples/ creates; test_docs_references lists those
    return modules


def _resolve_dotted(dotted: str) -> object:
    """mpvlab.a.b.C: the longest importable module prefix, then attributes; _MISSING if any is absent."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def _chain(node: ast.expr) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _lookup(head: str, homes: list[Any]) -> object:
    for module in homes:
        obj = getattr(module, head, _MISSING)
        if obj is not _MISSING:
            return obj
    return _MISSING


def _follow(obj: object, attrs: list[str]) -> tuple[object, str | None]:
    for attr in attrs:
        nxt = getattr(obj, attr, _MISSING)
        if nxt is _MISSING:
            return _MISSING, attr
        obj = nxt
    return obj, None


def _binds(func: object, n_args: int, keywords: list[str]) -> str | None:
    """None when `func` accepts n_args positional arguments and these keywords; else why not."""
    try:
        sig = inspect.signature(func)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None          # a builtin without a signature: nothing to compare
    try:
        sig.bind(*range(n_args), **{k: None for k in keywords})
    except TypeError as e:
        return f"{e} (signature {sig})"
    return None


def _check_expression(tree: ast.AST, homes: list[Any], bound: set[str], where: str) -> list[str]:
    """Names, attributes and calls of `tree` against `homes`; names in `bound` are the code's own."""
    errors = []
    checked_calls: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            chain = _chain(node.func)
            if chain is None or chain[0] in bound or chain[0].startswith(READERS_OWN):
                continue
            checked_calls.add(id(node.func))
            obj = _lookup(chain[0], homes)
            if obj is _MISSING:
                errors.append(f"{where}: calls {'.'.join(chain)}, and no module the page names has {chain[0]}")
                continue
            obj, missing = _follow(obj, chain[1:])
            if missing:
                errors.append(f"{where}: {'.'.join(chain)} has no attribute {missing}")
                continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue
            why = _binds(obj, len(node.args), [k.arg for k in node.keywords if k.arg])
            if why:
                errors.append(f"{where}: {'.'.join(chain)}(...) does not fit: {why}")
        elif isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in checked_calls:
            chain = _chain(node)
            if chain is None or chain[0] in bound or chain[0].startswith(READERS_OWN):
                continue
            obj = _lookup(chain[0], homes)
            if obj is _MISSING:
                continue             # a variable of the prose (ctx, stack, entry): not a name of the code
            _, missing = _follow(obj, chain[1:])
            if missing:
                errors.append(f"{where}: {'.'.join(chain)} has no attribute {missing}")
    return errors


def _bound_names(tree: ast.AST) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound


def _check_imports(tree: ast.AST, where: str) -> list[str]:
    errors = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.split(".")[-1].startswith(READERS_OWN) and _resolve_dotted(alias.name) is _MISSING:
                    errors.append(f"{where}: import {alias.name}: no such module")
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name.startswith(READERS_OWN):
                    continue
                if _resolve_dotted(f"{node.module}.{alias.name}") is _MISSING:
                    errors.append(f"{where}: from {node.module} import {alias.name}: no such name")
    return errors


def check_python_block(block: str, where: str) -> list[str]:
    first = block.splitlines()[0] if block.strip() else ""
    home = re.match(r"#\s*((?:mpvlab|" + "|".join(COMPONENTS) + r")/[\w/]+\.py)\b", first)
    if not home:
        return [f"{where}: the first line does not name the module the code belongs in (# mpvlab/…/x.py: …)"]
    try:
        tree = ast.parse(block)
    except SyntaxError as e:
        return [f"{where}: not Python: {e}"]
    try:
        homes = [importlib.import_module(_module_name(home.group(1)))]
    except ModuleNotFoundError:
        return [f"{where}: its module {home.group(1)} does not exist"]
    errors = _check_imports(tree, where)
    bound = _bound_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            name = node.id
            if name not in bound and not hasattr(builtins, name) and not name.startswith(READERS_OWN) \
                    and _lookup(name, homes) is _MISSING:
                errors.append(f"{where}: uses {name}, which neither the block nor {home.group(1)} defines")
    return errors + _check_expression(tree, homes, bound, where)


def check_inline(span: str, homes: list[Any]) -> list[str]:
    where = f"`{span}`"
    if sig := SIGNATURE_RE.match(span):
        name, params, ret = sig.groups()
        shown = [p.split(":")[0].split("=")[0].strip() for p in params.split(",") if p.strip()]
        found = [obj for obj in (_follow(_lookup(name.split(".")[0], homes), name.split(".")[1:])[0],)
                 if obj is not _MISSING]
        found += [getattr(m, name) for m in homes if "." not in name and callable(getattr(m, name, None))]
        if not found:
            return [f"{where}: no module the page names defines {name}"]
        real = {tuple(inspect.signature(f).parameters) for f in found}
        errors = [] if tuple(shown) in real else [f"{where}: the real parameters are {sorted(real)}"]
        if _lookup(ret.split("[")[0].split(".")[0], homes) is _MISSING:
            errors.append(f"{where}: returns {ret}, which no module the page names defines")
        return errors
    if re.fullmatch(r"[\w.:/-]+", span) and "/" in span:
        return []            # a path (it would parse as a division): test_docs_references checks those
    try:
        tree = ast.parse(span, mode="eval")
    except SyntaxError:
        return []            # a command, YAML, prose: the other doc tests read those
    return _check_expression(tree, homes, set(), where)


def page_errors(text: str) -> list[str]:
    homes = _named_modules(text)
    errors = [f"{dotted}: does not import" for dotted in sorted(set(DOTTED_RE.findall(text)))
              if _resolve_dotted(dotted.rstrip(".")) is _MISSING]
    for i, block in enumerate(_python_blocks(text), 1):
        errors += check_python_block(block, f"python block {i}")
    for span in _inline_code(text):
        errors += check_inline(span, homes)
    return errors


def test_every_name_extending_md_shows_exists() -> None:
    errors = page_errors(_text())
    assert not errors, "docs/extending.md shows names the code does not have:\n" + "\n".join(errors)


def test_extending_md_shows_its_code_in_checked_blocks() -> None:
    """The page's Python is in ```python blocks (checked above), at least the backend entry of kinds.py."""
    blocks = _python_blocks(_text())
    assert any("lifecycle.execute(" in b for b in blocks), "the backend entry of BACKENDS is not shown"


@pytest.mark.parametrize("stale, says", [
    ('`_on(physical.bring_up, {VIDEO.name: RemoteVideoWorkload})`', "calls _on"),
    ("`bring_up(ctx, stack, lead_s) -> Network`", "the real parameters are [('ctx', 'stack')]"),
    ("`lifecycle.execute(ctx, bring_up, WORKLOADS, 5.0, True)`", "does not fit"),
    ("`mpvlab.runner.network.BringsUp`", "does not import"),
    ("```python\n# mpvlab/runner/kinds.py: x\nBACKENDS = {\"x\": _on(_emulated)}\n```\n", "uses _on"),
    ("```python\n# mpvlab/runner/kinds.py: x\nfrom mpvlab.runner.lifecycle import run\n```\n",
     "from mpvlab.runner.lifecycle import run: no such name"),
])
def test_the_check_catches_a_stale_name(stale: str, says: str) -> None:
    """The check can fail: each stale form, added to the page with its modules, is reported."""
    text = "`mpvlab/runner/kinds.py` `mpvlab/runner/shared.py` `mpvlab/runner/physical/backend.py`\n\n" + stale
    errors = page_errors(text)
    assert any(says in e for e in errors), errors
