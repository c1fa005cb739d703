"""A BPF congestion control from an object file, registered for one run by ``cc/build/bpfcc-loader``.

Used for our BBRv3 / BBRv3-S (mpvlab/cc/bbr3.py) and for a user's own object:

    cc: {bpf: cc/my_cc.bpf.o, params: {beta_pct: 70}}     # path inside the scenario's folder

The object's convention (cc/README.md, "Your own BPF CC"): one ``struct tcp_congestion_ops`` in
``SEC(".struct_ops")``; parameters are integer globals ``const volatile <int> mpvlab_param_NAME``
set before load (unknown names and out-of-range values are refused by the loader). The loader
registers the object under a run-scoped name through a struct_ops link, so the CC disappears with
the loader process (even on SIGKILL) and concurrent runs never share one.

`load_bpf_cc()` is a context manager with the shape of `cc.load_bbrs()`: it validates, starts the
loader, waits for its ready file and yields a `BpfCCLoad` (pid for the ledger, kernel ids of
what it created, the effective parameters); on exit SIGTERM (SIGKILL after 10 s, still clean).
A load fault (verifier rejection, a kfunc the kernel lacks) raises `BpfCCError` whose message
ends with the loader's one-line diagnosis, e.g. "the kernel lacks kfunc 'x' (not in its BTF ...)".
"""
from __future__ import annotations

import json
import re
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from pydantic import Field, field_validator

from mpvlab.core.paths import checkout_root
from mpvlab.cc.ccrun import CCRun
from mpvlab.core import naming
from mpvlab.core import proc as proc_mod
from mpvlab.core.errors import MpvlabError
from mpvlab.core.quantities import Strict

CC_DIR = checkout_root() / "cc"   # the C/BPF sources and their build/
LOADER = CC_DIR / "build" / "bpfcc-loader"
EXAMPLE_OBJECT = CC_DIR / "build" / "examples" / "reno_mini.bpf.o"
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,15}$")
_PARAM_RE = re.compile(r"^[A-Za-z0-9_]{1,50}$")
_OBJ_RE = re.compile(r"^[A-Za-z0-9_./-]{1,200}\.o$")
MAX_PARAMS = 32            # bpfcc_loader.c MAX_PARAMS
MAX_OBJECT_BYTES = 64 << 20  # bpfcc_loader.c MAX_OBJ_BYTES
KERNEL_CCS = ("reno", "cubic", "bbr")


class BpfCCError(MpvlabError, RuntimeError):
    pass


class UserBpfCC(Strict):
    """`cc: {bpf: PATH, params: {NAME: INT}}` — PATH relative to the scenario's folder."""

    bpf: str = Field(description="BPF object (.o) inside the scenario's folder, e.g. cc/my_cc.bpf.o")
    params: dict[str, int] = Field(default_factory=dict,
                                   description="values for the object's `const volatile mpvlab_param_NAME` globals")

    @field_validator("bpf")
    @classmethod
    def _path(cls, v: str) -> str:
        if not _OBJ_RE.match(v) or v.startswith("/") or ".." in Path(v).parts:
            raise ValueError(f"{v!r} must be a relative path to a .o file inside the scenario's folder "
                             "(letters, digits and _ . / -, no '..', at most 200 characters)")
        return v

    # Before pydantic's coercion: lax int parsing would turn True into 1 and "7" into 7.
    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, v: object) -> dict[str, int]:
        if not isinstance(v, Mapping):
            raise ValueError("params: expected a mapping NAME: INTEGER")
        return check_params(v)


def check_params(params: Mapping[str, int]) -> dict[str, int]:
    """Names [A-Za-z0-9_]{1,50}, integer values in the signed 64-bit range, at most 32."""
    if len(params) > MAX_PARAMS:
        raise ValueError(f"params: at most {MAX_PARAMS}, got {len(params)}")
    out: dict[str, int] = {}
    for k, v in params.items():
        if not isinstance(k, str) or not _PARAM_RE.match(k):
            raise ValueError(f"params: name {k!r} must be 1..50 characters of [A-Za-z0-9_]")
        if isinstance(v, bool) or not isinstance(v, int) or not (-(2**63) <= v < 2**63):
            raise ValueError(f"params.{k}: expected a 64-bit integer, got {v!r} "
                             "(scale fractions yourself, e.g. factor_bp: 8500)")
        out[k] = v
    return out


def resolve_object(scenario_dir: Path, rel: str) -> Path:
    """The object file named by `cc.bpf`, which must lie inside `scenario_dir` (symlinks resolved)."""
    base = scenario_dir.resolve()
    path = (base / rel).resolve()
    if base != path and base not in path.parents:
        raise BpfCCError(f"cc.bpf: {rel!r} resolves to {path}, outside the scenario's folder {base}")
    if not path.is_file():
        raise BpfCCError(f"cc.bpf: {path} does not exist or is not a regular file")
    size = path.stat().st_size
    if not 0 < size <= MAX_OBJECT_BYTES:
        raise BpfCCError(f"cc.bpf: {path} is {size} bytes; allowed 1..{MAX_OBJECT_BYTES}")
    return path


# Inspecting an object (libbpf opens and parses it, nothing is loaded) takes milliseconds; a minute
# of 2-core steal cannot stretch it past this.
CHECK_TIMEOUT_S = 30


def check_object(obj: Path, params: Mapping[str, int]) -> dict[str, int]:
    """What `run` would refuse about `obj`, found at validation by the loader's --check (libbpf opens
    the object, nothing is loaded): exactly one `struct tcp_congestion_ops`, only struct_ops
    programs (no kprobe or tracepoint program from a user's object is ever loaded), every given
    parameter declared by the object and within its integer type. Returns the object's parameters
    with their effective values; raises BpfCCError with the loader's one-line reason."""
    if not LOADER.exists():
        raise BpfCCError(f"cannot inspect the BPF object: {LOADER} missing (./setup.sh builds it)")
    args = [str(LOADER), "--check", "--obj", str(obj), "--name", "mpvlab_check"]
    for k, v in check_params(params).items():
        args += ["--param", f"{k}={v}"]
    try:
        cp = subprocess.run(args, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BpfCCError(f"inspecting {obj.name} took more than {CHECK_TIMEOUT_S} s") from None
    if cp.returncode != 0:
        lines = [ln for ln in cp.stderr.splitlines() if ln.startswith("bpfcc-loader: ")]
        reason = lines[-1].removeprefix("bpfcc-loader: ") if lines else f"the loader exited with {cp.returncode}"
        raise BpfCCError(reason.replace(str(obj), obj.name).replace("--param ", "params.")[:500])
    try:
        return {str(k): int(v) for k, v in json.loads(cp.stdout)["params"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise BpfCCError(f"inspecting {obj.name}: unexpected loader output") from None


@dataclass(frozen=True)
class BpfCCLoad:
    """A registered BPF CC; ids are the kernel objects the loader created."""
    name: str
    pid: int
    link_id: int
    map_ids: tuple[int, ...]
    prog_ids: tuple[int, ...]
    params: dict[str, int]          # every mpvlab_param_* of the object, as loaded
    state_csv: Path | None
    events_csv: Path | None
    log: Path


def _diagnosis(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
    last = [ln for ln in lines if ln.startswith("bpfcc-loader: ")]
    return last[-1].removeprefix("bpfcc-loader: ") if last else (lines[-1] if lines else "no output")


@contextmanager
def load_bpf_cc(obj: Path, name: str, params: Mapping[str, int] | None = None, *,
                workdir: Path, state_csv: Path | None = None, events_csv: Path | None = None,
                state_hz: float = 100.0, timeout: float = 20.0) -> Iterator[BpfCCLoad]:
    """Register the struct_ops object `obj` as CC `name` while the block runs; unregister on exit.

    Raises ValueError for bad arguments and BpfCCError (message: the loader's diagnosis, full log
    in workdir/NAME.loader.log) if the kernel refuses the object."""
    if not _NAME_RE.match(name):
        raise ValueError(f"CC name {name!r}: 1..15 characters of [A-Za-z0-9_-]")
    if name in KERNEL_CCS:
        raise ValueError(f"CC name {name!r} is a kernel congestion control")
    p = check_params(params or {})
    if not (0 < state_hz <= 1000):
        raise ValueError(f"state_hz={state_hz} outside (0, 1000]")
    if not LOADER.exists():
        raise BpfCCError(f"{LOADER} missing: run `make -C {CC_DIR}` (./setup.sh does)")
    if not Path(obj).is_file():
        raise BpfCCError(f"BPF object {obj} does not exist")
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / f"{name}.ready.json"
    log = workdir / f"{name}.loader.log"
    ready.unlink(missing_ok=True)
    args = [str(LOADER), "--obj", str(obj), "--name", name, "--ready-file", str(ready),
            "--state-hz", repr(float(state_hz))]
    for k, v in p.items():
        args += ["--param", f"{k}={v}"]
    if state_csv is not None:
        args += ["--state-csv", str(state_csv)]
    if events_csv is not None:
        args += ["--events-csv", str(events_csv)]
    with open(log, "w") as logf:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
    try:
        try:
            proc_mod.wait_ready(proc, ready, f"bpfcc-loader ({name!r})", timeout, log=log,
                                error=BpfCCError, poll_s=0.02)
        except BpfCCError as e:
            raise BpfCCError(f"BPF congestion control {obj.name} as {name!r}: {_diagnosis(log)}") from e
        info = json.loads(ready.read_text())
        yield BpfCCLoad(name=name, pid=proc.pid, link_id=int(info["link_id"]),
                        map_ids=tuple(info["map_ids"]), prog_ids=tuple(info["prog_ids"]),
                        params={k: int(v) for k, v in info["params"].items()},
                        state_csv=state_csv, events_csv=events_csv, log=log)
    finally:
        proc_mod.stop_child(proc, grace=10)
    if proc.returncode != 0:
        raise BpfCCError(f"bpfcc-loader for {name!r} exited with {proc.returncode}: {_diagnosis(log)}")


def setup_user_bpf(run_id: str, spec: UserBpfCC, scenario_dir: Path, data: Path, logs: Path,
                   state_hz: float):  # -> ContextManager[cc.registry.CCRun]
    """Registry-shaped setup for `cc: {bpf: ..., params: ...}`: yields a CCRun with the run-scoped
    kernel name (``bpf_<run_id>``) and the loader's pid. No state export (the object's own)."""

    @contextmanager
    def _cm() -> Iterator[CCRun]:
        obj = resolve_object(scenario_dir, spec.bpf)
        name = naming.cc_name(run_id, "bpf")
        with load_bpf_cc(obj, name, spec.params, workdir=logs, state_hz=state_hz) as load:
            yield CCRun(name, load.pid, None)
    return _cm()
