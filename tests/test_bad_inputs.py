"""Bad input, by class, can never escape, crash or hang (issue 15).

Every case is an input a user (or a hostile file) can give `mpvlab validate`, `mpvlab run` or
`mpvlab sweep`: files outside the scenario's folder (directly, or through a sweep's grid or
overrides), a sweep naming /etc/shadow, YAML alias bombs, huge files, devices and FIFOs, bytes that
are not UTF-8, duplicate keys, sweeps of 900,000 runs, physically absurd values, wrong types, and a
property-based generator over the scenario schema. For each:
- no traceback and no hang: the bulk is checked in-process (mpvlab.input.validation.validate_file, the
  function `mpvlab validate` calls) under an alarm, a representative subset of each class through
  the CLI in a subprocess under CPU-time and address-space limits;
- the message names the file, the field and what is allowed, in words (no regex), and never echoes
  what a file it points at contains;
- the CLI exits 2 and creates nothing: its runtime directory (where a run writes its ledger before
  it creates any namespace) stays empty.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpvlab.input.validation import validate_file
from mpvlab.core.paths import checkout_root

# Not `cpu` as a module (issue 44): these tests are CPU-bound in one process each and assert no bound a
# busy host can move (CPU-time limits count the process's own CPU time; wall limits are 20-240 s over
# validations that take milliseconds). Only the report with its figure worker pool is marked.

REPO = checkout_root()

# What a file the input points at contains; none of it may appear in a message.
SECRET = "H15B-TOP-SECRET-CONTENT-4711"
SECRET_HASH = "$6$h15bsecrethash$AbCdEfGhIjKlMnOp"
# Per case, in-process: a hang becomes a failure (validating any of these takes milliseconds).
CASE_TIME_LIMIT_S = 20
# Per case, in-process: new address space it may take (a 1 MiB scenario parses in a few MB).
CASE_MEMORY_BYTES = 512 << 20
# Per CLI subprocess: CPU seconds and address space (Python + pydantic need ~300 MB of it).
CLI_CPU_S = 60
CLI_MEMORY_BYTES = 2 << 30
# A regex in a message means it says how the code checks, not what is allowed.
REGEX_SIGNS = re.compile(r"\^\[|\]\{|\\d|\\w|\[a-z|\$'|\.\*|\(\?")

BASE: dict[str, Any] = {
    "name": "bad",
    "seed": 1,
    "paths": {
        "wifi": {"down": {"rate": "3mbit", "buffer": "100KB",
                          "delay": {"kind": "square", "base": "5ms", "amplitude": "60ms", "period": "10s"}}},
        "lte": {"down": {"rate": "3mbit", "buffer": "100KB", "delay": "20ms"}},
    },
    "transport": {"cc": "cubic", "scheduler": "default"},
    "video": {"duration": "6s", "bitrate": "2mbit"},
    "fidelity": {"probe_duration": "3s"},
}


def with_values(values: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """BASE with each dotted path set (a value of DELETE removes the key)."""
    doc = copy.deepcopy(BASE if base is None else base)
    for dotted, v in values.items():
        node = doc
        *head, last = dotted.split(".")
        for k in head:
            if not isinstance(node.get(k), dict):
                node[k] = {}             # an earlier change put a non-mapping here: this one wins
            node = node[k]
        if v is DELETE:
            node.pop(last, None)
        else:
            node[last] = v
    return doc


DELETE = object()


def dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


# --- the cases -------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    cls: str
    build: Callable[[Path], Path]          # writes what it needs into its own folder, returns the input
    expect: tuple[str, ...]                # substrings of the message: field and what is allowed
    kind: str = "scenario"                 # scenario | spec: which CLI commands take it
    cli: bool = False                      # also through the CLI in a subprocess (the class's sample)
    forbidden_files: tuple[str, ...] = field(default=())


def _secret_outside(d: Path) -> Path:
    """A file outside the case's folder whose contents must never be echoed."""
    f = d.parent / f"{d.name}-outside-secret.txt"
    f.write_text(f"0 20\n# {SECRET}\nroot:{SECRET_HASH}:19000:0:99999:7:::\n")
    return f


def scenario_file(doc: Any | str | bytes, name: str = "s.yaml") -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        f = d / name
        if isinstance(doc, bytes):
            f.write_bytes(doc)
        else:
            f.write_text(doc if isinstance(doc, str) else dump(doc))
        return f
    return build


def spec_file(spec: dict[str, Any] | str, scenario: Any = None,
              extra: Callable[[Path], None] | None = None) -> Callable[[Path], Path]:
    """A sweep spec in the case's folder, with the scenario it names (sub/base.yaml) beside it."""
    def build(d: Path) -> Path:
        (d / "sub").mkdir(exist_ok=True)
        (d / "sub" / "base.yaml").write_text(dump(BASE if scenario is None else scenario))
        if extra is not None:
            extra(d)
        f = d / "spec.yaml"
        f.write_text(spec if isinstance(spec, str) else dump({"name": "bad-sweep", "scenarios": ["sub/base.yaml"],
                                                              **spec}))
        return f
    return build


def _escape_setup(d: Path) -> None:
    """Links inside the folder that point out of it, and the secret they point at."""
    secret = _secret_outside(d)
    for sub in (d, d / "sub"):
        sub.mkdir(exist_ok=True)
        with contextlib.suppress(FileExistsError):
            (sub / "link-out.txt").symlink_to(secret)
        with contextlib.suppress(FileExistsError):
            (sub / "linkdir").symlink_to(secret.parent)


ESCAPES = ["x/../../../etc/passwd", "../etc/passwd", "/etc/passwd", "../../../../../../etc/shadow",
           "./../secret.txt", "~/x", "a/b/../../../../etc/hostname", "link-out.txt", "linkdir/link-out.txt",
           "%2e%2e/etc/passwd", "x/..//../etc/passwd"]


def escape_cases() -> Iterator[Case]:
    for i, path in enumerate(ESCAPES):
        delay = {"kind": "trace", "file": path}
        expect = ("paths.lte.down.delay.file", "scenario's folder")
        forbid = ("/etc/passwd", "/etc/shadow")

        def scen(d: Path, delay: dict[str, Any] = delay) -> Path:
            _escape_setup(d)
            return scenario_file(with_values({"paths.lte.down.delay": delay}))(d)
        yield Case(f"escape-scenario-{i}", "escape", scen, expect, cli=i < 2, forbidden_files=forbid)
        yield Case(f"escape-grid-{i}", "escape", spec_file({"grid": {"paths.lte.down.delay": [delay]}},
                                                           extra=_escape_setup),
                   expect, kind="spec", cli=i == 0, forbidden_files=forbid)
        yield Case(f"escape-override-{i}", "escape", spec_file({"overrides": {"paths.lte.down.delay": delay}},
                                                               extra=_escape_setup),
                   expect, kind="spec", forbidden_files=forbid)
        # the same name as a capacity trace (the delay line's link) and as a user BPF object
        capacity = {"paths.lte.down.rate": DELETE, "paths.lte.down.capacity": {"rate": {"kind": "trace", "file": path}}}

        def cap(d: Path, capacity: dict[str, Any] = capacity) -> Path:
            _escape_setup(d)
            return scenario_file(with_values(capacity))(d)
        yield Case(f"escape-capacity-{i}", "escape", cap, ("paths.lte.down.capacity",), forbidden_files=forbid)

        def bpf(d: Path, path: str = path) -> Path:
            _escape_setup(d)
            return scenario_file(with_values({"transport.cc": {"bpf": path}}))(d)
        yield Case(f"escape-bpf-{i}", "escape", bpf, ("transport", "bpf", "scenario's folder"), forbidden_files=forbid)


def _link_yaml_to(target: str) -> Callable[[Path], None]:
    def extra(d: Path) -> None:
        dest = Path(target) if target.startswith("/") else _secret_outside(d)
        with contextlib.suppress(FileExistsError):
            (d / "linked.yaml").symlink_to(dest)
    return extra


def sensitive_cases() -> Iterator[Case]:
    forbid = ("/etc/shadow", "/etc/passwd")
    for i, (rel, extra) in enumerate([
        ("/etc/shadow", None), ("../../../../../../etc/shadow", None), ("/etc/passwd", None),
        ("/proc/self/environ", None), ("/etc/shadow.yaml", None),
        ("linked.yaml", _link_yaml_to("/etc/shadow")), ("linked.yaml", _link_yaml_to("secret")),
        ("linked.yaml", _link_yaml_to("/dev/zero")),
    ]):
        spec = dump({"name": "bad-sweep", "scenarios": [rel]})
        yield Case(f"sensitive-{i}", "sensitive", spec_file(spec, extra=extra), ("scenarios[0]",),
                   kind="spec", cli=i in (0, 5), forbidden_files=forbid)
    # The same files named directly: their contents are still never printed back.
    for i, target in enumerate(["/etc/shadow", "/etc/passwd"]):
        yield Case(f"sensitive-direct-{i}", "sensitive", lambda d, t=target: Path(t), (),
                   cli=i == 0, forbidden_files=forbid)


BOMB_LEVELS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
BOMBS = {
    "billion-laughs": "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + BOMB_LEVELS,
    "mapping-bomb": "m0: &m0 {x: 1, y: 2, z: 3, w: 4}\n" + "".join(
        f"m{i}: &m{i} {{" + ", ".join(f"k{j}: *m{i - 1}" for j in range(9)) + "}\n" for i in range(1, 9)),
    "merge-bomb": "a: &a {x: 1}\n" + "".join(f"b{i}: &b{i}\n  <<: *{'a' if i == 0 else f'b{i - 1}'}\n  y{i}: 1\n"
                                              for i in range(150)),
    "recursive-anchor": "a: &a [1, *a]\n",
    "recursive-mapping": "a: &a {b: *a}\n",
    "many-aliases": "x: &x 1\nl: [" + ", ".join(["*x"] * 150) + "]\n",
    "deep-lists": "[" * 5000,
    "deep-mappings": "".join("  " * i + f"k{i}:\n" for i in range(60)) + "  " * 60 + "v: 1\n",
    "deep-flow": "a: " + "{b: " * 200 + "1" + "}" * 200 + "\n",
}


def bomb_cases() -> Iterator[Case]:
    expect = ("limit",)
    for i, (name, text) in enumerate(BOMBS.items()):
        exp = ("not allowed",) if name.startswith("recursive") else expect
        yield Case(f"bomb-{name}", "bomb", scenario_file(text), exp, cli=i < 2)
        # The same structure as a sweep spec's values: refused before the spec's schema is looked at.
        spec = text if text.startswith("[") else "name: bad-sweep\nscenarios: [x.yaml]\n" + text
        yield Case(f"bomb-{name}-in-spec", "bomb", scenario_file(spec, "spec.yaml"), exp, kind="spec")


def huge_cases() -> Iterator[Case]:
    def sparse(name: str, size: int) -> Callable[[Path], Path]:
        def build(d: Path) -> Path:
            f = d / name
            with f.open("wb") as fh:
                fh.truncate(size)
            return f
        return build

    def text_file(name: str, size: int) -> Callable[[Path], Path]:
        def build(d: Path) -> Path:
            f = d / name
            line = b"# " + b"x" * 1000 + b"\n"
            f.write_bytes(dump(BASE).encode() + line * (size // len(line) + 1))
            return f
        return build

    def with_trace(make: Callable[[Path], Any]) -> Callable[[Path], Path]:
        def build(d: Path) -> Path:
            make(d)
            return scenario_file(with_values({"paths.lte.down.delay": {"kind": "trace", "file": "t.txt"}}))(d)
        return build

    yield Case("huge-scenario-sparse", "huge", sparse("s.yaml", 1 << 30), ("size limit",), cli=True)
    yield Case("huge-scenario-text", "huge", text_file("s.yaml", (1 << 20) + 1), ("size limit",))
    yield Case("huge-spec", "huge", sparse("spec.yaml", 5 << 20), ("size limit",), kind="spec", cli=True)
    yield Case("huge-trace-sparse", "huge", with_trace(lambda d: sparse("t.txt", (16 << 20) + 1)(d)),
               ("paths.lte.down.delay", "size limit"))
    yield Case("huge-trace-points", "huge", with_trace(
        lambda d: (d / "t.txt").write_text("".join(f"{i} 20\n" for i in range(100_001)))),
        ("paths.lte.down.delay", "100,000"))
    # written out by hand: yaml.safe_dump of 100,001 points alone takes seconds
    points = "".join(f"          - [{i}ms, 20ms]\n" for i in range(100_001))
    yield Case("huge-piecewise-points", "huge", scenario_file(dump(BASE).replace(
        "      delay: 20ms\n", "      delay:\n        kind: piecewise\n        points:\n" + points)),
        ("size limit",))


def special_cases() -> Iterator[Case]:
    def fifo(name: str) -> Callable[[Path], Path]:
        def build(d: Path) -> Path:
            f = d / name
            if not f.exists():
                os.mkfifo(f)
            return f
        return build

    def sock(d: Path) -> Path:
        f = d / "s.yaml"
        s = socket.socket(socket.AF_UNIX)
        with contextlib.suppress(OSError):
            s.bind(str(f))
        s.close()
        return f

    def link(name: str, target: str) -> Callable[[Path], Path]:
        def build(d: Path) -> Path:
            f = d / name
            with contextlib.suppress(FileExistsError):
                f.symlink_to(target)
            return f
        return build

    def trace_is(make: Callable[[Path], Path]) -> Callable[[Path], Path]:
        def build(d: Path) -> Path:
            make(d)
            return scenario_file(with_values({"paths.lte.down.delay": {"kind": "trace", "file": "t.txt"}}))(d)
        return build

    rf = ("regular file",)
    yield Case("special-dev-zero", "special", lambda d: Path("/dev/zero"), rf, cli=True)
    yield Case("special-dev-urandom", "special", lambda d: Path("/dev/urandom"), rf)
    yield Case("special-dev-null", "special", lambda d: Path("/dev/null"), rf)
    yield Case("special-fifo", "special", fifo("s.yaml"), rf, cli=True)
    yield Case("special-directory", "special", lambda d: d, rf)
    yield Case("special-socket", "special", sock, rf)
    yield Case("special-link-to-zero", "special", link("s.yaml", "/dev/zero"), rf)
    yield Case("special-missing", "special", lambda d: d / "nope.yaml", ("no such file",))
    yield Case("special-trace-fifo", "special", trace_is(fifo("t.txt")), ("paths.lte.down.delay", *rf), cli=True)
    yield Case("special-trace-zero-link", "special", trace_is(link("t.txt", "/dev/zero")),
               ("paths.lte.down.delay", "scenario's folder"))
    yield Case("special-trace-directory", "special", trace_is(lambda d: (d / "t.txt").mkdir(exist_ok=True) or d),
               ("paths.lte.down.delay", *rf))
    yield Case("special-trace-missing", "special", trace_is(lambda d: d), ("paths.lte.down.delay",))
    yield Case("special-capacity-fifo", "special", lambda d: (fifo("c.txt")(d), scenario_file(with_values({
        "paths.lte.down.rate": DELETE, "paths.lte.down.capacity": {"rate": {"kind": "trace", "file": "c.txt"}}}))(d))[1],
        ("paths.lte.down.capacity", "not a regular file"), cli=True)
    yield Case("special-spec-scenario-fifo", "special",
               spec_file({"scenarios": ["f.yaml"]}, extra=lambda d: fifo("f.yaml")(d)),
               ("scenarios[0]", *rf), kind="spec")


def encoding_cases() -> Iterator[Case]:
    good = dump(BASE).encode()
    variants = {
        "latin1": good.replace(b"name: bad", b"name: caf\xe9"),
        "utf16": dump(BASE).encode("utf-16"),
        "bad-continuation": good.replace(b"name: bad", b"name: b\xc3\x28d"),
        "overlong": good.replace(b"name: bad", b"name: \xc0\xafbad"),
        "surrogate": good.replace(b"name: bad", b"name: \xed\xa0\x80bad"),
        "truncated": good + b"\xe2\x82",
    }
    for i, (name, data) in enumerate(variants.items()):
        yield Case(f"encoding-{name}", "encoding", scenario_file(data), ("UTF-8",), cli=i == 0)
    for i, ch in enumerate([b"\x00", b"\x1b", b"\x7f", b"\x08"]):
        yield Case(f"encoding-control-{i}", "encoding", scenario_file(good.replace(b"name: bad", b"name: b" + ch + b"d")),
                   ("control character",))
    yield Case("encoding-trace", "encoding", lambda d: ((d / "t.txt").write_bytes(b"0 20\n1000 2\xff0\n"),
               scenario_file(with_values({"paths.lte.down.delay": {"kind": "trace", "file": "t.txt"}}))(d))[1],
               ("paths.lte.down.delay", "UTF-8"))
    yield Case("encoding-spec", "encoding", lambda d: ((d / "spec.yaml").write_bytes(
        b"name: bad\xfe\nscenarios: [a.yaml]\n"), d / "spec.yaml")[1], ("UTF-8",), kind="spec", cli=True)


def duplicate_cases() -> Iterator[Case]:
    text = dump(BASE)
    yield Case("dup-top", "duplicate", scenario_file(text + "seed: 2\n"), ("duplicate key", "'seed'"), cli=True)
    yield Case("dup-nested", "duplicate", scenario_file(text.replace("    down:\n      rate: 3mbit\n",
                                                                     "    down:\n      rate: 3mbit\n      rate: 9mbit\n", 1)),
               ("duplicate key", "'rate'"))
    yield Case("dup-path", "duplicate", scenario_file(text.replace("  lte:\n", "  wifi: {}\n  lte:\n", 1)),
               ("duplicate key", "'wifi'"))
    yield Case("dup-flow", "duplicate", scenario_file(text + "observe: {sample_hz: 10, sample_hz: 20}\n"),
               ("duplicate key", "'sample_hz'"))
    yield Case("dup-spec-grid", "duplicate", lambda d: ((d / "spec.yaml").write_text(
        "name: s\nscenarios: [a.yaml]\ngrid:\n  transport.cc: [cubic]\n  transport.cc: [bbr]\n"), d / "spec.yaml")[1],
        ("duplicate key", "'transport.cc'"), kind="spec", cli=True)
    yield Case("dup-spec-name", "duplicate", lambda d: ((d / "spec.yaml").write_text(
        "name: s\nname: t\nscenarios: [a.yaml]\n"), d / "spec.yaml")[1], ("duplicate key", "'name'"), kind="spec")


def sweep_size_cases() -> Iterator[Case]:
    def values(n: int, unit: str, start: int) -> list[str]:
        return [f"{start + i}{unit}" for i in range(n)]
    runs = ("runs", "limit")
    yield Case("sweep-900k", "sweep-size", spec_file({"grid": {
        "transport.cc": ["cubic", "bbr", "reno"], "video.bitrate": values(300, "kbit", 100),
        "fidelity.probe_duration": values(1000, "ms", 1000)}}), runs, kind="spec", cli=True)
    yield Case("sweep-1m", "sweep-size", spec_file({"grid": {
        "video.bitrate": values(100, "kbit", 100), "fidelity.probe_duration": values(100, "ms", 1000),
        "paths.lte.down.delay": values(100, "ms", 1)}}), runs, kind="spec")
    yield Case("sweep-trials", "sweep-size", spec_file({"trials": 900_000}), ("trials", "at most"), kind="spec")
    yield Case("sweep-scenarios-x-grid", "sweep-size", spec_file(
        {"scenarios": ["sub/base.yaml"] * 5, "grid": {"video.bitrate": values(1000, "kbit", 100)}, "trials": 1000}),
        runs, kind="spec")
    yield Case("sweep-empty-grid-key", "sweep-size", spec_file({"grid": {"video.bitrate": []}}),
               ("video.bitrate", "at least one value"), kind="spec")
    yield Case("sweep-grid-not-list", "sweep-size", spec_file({"grid": {"video.bitrate": "2mbit"}}),
               ("grid.video.bitrate", "a list"), kind="spec")
    yield Case("sweep-grid-name", "sweep-size", spec_file({"grid": {"name": ["a", "b"]}}),
               ("name", "cannot be varied"), kind="spec")


# (dotted field, value, words the message must hold besides the field)
ABSURD: list[tuple[str, Any, tuple[str, ...]]] = [
    ("paths.lte.down.delay", "61s", ("0 … 60s",)),
    ("paths.lte.down.delay", "-1ms", ("negative",)),
    ("paths.lte.down.delay", "100000000000000000000000s", ("60s",)),
    ("paths.lte.down.rate", "99999999999999999999gbit", ("8kbit … 100gbit",)),
    ("paths.lte.down.rate", "1bit", ("8kbit … 100gbit",)),
    ("paths.lte.down.rate", "0bit", ("positive",)),
    ("paths.lte.down.rate", "101gbit", ("8kbit … 100gbit",)),
    ("paths.lte.down.buffer", "0KB", ("one frame",)),
    ("paths.lte.down.buffer", "0pkt", ("at least 1 packet",)),
    ("paths.lte.down.buffer", "2GB", ("1GiB",)),
    ("paths.lte.down.buffer", "99999999999999999999GB", ("1GiB",)),
    ("paths.lte.down.burst", "0B", ("1514B",)),
    ("paths.lte.down.burst", "10GB", ("1GiB",)),
    ("paths.lte.down.loss", "200%", ("[0, 1)",)),
    ("paths.lte.down.loss", -0.5, ("[0, 1)",)),
    ("fidelity.probe_duration", "950400s", ("1s … 60s",)),
    ("fidelity.probe_duration", "11d", ("us, ms, s, min",)),
    ("fidelity.probe_duration", "100ms", ("1s … 60s",)),
    ("paths.lte.down.delay", {"kind": "piecewise", "points": [["1s", "10ms"], ["2s", "20ms"]]}, ("time 0",)),
    ("paths.lte.down.delay", {"kind": "piecewise", "points": [["0s", "10ms"], ["2s", "20ms"], ["1s", "5ms"]]},
     ("strictly increase",)),
    ("paths.lte.down.delay", {"kind": "piecewise", "points": [["0s", "10ms"], ["0s", "20ms"]]},
     ("strictly increase",)),
    ("paths.lte.down.delay", {"kind": "piecewise", "points": [["0s", "61s"]]}, ("0 … 60s",)),
    ("paths.lte.down.delay", {"kind": "piecewise", "points": [["0s", "1ms"], ["2000min", "1ms"]]}, ("24h",)),
    ("paths.lte.down.delay", {"kind": "piecewise", "points": []}, ("at least 1 item",)),
    ("paths.lte.down.delay", {"kind": "square", "base": "5ms", "amplitude": "100s", "period": "1s"}, ("60s",)),
    ("paths.lte.down.delay", {"kind": "square", "base": "5ms", "amplitude": "5ms", "period": "2000min"}, ("24h",)),
    ("paths.lte.down.delay", {"kind": "square", "base": "5ms", "amplitude": "5ms", "period": "0s"}, ("positive",)),
    ("paths.wifi.down.delay.duty", 5, ("less than 1",)),
    ("transport.cc_params", {"beta": 3}, ("takes no parameters",)),
    ("transport.cc_params", {"x": 1}, ("cc_params",)),
    ("video.bitrate", "99999999999999999999gbit", ("10kbit … 1gbit",)),
    ("video.bitrate", "1bit", ("10kbit … 1gbit",)),
    ("video.duration", "0s", ("1s and 60min",)),
    ("video.duration", "11d", ("us, ms, s, min",)),
    ("video.fps", 1_000_000, ("at most 120",)),
    ("video.width", 100_000_000, ("at most 3840",)),
    ("observe.sample_hz", 1_000_000_000, ("at most",)),
    ("player.timeout_factor", 1e308, ("at most 20",)),
    ("hosts.client_tcp_rmem", ["2GiB", "4KiB", "4KiB"], ("min ≤ default ≤ max",)),
    ("paths.lte.down.rate", "9" * 400 + "gbit", ("too large a number",)),
    ("paths.lte.down.buffer", "9" * 400 + "KB", ("too large a number",)),
    ("video.duration", "9" * 400 + "s", ("too large a number",)),
    ("paths.lte.down.loss", 10**400, ("[0, 1)",)),
    ("seed", -1, ("at least 0",)),
    ("video.mpd_min_buffer_time", "1500ms", ("kind: dash", "no MPD")),
    ("video", {"kind": "dash", "duration": "10s", "segment": "2s", "mpd_min_buffer_time": "11s"},
     ("within video.duration",)),
    ("video", {"kind": "dash", "duration": "10s", "segment": "2s", "mpd_min_buffer_time": 0}, ("above 0 s",)),
]


def absurd_cases() -> Iterator[Case]:
    for i, (dotted, value, words) in enumerate(ABSURD):
        # The field as the message names it: a delay's own field for a duty, the mapping for cc_params.
        fname = "paths.lte.down.delay" if dotted.startswith("paths.lte.down.delay") else dotted
        fname = "cc_params" if dotted == "transport.cc_params" else fname
        yield Case(f"absurd-{i}", "absurd", scenario_file(with_values({dotted: value})), (fname, *words),
                   cli=i in (0, 3))
        # A sweep may not set the seed at all (it derives one per run): that is what it must say then.
        spec_words = ("cannot be varied",) if dotted == "seed" else words
        yield Case(f"absurd-override-{i}", "absurd", spec_file({"overrides": {dotted: value}}), (fname, *spec_words),
                   kind="spec", cli=i == 0)


WRONG_TYPES: list[tuple[str, Any, tuple[str, ...]]] = [
    ("paths.lte.down.delay", True, ("expected a delay such as 20ms",)),
    ("paths.lte.down.delay", [1, 2], ("expected a delay",)),
    ("paths.lte.down.delay", None, ("delay",)),
    ("paths.lte.down.delay", {"kind": "nope"}, ("kinds: constant, square, piecewise, trace",)),
    ("paths.lte.down.rate", True, ("rate",)),
    ("paths.lte.down.rate", {"a": 1}, ("rate",)),
    ("paths.lte.down.rate", 3, ("unit",)),
    ("paths.lte.down.buffer", [], ("size",)),
    ("seed", "x", ("whole number",)),
    ("seed", 1.5, ("whole number",)),
    ("name", 5, ("name",)),
    ("name", None, ("name",)),
    ("name", "../../etc", ("lowercase letters",)),
    ("paths", ["a"], ("paths",)),
    ("paths", 5, ("paths",)),
    ("paths", {}, ("takes 2 to 8 paths",)),
    ("video", 3, ("video",)),
    ("transport.cc", 5, ("transport.cc",)),
    ("transport.cc", ["cubic"], ("transport.cc",)),
    ("transport.cc", "vegasx", ("transport.cc",)),
    ("fidelity.probe", "maybe", ("true or false",)),
    ("observe.sample_hz", "fast", ("whole number",)),
    ("player.mode", "fast", ("discard or rebuffer",)),
    ("transport.cc", {"\r\rx": None}, ("transport", "not shown")),       # a key of control characters
    ("paths.lte.down", {"rate": "3mbit", "\x1b[2J": 1}, ("paths.lte.down", "not shown")),
    ("paths.lte.down.loss", None, ("number in [0, 1)",)),
    ("paths.lte.down.loss", [0.1], ("number in [0, 1)",)),
    ("bogus", 1, ("unknown key", "allowed here")),
    ("paths.lte.down.bogus", 1, ("unknown key", "allowed here")),
]


def wrong_type_cases() -> Iterator[Case]:
    for i, (dotted, value, words) in enumerate(WRONG_TYPES):
        fname = dotted.split(".bogus")[0] if "bogus" in dotted else dotted
        # `cc: {bpf: …}` is the bpf CC's parameters: its problems are named under transport's cc_params
        fname = "transport: cc_params" if dotted == "transport.cc" and isinstance(value, dict) else fname
        yield Case(f"type-{i}", "wrong-type", scenario_file(with_values({dotted: value})), (fname, *words),
                   cli=i in (0, 8))
    for i, (text, words) in enumerate([
        ("- a\n- b\n", ("mapping at the top level",)), ("hello\n", ("mapping at the top level",)),
        ("", ("mapping at the top level",)), ("name: x\nseed: 2001-01-01\n", ("seed", "whole number")),
        ("name: x\nseed: !!binary aGVsbG8=\n", ("seed", "whole number")),
        ("name: x\nseed: !!python/object:os.system x\n", ("line 2",)),
        ("name: x\nseed: !!set {a, b}\n", ("seed",)), ("name: x\n? [a, b]\n: 1\n", ("plain value",)),
        ("name: x\npaths: {wifi: {down: {rate: 3mbit\n", ("not valid YAML", "line")),
        ("name: x\nseed: " + "9" * 5000 + "\n", ("number",)),
    ]):
        yield Case(f"type-doc-{i}", "wrong-type", scenario_file(text), words, cli=i == 0)
    yield Case("type-spec-trials", "wrong-type", spec_file({"trials": "many"}), ("trials", "whole number"),
               kind="spec", cli=True)
    yield Case("type-spec-scenarios", "wrong-type", spec_file(dump({"name": "s", "scenarios": "a.yaml"})),
               ("scenarios", "a list"), kind="spec")
    yield Case("type-grid-delay", "wrong-type", spec_file({"grid": {"paths.lte.down.delay": [True]}}),
               ("paths.lte.down.delay", "expected a delay"), kind="spec")


CC_BUILD = REPO / "cc" / "build"


def _bpf_case(source: Path | bytes, params: dict[str, int] | None = None) -> Callable[[Path], Path]:
    """A scenario naming `cc.bpf` = the given object (copied into the case's folder, as a user would)."""
    def build(d: Path) -> Path:
        obj = d / "cc.bpf.o"
        obj.write_bytes(source if isinstance(source, bytes) else source.read_bytes())
        cc: dict[str, Any] = {"bpf": "cc.bpf.o", **({"params": params} if params else {})}
        return scenario_file(with_values({"transport.cc": cc}))(d)
    return build


RTP_BASE = {**{k: v for k, v in BASE.items() if k not in ("video", "paths")},
            "topology": {"kind": "dumbbell"}, "paths": {"bneck": {"down": {"rate": "5mbit", "delay": "10ms"}}},
            "workload": {"kind": "rtp", "controller": "webrtc-bbr"}}
BULK_BASE = {**{k: v for k, v in BASE.items() if k != "video"}, "workload": {"kind": "bulk", "duration": "2s"}}


def issue33_cases() -> Iterator[Case]:
    """What `validate` accepted and `run` then refused or ignored (issue 33): BPF objects inspected at
    validation, sections a workload never reads, quoted booleans, absurd durations, a short message
    for a huge list."""
    reno = CC_BUILD / "examples" / "reno_mini.bpf.o"
    bpf: list[tuple[Path | bytes, dict[str, int] | None, tuple[str, ...]]] = [
        (b"not an object at all\n", None, ("not a BPF object",)),
        (Path("/bin/true"), None, ("not a BPF object",)),                      # an ELF file, not BPF
        (CC_BUILD / "examples" / "faults" / "with_kprobe.bpf.o", None, ("kprobe", "only struct_ops programs")),
        (reno, {"nosuch": 1}, ("no parameter 'nosuch'", "it declares: beta_pct, ai_pkts")),
        (reno, {"beta_pct": 2**40}, ("params.beta_pct", "outside [0, 4294967295]")),
        (reno, {"beta_pct": -1}, ("params.beta_pct", "outside [0, 4294967295]")),
    ]
    for i, (source, params, words) in enumerate(bpf):
        yield Case(f"bpf-object-{i}", "bpf-object", _bpf_case(source, params), ("transport.cc.bpf", *words),
                   cli=i == 2)
    unused = [(RTP_BASE, "video", {"duration": "10s"}, "encodes its own test picture"),
              (RTP_BASE, "player", {"max_lateness": "40ms"}, "receiver is mpvlab-rtp"),
              (RTP_BASE, "server", {"tls": True}, "no web server"),
              (BULK_BASE, "video", {"bitrate": "3mbit"}, "sends no video"),
              (BULK_BASE, "player", {"mode": "rebuffer"}, "has no player")]
    for i, (base, section, block, why) in enumerate(unused):
        yield Case(f"unused-section-{i}", "unused-section", scenario_file({**base, section: block}),
                   (section, "does not apply to workload.kind", why), cli=i == 0)
    bools = [("fidelity.probe", "no"), ("fidelity.probe", "false"), ("fidelity.probe", 0), ("hosts.offloads", 1),
             ("hosts.offloads", "off"), ("player.decode", "yes"), ("server.tls", "yes"), ("server.tls", 1)]
    for i, (dotted, value) in enumerate(bools):
        yield Case(f"strict-bool-{i}", "strict-bool", scenario_file(with_values({dotted: value})),
                   (dotted, "true or false"), cli=i == 0)
    yield Case("strict-bool-rtp-padding", "strict-bool",
               scenario_file({**RTP_BASE, "workload": {**RTP_BASE["workload"], "bbr": {"padding": "no"}}}),
               ("workload.bbr.padding", "true or false"))
    durations = [("paths.lte.down.outages", [["1s", "1000000000000s"]], ("outages must end within 24h",)),
                 ("paths.lte.down.outages", [["0s", "2000min"]], ("24h",)),
                 ("player.max_lateness", "10000min", ("max_lateness", "at most 60s")),
                 ("player.buffer", "10000min", ("buffer", "at most 60min")),
                 ("player.startup_buffer", "6000min", ("startup_buffer", "at most 60min")),
                 ("player.rebuffer_resume", "10000min", ("rebuffer_resume", "at most 60min"))]
    for i, (dotted, value, words) in enumerate(durations):
        fname = dotted.rsplit(".", 1)[0] if dotted.startswith("player.") else dotted
        yield Case(f"absurd-duration-{i}", "absurd-duration", scenario_file(with_values({dotted: value})),
                   (fname, *words), cli=i == 0)
    yield Case("pcap-10000-points", "absurd",
               scenario_file(with_values({"observe.pcap": {"points": [f"router-x{i:05d}" for i in range(10_000)]}})),
               # in-process only: parsing 10,000 list items takes PyYAML's pure-Python loader ~3 s a pass
               ("observe.pcap.points", "at most 10 points", "got 10000"))


DASH_BASE = {**BASE, "video": {"kind": "dash", "duration": "12s", "bitrates": ["500kbit", "1mbit", "2mbit"],
                                 "segment": "2s", "width": 640, "height": 360}, "player": {"buffer": "8s"}}


def issue45_cases() -> Iterator[Case]:
    """What `validate` accepted and `run` then failed on with a raw ValueError once the network was up, or
    ran meaninglessly (issue 45): DASH ladders the content maker refuses, a zero DASH buffer, infinite or
    absurdly small ABR parameters, a cross-traffic flow that starts after the run's media ends."""
    dashjs = {"kind": "dashjs", "dashjs_stable_buffer_time": "8s"}
    cases: list[tuple[str, dict[str, Any], dict[str, Any] | None, tuple[str, ...]]] = [
        ("dash-buffer-0", {"player.buffer": "0s"}, None, ("player.buffer", "0 s holds nothing")),
        ("dashjs-stable-buffer-0", {"player": {**dashjs, "dashjs_stable_buffer_time": "0s"}}, None,
         ("player", "dashjs_stable_buffer_time must be more than 0s")),
        # dash.js has no one playout buffer: player.buffer is refused, naming dash.js's own fields (issue 47)
        ("dashjs-buffer", {"player": {**dashjs, "buffer": "8s"}}, None,
         ("player", "buffer: not a setting of kind dashjs", "dashjs_stable_buffer_time",
          "dashjs_buffer_time_at_top_quality", "dashjs_buffer_time_at_top_quality_long_form")),
        ("dashjs-top-quality-61min", {"player": {**dashjs, "dashjs_buffer_time_at_top_quality": "61min"}}, None,
         ("player", "dashjs_buffer_time_at_top_quality must be more than 0s and at most 60min")),
        ("dashjs-setting-on-gstreamer", {"player": {"fetcher": "own", "abr": "bola", "buffer": "8s",
                                                    "dashjs_buffer_time_at_top_quality_long_form": "20s"}}, None,
         ("player", "dashjs_buffer_time_at_top_quality_long_form: for kind dashjs only")),
        ("dash-repeated-bitrates", {"video.bitrates": ["1mbit", "1mbit", "2mbit"]}, None,
         ("video (dash)", "strictly increasing")),
        ("dash-segment-1ms", {"video.segment": "1ms"}, None, ("video (dash)", "1 frame")),
        ("dash-segment-1ms-60min", {"video.segment": "1ms", "video.duration": "60min"}, None, ("video (dash)", "1 frame")),
        ("dash-segment-half-frame", {"video.segment": "50ms"}, None, ("video (dash)", "whole number of frames")),
        ("dash-segment-longer-than-video", {"video.segment": "20s"}, None, ("video (dash)", "longer than the video")),
        ("festive-alpha-inf", {"player": {"fetcher": "own", "abr": "festive", "abr_params": {"alpha": float("inf")},
                                          "buffer": "8s"}}, None, ("alpha", "finite number")),
        ("dashjs-festive-alpha-inf", {"player": {**dashjs, "abr": "festive", "abr_params": {"alpha": float("inf")}}},
         None, ("alpha", "finite number")),
        ("sabre-check-period-1e-300", {"player": {"fetcher": "own", "abr": "sabre", "buffer": "8s",
                                                  "abr_params": {"check_period_s": 1e-300}}}, None,
         ("check_period_s", "greater than or equal to 0.01")),
        ("cross-traffic-after-the-run", {"cross_traffic.bulk.start": "30s"},     # a 25 s RTP run
         yaml.safe_load((REPO / "scenarios" / "rtp-competition-short.yaml").read_text()),
         ("cross_traffic.bulk.start", "after the end of the run's media", "never run")),
    ]
    for i, (cid, values, base, words) in enumerate(cases):
        yield Case(cid, "validate-equals-run", scenario_file(with_values(values, DASH_BASE if base is None else base)),
                   words, cli=i in (0, 2))


SHARED_BASE = {**{k: v for k, v in BASE.items() if k != "paths"},
               "topology": {"kind": "shared-bottleneck", "clients": 2},
               "paths": {"shared": {"down": {"rate": "6mbit", "buffer": "256pkt", "delay": "50ms"}}}}


def issue48_cases() -> Iterator[Case]:
    """topology.client_stagger (issue 48 §3): only where there are several clients, never negative, the
    last client's start within 1 h of t0, and a duration, not a per-client list."""
    cases: list[tuple[str, dict[str, Any], dict[str, Any], tuple[str, ...]]] = [
        ("stagger-on-dual-path", {"topology.client_stagger": "20s"}, BASE,
         ("topology.client_stagger", "only for kind shared-bottleneck")),
        ("stagger-negative", {"topology.client_stagger": "-20s"}, SHARED_BASE,
         ("topology.client_stagger", "negative")),
        ("stagger-past-1h", {"topology.client_stagger": "61min"}, SHARED_BASE,
         ("topology.client_stagger", "0s … 3600s with 2 clients", "within 1 h")),
        ("stagger-8-clients-past-1h", {"topology.clients": 8, "topology.client_stagger": "10min"}, SHARED_BASE,
         ("topology.client_stagger", "with 8 clients", "within 1 h")),
        ("stagger-huge", {"topology.client_stagger": "9" * 40 + "s"}, SHARED_BASE,
         ("topology.client_stagger",)),
        ("stagger-list", {"topology.client_stagger": ["0s", "20s"]}, SHARED_BASE,
         ("topology.client_stagger", "duration")),
        ("stagger-no-unit", {"topology.client_stagger": 20}, SHARED_BASE, ("topology.client_stagger", "unit")),
    ]
    for i, (cid, values, base, words) in enumerate(cases):
        yield Case(cid, "client-start", scenario_file(with_values(values, base)), words, cli=i in (0, 2))


def strict_number_cases() -> Iterator[Case]:
    """Numbers written as text or yes/no, which the JSON Schema refuses and pydantic's lax mode read as
    numbers (issue 45 item 6): now refused by `validate` too."""
    numbers: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("seed-true", {"seed": True}, ("seed", "whole number")),
        ("seed-text", {"seed": "7"}, ("seed", "whole number")),
        ("width-text", {"video.width": "640"}, ("video.width", "whole number")),
        ("fps-false", {"video.fps": False}, ("video.fps", "whole number")),
        ("timeout-factor-text", {"player.timeout_factor": "3"}, ("player.timeout_factor", "a number")),
        ("cpu-text", {"player.cpu": "1"}, ("player.cpu", "whole number")),
        ("sabre-lambda-text", {"player": {"fetcher": "own", "abr": "sabre", "buffer": "8s",
                                          "abr_params": {"lambda": "1.5"}}}, ("lambda", "valid number")),
    ]
    for i, (cid, values, words) in enumerate(numbers):
        yield Case(f"strict-number-{cid}", "strict-number", scenario_file(with_values(values, DASH_BASE)), words,
                   cli=i == 0)


def schema_rule_cases() -> Iterator[Case]:
    """What the JSON Schema accepted and `validate` refused (issue 45 item 6, issue 49 item 2): a quantity
    in another family's unit, a unit no family has, a path count the topology does not take, names and
    parameters outside the cc, scheduler and ABR registries. Each is refused by both now
    (test_validate_and_the_schema_agree)."""
    own = {"fetcher": "own", "buffer": "8s"}
    cases: list[tuple[str, dict[str, Any], dict[str, Any] | None, tuple[str, ...]]] = [
        ("rate-in-ms", {"paths.lte.down.rate": "3ms"}, None, ("paths.lte.down.rate", "unit one of bit, kbit")),
        ("rate-in-bps", {"paths.lte.down.rate": "3mbps"}, None, ("paths.lte.down.rate", "'bps' is ambiguous")),
        ("delay-in-mbit", {"paths.lte.down.delay": "30mbit"}, None, ("paths.lte.down.delay", "unit one of us, ms")),
        ("delay-1ns", {"paths.lte.down.delay": "1ns"}, None, ("paths.lte.down.delay", "unit one of us, ms")),
        ("probe-duration-1ns", {"fidelity.probe_duration": "1ns"}, None, ("fidelity.probe_duration", "unit one of us")),
        ("buffer-in-ms", {"paths.lte.down.buffer": "5ms"}, None, ("paths.lte.down.buffer", "unit one of B, KB")),
        ("loss-100-percent", {"paths.lte.down.loss": "100%"}, None, ("paths.lte.down.loss", "must lie in [0, 1)")),
        ("one-path-on-dual-path", {"paths.wifi": DELETE}, None, ("paths", "dual-path takes 2 to 8 paths")),
        ("cc-in-capitals", {"transport.cc": "CUBIC"}, None, ("transport.cc", "available: cubic")),
        ("scheduler-unknown", {"transport.scheduler": "roundrobin"}, None, ("scheduler", "available: default")),
        ("scheduler-params-unknown-key", {"transport.scheduler": "minrtt", "transport.scheduler_params": {"nosuch": 1}},
         None, ("scheduler_params.nosuch", "allowed:")),
        ("bbrs-params-unknown-key", {"transport.cc": "bbr-s", "transport.cc_params": {"nosuch": 1}}, None,
         ("cc_params.nosuch", "allowed: window")),
        ("abr-params-unknown-key", {"player": {**own, "abr": "bba", "abr_params": {"nosuch": 1}}}, DASH_BASE,
         ("abr_params for bba", "unknown key")),
        ("abr-params-on-dashdemux", {"player": {"abr": "bba", "buffer": "8s", "abr_params": {"reservoir_s": 2}}},
         DASH_BASE, ("abr_params", "fetcher: own")),
        ("abr-gst-for-own", {"player": {**own, "abr": "gst"}}, DASH_BASE, ("abr 'gst'", "with fetcher own, one of")),
        # `false == 0` in Python: a capacity's low rate of `false` was read as 0 (carries nothing)
        ("capacity-low-false", {"paths.lte.down.rate": DELETE, "paths.lte.down.capacity": {"rate": {
            "kind": "square", "high": "3mbit", "low": False, "period": "10s", "duty": 0.5}}}, None,
         ("paths.lte.down.capacity.rate", "low")),
        ("dashjs-abr-params-for-bola", {"player": {"kind": "dashjs", "abr": "bola",
                                                   "abr_params": {"gamma_p": 5}}}, DASH_BASE,
         ("abr_params", "bola takes none")),
    ]
    for i, (cid, values, base, words) in enumerate(cases):
        yield Case(cid, "schema-rule", scenario_file(with_values(values, base)), words, cli=i == 0)


CASES = [*escape_cases(), *sensitive_cases(), *bomb_cases(), *huge_cases(), *special_cases(), *encoding_cases(),
         *duplicate_cases(), *sweep_size_cases(), *absurd_cases(), *wrong_type_cases(), *issue33_cases(),
         *issue45_cases(), *issue48_cases(), *strict_number_cases(), *schema_rule_cases()]


# --- the checks ------------------------------------------------------------------------------------


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """A hang becomes TimeoutError, and more than CASE_MEMORY_BYTES of new address space a
    MemoryError (both fail the case: validation must raise neither)."""
    def hang(_sig: int, _frame: Any) -> None:
        raise TimeoutError(f"validation took more than {seconds} s: a hang")
    old = signal.signal(signal.SIGALRM, hang)
    old_as = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_vm_size() + CASE_MEMORY_BYTES, old_as[1]))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, old_as)
        signal.signal(signal.SIGALRM, old)


def _vm_size() -> int:
    """This process's address space now (VmSize), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


def _forbidden_text(case: Case, folder: Path) -> list[str]:
    """Every line of the files the case points at that a message must not contain."""
    out = [SECRET, SECRET_HASH]
    for f in case.forbidden_files:
        with contextlib.suppress(OSError):
            out += [ln for ln in Path(f).read_text(errors="replace").splitlines() if len(ln) >= 12]
    return out


def rules(text: str) -> str:
    """What the message says is allowed: its problem lines without the excerpt of what was given
    (`; got ...`, the user's own text, may hold anything) and without the header (it names the grid
    point, the user's values too)."""
    return "\n".join(line.split("; got ")[0] for line in text.splitlines()[1:]) or text.split(": ", 1)[-1]


def check_message(case: Case, path: Path, text: str, folder: Path) -> None:
    assert "Traceback" not in text, text
    assert text.startswith(str(path)), f"the message must name the file {path}:\n{text}"
    for want in case.expect:
        assert want in text, f"{case.id}: {want!r} missing from:\n{text}"
    assert not REGEX_SIGNS.search(rules(text)), f"{case.id}: a regex instead of words:\n{text}"
    for line in text.splitlines()[1:]:       # one problem per line, each naming its field
        assert ": " in line, f"{case.id}: a line without its field: {line!r}\n{text}"
    for secret in _forbidden_text(case, folder):
        assert secret not in text, f"{case.id}: echoes file contents ({secret[:20]}…):\n{text}"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad")


def _build(case: Case, root: Path) -> tuple[Path, Path]:
    folder = root / case.id
    folder.mkdir(exist_ok=True)
    return case.build(folder), folder


def test_the_base_scenario_is_valid(tmp_path: Path) -> None:
    """The cases are BASE with one thing wrong: BASE itself must pass, or they prove nothing."""
    f = tmp_path / "s.yaml"
    f.write_text(dump(BASE))
    v = validate_file(f)
    assert v.ok, v.text


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 150, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES)
    classes = {c.cls for c in CASES}
    assert all(any(c.cli for c in CASES if c.cls == k) for k in classes), "each class has a CLI sample"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused_in_words(case: Case, root: Path) -> None:
    path, folder = _build(case, root)
    with time_limit(CASE_TIME_LIMIT_S):
        verdict = validate_file(path)
    assert not verdict.ok, f"{case.id}: accepted:\n{verdict.text}"
    check_message(case, path, verdict.text, folder)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CLI_CPU_S, CLI_CPU_S))
    resource.setrlimit(resource.RLIMIT_AS, (CLI_MEMORY_BYTES, CLI_MEMORY_BYTES))


def _cli(args: list[str], runtime: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MPVLAB_RUNTIME_DIR": str(runtime), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "mpvlab", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=CLI_CPU_S * 2, preexec_fn=_limits)


@pytest.mark.parametrize("case", [c for c in CASES if c.cli], ids=lambda c: c.id)
def test_cli_exits_2_and_creates_nothing(case: Case, root: Path, tmp_path: Path) -> None:
    """validate, and the command that would act on it (run, or a sweep's dry run), refuse it alike:
    exit 2, no traceback, the file named, nothing written where a run keeps its ledger."""
    path, folder = _build(case, root)
    runtime = tmp_path / "runtime"
    commands = [["validate", str(path)]]
    if case.kind == "scenario":
        commands.append(["run", str(path), "--results", str(tmp_path / "results")])
    else:
        commands.append(["sweep", str(path), "--dry-run", "--results", str(tmp_path / "results")])
    for args in commands:
        cp = _cli(args, runtime)
        out = cp.stdout + cp.stderr
        assert cp.returncode == 2, f"{args[0]} {case.id}: exit {cp.returncode}\n{out}"
        assert "Traceback" not in out, out
        assert str(path) in out, out
        for secret in _forbidden_text(case, folder):
            assert secret not in out, f"{case.id}: echoes file contents:\n{out}"
    assert not runtime.exists() or not any(runtime.rglob("*")), list(runtime.rglob("*"))
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*"))


# --- property-based: any value at any field of the schema --------------------------------------------

LEAVES = ["name", "seed", "description", "paths.wifi.down.rate", "paths.wifi.down.buffer", "paths.wifi.down.delay",
          "paths.wifi.down.burst", "paths.wifi.down.loss", "paths.wifi.up", "paths.lte.down.delay",
          "paths.lte.up.delay", "paths.lte", "paths", "transport.cc", "transport.cc_params", "transport.scheduler",
          "transport.scheduler_params", "transport.subflows", "video", "video.duration", "video.bitrate",
          "video.bitrates", "video.kind", "video.fps", "video.width", "player", "player.mode", "player.buffer",
          "player.abr", "player.timeout_factor", "fidelity.probe", "fidelity.probe_duration", "observe.sample_hz",
          "hosts.client_tcp_rmem", "hosts.offloads", "server.protocol", "server.tls", "topology.kind",
          "topology.server_addressing", "workload.kind", "cross_traffic", "paths.wifi.down.delay.kind",
          "paths.wifi.down.delay.period", "paths.wifi.down.delay.duty", "paths.wifi.down.delay.file"]
UNITS = ["", "ms", "s", "min", "us", "h", "d", "bit", "kbit", "mbit", "gbit", "B", "KB", "MB", "GB", "KiB", "pkt",
         "%"]
numbers = st.one_of(st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True))
unit_text = st.builds(lambda n, u: f"{n}{u}", numbers, st.sampled_from(UNITS))
scalars = st.one_of(st.none(), st.booleans(), numbers, unit_text, st.text(max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


# derandomize: the examples are the same on every run, so CI never meets a new counterexample by chance
# (to explore, drop derandomize locally; a case found that way goes into the hand-written lists).
@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(LEAVES), st.one_of(values, st.just(DELETE)), min_size=1, max_size=3))
def test_any_value_anywhere_is_refused_in_words_or_accepted(changes: dict[str, Any], tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(text := dump(with_values(changes)))
    with time_limit(CASE_TIME_LIMIT_S):
        verdict = validate_file(f)       # must not raise, whatever the value
    assert verdict.text.startswith(str(f)), verdict.text
    assert "Traceback" not in verdict.text
    if not verdict.ok:
        # (a message may quote a short excerpt of the value: only a regex the input did not hold counts)
        given = text + repr(changes)        # as written, and as a message's excerpt renders it
        assert REGEX_SIGNS.search(given) or not REGEX_SIGNS.search(rules(verdict.text)), verdict.text
        for line in verdict.text.splitlines()[1:]:
            assert ": " in line, f"a problem line without its field: {line!r}\n{verdict.text}"


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(LEAVES), grid=st.lists(values, min_size=1, max_size=4))
def test_any_grid_is_refused_in_words_or_accepted(key: str, grid: list[Any], tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir(exist_ok=True)
    (tmp_path / "sub" / "base.yaml").write_text(dump(BASE))
    f = tmp_path / "spec.yaml"
    f.write_text(text := dump({"name": "prop", "scenarios": ["sub/base.yaml"], "grid": {key: grid}}))
    with time_limit(CASE_TIME_LIMIT_S):
        verdict = validate_file(f)
    assert verdict.text.startswith(str(f)), verdict.text
    if not verdict.ok:
        given = text + repr(grid)
        assert REGEX_SIGNS.search(given) or not REGEX_SIGNS.search(rules(verdict.text)), verdict.text


# --- issue 33: `mpvlab report` reads a results folder as untrusted input --------------------------------
# A results folder can be crafted by anyone who can write in it, and the report runs as root: each
# hostile run folder must become one row of not_aggregated (with its reason), never the end of the
# report, never memory exhaustion; no write may follow a link planted in the report's folder.

BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi"))

# run folder → (file, contents) written over a complete synthetic run; words its row's reason holds
HOSTILE_RUNS: dict[str, tuple[str, str | bytes, str]] = {
    "yaml-billion-laughs": ("resolved.yaml", BILLION_LAUGHS, "expands (through aliases)"),
    "yaml-recursive-anchor": ("resolved.yaml", "a: &a [1, *a]\n", "itself"),
    "yaml-invalid": ("resolved.yaml", "a: [1, 2\nb: {\n", "not valid YAML"),
    "yaml-deep": ("resolved.yaml", "[" * 5000 + "]" * 5000, "nested deeper"),
    "yaml-a-list": ("resolved.yaml", "- 1\n- 2\n", "not a mapping"),
    "yaml-not-utf8": ("resolved.yaml", b"name: \xff\xfe\n", "UTF-8"),
    "json-deep": ("summary.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "json-invalid": ("summary.json", '{"scenario": "x", ', "unreadable"),
    "json-a-list": ("summary.json", "[1, 2, 3]", "not a JSON object"),
    "json-paths-wrong-type": ("summary.json", '{"scenario": "x", "paths": {"wifi": 5}}', "unexpected content"),
    "json-paths-a-list": ("summary.json", '{"scenario": "x", "paths": [1, 2]}', "unexpected content"),
    "json-warnings-wrong-type": ("summary.json", '{"scenario": "x", "warnings": [{"a": 1}]}', "not text"),
    "status-deep": ("status.json", "{\"a\":" * 50_000 + "1" + "}" * 50_000, "nested too deeply"),
    "status-a-string": ("status.json", '"complete"', "not a JSON object"),
    "header-deep": ("scenario.yaml", "# mpvlab-sweep: " + "[" * 4000 + "]" * 4000 + "\nname: x\n", ""),
}


def _hostile_results(root: Path) -> tuple[Path, int]:
    """Two complete synthetic runs per hostile case, one of them then broken; returns (folder, good runs)."""
    from mpvlab.reporting.synthetic import make_set
    src = root / "results"
    make_set(src, ["sc"], ["cubic"], ["default"], trials=len(HOSTILE_RUNS) + 2)
    runs = sorted((src / "sc").iterdir())
    for d, (case, (name, data, _)) in zip(runs, HOSTILE_RUNS.items()):
        (d / name).unlink(missing_ok=True)
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())
        d.rename(d.with_name(case))
    # links to devices and to files outside: read through, they must be refused as not a regular file
    special = runs[len(HOSTILE_RUNS)]
    (special / "summary.json").unlink()
    (special / "summary.json").symlink_to("/dev/zero")
    special.rename(special.with_name("summary-to-dev-zero"))
    return src, 2       # the untouched last run, and header-deep (a run whose unreadable header is no header)


def test_report_lists_each_hostile_run_and_still_reports(tmp_path: Path) -> None:
    from mpvlab.reporting import build_report
    src, good = _hostile_results(tmp_path)
    with time_limit(120), _memory_limit(1 << 30):
        rep = build_report(src, src / "report", figures=False)
    rows = {Path(n.rel).name: n for n in rep.collection.not_aggregated}
    assert rep.n_complete == good, [r.rel for r in rep.collection.runs]
    for case, (_, _, words) in HOSTILE_RUNS.items():
        if case == "header-deep":        # the sweep header is optional: an unreadable one is no header
            assert case not in rows
            continue
        assert case in rows, (case, sorted(rows))
        assert words in rows[case].reason, (case, rows[case])
        assert "Traceback" not in rows[case].reason and len(rows[case].reason) < 400, rows[case]
    assert "regular file" in rows["summary-to-dev-zero"].reason or "device" in rows["summary-to-dev-zero"].reason
    table = (src / "report" / "not_aggregated.csv").read_text()
    assert all(case in table for case in HOSTILE_RUNS if case != "header-deep"), table


@contextlib.contextmanager
def _memory_limit(extra: int) -> Iterator[None]:
    """At most `extra` more bytes of address space in this process while the block runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (vm + extra, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _report_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpvlab", "report", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "COLUMNS": "200"}, timeout=CLI_CPU_S * 4, preexec_fn=_limits)


def test_report_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    """DIR/report/runs.csv swapped for a link to a file outside, then DIR/report itself a link to a
    folder outside: neither is written through nor removed (issue 45: a report removes only what it
    wrote), both are refused in words; an intact earlier report is replaced by real files."""
    from mpvlab.reporting import ReportFolderError, build_report
    from mpvlab.reporting.synthetic import make_set
    src = tmp_path / "results"
    make_set(src, ["sc"], ["cubic"], ["default"], trials=2)
    victim = tmp_path / "victim.txt"
    victim.write_text(SECRET)
    # in-process, without figures: the same staging folder and rename (figures only cost time here;
    # the command's exit codes are test_report_never_replaces_a_folder_that_is_not_a_report's)
    build_report(src, src / "report", figures=False)
    (src / "report" / "runs.csv").unlink()
    (src / "report" / "runs.csv").symlink_to(victim)
    with pytest.raises(ReportFolderError, match="runs.csv .a symbolic link"):
        build_report(src, src / "report", figures=False)
    assert victim.read_text() == SECRET and (src / "report" / "runs.csv").is_symlink()
    (src / "report" / "runs.csv").unlink()          # the earlier report, less a file: replaced
    build_report(src, src / "report", figures=False)
    assert not (src / "report" / "runs.csv").is_symlink() and "run_id" in (src / "report" / "runs.csv").read_text()

    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(src / "report")
    (src / "report").symlink_to(outside)
    with pytest.raises(ReportFolderError, match="symbolic link"):
        build_report(src, src / "report", figures=False)
    assert list(outside.iterdir()) == [] and (src / "report").is_symlink()
    assert not [p for p in src.iterdir() if p.name.startswith(".report.")], list(src.iterdir())


def test_report_never_replaces_a_folder_that_is_not_a_report(tmp_path: Path) -> None:
    from mpvlab.reporting.synthetic import make_set
    src = tmp_path / "results"
    make_set(src, ["sc"], ["cubic"], ["default"], trials=2)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text(SECRET)
    cp = _report_cli([str(src), "--out", str(mine)])
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2 and "Traceback" not in out and "no report manifest" in out, out
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".mine.")]


# --- issue 45: a report removes only what it wrote; report data within limits; no worker outlives it ---


def _tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_report_removes_only_what_it_wrote(tmp_path: Path) -> None:
    """Issue 45: `--out DIR` on a folder that merely holds a report.html deleted thesis.tex beside it.
    Now each report writes a manifest (.mpvlab-report.json, sizes and SHA-256) and replaces DIR only
    when DIR holds exactly what it lists: a stranger file, a changed file, a stranger folder are each
    refused (exit 2, named), and every byte in DIR stays; an intact report is replaced."""
    from mpvlab.reporting import build_report
    from mpvlab.reporting.synthetic import make_set
    src = tmp_path / "results"
    make_set(src, ["sc"], ["cubic"], ["default"], trials=2)
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "report.html").write_text("<p>my notes</p>")
    (thesis / "thesis.tex").write_text(SECRET)
    before = _tree(thesis)
    cp = _report_cli([str(src), "--out", str(thesis), "--formats", "svg"])
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2 and "Traceback" not in out and "no report manifest" in out, out
    assert _tree(thesis) == before

    rep = tmp_path / "rep"
    build_report(src, rep, figures=False)
    assert (rep / ".mpvlab-report.json").is_file()
    for plant, words in (("thesis.tex", "thesis.tex (not written by the report)"),
                         ("runs.csv", "runs.csv (changed since the report wrote it)"),
                         ("drafts/ch1.tex", "drafts/ (a folder no report wrote)")):
        keep = (rep / plant).read_bytes() if (rep / plant).exists() else None
        (rep / plant).parent.mkdir(exist_ok=True)
        (rep / plant).write_text(SECRET)
        state = _tree(rep)
        cp = _report_cli([str(src), "--out", str(rep), "--formats", "svg"])
        out = cp.stdout + cp.stderr
        assert cp.returncode == 2 and "Traceback" not in out and words in out, (plant, out)
        assert _tree(rep) == state, plant
        if keep is not None:
            (rep / plant).write_bytes(keep)
        else:
            shutil.rmtree(rep / "drafts") if plant.startswith("drafts") else (rep / plant).unlink()
    build_report(src, rep, figures=False)             # the intact report: replaced
    assert "run_id" in (rep / "runs.csv").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".rep.")], list(tmp_path.iterdir())


def test_report_refuses_a_proc_folder_in_words(tmp_path: Path) -> None:
    """Issue 45: `--out /proc/self` ended in a traceback; a folder no file can be made in is one line."""
    from mpvlab.reporting.synthetic import make_set
    src = tmp_path / "results"
    make_set(src, ["sc"], ["cubic"], ["default"], trials=2)
    for out_dir, words in (("/proc/self", "symbolic link"), ("/proc/self/mpvlab-report", "cannot write the report"),
                           ("/proc/1/report", "cannot write the report")):
        cp = _report_cli([str(src), "--out", out_dir, "--formats", "svg"])
        out = cp.stdout + cp.stderr
        assert cp.returncode == 2 and "Traceback" not in out and words in out, (out_dir, out)


def test_report_leaves_out_a_huge_sparse_data_file(tmp_path: Path) -> None:
    """Issue 45: a 2 GiB sparse data/links.csv in one run was read whole (MemoryError after 160 s).
    Data series have a size limit (files.MAX_DATA_CSV_BYTES): the file is left out of the figures like
    a missing one, under a 1 GiB address-space cap on the report and its figure workers."""
    from mpvlab.reporting import build_report
    from mpvlab.reporting.synthetic import make_set
    src = tmp_path / "results"
    make_set(src, ["sc"], ["cubic"], ["default"], trials=2, series_s=5)
    runs = sorted((src / "sc").iterdir())
    for run in runs:                                   # each: whichever the report draws from
        for name in ("links.csv", "subflows.csv"):
            with open(run / "data" / name, "r+b") as f:
                f.truncate(2 << 30)                    # sparse: 2 GiB of NUL, no line end
    assert (runs[0] / "data" / "links.csv").stat().st_size == 2 << 30
    from mpvlab.reporting import figures
    from mpvlab.results.aggregate import aggregate
    c = aggregate(src)
    with time_limit(20), _memory_limit(256 << 20):    # was: 60 s, 4.4 GB, then csv.Error
        assert figures.throughput_series(c.runs[0]) == {} and figures.cwnd_series(c.runs[0]) == {}
    with time_limit(120), _memory_limit(1 << 30):
        rep = build_report(src, src / "report")
    assert rep.n_complete == 2 and rep.figures


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.cpu   # cpu: a report's figure worker pool (several processes), watched at 20 ms while it runs
def test_a_killed_report_leaves_no_worker_and_no_staging_folder(tmp_path: Path) -> None:
    """Issue 45: a report SIGKILLed (as a timeout does) left a forked figure worker running (166 MB, 172 s)
    and its `.report.new.*` staging folder, which the next report did not remove. Now each worker dies
    with the report (PR_SET_PDEATHSIG) and the next report at the same folder removes the dead one's."""
    from mpvlab.reporting.synthetic import make_set
    src = tmp_path / "results"
    make_set(src, ["sc"], ["cubic", "bbr"], ["default", "minrtt"], trials=3)
    p = subprocess.Popen([sys.executable, "-m", "mpvlab", "report", str(src), "--formats", "svg,pdf"], cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            kids = _children(p.pid)
            if kids and [d for d in src.iterdir() if d.name.startswith(".report.new.")]:
                break
            time.sleep(0.02)
        assert p.poll() is None and kids, "the report ended before its staging folder was seen"
    finally:
        p.kill()
        p.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.1)
    alive = [k for k in kids if _alive(k)]
    for k in alive:
        os.kill(k, signal.SIGKILL)
    assert not alive, f"figure workers {alive} outlived their SIGKILLed report"
    assert [d for d in src.iterdir() if d.name.startswith(".report.new.")], "nothing to reap: the test proves nothing"
    cp = _report_cli([str(src), "--formats", "svg"])
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not [d for d in src.iterdir() if d.name.startswith(".report.")], sorted(d.name for d in src.iterdir())
    assert (src / "report" / "report.html").is_file()


@pytest.mark.root
def test_the_loader_never_loads_a_non_struct_ops_program(tmp_path: Path) -> None:
    """Issue 33: bpfcc-loader (as `run` starts it, not --check) refuses an object holding a kprobe and a
    tracepoint program before loading anything: neither program ever shows in `bpftool prog show`."""
    ready = tmp_path / "ready.json"
    p = subprocess.Popen([str(CC_BUILD / "bpfcc-loader"), "--obj", str(CC_BUILD / "examples" / "faults" / "with_kprobe.bpf.o"),
                          "--name", "h33kprobe", "--ready-file", str(ready)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    loaded = ""
    try:
        deadline = time.monotonic() + 20
        while p.poll() is None and not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        loaded = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True).stdout
    finally:
        if p.poll() is None:
            p.terminate()
        _, err = p.communicate(timeout=30)
    assert "wk_snoop" not in loaded and "wk_trace" not in loaded, "the kprobe/tracepoint program was loaded"
    assert p.returncode == 1 and "only struct_ops programs" in err, (p.returncode, err)


# --- issue 45: `mpvlab shell --commands FILE` is untrusted input like every other file -------------------

SHADOW_LIKE = f"root:{SECRET_HASH}:19000:0:99999:7:::\nmpv:{SECRET}:19000:0:99999:7:::\n"


def _shell_command_files(d: Path) -> dict[str, tuple[Path, str]]:
    """case → (the --commands path, words the refusal holds)."""
    fifo = d / "fifo"
    os.mkfifo(fifo)
    (d / "long-line").write_text("x" * (20 << 20))
    (d / "shadow").write_text(SHADOW_LIKE)
    (d / "link-to-shadow").symlink_to(d / "shadow")
    (d / "binary").write_bytes(bytes(range(256)))
    (d / "control").write_text("nodes\n\x1b[2Jnet\n")
    (d / "long-command").write_text("nodes\nclient " + "a" * 5000 + "\n")
    return {"missing": (d / "nope.mn", "no such file"), "fifo": (fifo, "FIFO"),
            "dev-zero": (Path("/dev/zero"), "a device"), "20mb-line": (d / "long-line", "size limit"),
            "shadow": (d / "shadow", "line 1: does not start with a Mininet command"),
            "link-to-shadow": (d / "link-to-shadow", "line 1: does not start with a Mininet command"),
            "binary": (d / "binary", "not UTF-8"), "control": (d / "control", "line 2: holds control characters"),
            "long-command": (d / "long-command", "line 2: 5,007 characters")}


@pytest.mark.root
def test_shell_commands_file_is_refused_in_words_before_anything_is_built(tmp_path: Path) -> None:
    """Issue 45: a missing --commands file was a traceback; a FIFO, /dev/zero or a 20 MB line hung (90 s)
    and left a 21 MB /tmp/mpvlab-shell-* folder; /etc/shadow (or a link to it) was echoed line by line.
    Each is now refused (exit 2, no traceback, the file named, never its contents) before the shell
    makes its folder or any namespace: the subprocess's TMPDIR and runtime folder stay empty."""
    d = tmp_path / "in"
    d.mkdir()
    tmp, runtime = tmp_path / "tmp", tmp_path / "runtime"
    tmp.mkdir()
    runtime.mkdir()
    for case, (path, words) in _shell_command_files(d).items():
        env = {**os.environ, "TMPDIR": str(tmp), "MPVLAB_RUNTIME_DIR": str(runtime), "COLUMNS": "200"}
        cp = subprocess.run([sys.executable, "-m", "mpvlab", "shell", "scenarios/smoke.yaml", "--commands", str(path)],
                            capture_output=True, text=True, cwd=REPO, env=env, timeout=60, preexec_fn=_limits)
        out = cp.stdout + cp.stderr
        assert cp.returncode == 2 and "Traceback" not in out, (case, out)
        assert str(path) in out and words in out, (case, out)
        assert SECRET not in out and SECRET_HASH not in out and "root:" not in out, (case, out)
        assert list(tmp.iterdir()) == [] and list(runtime.rglob("*.json")) == [], case


def test_the_shell_never_echoes_an_unknown_line() -> None:
    """What a --commands line holds past its command word is never printed back (an unknown word that is
    not a plain name is not either): Mininet's CLI printed `*** Unknown command: <the whole line>`."""
    import cmd
    import io

    from mininet.cli import CLI

    from mpvlab.emulation.cli import _scenario_cli_class
    cls = _scenario_cli_class(CLI)
    shell = cls.__new__(cls)
    shell.mn, shell.stdout, shell.identchars = {}, io.StringIO(), cmd.IDENTCHARS
    shell.default(f"secret {SECRET}")
    shell.default(f"root:{SECRET_HASH}:19000")
    out = shell.stdout.getvalue()
    assert SECRET not in out and SECRET_HASH not in out, out
    assert out == "*** Unknown command: secret\n*** Unknown command: (not shown)\n", out


# --- issue 45: the Python API refuses with an MpvlabError, within the limits of files -------------------

def _deep(levels: int) -> dict[str, Any]:
    d: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        d = {"a": d}
    return {**BASE, "description": d}


def _api_cases(tmp: Path) -> dict[str, Callable[[], Any]]:
    """case → a call of the API that must raise an MpvlabError (and never start anything)."""
    import mpvlab
    import mpvlab.results
    smoke = str(REPO / "scenarios" / "smoke.yaml")
    spec = str(REPO / "sweeps" / "smoke-sweep.yaml")
    results = tmp / "results"
    results.mkdir(exist_ok=True)
    return {
        "dict-nested-10000": lambda: mpvlab.run(_deep(10_000)),
        "dict-nested-40": lambda: mpvlab.run(_deep(40)),
        "dict-object-value": lambda: mpvlab.run({**BASE, "name": object()}),
        "dict-set-value": lambda: mpvlab.run({**BASE, "description": {1, 2}}),
        "dict-int-key": lambda: mpvlab.run({**BASE, 7: "x"}),
        "dict-50mb-string": lambda: mpvlab.run({**BASE, "description": "x" * (50 << 20)}),
        "dict-many-values": lambda: mpvlab.run({**BASE, "description": [0] * 400_000}),
        "scenario-int": lambda: mpvlab.run(42),
        "scenario-bytes": lambda: mpvlab.run(smoke.encode()),
        "scenario-nul": lambda: mpvlab.run("scen\0ario.yaml"),
        "key-dir-int": lambda: mpvlab.run(smoke, key_dir=12),
        "results-int": lambda: mpvlab.run(smoke, results=12),
        "progress-not-callable": lambda: mpvlab.run(smoke, results=str(results), progress=5),
        "sweep-dict": lambda: mpvlab.sweep({"sweep": "x"}),
        "sweep-int": lambda: mpvlab.sweep(42),
        "sweep-parallel-text": lambda: mpvlab.sweep(spec, parallel="2"),
        "sweep-quick-text": lambda: mpvlab.sweep(spec, quick="yes"),
        "sweep-results-list": lambda: mpvlab.sweep(spec, results=[1]),
        "report-int": lambda: mpvlab.report(42),
        "report-out-int": lambda: mpvlab.report(results, out=12),
        "report-title-int": lambda: mpvlab.report(results, title=5),
        "report-figures-text": lambda: mpvlab.report(results, figures="no"),
        "report-formats-int": lambda: mpvlab.report(results, formats=42),
        "load-int": lambda: mpvlab.results.load(42),
        "load-none": lambda: mpvlab.results.load(None),
        "load-missing": lambda: mpvlab.results.load(tmp / "nope"),
    }


def test_the_api_raises_only_mpvlab_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: the API raised RecursionError (a deeply nested dict), yaml's RepresenterError
    ({'name': object()}), TypeErrors (key_dir=12, mpvlab.sweep(dict), mpvlab.results.load(42), …) and
    took >90 s and GBs on a 50 MB string. docs/python-api.md: any non-MpvlabError is a bug. Each call
    here raises an MpvlabError within 20 s and 512 MiB of new address space, and nothing is started
    (a run, a sweep or a report reaching its work would fail the case)."""
    from mpvlab.core.errors import MpvlabError

    def started(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the API started work on an input it should have refused")
    monkeypatch.setattr("mpvlab.runner.session.run_scenario", started)
    monkeypatch.setattr("mpvlab.sweeps.Sweeper.run", started)
    monkeypatch.setattr("mpvlab.reporting.build_report", started)
    wrong: dict[str, str] = {}
    for case, call in _api_cases(tmp_path).items():
        try:
            with time_limit(20):
                call()
            wrong[case] = "returned"
        except MpvlabError as e:
            if "Traceback" in str(e) or len(str(e)) > 2000:
                wrong[case] = f"message: {str(e)[:200]}"
        except BaseException as e:  # noqa: BLE001 — what the test counts
            wrong[case] = f"{type(e).__name__}: {str(e)[:200]}"
    assert not wrong, wrong


# --- issue 45 item 6, issue 49 item 2: the JSON Schema and `validate` over every scenario file here ------

# The rules `validate` applies that the generated JSON Schema (docs/schemas/scenario.schema.json) cannot
# express, each with the suite's cases that only it refuses (fnmatch patterns of case ids). Any other
# file that the schema accepts and `validate` refuses fails the test: the schema should say it too.
BEYOND_THE_SCHEMA: dict[str, tuple[str, ...]] = {
    "what a named file is or holds (inside the scenario's folder after symbolic links, a regular file, its "
    "size, points, UTF-8, a BPF object's programs and parameters): a schema sees the document only":
        ("escape-scenario-*", "escape-capacity-*", "escape-bpf-*", "huge-trace-*", "special-trace-*", "special-capacity-*",
         "encoding-trace", "bpf-object-*"),
    "a quantity's bounds (8kbit … 100gbit, 0 … 60s, one frame … 1GiB, within 24h, above zero, a number too "
    "large for a float): the value is a number with a unit in a string; the schema's pattern checks the unit "
    "family, a bound compares values across units":
        ("absurd-0", "absurd-2", "absurd-3", "absurd-4", "absurd-6", "absurd-7", "absurd-9", "absurd-10",
         "absurd-11", "absurd-12", "absurd-15", "absurd-17", "absurd-21", "absurd-22", "absurd-25", "absurd-26",
         "absurd-30", "absurd-31", "absurd-32", "absurd-39", "absurd-40", "absurd-41", "absurd-46",
         "absurd-duration-*", "dashjs-stable-buffer-0", "dashjs-top-quality-61min", "stagger-past-1h",
         "stagger-huge"),
    "order and sums across items or fields (a schedule's times from 0 and strictly increasing, base + "
    "amplitude, tcp_rmem min ≤ default ≤ max, a ladder strictly increasing, segment against frame length and "
    "video length, a flow's start before the run's end, the MPD's minBufferTime within the video's length and "
    "only on a DASH video)":
        ("absurd-18", "absurd-19", "absurd-20", "absurd-24", "absurd-38", "absurd-44", "absurd-45",
         "dash-repeated-bitrates",
         "dash-segment-*", "cross-traffic-after-the-run", "stagger-8-clients-past-1h"),
    "a finite number (YAML's .inf): JSON has no infinity, so JSON Schema has no word for it":
        ("festive-alpha-inf", "dashjs-festive-alpha-inf"),
    "which congestion controls the running kernel lists (/proc/sys/net/ipv4/tcp_available_congestion_control): "
    "the schema allows the registry's names and any kernel-style name":
        ("type-19",),
    "a field only one topology kind reads, unless it is its default (topology.client_stagger other than 0 "
    "off shared-bottleneck): a duration's zero in any unit (0s = 0ms), which a schema cannot compare":
        ("stagger-on-dual-path",),
    "a section the workload does not read, unless it equals its defaults: equality after the units are "
    "parsed (6s = 6000ms), which a schema cannot compare":
        ("unused-section-*",),
    "a setting of the other player kind, unless it equals its default (dash.js's 12s = 12000ms): the same "
    "equality after the units are parsed":
        ("dashjs-setting-on-gstreamer",),
}

_FILES, _BOUNDS, _ORDER = list(BEYOND_THE_SCHEMA)[:3]
# The same for sweep specs and docs/schemas/sweep.schema.json, whose grid and override values are the
# scenario schema's at each dotted key. A spec's own cases, and the scenario cases given as overrides.
BEYOND_THE_SWEEP_SCHEMA: dict[str, tuple[str, ...]] = {
    _FILES + "; a spec's scenario is judged by the file its name resolves to (.yaml or .yml)":
        ("escape-grid-*", "escape-override-*", "sensitive-*", "special-spec-scenario-fifo"),
    _BOUNDS: tuple(p.replace("absurd-", "absurd-override-") for p in BEYOND_THE_SCHEMA[_BOUNDS]
                   if p.startswith("absurd-") and not p.startswith("absurd-duration")),
    _ORDER: ("absurd-override-18", "absurd-override-19", "absurd-override-20", "absurd-override-24",
             "absurd-override-38", "absurd-override-44", "absurd-override-45"),
    "a value whose rule depends on what the scenario file sets (cc_params against the scenario's cc): the "
    "spec's schema does not see the scenario":
        ("absurd-override-28", "absurd-override-29"),
    "the number of runs, a product of the grid's list lengths, the scenarios and the trials (at most "
    "10,000)":
        ("sweep-900k", "sweep-1m", "sweep-scenarios-x-grid"),
}

# Written forms both must accept: the schema's patterns are not stricter than `validate`.
ACCEPTED_FORMS: dict[str, dict[str, Any]] = {
    "units-in-other-cases": {"paths.lte.down.rate": "3 Mbit", "paths.lte.down.buffer": "64pkt",
                             "paths.wifi.down.loss": "1.5%", "fidelity.probe_duration": "2.5s"},
    "delay-zero": {"paths.lte.down.delay": 0, "paths.lte.down.loss": 0},
    "bbrs-params": {"transport.cc": "bbr-s", "transport.cc_params": {"window": 10}},
    "scheduler-params": {"transport.scheduler": "minrtt", "transport.scheduler_params": {"period_us": 500}},
    "sabre-params": {"player": {"fetcher": "own", "abr": "sabre", "buffer": "8s", "abr_params": {"lambda": 1.5}}},
    "dashjs-festive-params": {"player": {"kind": "dashjs", "abr": "festive", "dashjs_stable_buffer_time": "8s",
                                         "abr_params": {"alpha": 12}}},
}


SHIPPED_SWEEP_TIME_LIMIT_S = 300


def _verdicts(items: list[tuple[str, Path]], kind: str = "scenario") -> dict[str, list[str]]:
    import json

    import jsonschema

    from mpvlab.input.files import InputFileError, load_yaml_file
    schema = "scenario.schema.json" if kind == "scenario" else "sweep.schema.json"
    validator = jsonschema.Draft202012Validator(json.loads((REPO / "docs" / "schemas" / schema).read_text()))
    quadrants: dict[str, list[str]] = {"both accept": [], "both refuse": [], "only validate accepts": [],
                                       "only schema accepts": []}
    for cid, path in items:
        # a shipped sweep is validated grid point by grid point (bbrs-dash-study: ~30 s): not a hang
        with time_limit(SHIPPED_SWEEP_TIME_LIMIT_S if cid.endswith(".yaml") else CASE_TIME_LIMIT_S):
            v_ok = validate_file(path).ok
            try:
                s_ok = not any(True for _ in validator.iter_errors(load_yaml_file(path, kind)[0]))
            except InputFileError:        # not YAML within the limits: no editor accepts it either
                s_ok = False
        key = ("both accept" if v_ok and s_ok else "both refuse" if not (v_ok or s_ok)
               else "only validate accepts" if v_ok else "only schema accepts")
        quadrants[key].append(cid)
    return quadrants


def test_validate_and_the_schema_agree(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every scenario input of this suite, every shipped scenario and the accepted forms above, through
    both the generated JSON Schema (what editors check) and `validate`. They agree on each, except
    where `validate` applies a rule listed in BEYOND_THE_SCHEMA; `validate` never accepts what the
    schema refuses (numbers as text or yes/no were: seed: "7", width: "640", …)."""
    items = [(c.id, _build(c, root)[0]) for c in CASES if c.kind == "scenario"]
    shipped = sorted((REPO / "scenarios").glob("*.yaml"))
    items += [(f.name, f) for f in shipped]
    (root / "accepted").mkdir(exist_ok=True)
    reno = CC_BUILD / "examples" / "reno_mini.bpf.o"
    for form, values in ACCEPTED_FORMS.items():
        f = root / "accepted" / f"{form}.yaml"
        f.write_text(dump(with_values(values, DASH_BASE if "player" in values else None)))
        items.append((f"accepted-{form}", f))
    if reno.exists():          # the bpf form: `cc: {bpf: FILE, params: {…}}`, with a real object
        items.append(("accepted-bpf-form", _bpf_case(reno, {"beta_pct": 70})(root / "accepted")))
    quadrants = _verdicts(items)
    with capsys.disabled():
        print(f"\nschema vs validate over {len(items)} files: "
              + ", ".join(f"{k} {len(v)}" for k, v in quadrants.items()))
    assert sum(map(len, quadrants.values())) == len(items)
    assert quadrants["only validate accepts"] == [], quadrants["only validate accepts"]
    accepted = {cid for cid, _ in items if cid.startswith("accepted-") or cid.endswith(".yaml")}
    assert accepted <= set(quadrants["both accept"]), sorted(accepted - set(quadrants["both accept"]))
    _only_by_rules_beyond_the_schema(quadrants["only schema accepts"], BEYOND_THE_SCHEMA)


def _only_by_rules_beyond_the_schema(only_schema: list[str], beyond: dict[str, tuple[str, ...]]) -> None:
    import fnmatch
    patterns = [p for ps in beyond.values() for p in ps]
    unexplained = [c for c in only_schema if not any(fnmatch.fnmatchcase(c, p) for p in patterns)]
    assert not unexplained, f"the schema accepts what `validate` refuses, by a rule it could express: {unexplained}"
    stale = [p for p in patterns if not any(fnmatch.fnmatchcase(c, p) for c in only_schema)]
    assert not stale, f"listed as beyond the schema, but the schema refuses them now: {stale}"


def test_validate_and_the_sweep_schema_agree(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every sweep spec of this suite and every shipped sweep, through docs/schemas/sweep.schema.json and
    `validate`: as for scenarios, `validate` never accepts what the schema refuses, and the schema
    accepts what `validate` refuses only by a rule listed in BEYOND_THE_SWEEP_SCHEMA."""
    items = [(c.id, _build(c, root)[0]) for c in CASES if c.kind == "spec"]
    shipped = sorted((REPO / "sweeps").glob("*.yaml"))
    items += [(f.name, f) for f in shipped]
    quadrants = _verdicts(items, "sweep spec")
    with capsys.disabled():
        print(f"\nsweep schema vs validate over {len(items)} files: "
              + ", ".join(f"{k} {len(v)}" for k, v in quadrants.items()))
    assert sum(map(len, quadrants.values())) == len(items)
    assert quadrants["only validate accepts"] == [], quadrants["only validate accepts"]
    assert {f.name for f in shipped} <= set(quadrants["both accept"])
    _only_by_rules_beyond_the_schema(quadrants["only schema accepts"], BEYOND_THE_SWEEP_SCHEMA)


# Quantities written every way a user might (case, spaces, decimals, zero, units of every family):
# property-based, `validate` accepting one means the schema accepts it too (its patterns are never
# stricter), and any the schema refuses `validate` refuses.
QUANTITY_FIELDS = ["paths.wifi.down.rate", "paths.lte.down.delay", "paths.wifi.down.buffer", "paths.wifi.down.burst",
                   "paths.lte.down.loss", "fidelity.probe_duration", "video.bitrate", "video.duration",
                   "player.max_lateness", "fidelity.rtt_tolerance"]
UNIT_SPELLINGS = ["bit", "kbit", "Kbit", "mbit", "MBIT", "Mbit", "gbit", "bps", "mbps", "us", "ms", "Ms", "s", "S",
                  "min", "ns", "h", "B", "b", "KB", "kB", "KiB", "MB", "MiB", "GiB", "pkt", "pkts", "packets", "%", ""]
quantity_numbers = st.one_of(st.integers(min_value=0, max_value=10**7).map(str),
                             st.floats(min_value=0, max_value=1e5, allow_nan=False).map(lambda x: f"{x:.3f}"),
                             st.sampled_from(["0", "00", "0.0", "-1", "1e3", ".5", "5.", "007"]))
quantity_texts = st.builds(lambda lead, n, gap, u, trail: f"{lead}{n}{gap}{u}{trail}", st.sampled_from(["", " "]),
                           quantity_numbers, st.sampled_from(["", " "]), st.sampled_from(UNIT_SPELLINGS),
                           st.sampled_from(["", " "]))


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field_=st.sampled_from(QUANTITY_FIELDS),
       value=st.one_of(quantity_texts, st.integers(min_value=0, max_value=3), st.floats(min_value=0, max_value=2)))
def test_a_quantity_validate_accepts_the_schema_accepts(field_: str, value: Any, tmp_path: Path) -> None:
    import json

    import jsonschema
    schema = json.loads((REPO / "docs" / "schemas" / "scenario.schema.json").read_text())
    doc = with_values({field_: value})
    f = tmp_path / "s.yaml"
    f.write_text(dump(doc))
    v_ok = validate_file(f).ok
    s_ok = not any(True for _ in jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(f.read_text())))
    assert s_ok or not v_ok, f"{field_}: {value!r} is accepted by validate, refused by the schema"

