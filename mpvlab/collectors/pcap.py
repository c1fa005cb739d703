"""Packet capture at named points of a run: one tcpdump per (namespace, interface).

`capture` runs tcpdump on every tap for the duration of a `with` block and yields a
`Capture`; on exit it reads the interface counters of each tap's namespace, stops the
captures (SIGTERM: tcpdump flushes and prints its counters), and fills `capture.results`:
per tap the file, packets and bytes in the file (bytes = the frames' original lengths,
as the interface counters count them), tcpdump's own counters ("packets dropped by
kernel"), whether the size limit cut the capture short, and the cross-check of the
capture's bytes against the interface's rx + tx bytes over the same window.

    taps = [Tap("client", "mpv-1234-client", "mv1234c0"), ...]
    with capture(taps, Path("out/pcap"), snaplen=128, max_bytes=200_000_000,
                 register=ledger.add_proc) as cap:
        ...   # the run
    cap.results   # list[TapResult]

Files: `out_dir/<point>-<if>.pcap` and `out_dir/<point>-<if>.stderr`.
"""

from __future__ import annotations

import contextlib
import re
import struct
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from mpvlab.collectors import CollectorError, _stderr_text
from mpvlab.core import proc as proc_mod
from mpvlab.core.netns import Netns

# A tcpdump writes its stats lines on stderr when it stops: these three are the ones we record.
_STAT_RE = {
    "captured": re.compile(r"^(\d+) packets? captured", re.M),
    "received_by_filter": re.compile(r"^(\d+) packets? received by filter", re.M),
    "dropped_by_kernel": re.compile(r"^(\d+) packets? dropped by kernel", re.M),
}
# Capture window cross-check: the counters are read once every tcpdump is listening and again just
# before they are stopped, so the two windows differ only by what crossed the interface between the
# counter read and the capture's start/stop (a few control packets at most: nothing flows then). The
# allowance is that many full frames, plus 0.1 % of the counted bytes for longer stragglers.
INFLIGHT_FRAMES_ALLOWED = 8
FULL_FRAME = 1514
RELATIVE_ALLOWANCE = 0.001
# How often the size limit is checked: a capture can overshoot max_bytes by this much time of traffic.
SIZE_POLL_S = 0.1


@dataclass(frozen=True)
class Tap:
    """One capture: `point` is the scenario's name for the node (client, server, router-<path>)."""

    point: str
    netns: str
    ifname: str

    @property
    def stem(self) -> str:
        return f"{self.point}-{self.ifname}"


@dataclass
class TapResult:
    point: str
    interface: str
    file: str
    packets: int
    bytes: int                      # sum of original frame lengths in the file
    captured: int | None            # tcpdump's counters (None if it printed none)
    received_by_filter: int | None
    dropped_by_kernel: int | None
    truncated: bool                 # stopped early at max_mb: the file ends before the run did
    counter_bytes: int | None       # interface rx + tx bytes over the capture window
    counter_packets: int | None
    ratio: float | None             # bytes / counter_bytes
    ok: bool | None                 # the byte cross-check (None without counters)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Running:
    tap: Tap
    popen: subprocess.Popen[bytes]
    pcap: Path
    err: Path
    before: dict[str, int] | None = None
    after: dict[str, int] | None = None
    truncated: bool = False


@dataclass
class Capture:
    taps: list[Tap]
    out_dir: Path
    snaplen: int
    max_bytes: int
    results: list[TapResult] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The summary's `capture` record."""
        return {
            "snaplen": self.snaplen, "max_bytes": self.max_bytes,
            "files": [r.as_dict() for r in self.results],
            "dropped_by_kernel": sum(r.dropped_by_kernel or 0 for r in self.results),
            "truncated": [r.file for r in self.results if r.truncated],
            "cross_check": {
                "definition": "bytes = sum of the captured frames' original lengths; counter_bytes = the "
                              "interface's rx_bytes + tx_bytes (/proc/PID/net/dev of its namespace) from the "
                              "moment every capture listened to the moment the captures were stopped",
                "allowance_bytes": f"{INFLIGHT_FRAMES_ALLOWED} x {FULL_FRAME} + {RELATIVE_ALLOWANCE:g} x counter_bytes",
            },
        }


def read_net_dev(pid: int, ifname: str) -> dict[str, int]:
    """rx/tx bytes and packets of one interface in the network namespace `pid` lives in."""
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() == ifname:
            f = rest.split()
            return {"bytes": int(f[0]) + int(f[8]), "packets": int(f[1]) + int(f[9])}
    raise CollectorError(f"interface {ifname} not in /proc/{pid}/net/dev")


def pcap_totals(path: Path) -> tuple[int, int]:
    """(records, sum of original lengths) of a pcap file, from the record headers alone."""
    data = path.read_bytes()
    if len(data) < 24:
        return 0, 0
    endian = _endianness(data[:4], path)
    rec = struct.Struct(endian + "IIII")
    off, n, total = 24, 0, 0
    while off + 16 <= len(data):
        _s, _u, incl, orig = rec.unpack_from(data, off)
        off += 16 + incl
        if off > len(data):
            break   # a record cut off by an abrupt stop: not counted
        n += 1
        total += orig
    return n, total


def _endianness(magic: bytes, path: Path) -> str:
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return "<"
    if magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        return ">"
    raise CollectorError(f"{path}: not a pcap file (magic {magic.hex()})")


def _stats(err_text: str) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for k, rx in _STAT_RE.items():
        m = rx.search(err_text)
        out[k] = int(m.group(1)) if m else None
    return out


def _check(nbytes: int, counted: int | None) -> tuple[float | None, bool | None]:
    if counted is None:
        return None, None
    ratio = round(nbytes / counted, 6) if counted else None
    allowed = INFLIGHT_FRAMES_ALLOWED * FULL_FRAME + RELATIVE_ALLOWANCE * counted
    return ratio, abs(nbytes - counted) <= allowed


@contextlib.contextmanager
def capture(
    taps: list[Tap],
    out_dir: Path,
    snaplen: int = 128,
    max_bytes: int = 200_000_000,
    *,
    register: Callable[[proc_mod.ProcRef], None] = lambda _r: None,
    ready_timeout_s: float = 15.0,
) -> Iterator[Capture]:
    """Capture on every tap while the block runs (see the module docstring). `register` is told
    every tcpdump as soon as it exists (the run's ledger, so a crash leaves none behind). Raises
    CollectorError if a tcpdump cannot start or dies before the block ends."""
    if not 64 <= snaplen <= 65535:
        raise CollectorError(f"snaplen must be within 64..65535, got {snaplen}")
    if max_bytes < 1_000_000:
        raise CollectorError(f"max_bytes must be at least 1 MB, got {max_bytes}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cap = Capture(list(taps), out_dir, snaplen, max_bytes)
    running: list[_Running] = []
    stop_watch = threading.Event()
    watcher: threading.Thread | None = None
    lock = threading.Lock()

    def stop_one(r: _Running, truncated: bool) -> None:
        with lock:
            if r.popen.poll() is None and r.after is None:
                r.after = read_net_dev(r.popen.pid, r.tap.ifname)
                r.truncated = truncated
            proc_mod.stop_child(r.popen, grace=10)

    def watch() -> None:
        # The size limit: a capture that reached max_bytes is stopped (its counters read first, so its
        # own window stays consistent), and the summary marks it truncated.
        while not stop_watch.wait(SIZE_POLL_S):
            for r in running:
                if r.popen.poll() is None and r.pcap.stat().st_size >= max_bytes:
                    stop_one(r, truncated=True)

    body_failed = False
    try:
        _start(taps, out_dir, snaplen, running, register)
        _wait_listening(running, ready_timeout_s)
        for r in running:
            r.before = read_net_dev(r.popen.pid, r.tap.ifname)
        watcher = threading.Thread(target=watch, name="pcap-size", daemon=True)
        watcher.start()
        yield cap
        for r in running:
            if r.popen.poll() is not None and not r.truncated:
                raise CollectorError(f"tcpdump on {r.tap.stem} exited early ({r.popen.returncode}): "
                                     f"{_stderr_text(r.err)[-500:]}")
    except BaseException:
        body_failed = True
        raise
    finally:
        stop_watch.set()
        if watcher is not None:
            watcher.join()
        _read_window_ends(running, lock)   # all counters first, then the stops: the windows end together
        for r in running:
            stop_one(r, truncated=r.truncated)
        if not body_failed:
            cap.results = [_result(r) for r in running]


def _start(taps: list[Tap], out_dir: Path, snaplen: int, running: list[_Running],
           register: Callable[[proc_mod.ProcRef], None]) -> None:
    """One tcpdump per tap, each added to `running` (and registered) as soon as it exists, so that a
    failure part-way still stops the ones already started."""
    for tap in taps:
        pcap, err = out_dir / f"{tap.stem}.pcap", out_dir / f"{tap.stem}.stderr"
        # -w - into a file we opened: no privilege drop or AppArmor question about where tcpdump
        # may write; --immediate-mode: nothing waits in a half-filled ring block at stop (that
        # would be lost without being counted as dropped); -B 8 MiB ring against kernel drops.
        argv = ["tcpdump", "-i", tap.ifname, "-s", str(snaplen), "-B", "8192", "--immediate-mode",
                "-n", "-w", "-"]
        with open(pcap, "wb") as out_f, open(err, "wb") as err_f:
            p = Netns(tap.netns).popen(argv, stdout=out_f, stderr=err_f)
        running.append(_Running(tap, p, pcap, err))
        register(proc_mod.ProcRef.of(p.pid, f"tcpdump {tap.stem}"))


def _wait_listening(running: list[_Running], ready_timeout_s: float) -> None:
    """Until every tcpdump says it listens; CollectorError if one dies or the time is up."""
    deadline = time.monotonic() + ready_timeout_s
    for r in running:
        # "listening on" is printed once the packet socket is bound: from then on nothing is missed.
        while "listening on" not in _stderr_text(r.err):
            if r.popen.poll() is not None or time.monotonic() > deadline:
                raise CollectorError(f"tcpdump on {r.tap.stem} did not start: {_stderr_text(r.err)[-500:]}")
            time.sleep(0.01)


def _read_window_ends(running: list[_Running], lock: threading.Lock) -> None:
    """Each running capture's interface counters at the window's end (not for one already stopped,
    e.g. at its size limit, whose window ended then)."""
    for r in running:
        with lock:
            if r.popen.poll() is None and r.after is None:
                try:
                    r.after = read_net_dev(r.popen.pid, r.tap.ifname)
                except (OSError, CollectorError):
                    pass    # no window end: its cross-check fails (ok false) instead of hiding an error


def _result(r: _Running) -> TapResult:
    n, nbytes = pcap_totals(r.pcap)
    st = _stats(_stderr_text(r.err))
    counted = pkts = None
    if r.before is not None and r.after is not None:
        counted = r.after["bytes"] - r.before["bytes"]
        pkts = r.after["packets"] - r.before["packets"]
    # A truncated capture is still checked: its counters were read just before it was stopped.
    ratio, ok = _check(nbytes, counted)
    return TapResult(r.tap.point, r.tap.ifname, r.pcap.name, n, nbytes, st["captured"], st["received_by_filter"],
                     st["dropped_by_kernel"], r.truncated, counted, pkts, ratio, ok)


__all__ = ["Capture", "Tap", "TapResult", "capture", "pcap_totals", "read_net_dev"]
