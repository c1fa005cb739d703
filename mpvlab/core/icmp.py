"""The Internet checksum of an ICMP message (RFC 1071): the run's kernel-stamped echo check
(mpvlab/runner/kping.py) and the test bed's probes (mpvlab/testbed/probes.py) build their echo requests with it."""

from __future__ import annotations

import struct


def checksum(b: bytes) -> int:
    """One's complement of the one's-complement sum of the 16-bit words (odd length: zero-padded)."""
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF
