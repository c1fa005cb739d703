"""Queue and interface counters of one network namespace, sampled on a fixed grid.

`sample_queues` runs build/mpvlab-qdiscstat (rtnetlink: every qdisc's backlog, drops,
overlimits, requeues, bytes/packets sent; every interface's rx/tx bytes, packets and
drops; see README.md) for the duration of a `with` block:

    t0 = time.monotonic_ns()
    with sample_queues("mpv-1234-r1", Path("out/run1/queues/r1"), t0, hz=100):
        ...  # run the transfer
    qdisc_rows, link_rows = load_samples(Path("out/run1/queues/r1"))

Files in `out_dir`: `qdisc.csv`, `link.csv` (columns in QDISC_COLUMNS / LINK_COLUMNS),
`qdiscstat.stderr` (the sampler's diagnostics and its final summary line).
"""

from __future__ import annotations

import contextlib
import csv
import subprocess
from pathlib import Path
from typing import Iterator

from mpvlab.collectors import COLLECTORS_DIR, CollectorError, collector_process, netns_handle

QDISCSTAT_BIN = COLLECTORS_DIR / "build" / "mpvlab-qdiscstat"
QDISC_FILE = "qdisc.csv"
LINK_FILE = "link.csv"
STDERR_FILE = "qdiscstat.stderr"
QDISC_COLUMNS = ("t_s", "dev", "kind", "handle", "parent", "backlog_bytes", "backlog_pkts",
                 "drops", "overlimits", "requeues", "sent_bytes", "sent_pkts")
LINK_COLUMNS = ("t_s", "dev", "rx_bytes", "rx_pkts", "rx_drops", "tx_bytes", "tx_pkts",
                "tx_drops")
# The C side accepts 100 us .. 10 s; 1..10000 Hz covers what the platform needs.
MIN_HZ, MAX_HZ = 1, 10000


def build_qdiscstat() -> Path:
    """`make -C collectors qdiscstat` (idempotent; needs only cc and libmnl-dev)."""
    cp = subprocess.run(["make", "-C", str(COLLECTORS_DIR), "qdiscstat"],
                        capture_output=True, text=True)
    if cp.returncode != 0:
        raise CollectorError(f"make -C {COLLECTORS_DIR} qdiscstat failed:\n{cp.stdout}\n{cp.stderr}")
    return QDISCSTAT_BIN


def interval_us(hz: int) -> int:
    """The grid interval for a rate; refuses rates that do not divide 1 s into whole
    microseconds, so the recorded grid is exactly the one asked for."""
    if not MIN_HZ <= hz <= MAX_HZ:
        raise CollectorError(f"hz must be within {MIN_HZ}..{MAX_HZ}, got {hz}")
    if 1_000_000 % hz:
        raise CollectorError(f"hz={hz} does not divide 1 s into whole microseconds")
    return 1_000_000 // hz


@contextlib.contextmanager
def sample_queues(
    netns_name: str,
    out_dir: Path,
    t0_ns: int,
    hz: int = 100,
    *,
    rt_prio: int | None = None,
    ready_timeout_s: float = 10.0,
    binary: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Sample the qdiscs and interfaces of one network namespace at `hz` while the block
    runs. Yields the sampler process; on exit sends SIGTERM, waits for it to flush and
    raises CollectorError if it failed (unless the block itself raised). `t0_ns` is the
    CLOCK_MONOTONIC origin of `t_s` and of the sampling grid (time.monotonic_ns()).
    `rt_prio` runs the sampler SCHED_FIFO at that priority (less grid jitter)."""
    exe = binary or QDISCSTAT_BIN
    if not exe.exists():
        raise CollectorError(f"{exe} is missing: run `make -C {COLLECTORS_DIR} qdiscstat`")
    iv = interval_us(hz)
    if rt_prio is not None and not 1 <= rt_prio <= 99:
        raise CollectorError(f"rt_prio must be within 1..99, got {rt_prio}")
    handle = netns_handle(netns_name)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ready = out_dir / ".qdiscstat.ready"
    ready.unlink(missing_ok=True)
    err_path = out_dir / STDERR_FILE
    argv = [
        str(exe), "--netns", str(handle), "--interval-us", str(iv),
        "--t0-ns", str(int(t0_ns)),
        "--qdisc-out", str(out_dir / QDISC_FILE), "--link-out", str(out_dir / LINK_FILE),
        "--ready-file", str(ready),
    ]
    if rt_prio is not None:
        argv += ["--rt-prio", str(rt_prio)]
    with collector_process(argv, "mpvlab-qdiscstat", ready, err_path, ready_timeout_s, grace=10) as proc:
        yield proc


_TEXT_COLUMNS = ("dev", "kind", "handle", "parent")


def _read(path: Path, columns: tuple[str, ...]) -> list[dict[str, str | float | int]]:
    # csv.reader and one converter per column: a run's 1 kHz samples are ~10^5 rows, and a
    # DictReader plus per-cell branching cost a run 0.2-0.4 s after its video ended.
    conv = [float if k == "t_s" else str if k in _TEXT_COLUMNS else int for k in columns]
    try:
        f = open(path, newline="")
    except FileNotFoundError:
        raise CollectorError(f"{path} is missing") from None
    with f:
        reader = csv.reader(f)
        header = next(reader, [])
        if tuple(header) != columns:
            raise CollectorError(f"{path}: header {header}, expected {list(columns)}")
        try:
            return [dict(zip(columns, [c(v) for c, v in zip(conv, r)])) for r in reader]
        except ValueError as e:
            raise CollectorError(f"{path}: {e}") from None


def load_samples(out_dir: Path, *, links: bool = True) -> tuple[list[dict[str, str | float | int]],
                                                              list[dict[str, str | float | int]]]:
    """(qdisc rows, link rows) of a finished sampler, typed (t_s float, counters int); without
    `links` the link rows are not read (an empty list)."""
    out_dir = Path(out_dir)
    return (_read(out_dir / QDISC_FILE, QDISC_COLUMNS),
            _read(out_dir / LINK_FILE, LINK_COLUMNS) if links else [])


__all__ = [
    "LINK_COLUMNS", "LINK_FILE", "QDISCSTAT_BIN", "QDISC_COLUMNS", "QDISC_FILE",
    "build_qdiscstat", "interval_us", "load_samples", "sample_queues",
]
