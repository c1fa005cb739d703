"""Strict parsing of the physical quantities a scenario may contain.

Every quantity in a scenario carries its unit, so a reviewer reading the YAML never has to guess
whether `3` meant bit/s or Mbit/s. Units follow SI for rates and durations and distinguish SI
(KB = 1000 B) from IEC (KiB = 1024 B) for sizes, because tc's own `kb` (= 1024) is a known source
of 2.4 % errors in published buffer sizes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from mpvlab.core.errors import InputError

_NUMBER = r"(?P<num>[0-9]+(?:\.[0-9]+)?)"

RATE_UNITS: dict[str, int] = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
SIZE_UNITS: dict[str, int] = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
}
TIME_UNITS_NS: dict[str, int] = {"us": 10**3, "ms": 10**6, "s": 10**9, "min": 60 * 10**9}

_RATE_RE = re.compile(rf"^{_NUMBER}\s*(?P<unit>[a-zA-Z]+)$")
_SIZE_RE = re.compile(rf"^{_NUMBER}\s*(?P<unit>[a-zA-Z]+)$")
_TIME_RE = re.compile(rf"^-?{_NUMBER}\s*(?P<unit>[a-z]+)$")
_PKT_RE = re.compile(r"^(?P<num>[0-9]+)\s*(?:pkt|pkts|packets)$")
_PERCENT_RE = re.compile(rf"^{_NUMBER}\s*%$")


class UnitError(InputError, ValueError):
    """A quantity that does not parse; the message says what is allowed."""


def _number(text: str, what: str, given: object) -> float:
    """The digits of a matched quantity as a finite float: 400 digits are `inf` to float(), and
    round(inf) would raise OverflowError instead of a message."""
    value = float(text)
    if not math.isfinite(value):
        raise UnitError(f"{what} {given!r} is too large a number; use a unit that keeps it to a few digits")
    return value


def parse_rate(text: str | int | float) -> int:
    """'3mbit' -> 3_000_000 (bit/s). Units: bit, kbit, mbit, gbit (case-insensitive)."""
    if not isinstance(text, str):
        raise UnitError(f"rate {text!r} needs a unit: one of {', '.join(RATE_UNITS)} (e.g. '3mbit')")
    m = _RATE_RE.match(text.strip())
    unit = m.group("unit").lower() if m else ""
    if not m or unit not in RATE_UNITS:
        hint = " ('bps' is ambiguous: tc reads it as bytes/s)" if "bps" in text.lower() else ""
        raise UnitError(
            f"rate {text!r} is not <number><unit> with unit one of {', '.join(RATE_UNITS)}"
            f" (e.g. '3mbit', '5.24mbit'){hint}"
        )
    value = _number(m.group("num"), "rate", text) * RATE_UNITS[unit]
    if value <= 0:
        raise UnitError(f"rate {text!r} must be positive")
    return round(value)


def parse_size(text: str | int | float) -> int:
    """'1MB' -> 1_000_000 bytes, '64KiB' -> 65536. Units are case-sensitive (B, KB, MB, GB, KiB, MiB, GiB)."""
    if not isinstance(text, str):
        raise UnitError(f"size {text!r} needs a unit: one of {', '.join(SIZE_UNITS)} (e.g. '100KB')")
    m = _SIZE_RE.match(text.strip())
    if not m or m.group("unit") not in SIZE_UNITS:
        raise UnitError(
            f"size {text!r} is not <number><unit> with unit one of {', '.join(SIZE_UNITS)}"
            " (SI: KB = 1000 B; IEC: KiB = 1024 B)"
        )
    return round(_number(m.group("num"), "size", text) * SIZE_UNITS[m.group("unit")])


@dataclass(frozen=True)
class QueueLimit:
    """A tail-drop limit either in bytes or in packets (tbf itself only knows bytes)."""

    bytes: int | None = None
    packets: int | None = None

    def to_bytes(self, mtu_frame: int = 1514) -> int:
        if self.bytes is not None:
            return self.bytes
        assert self.packets is not None
        return self.packets * mtu_frame

    def __str__(self) -> str:
        return f"{self.packets}pkt" if self.packets is not None else format_size(self.bytes or 0)


def parse_queue_limit(text: str | int | float) -> QueueLimit:
    """'100KB' -> bytes; '256pkt' -> packets."""
    if isinstance(text, str):
        m = _PKT_RE.match(text.strip())
        if m:
            n = int(m.group("num"))
            if n <= 0:
                raise UnitError(f"buffer {text!r} must be at least 1 packet")
            return QueueLimit(packets=n)
    try:
        return QueueLimit(bytes=parse_size(text))
    except UnitError as e:
        raise UnitError(f"{e}; or a packet count like '256pkt'") from None


def parse_duration_ns(text: str | int | float, *, allow_negative: bool = False) -> int:
    """'60ms' -> 60_000_000 ns. Units: us, ms, s, min. A bare 0 is accepted (zero needs no unit)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool) and text == 0:
        return 0
    if not isinstance(text, str):
        raise UnitError(f"duration {text!r} needs a unit: one of {', '.join(TIME_UNITS_NS)} (e.g. '60ms')")
    s = text.strip()
    m = _TIME_RE.match(s)
    if not m or m.group("unit") not in TIME_UNITS_NS:
        raise UnitError(
            f"duration {text!r} is not <number><unit> with unit one of {', '.join(TIME_UNITS_NS)} (e.g. '60ms', '20s')"
        )
    value = round(_number(m.group("num"), "duration", text) * TIME_UNITS_NS[m.group("unit")])
    if s.startswith("-"):
        if not allow_negative:
            raise UnitError(f"duration {text!r} must not be negative")
        value = -value
    return value


def parse_probability(value: str | int | float) -> float:
    """'1%' -> 0.01; 0.01 -> 0.01. Must lie in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        # true, null, a list or a mapping: float() would raise TypeError, not say what is allowed
        raise UnitError(f"probability {value!r} must be a number in [0, 1) or a percentage like '1%'")
    if isinstance(value, str):
        m = _PERCENT_RE.match(value.strip())
        if not m:
            raise UnitError(f"probability {value!r} must be a number in [0, 1) or a percentage like '1%'")
        p = _number(m.group("num"), "probability", value) / 100.0
    else:
        try:
            p = float(value)
        except OverflowError:                     # an int of 400 digits
            raise UnitError(f"probability {value!r} must lie in [0, 1)") from None
    if not 0.0 <= p < 1.0:
        raise UnitError(f"probability {value!r} must lie in [0, 1)")
    return p


def format_rate(bps: float) -> str:
    for unit, factor in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps >= factor and (bps / factor) == round(bps / factor, 6):
            return f"{bps / factor:g}{unit}"
    return f"{bps:g}bit"


def format_size(n: int) -> str:
    for unit in ("GB", "MB", "KB", "GiB", "MiB", "KiB"):
        factor = SIZE_UNITS[unit]
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def format_duration(ns: int) -> str:
    for unit in ("s", "ms", "us"):
        factor = TIME_UNITS_NS[unit]
        if ns % factor == 0:
            return f"{ns // factor}{unit}"
    return f"{ns / 1e3:g}us"
