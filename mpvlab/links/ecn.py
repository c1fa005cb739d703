"""ECN marking at a shaped link (links/ecnmark/): this kernel has no marking qdisc (no RED, codel,
fq_codel, pie, cake, fq, choke; no BPF qdisc), so a tc-BPF program at clsact egress of the tbf's
device keeps a virtual queue that drains at the tbf's rate and sets CE on ECT packets while it holds
more than K bytes (DCTCP-style step marking at enqueue; links/ecnmark/README.md).

Scenario (on a link direction that has a `rate`):

    down: {rate: 25Mbit, buffer: 125KB, ecn_mark: {threshold: 4ms}}     # or threshold: 12500B

A threshold in time is converted at the link rate (K = rate/8 × t). The run sets
`net.ipv4.tcp_ecn=1` in its own namespaces so the endpoints negotiate ECN.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable

from pydantic import BeforeValidator, Field, PlainSerializer, WithJsonSchema

from mpvlab.core.paths import checkout_root
from mpvlab.core import naming, proc, units
from mpvlab.core.errors import MpvlabError
from mpvlab.core.netns import Netns
from mpvlab.core.quantities import Strict

REPO = checkout_root()
BUILD = REPO / "links" / "ecnmark" / "build"
OBJECT = BUILD / "ecn_vq.bpf.o"
LOADER = BUILD / "mpvlab-ecnmark"
FRAME_BYTES = 1514

# Bounds: below one frame every packet would be marked; a threshold of more than 1 s of queue or
# 256 MB is no longer "marking before the buffer fills" on any link this platform emulates.
MIN_THRESHOLD_NS, MAX_THRESHOLD_NS = 10_000, 1_000_000_000
MIN_THRESHOLD_BYTES, MAX_THRESHOLD_BYTES = FRAME_BYTES, 256 << 20


class EcnMarkError(MpvlabError, RuntimeError):
    pass


@dataclass(frozen=True)
class Threshold:
    """K as given: a time at the link rate (ns) or bytes (exactly one of the two)."""

    ns: Annotated[int | None, Field(description="K as a time at the link rate, in ns; null when given as a size.")] = None
    bytes: Annotated[int | None, Field(description="K as a size, in bytes; null when given as a time.")] = None

    def to_bytes(self, rate_bit: int) -> int:
        if self.bytes is not None:
            return self.bytes
        assert self.ns is not None
        return rate_bit * self.ns // 8 // 1_000_000_000

    def __str__(self) -> str:
        return units.format_duration(self.ns) if self.ns is not None else units.format_size(self.bytes or 0)


_TIME_RE = re.compile(r"^\s*[0-9.]+\s*(us|ms|s)\s*$")


def parse_threshold(v: Any) -> Threshold:
    if isinstance(v, Threshold):
        return v
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise ValueError(f"threshold {v!r}: give a time at the link rate ('4ms') or a size ('12500B', '12KB')")
    if isinstance(v, str) and _TIME_RE.match(v):
        ns = units.parse_duration_ns(v)
        if not MIN_THRESHOLD_NS <= ns <= MAX_THRESHOLD_NS:
            raise ValueError(f"threshold {v!r} is outside 10us … 1s")
        return Threshold(ns=ns)
    try:
        n = units.parse_size(v)
    except units.UnitError as e:
        raise ValueError(f"threshold {v!r}: {e}; or a time at the link rate like '4ms'") from None
    if not MIN_THRESHOLD_BYTES <= n <= MAX_THRESHOLD_BYTES:
        raise ValueError(f"threshold {v!r} is outside 1514B (one frame) … 256MB")
    return Threshold(bytes=n)


# What a file may write for K: a string, a time in us/ms/s or a size with units.SIZE_UNITS (the
# shape; parse_threshold checks the number and the bounds). Declared because pydantic would otherwise
# publish the schema of the parsed Threshold ({ns, bytes}), which parse_threshold refuses.
_THRESHOLD_UNITS = ("us", "ms", "s", *units.SIZE_UNITS)
_THRESHOLD_PATTERN = rf"^\s*[0-9]+(\.[0-9]+)?\s*({'|'.join(_THRESHOLD_UNITS)})\s*$"
ThresholdT = Annotated[
    Threshold, BeforeValidator(parse_threshold), PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "pattern": _THRESHOLD_PATTERN, "x-unit": "ns or bytes",
                    "x-written": "a time at the link rate (number + us, ms, s) or a size (number + B, KB, MB, KiB, MiB, …)",
                    "examples": ["4ms", "12500B"]}),
]


class EcnMark(Strict):
    """`ecn_mark: {threshold: 4ms}` on a link direction with a rate: CE on ECT packets while the
    virtual queue (draining at the rate) holds more than `threshold`."""

    threshold: ThresholdT = Field(description="Marking threshold K: a time at the link rate ('4ms') or a size ('12KB'), one frame … tbf limit.")


def check_on_link(mark: EcnMark, rate_bit: int | None, buffer_bytes: int, has_capacity: bool) -> None:
    """The link-level rules (LinkDirection's validator calls this): a rate to drain at, and a K that
    is at least one frame and below the tbf limit (at or above it the tbf drops before marking)."""
    if rate_bit is None:
        why = ("the delay line's capacity model is not a tc qdisc the marker can follow"
               if has_capacity else "an unshaped link has no queue to mark at")
        raise ValueError(f"ecn_mark needs a rate (tbf) on the same link direction: {why}")
    k = mark.threshold.to_bytes(rate_bit)
    if k < FRAME_BYTES:
        raise ValueError(f"ecn_mark.threshold {mark.threshold} is {k} B at {rate_bit} bit/s: less than one "
                         f"{FRAME_BYTES}-byte frame (every packet would be marked)")
    if k >= buffer_bytes:
        raise ValueError(f"ecn_mark.threshold {mark.threshold} is {k} B, not below the buffer ({buffer_bytes} B): "
                         "the tbf would drop before the marker marks")


def marker_name(shaper_ifb: str) -> str:
    """The run-scoped name of a direction's marker program and map, from that direction's IFB name
    (naming.ifname: `mv` + run id + tag, unique per run and direction): `ecn_<run id><tag>`, at most
    14 chars (BPF_OBJ_NAME_LEN is 16 with the NUL)."""
    m = re.fullmatch(r"mv([a-z0-9]{6})([a-z0-9]{1,4})", shaper_ifb)
    assert m, shaper_ifb
    return f"ecn_{naming.check_run_id(m.group(1))}{m.group(2)}"


COUNTERS = ("pkts", "bytes", "ect", "not_ect", "ce_in", "non_ip", "marked", "mark_failed", "over_threshold",
            "over_limit")



@dataclass
class Marker:
    """One attached marker: its loader process (kept in the run's ledger) and its files."""

    label: str
    name: str
    dev: str
    rate_bit: int
    threshold_bytes: int
    limit_bytes: int
    process: subprocess.Popen[bytes]
    files: dict[str, Path] = field(default_factory=dict)
    ids: tuple[int, int] = (0, 0)     # kernel prog id, map id

    def alive(self) -> bool:
        return self.process.poll() is None

    def snapshot(self) -> dict[str, int]:
        """The counters now, read from the map by id (maps are not per namespace): the run takes one
        at the start and one at the end of the workload, so probe traffic before it is not counted."""
        cp = proc.run(["bpftool", "-j", "map", "lookup", "id", str(self.ids[1]), "key", "0", "0", "0", "0"],
                      check=False)
        try:
            val = json.loads(cp.stdout)["formatted"]["value"]
            return {k: int(val[k]) for k in COUNTERS}
        except (ValueError, KeyError, TypeError):
            raise EcnMarkError(f"cannot read the ECN marker's map {self.name} (id {self.ids[1]}): "
                               f"{(cp.stderr or cp.stdout).strip()[-300:]}") from None

    def stop(self) -> dict[str, Any]:
        """Detach and return the counters (the loader writes them after detaching)."""
        rc = proc.stop_child(self.process)
        try:
            stats: dict[str, Any] = json.loads(self.files["stats"].read_text())
        except (OSError, ValueError):
            return {"error": f"the ECN marker {self.name} wrote no counters (exit {rc}); see {self.files['log']}",
                    "exit_code": rc}
        stats["exit_code"] = rc
        return stats


def window(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in COUNTERS}


class WorkloadWindow:
    """The markers' counts over the workload (summary.py EcnMarks): a snapshot of each marker's map
    when the collectors start and one when they stop, so the pre-run probe's packets are not counted."""

    def __init__(self, handles: list[Any]) -> None:
        self.markers: dict[str, Marker] = {h.plan.label: h.ecn_marker for h in handles
                                           if getattr(h, "ecn_marker", None) is not None}
        self.before: dict[str, dict[str, int]] = {}
        self.counts: dict[str, dict[str, Any]] = {}

    def start(self) -> None:
        self.before = {label: m.snapshot() for label, m in self.markers.items()}

    def stop(self) -> None:
        for label, m in self.markers.items():
            if label not in self.before:
                continue
            c: dict[str, Any] = window(self.before[label], m.snapshot())
            c["marked_fraction_of_ect"] = round(c["marked"] / c["ect"], 6) if c["ect"] else None
            self.counts[label] = {"threshold_bytes": m.threshold_bytes, "rate_bit": m.rate_bit,
                                  "limit_bytes": m.limit_bytes, **c}

    def view(self) -> dict[str, dict[str, Any]] | None:
        return self.counts or None


def check_built() -> None:
    for p in (OBJECT, LOADER):
        if not p.exists():
            raise EcnMarkError(f"{p} is missing: run ./setup.sh (it builds links/ecnmark)")


def start_marker(ns: Netns, dev: str, rate_bit: int, threshold_bytes: int, limit_bytes: int, *, name: str, label: str,
                 workdir: Path, samples_dir: Path | None = None, sample_hz: int = 100,
                 popen: Callable[[list[str], Any], subprocess.Popen[bytes]] | None = None,
                 on_process: Callable[[proc.ProcRef], None] | None = None) -> Marker:
    """Attach the marker at `dev` egress inside `ns`; returns once it is attached (ready file).
    `limit_bytes`: the tbf's limit, whose tail drop the virtual queue mirrors.
    Its virtual backlog is sampled at `sample_hz` into ecn-<label>.csv (t_mono_ns: CLOCK_MONOTONIC,
    the clock of the run's time zero and of collectors/qdiscstat; `load_samples` converts)."""
    check_built()
    assert re.fullmatch(r"[a-z0-9-]{1,40}", label), label
    files = {k: workdir / f"ecn-{label}.{ext}" for k, ext in (("ready", "ready"), ("stats", "json"), ("log", "log"))}
    files["samples"] = (samples_dir or workdir) / f"ecn-{label}.csv"
    files["ready"].unlink(missing_ok=True)
    argv = [str(LOADER), "--obj", str(OBJECT), "--dev", dev, "--rate-bit", str(rate_bit),
            "--threshold-bytes", str(threshold_bytes), "--limit-bytes", str(limit_bytes), "--name", name, "--ready-file", str(files["ready"]),
            "--stats", str(files["stats"]), "--samples", str(files["samples"]),
            "--sample-us", str(max(100, 1_000_000 // max(1, sample_hz)))]
    with files["log"].open("wb") as log:
        p = popen(argv, log) if popen else ns.popen(argv, stdout=log, stderr=subprocess.STDOUT)
    if on_process is not None:
        on_process(proc.ProcRef.of(p.pid, f"ecnmark {label}"))
    proc.wait_ready(p, files["ready"], f"ECN marker {label} ({dev})", 10.0, log=files["log"], error=EcnMarkError)
    ids = tuple(int(x) for x in files["ready"].read_text().split()[:2])
    return Marker(label, name, dev, rate_bit, threshold_bytes, limit_bytes, p, files, (ids[0], ids[1]))


def load_samples(path: Path, t0_ns: int = 0) -> list[dict[str, float]]:
    """Rows of a marker's samples with `t_s` = (t_mono_ns − t0_ns) / 1e9 added."""
    rows: list[dict[str, float]] = []
    with path.open() as f:
        head = f.readline().strip().split(",")
        for line in f:
            parts = line.strip().split(",")
            if len(parts) == len(head):
                row = {k: float(v) for k, v in zip(head, parts)}
                row["t_s"] = (int(parts[0]) - t0_ns) / 1e9
                rows.append(row)
    return rows


def bpf_objects_named(name: str) -> dict[str, list[int]]:
    """Kernel program and map ids whose name is `name` (bpftool; the run's leftover check)."""
    out: dict[str, list[int]] = {"progs": [], "maps": []}
    for kind, key in (("prog", "progs"), ("map", "maps")):
        cp = proc.run(["bpftool", "-j", kind, "show"], check=False)
        try:
            items = json.loads(cp.stdout or "[]")
        except ValueError:
            items = []
        out[key] = [int(i["id"]) for i in items if i.get("name") == name]
    return out


def enable_ecn(namespaces: list[Netns]) -> dict[str, dict[str, str]]:
    """`net.ipv4.tcp_ecn=1` (request ECN on outgoing connections, accept it on incoming ones) in each
    of the run's own namespaces — never the root namespace. Returns what was read back, per
    namespace, for the provenance."""
    for ns in namespaces:
        assert naming.run_id_of_netns(ns.name) is not None, f"not a run namespace: {ns.name}"
        ns.sysctl("net.ipv4.tcp_ecn", "1")
    return {ns.name: {"net.ipv4.tcp_ecn": ns.read_sysctl("net.ipv4.tcp_ecn")} for ns in namespaces}


def wanted(directions: list[Any]) -> bool:
    """Whether any link direction asks for ECN marking (then the endpoints negotiate ECN)."""
    return any(getattr(d, "ecn_mark", None) is not None for d in directions)
