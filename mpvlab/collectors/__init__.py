"""mpvlab collectors: kernel-side observers of a run.

`trace_scheduler` runs build/mpvlab-schedtrace (the BPF trace of MPTCP scheduling
decisions, bytes handed per subflow and path switches, see README.md) for the
duration of a `with` block; `load_summary` reads its decisions_summary.json.

    t0 = time.monotonic_ns()
    with trace_scheduler("srv-ns", Path("out/run1"), t0):
        ...  # run the transfer; the server side lives in network namespace "srv-ns"
    summary = load_summary(Path("out/run1"))
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Iterator

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc as proc_mod
from mpvlab.core.errors import MpvlabError

COLLECTORS_DIR = checkout_root() / "collectors"   # the C/BPF sources and their build/
SCHEDTRACE_BIN = COLLECTORS_DIR / "build" / "mpvlab-schedtrace"
SUMMARY_FILE = "decisions_summary.json"
SCHEMA = "mpvlab.schedtrace/1"
STDERR_FILE = "schedtrace.stderr"

_NETNS_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class CollectorError(MpvlabError, RuntimeError):
    """The collector could not start, failed while running, or left bad output."""


def build() -> Path:
    """`make -C collectors` (idempotent); returns the binary's path."""
    cp = subprocess.run(["make", "-C", str(COLLECTORS_DIR)], capture_output=True, text=True)
    if cp.returncode != 0:
        raise CollectorError(f"make -C {COLLECTORS_DIR} failed:\n{cp.stdout}\n{cp.stderr}")
    return SCHEDTRACE_BIN


def netns_handle(netns: str) -> Path:
    """A file naming the namespace: an absolute path (/proc/PID/ns/net, a bind mount)
    is used as is; a bare name means `ip netns`' /run/netns/NAME."""
    if netns.startswith("/"):
        path = Path(netns)
    elif _NETNS_NAME.match(netns) and netns not in (".", ".."):
        path = Path("/run/netns") / netns
    else:
        raise CollectorError(f"not a network namespace name or absolute path: {netns!r}")
    if not path.exists():
        raise CollectorError(f"network namespace handle {path} does not exist")
    return path


def _stderr_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


@contextlib.contextmanager
def collector_process(argv: list[str], name: str, ready: Path, err_path: Path, ready_timeout_s: float, *,
                      grace: float, poll_s: float = 0.005) -> Iterator[subprocess.Popen[bytes]]:
    """Start one collector daemon (stderr to err_path), wait for its ready file and yield it; on exit
    SIGTERM (SIGKILL after `grace` s) and, unless the block itself raised, a CollectorError naming
    the daemon, its exit code and its stderr when it did not exit 0."""
    with open(err_path, "wb") as err_f:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_f)
    proc_mod.wait_ready(proc, ready, name, ready_timeout_s, log=err_path, error=CollectorError, poll_s=poll_s)
    body_failed = False
    try:
        yield proc
    except BaseException:
        body_failed = True
        raise
    finally:
        rc = proc_mod.stop_child(proc, grace=grace)
        ready.unlink(missing_ok=True)
        if not body_failed and rc != 0:
            raise CollectorError(f"{name} failed (exit {rc}): {_stderr_text(err_path)}")


@contextlib.contextmanager
def trace_scheduler(
    netns_name: str,
    out_dir: Path,
    t0_ns: int,
    sample_hz: int = 100,
    *,
    bpf_stats: bool = False,
    ready_timeout_s: float = 15.0,
    binary: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Trace the MPTCP connections of one network namespace (the sender's) while the
    block runs. Yields the collector process; on exit sends SIGTERM, waits for the
    summary and raises CollectorError if the collector failed (unless the block itself
    raised). `t0_ns` is the CLOCK_MONOTONIC origin of all time columns
    (time.monotonic_ns() in Python)."""
    exe = binary or SCHEDTRACE_BIN
    if not exe.exists():
        raise CollectorError(f"{exe} is missing: run `make -C {COLLECTORS_DIR}`")
    if not 0 <= sample_hz <= 10000:
        raise CollectorError(f"sample_hz must be within 0..10000, got {sample_hz}")
    handle = netns_handle(netns_name)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ready = out_dir / ".schedtrace.ready"
    ready.unlink(missing_ok=True)
    (out_dir / SUMMARY_FILE).unlink(missing_ok=True)
    err_path = out_dir / STDERR_FILE
    argv = [
        str(exe), "--netns", str(handle), "--out-dir", str(out_dir),
        "--t0-ns", str(int(t0_ns)), "--sample-hz", str(int(sample_hz)),
        "--ready-file", str(ready),
    ]
    if bpf_stats:
        argv.append("--bpf-stats")
    # SIGTERM: it detaches and writes its summary; SIGKILL after 30 s (then rc is -9, an error)
    with collector_process(argv, "mpvlab-schedtrace", ready, err_path, ready_timeout_s, grace=30,
                           poll_s=0.01) as proc:
        yield proc
    if not (out_dir / SUMMARY_FILE).exists():
        raise CollectorError(f"mpvlab-schedtrace wrote no {SUMMARY_FILE} in {out_dir}")


def load_summary(out_dir: Path) -> dict[str, Any]:
    """decisions_summary.json of a finished trace (schema checked)."""
    path = Path(out_dir) / SUMMARY_FILE
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise CollectorError(f"{path} is missing (did the trace stop cleanly?)") from None
    except json.JSONDecodeError as e:
        raise CollectorError(f"{path} is not valid JSON: {e}") from None
    if data.get("schema") != SCHEMA:
        raise CollectorError(f"{path}: schema {data.get('schema')!r}, expected {SCHEMA!r}")
    return data


__all__ = [
    "CollectorError", "SCHEDTRACE_BIN", "build", "load_summary", "netns_handle",
    "trace_scheduler",
]
