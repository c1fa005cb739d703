"""Capacity trace files, read strictly (they are untrusted input): Mahimahi's packet-delivery
format (`MahimahiTrace`, one millisecond timestamp per delivery opportunity) and `time_ms rate_mbit`
lines. Errors are `TraceError`s naming the file and line, with at most a short excerpt.

Split out of mpvlab/links/capacity.py (issue 46), which holds the spec models and lowers them to the
delay line's arguments; every name here is still importable from there. The limits below are the C
delay line's own (links/delayline/capacity.h), so a file read here is one the delay line accepts."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

from mpvlab.core.errors import InputError

# Mahimahi's LinkQueue::PACKET_SIZE is 1504: its TUN device adds a 4-byte packet-information header,
# so an MTU-sized (1500-byte) IP packet fills one opportunity. The delay line sees IP packets and
# counts IP length + 4 against 1504-byte opportunities (and against a byte limit of the queue).
MAHIMAHI_OPPORTUNITY_BYTES = 1504
MAHIMAHI_OVERHEAD = 4
MTU_IP_BYTES = 1500

TRACE_MAX_BYTES = 16 * 1024 * 1024
TRACE_MAX_LINES = 4 * 1024 * 1024      # the C side's limit too (capacity.h)
TRACE_MAX_MS = 1 << 36                  # the C side's limit too
RATE_MAX_BPS = 100 * 10**9


class TraceError(InputError, ValueError):
    """A trace file that is refused; the message names the file and line."""


# ----------------------------------------------------------------------------------- trace files

def _excerpt(raw: bytes) -> str:
    """A short, printable excerpt of an offending line (never more than 24 characters)."""
    text = raw[:24].decode("ascii", errors="replace")
    text = "".join(c if c.isprintable() else "?" for c in text)
    return repr(text + ("..." if len(raw) > 24 else ""))


def _read_capped(path: Path, max_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
    except OSError as e:
        raise TraceError(f"trace {path}: cannot read: {e.strerror}") from None
    if size > max_bytes:
        raise TraceError(f"trace {path}: {size} bytes, more than the limit of {max_bytes} bytes")
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TraceError(f"trace {path}: more than the limit of {max_bytes} bytes")
    return data


@dataclass(frozen=True)
class MahimahiTrace:
    """Delivery opportunities of one period, in ms (non-decreasing); the trace repeats every
    `period_ms` = its last timestamp (Mahimahi: base_timestamp += schedule.back())."""

    path: Path
    opportunities_ms: tuple[int, ...]

    @property
    def period_ms(self) -> int:
        return self.opportunities_ms[-1]

    @property
    def mean_bps(self) -> float:
        """Mean capacity of MTU-sized IP packets: opportunities x 1500 B per period."""
        return len(self.opportunities_ms) * MTU_IP_BYTES * 8 / (self.period_ms / 1000)

    def opportunity_ns(self, g: int) -> int:
        """Time of global opportunity index g (may be negative) relative to the run's t0."""
        n = len(self.opportunities_ms)
        cycle, k = divmod(g, n)
        return (cycle * self.period_ms + self.opportunities_ms[k]) * 1_000_000

    def first_after(self, t_ns: int) -> int:
        """Global index of the first opportunity strictly after t_ns."""
        p_ns = self.period_ms * 1_000_000
        cycle, within = divmod(t_ns, p_ns)
        k = bisect.bisect_right(self.opportunities_ms, within // 1_000_000)
        # within < period = the last timestamp, so k < n
        return cycle * len(self.opportunities_ms) + k

    def count_between(self, start_ns: int, end_ns: int) -> int:
        """Opportunities with start < t <= end."""
        return self.first_after(end_ns) - self.first_after(start_ns)

    def peak_bps(self, window_ms: int = 100) -> float:
        """Largest capacity over any aligned window of one period (MTU packets)."""
        counts: dict[int, int] = {}
        for t in self.opportunities_ms:
            counts[t // window_ms] = counts.get(t // window_ms, 0) + 1
        return max(counts.values()) * MTU_IP_BYTES * 8 / (window_ms / 1000)


def read_mahimahi_trace(path: Path, *, max_bytes: int = TRACE_MAX_BYTES,
                        max_lines: int = TRACE_MAX_LINES) -> MahimahiTrace:
    """Strict reader of Mahimahi's packet-delivery format: one non-negative integer millisecond
    timestamp per line, non-decreasing, no empty lines (Mahimahi refuses them), the last > 0."""
    path = Path(path)
    data = _read_capped(path, max_bytes)
    if data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        raise TraceError(f"trace {path}: no timestamps")
    lines = data.split(b"\n")
    if len(lines) > max_lines:
        raise TraceError(f"trace {path}: {len(lines)} lines, more than the limit of {max_lines}")
    out: list[int] = []
    prev = 0
    for lineno, raw in enumerate(lines, start=1):
        if not raw:
            raise TraceError(f"trace {path} line {lineno}: empty line (Mahimahi format: one integer "
                             "millisecond timestamp per line)")
        if not raw.isdigit() or len(raw) > 12:
            raise TraceError(f"trace {path} line {lineno}: {_excerpt(raw)} is not a non-negative integer "
                             "millisecond timestamp")
        ms = int(raw)
        if ms > TRACE_MAX_MS:
            raise TraceError(f"trace {path} line {lineno}: timestamp larger than {TRACE_MAX_MS} ms")
        if ms < prev:
            raise TraceError(f"trace {path} line {lineno}: timestamp {ms} ms is smaller than the previous "
                             f"one ({prev} ms); timestamps must be non-decreasing")
        prev = ms
        out.append(ms)
    if out[-1] == 0:
        raise TraceError(f"trace {path}: the last timestamp must be > 0 (it is the trace's period)")
    return MahimahiTrace(path, tuple(out))


_TIME_RATE_LINE = re.compile(rb"^([0-9]{1,12})[ \t]+([0-9]{1,9}(?:\.[0-9]{1,9})?)$")


def read_time_rate_trace(path: Path, *, max_bytes: int = TRACE_MAX_BYTES,
                         max_lines: int = TRACE_MAX_LINES) -> list[tuple[int, int]]:
    """`time_ms rate_mbit` lines ('#' comment lines and blank lines allowed): integer milliseconds
    from 0, strictly increasing; rate a decimal in Mbit/s (0 allowed: the link holds packets).
    Returns [(t_ns, rate_bps)]."""
    path = Path(path)
    data = _read_capped(path, max_bytes)
    lines = data.split(b"\n")
    if len(lines) > max_lines + 1:
        raise TraceError(f"trace {path}: more than the limit of {max_lines} lines")
    points: list[tuple[int, int]] = []
    for lineno, raw in enumerate(lines, start=1):
        s = raw.strip()
        if not s or s.startswith(b"#"):
            continue
        m = _TIME_RATE_LINE.match(s)
        if not m:
            raise TraceError(f"trace {path} line {lineno}: {_excerpt(raw)} is not 'time_ms rate_mbit' "
                             "(an integer millisecond time and a decimal rate in Mbit/s)")
        t_ms, rate_bps = int(m.group(1)), round(float(m.group(2)) * 1e6)
        if rate_bps > RATE_MAX_BPS:
            raise TraceError(f"trace {path} line {lineno}: rate above {RATE_MAX_BPS // 10**9} Gbit/s")
        if not points and t_ms != 0:
            raise TraceError(f"trace {path} line {lineno}: the first time must be 0, got {t_ms} ms")
        if points and t_ms * 1_000_000 <= points[-1][0]:
            raise TraceError(f"trace {path} line {lineno}: time {t_ms} ms is not after the previous one")
        points.append((t_ms * 1_000_000, rate_bps))
    if not points:
        raise TraceError(f"trace {path}: no 'time_ms rate_mbit' lines")
    return points
