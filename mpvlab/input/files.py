"""Reading untrusted input files (scenarios, sweep specs, delay traces) safely, as root.

Every input is refused before it can hang, exhaust memory or leak what it points at:
- only regular files are opened (a FIFO would block forever, /dev/zero never ends, a directory is
  not a file); the type is checked with fstat on the opened descriptor, opened with O_NONBLOCK so a
  FIFO cannot block the open itself;
- each kind has a size limit, and the read itself stops one byte past it (a file growing while it is
  read cannot get around the limit);
- text must be UTF-8 (the error gives the byte offset of the first bad byte, never the bytes);
- YAML: duplicate keys are refused (naming the key and both lines), tags other than the plain
  ones are refused by the safe loader, nesting depth, aliases and the node count after alias
  expansion are bounded, so a "billion laughs" fails in milliseconds naming the limit it hit;
- error messages name the file, the place in it and what is allowed; they never quote the file's
  contents (PyYAML's own messages quote the offending line, so only its description and position
  are kept).

Pure Python: imports nothing from the rest of mpvlab (the error class is the platform's one input
error, from core).
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from mpvlab.core.errors import InputError

# --- limits, each with its reason ----------------------------------------------------------------

# A scenario or sweep spec is a page of hand-written YAML (the largest shipped one is ~3 KB); 1 MiB is
# >300× that and parses in well under a second, while a 50 MB file took 169 s and 4.4 GB to validate.
MAX_SCENARIO_BYTES = 1 << 20
MAX_SPEC_BYTES = 1 << 20
# A delay trace is `time_ms delay_ms` per line (~12 bytes): 16 MiB holds ~1.4 million lines, far more
# than MAX_SCHEDULE_POINTS (mpvlab/input/limits.py) allows, so the point limit (not the read) is what a
# long trace meets first, with its own message.
MAX_TRACE_BYTES = 16 << 20
# Nesting: the deepest path in the schema is ~7 levels (paths.wifi.down.delay.points[i][j]); 32 leaves
# room and keeps PyYAML's recursive composer and pydantic far from Python's recursion limit (a file
# of 1 MiB of '[' would otherwise end in RecursionError).
MAX_YAML_DEPTH = 32
# Aliases are allowed (e.g. `up: *down`), but few: every alias multiplies what the validator walks.
MAX_YAML_ALIASES = 100
# Nodes after alias expansion: what pydantic and the sweep's duplicate check actually walk. A 1 MiB
# file written out without aliases holds well under 300,000 nodes in practice (a 58,000-point
# piecewise schedule fills it), so an alias structure expanding past that is a bomb, not a scenario.
MAX_YAML_NODES = 300_000

# A run's own JSON files (summary.json, provenance.json, status.json), read back by `mpvlab report`: a
# 10-minute run's summary is ~0.5 MB (per-second series); 64 MiB is >100x that, and bounds what a
# crafted file can make the report parse (json's C scanner needs ~10x the text in objects).
MAX_RESULT_JSON_BYTES = 64 << 20

# A run's data series (data/*.csv: links.csv, subflows.csv, the queues' CSVs, …), read back by the
# report's figures, which hold each whole in memory (~20x its text as Python rows). The largest series
# of a 30 s two-path run is data/queues/*/qdisc.csv at ~24 KB/s, so a 60-minute run's is ~90 MB: 256 MiB
# is ~3x that, and bounds a worker's memory to a few GB. A larger (or special) file is left out of the
# figures like a missing one (docs/robustness.md), never read.
MAX_DATA_CSV_BYTES = 256 << 20
# The report's manifest (mpvlab/reporting/folder.py): one entry per file it wrote (~120 bytes each).
MAX_REPORT_MANIFEST_BYTES = 16 << 20

# `mpvlab shell --commands FILE`: a hand-written script of Mininet CLI commands, a few dozen lines. 64 KiB
# is ~1,000 lines of 60 characters; a line is a command with its arguments, 4,096 characters at most
# (issue 45: a 20 MB single line hung the shell).
MAX_SHELL_COMMANDS_BYTES = 64 << 10
MAX_SHELL_LINE_CHARS = 4096

LIMITS = {"scenario": MAX_SCENARIO_BYTES, "sweep spec": MAX_SPEC_BYTES, "trace": MAX_TRACE_BYTES,
          "run's resolved scenario": MAX_SCENARIO_BYTES, "run's result file": MAX_RESULT_JSON_BYTES,
          "run's data file": MAX_DATA_CSV_BYTES, "report manifest": MAX_REPORT_MANIFEST_BYTES,
          "shell commands file": MAX_SHELL_COMMANDS_BYTES}


class InputFileError(InputError):
    """An input file refused before its contents were used; str() names the file and the rule."""


def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def _require_regular(path: Path, st: os.stat_result, kind: str, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        what = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise InputFileError(f"{path}: is {what}; a {kind} must be a regular file")
    if st.st_size > limit:
        raise InputFileError(f"{path}: {st.st_size} bytes is larger than the {kind} size limit of "
                             f"{_human_bytes(limit)}")


def _open_checked(path: Path, kind: str) -> int:
    """A descriptor of `path` if it is a regular file within LIMITS[kind] (checked before and after
    opening: a FIFO, device or directory is refused without being opened, O_NONBLOCK in case it is
    swapped for one in between), in blocking mode."""
    limit = LIMITS[kind]
    try:
        first = os.stat(path)
    except OSError as e:
        reason = "no such file" if e.errno == errno.ENOENT else (e.strerror or "cannot open").lower()
        raise InputFileError(f"{path}: cannot read {kind}: {reason}") from None
    _require_regular(path, first, kind, limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory; give a {kind} file") from None
    except OSError as e:
        reason = "no such file" if e.errno == errno.ENOENT else (e.strerror or "cannot open").lower()
        raise InputFileError(f"{path}: cannot read {kind}: {reason}") from None
    try:
        _require_regular(path, os.fstat(fd), kind, limit)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path, kind: str) -> bytes:
    """The bytes of `path` if it is a regular file of at most LIMITS[kind] bytes."""
    limit = LIMITS[kind]
    fd = _open_checked(path, kind)
    try:
        chunks: list[bytes] = []
        got = 0
        while got <= limit:                                   # one byte past the limit proves "too big"
            chunk = os.read(fd, min(1 << 16, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise InputFileError(f"{path}: larger than the {kind} size limit of {_human_bytes(limit)} "
                                 "(it grew while being read)")
        return b"".join(chunks)
    except OSError as e:
        raise InputFileError(f"{path}: cannot read {kind}: {(e.strerror or 'read error').lower()}") from None
    finally:
        os.close(fd)


def open_data_csv(path: Path) -> IO[str]:
    """A run's data series (data/*.csv) for reading as CSV text: a regular file within
    MAX_DATA_CSV_BYTES, else InputFileError (the report leaves it out like a missing file). The
    stream stops at the limit even if the file grows while it is read; bad UTF-8 becomes U+FFFD."""
    fd = _open_checked(path, "run's data file")
    raw = os.fdopen(fd, "rb")
    return io.TextIOWrapper(io.BufferedReader(_Capped(raw, MAX_DATA_CSV_BYTES)), encoding="utf-8", errors="replace",
                            newline="")


class _Capped(io.RawIOBase):
    """A binary stream that ends after `limit` bytes."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw, self.left = raw, limit

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:    # noqa: ANN401 — io's buffer protocol
        n = min(len(b), self.left)
        if n <= 0:
            return 0
        data = self.raw.read(n)
        b[:len(data)] = data
        self.left -= len(data)
        return len(data)

    def close(self) -> None:
        self.raw.close()
        super().close()


def decode_utf8(data: bytes, source: str, kind: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputFileError(f"{source}: not UTF-8 text: byte offset {e.start} (line {line}) is not valid "
                             f"UTF-8; a {kind} must be UTF-8 encoded") from None


def read_text(path: Path, kind: str) -> str:
    """A regular file within the size limit of `kind`, decoded strictly as UTF-8."""
    return decode_utf8(read_bytes(path, kind), str(path), kind)


# A command line of `mpvlab shell --commands` starts with a Mininet CLI command or a node name.
_SHELL_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


def read_shell_commands(path: Path) -> str:
    """`mpvlab shell --commands FILE`, as untrusted as every other input file: a regular UTF-8 file
    within MAX_SHELL_COMMANDS_BYTES, lines within MAX_SHELL_LINE_CHARS, no control characters, and
    each line (blank ones and `#` comments aside) starting with a command or node name. A file that is
    not such a script (/etc/shadow, a binary) is refused before the network is built, naming the
    line number and never the line (the CLI would echo it as an unknown command)."""
    kind = "shell commands file"
    text = read_text(path, kind)
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_SHELL_LINE_CHARS:
            raise InputFileError(f"{path}: line {n}: {len(line):,} characters, more than the limit of "
                                 f"{MAX_SHELL_LINE_CHARS:,} per command line")
        if any(not c.isprintable() and c != "\t" for c in line):
            raise InputFileError(f"{path}: line {n}: holds control characters; a {kind} is printable text")
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if not _SHELL_WORD.fullmatch(words[0]):
            raise InputFileError(f"{path}: line {n}: does not start with a Mininet command or a node name "
                                 "(a letter, then letters, digits, _ or -, at most 32; the line is not shown)")
    return text


# --- YAML -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


def _mark(node_or_event: Any) -> _Where:
    m = node_or_event.start_mark
    return _Where(m.line + 1, m.column + 1)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose mappings refuse duplicate keys (YAML 1.2 forbids them; PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)          # `<<` merge keys, as SafeLoader does
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    hash(key)
                except TypeError:
                    raise InputFileError(f"{self.name}: {_mark(key_node)}: a mapping key must be a plain "
                                         "value (text or number), not a list or mapping") from None
                if key in seen:
                    shown = key if isinstance(key, (int, float, bool)) or (
                        isinstance(key, str) and len(key) <= 40 and key.isprintable()) else "(a long key)"
                    raise InputFileError(
                        f"{self.name}: {_mark(key_node)}: duplicate key {shown!r} (first given at line "
                        f"{_mark(seen[key]).line}); each key may appear once in a mapping")
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _problem(e: yaml.YAMLError) -> str:
    """PyYAML's description and position, without the quoted snippet of the file it appends."""
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context or "syntax error"
        return f"line {mark.line + 1}, column {mark.column + 1}: {what}" if mark else what
    if isinstance(e, yaml.reader.ReaderError):
        # A control character (e.g. NUL) in the text: its position and code, never the text around it.
        code = ord(e.character) if isinstance(e.character, str) else int(e.character)
        return (f"character {e.position} (code {code:#x}) is a control character; YAML text may hold "
                "printable characters, tabs and line breaks only")
    return "syntax error"


def _precheck_events(text: str, source: str, loader: Any = yaml.SafeLoader) -> None:
    """One pass over the event stream (PyYAML's parser is iterative): depth and alias count are
    bounded before the recursive composer runs."""
    depth = aliases = 0
    for ev in yaml.parse(text, Loader=loader):
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise InputFileError(f"{source}: {_mark(ev)}: nested deeper than the limit of {MAX_YAML_DEPTH} "
                                     "levels (lists/mappings inside each other)")
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(ev, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_YAML_ALIASES:
                raise InputFileError(f"{source}: {_mark(ev)}: more than {MAX_YAML_ALIASES} aliases (*name), the limit for one file; "
                                     "write the values out instead")


def _expanded_size(root: yaml.Node, source: str) -> int:
    """Nodes the document has once every alias is expanded, computed on the composed graph (aliases
    are shared nodes there) without expanding anything: memoised per node, iterative, and stopping as
    soon as the limit is passed. A node reachable from itself (a recursive anchor) is refused."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done:
            on_path.discard(nid)
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_YAML_NODES:
                raise InputFileError(f"{source}: {_mark(node)}: expands (through aliases) to more than "
                                     f"{MAX_YAML_NODES:,} values, the limit for one file")
            size[nid] = total
            continue
        if nid in size:
            continue
        if nid in on_path:
            raise InputFileError(f"{source}: {_mark(node)}: an alias refers to a structure containing "
                                 "itself (recursive anchor); not allowed")
        on_path.add(nid)
        stack.append((node, True))
        for c in children:
            if id(c) in on_path:
                raise InputFileError(f"{source}: {_mark(c)}: an alias refers to a structure containing "
                                     "itself (recursive anchor); not allowed")
            if id(c) not in size:
                stack.append((c, False))
    return size[id(root)]


def _construct_within_limits(text: str, source: str, loader_cls: Any) -> Any:
    """The one document of `text`: depth and aliases bounded on the event stream first, then the
    node graph's expanded size, and only then construction (the step a bomb would blow up)."""
    _precheck_events(text, source, loader_cls)
    loader = loader_cls(text)
    loader.name = source
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml(text: str, source: str) -> Any:
    """One YAML document, parsed within the limits above. Raises InputFileError naming the limit or
    the position of the syntax error (never quoting the text)."""
    try:
        return _construct_within_limits(text, source, _StrictLoader)
    except InputFileError:
        raise
    except yaml.YAMLError as e:
        raise InputFileError(f"{source}: not valid YAML: {_problem(e)}") from None
    except (ValueError, OverflowError):
        # e.g. an integer of more than 4300 digits (Python's int-from-text limit)
        raise InputFileError(f"{source}: a value cannot be read as a number (too many digits?); numbers "
                             "in a scenario are at most a few digits long") from None
    except RecursionError:  # belt and braces: the depth limit should make this unreachable
        raise InputFileError(f"{source}: nested too deeply (limit {MAX_YAML_DEPTH} levels)") from None


_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml when built with it


def load_result_yaml(path: Path) -> Any:
    """A run's resolved.yaml as `mpvlab report` reads it: a results folder is untrusted input, so the
    same size, depth, alias and expanded-size limits as `validate` (a billion-laughs file fails in
    milliseconds), with libyaml's parser (~10x faster on a 1,000-run report) and without the
    duplicate-key check (the platform wrote the file; a duplicate cannot make it larger)."""
    kind = "run's resolved scenario"
    text = read_text(path, kind)
    source = str(path)
    try:
        return _construct_within_limits(text, source, _FAST_LOADER)
    except InputFileError:
        raise
    except yaml.YAMLError as e:
        raise InputFileError(f"{source}: not valid YAML: {_problem(e)}") from None
    except (ValueError, OverflowError, RecursionError) as e:
        raise InputFileError(f"{source}: cannot be read ({type(e).__name__})") from None


def load_result_json(path: Path) -> Any:
    """A run's JSON file (summary, provenance, status) within MAX_RESULT_JSON_BYTES; too deep a nesting
    (json's scanner recurses) is refused, not a crash."""
    import json
    data = read_bytes(path, "run's result file")
    try:
        return json.loads(data)
    except RecursionError:
        raise InputFileError(f"{path}: nested too deeply to be a result file") from None
    except ValueError as e:      # not JSON, not UTF-8
        raise InputFileError(f"{path}: not valid JSON ({str(e)[:100]})") from None


def load_yaml_file(path: Path, kind: str) -> tuple[Any, str]:
    """(parsed document, text) of a scenario or sweep spec file, within every limit above."""
    text = read_text(path, kind)
    return load_yaml(text, str(path)), text
