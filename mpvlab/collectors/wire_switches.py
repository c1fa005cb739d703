"""Path switches on the wire: per data segment, as the segments leave the sender.

The BPF trace (collectors/sched_trace.*) counts path switches per scheduler *decision*; Linux's
MPTCP hands a whole burst (up to ~64 KB) to one subflow per decision, while the published
testbeds' schedulers decided per *segment*. This module counts at segment level from a capture
at the sender (the server's interface; headers only, snaplen >= 128 keeps the MPTCP DSS option):

- `segments_from_pcap` reads the sender's MPTCP data segments, in capture (transmit) order, and
  gives each its connection (token, from the handshake), subflow and data-sequence range (from the
  DSS mapping: DSN of its first byte = mapping DSN + (relative subflow seq - mapping SSN));
- `count_switches` is the pure count over such a sequence (definitions in DEFINITIONS).

Definitions (also in the summary): see DEFINITIONS below.
"""

from __future__ import annotations

import bisect
import hashlib
import ipaddress
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

DEFINITIONS = {
    "data_segment": "a TCP segment with payload sent by the connection's server side (the side that sent the "
                    "SYN-ACK), with an MPTCP DSS mapping; its data-sequence range is [dsn, dsn + payload)",
    "retransmitted_segment": "a data segment whose whole data-sequence range was already sent on this connection "
                             "(on any subflow): a TCP retransmission or an MPTCP reinjection",
    "new_data_segment": "a data segment carrying at least one data-sequence byte not sent before "
                        "(partial_overlap_segments: those that also repeat some)",
    "wire_switch": "two consecutive new-data segments of one connection, in the order they left the sender "
                   "(capture order), that went out on different subflows; retransmitted segments are left out "
                   "of the sequence and counted separately",
    "dsn_order_switch": "two new-data segments adjacent in data-sequence order that went out on different "
                        "subflows: how the data was split, whatever the timing (close to the decision count's "
                        "path switches, since one decision hands one contiguous range to one subflow)",
}


@dataclass(frozen=True)
class Segment:
    """One data segment as it left the sender."""

    conn: str       # connection key (MPTCP token, 8 hex digits)
    subflow: int    # subflow id within the connection (1 = initial), or any hashable id
    dsn: int        # data sequence number of the first payload byte
    length: int     # payload bytes


@dataclass
class ConnCount:
    subflows: int = 0
    data_segments: int = 0
    new_data_segments: int = 0
    retransmitted_segments: int = 0
    partial_overlap_segments: int = 0
    new_bytes: int = 0
    retransmitted_bytes: int = 0
    wire_switches: int = 0
    dsn_order_switches: int = 0
    new_segments_by_subflow: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["new_segments_by_subflow"] = {str(k): v for k, v in sorted(self.new_segments_by_subflow.items())}
        return d


class _Ranges:
    """Disjoint, sorted half-open ranges of data sequence already sent."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def covers(self, a: int, b: int) -> bool:
        i = bisect.bisect_right(self.starts, a) - 1
        return i >= 0 and self.ends[i] >= b

    def overlaps(self, a: int, b: int) -> bool:
        # The last range starting before b has the largest end of those (ranges are disjoint, sorted).
        i = bisect.bisect_left(self.starts, b) - 1
        return i >= 0 and self.ends[i] > a

    def add(self, a: int, b: int) -> None:
        i = bisect.bisect_right(self.starts, a) - 1
        if i >= 0 and self.ends[i] >= a:
            lo, a, b = i, self.starts[i], max(b, self.ends[i])
        else:
            lo = i + 1
        j = lo
        while j < len(self.starts) and self.starts[j] <= b:
            b = max(b, self.ends[j])
            j += 1
        self.starts[lo:j] = [a]
        self.ends[lo:j] = [b]


def count_switches(segments: Iterable[Segment]) -> dict[str, ConnCount]:
    """Per connection: wire-order and data-sequence-order switches, new and retransmitted segments
    (DEFINITIONS), over segments given in the order they left the sender. Connections may interleave."""
    counts: dict[str, ConnCount] = {}
    sent: dict[str, _Ranges] = {}
    last_sf: dict[str, int] = {}
    new_by_conn: dict[str, list[tuple[int, int]]] = {}
    seen_sf: dict[str, set[int]] = {}
    for s in segments:
        if s.length <= 0:
            continue
        c = counts.setdefault(s.conn, ConnCount())
        ranges = sent.setdefault(s.conn, _Ranges())
        seen_sf.setdefault(s.conn, set()).add(s.subflow)
        c.data_segments += 1
        a, b = s.dsn, s.dsn + s.length
        if ranges.covers(a, b):
            c.retransmitted_segments += 1
            c.retransmitted_bytes += s.length
            continue
        if ranges.overlaps(a, b):
            c.partial_overlap_segments += 1
        ranges.add(a, b)
        c.new_data_segments += 1
        c.new_bytes += s.length      # payload of new-data segments (partial overlaps counted whole)
        c.new_segments_by_subflow[s.subflow] = c.new_segments_by_subflow.get(s.subflow, 0) + 1
        prev = last_sf.get(s.conn)
        if prev is not None and prev != s.subflow:
            c.wire_switches += 1
        last_sf[s.conn] = s.subflow
        new_by_conn.setdefault(s.conn, []).append((s.dsn, s.subflow))
    for conn, segs in new_by_conn.items():
        segs.sort(key=lambda x: x[0])     # stable: equal DSNs keep their wire order
        counts[conn].dsn_order_switches = sum(1 for x, y in zip(segs, segs[1:]) if x[1] != y[1])
    for conn, sfs in seen_sf.items():
        counts[conn].subflows = len(sfs)
    return counts


def totals(counts: dict[str, ConnCount]) -> dict[str, int]:
    keys = ("data_segments", "new_data_segments", "retransmitted_segments", "partial_overlap_segments",
            "new_bytes", "retransmitted_bytes", "wire_switches", "dsn_order_switches")
    out = {k: sum(getattr(c, k) for c in counts.values()) for k in keys}
    out["connections"] = len(counts)
    return out


# ---------------------------------------------------------------------------------------------
# Reading the segments from a capture (Ethernet, IPv4/IPv6, TCP, MPTCP option kind 30, RFC 8684)

TCPOPT_MPTCP = 30
MPTCP_CAPABLE, MPTCP_JOIN, MPTCP_DSS = 0, 1, 2
DSS_M_DSN64, DSS_M_MAP, DSS_A_ACK64, DSS_A_ACK = 0x08, 0x04, 0x02, 0x01
SYN, ACK = 0x02, 0x10

FourTuple = tuple[str, int, str, int]     # (sender addr, port, receiver addr, port)


@dataclass
class _Subflow:
    conn: str
    sid: int
    isn: int
    peer: str


@dataclass
class ParseStats:
    """What the reader saw besides the counted segments (all should be 0 but `other_packets`)."""

    packets: int = 0
    other_packets: int = 0                  # not TCP, or not of a known MPTCP subflow's sender side
    data_segments: int = 0
    unmapped_segments: int = 0              # payload but no DSS mapping in the (captured) options
    mapping_mismatch: int = 0               # segment outside its own mapping's range
    options_truncated: int = 0              # snaplen cut the TCP options
    subflows: dict[str, dict[str, Any]] = field(default_factory=dict)   # "addr:port-addr:port" -> conn, id, peer


def mptcp_token(key: bytes) -> str:
    """The token of a 64-bit MPTCP key: the most significant 32 bits of SHA-256(key) (RFC 8684 §3.2)."""
    return hashlib.sha256(key).digest()[:4].hex()


def _pcap_records(path: Path) -> Iterable[tuple[float, int, bytes]]:
    data = path.read_bytes()
    if len(data) < 24:
        return
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise ValueError(f"{path}: not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack_from(e + "I", data, 20)[0]
    if linktype != 1:
        raise ValueError(f"{path}: link type {linktype}, only Ethernet (1) is read")
    rec = struct.Struct(e + "IIII")
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, orig = rec.unpack_from(data, off)
        body = data[off + 16: off + 16 + incl]
        off += 16 + incl
        if len(body) < incl:
            break
        yield sec + frac / (1e9 if nano else 1e6), orig, body


def _tcp_of(frame: bytes) -> tuple[str, str, int, int] | None:
    """(src, dst, offset of the TCP header, TCP segment length from the IP header) or None."""
    if len(frame) < 14:
        return None
    etype, off = struct.unpack_from("!H", frame, 12)[0], 14
    if etype == 0x8100 and len(frame) >= 18:
        etype, off = struct.unpack_from("!H", frame, 16)[0], 18
    if etype == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 0x0F) * 4
        if frame[off + 9] != 6:
            return None
        total = struct.unpack_from("!H", frame, off + 2)[0]
        src = str(ipaddress.IPv4Address(frame[off + 12: off + 16]))
        dst = str(ipaddress.IPv4Address(frame[off + 16: off + 20]))
        return src, dst, off + ihl, total - ihl
    if etype == 0x86DD and len(frame) >= off + 40:
        if frame[off + 6] != 6:
            return None     # extension headers are not followed (the kernel's MPTCP sends none)
        plen = struct.unpack_from("!H", frame, off + 4)[0]
        src = str(ipaddress.IPv6Address(frame[off + 8: off + 24]))
        dst = str(ipaddress.IPv6Address(frame[off + 24: off + 40]))
        return src, dst, off + 40, plen
    return None


def _mptcp_options(opts: bytes) -> tuple[list[bytes], bool]:
    """The MPTCP options (whole, kind byte first) and whether the option list was cut short."""
    out: list[bytes] = []
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts):
            return out, True
        ln = opts[i + 1]
        if ln < 2:
            break
        if i + ln > len(opts):
            return out, True
        if kind == TCPOPT_MPTCP:
            out.append(opts[i: i + ln])
        i += ln
    return out, False


def _dss_mapping(opt: bytes) -> tuple[int, bool, int, int] | None:
    """(dsn, dsn_is_64bit, relative subflow seq, data-level length) of a DSS option with a mapping."""
    flags, p = opt[3], 4
    if flags & DSS_A_ACK:
        p += 8 if flags & DSS_A_ACK64 else 4
    if not flags & DSS_M_MAP:
        return None
    if flags & DSS_M_DSN64:
        if len(opt) < p + 14:
            return None
        dsn = struct.unpack_from("!Q", opt, p)[0]
        p += 8
    else:
        if len(opt) < p + 10:
            return None
        dsn = struct.unpack_from("!I", opt, p)[0]
        p += 4
    ssn, dlen = struct.unpack_from("!IH", opt, p)
    return dsn, bool(flags & DSS_M_DSN64), ssn, dlen


def _advance_seq_end(rec: dict[str, Any], rel_end: int) -> None:
    """`seq_data_bytes`: the subflow's data bytes in its own sequence space, the highest relative
    sequence number its payload reached less the SYN's one (each byte once, however often it was
    retransmitted): what its `ss bytes_acked` counts once all is acknowledged. Unwrapped past 4 GiB
    by taking each step forward modulo 2^32 when it is less than 2^31."""
    have = rec["seq_data_bytes"] + 1
    step = (rel_end - have) & 0xFFFFFFFF
    if step < 1 << 31:
        rec["seq_data_bytes"] = have + step - 1


def segments_from_pcap(path: Path) -> tuple[list[Segment], ParseStats]:
    """The sender's MPTCP data segments in capture order, and what else the reader saw. The capture
    must include the connections' handshakes (it starts before the run's traffic)."""
    st = ParseStats()
    subflows: dict[FourTuple, _Subflow] = {}
    joins: dict[FourTuple, str] = {}          # server-side 4-tuple -> token named by the client's MP_JOIN SYN
    next_sid: dict[str, int] = {}
    last_dsn: dict[str, int] = {}
    segs: list[Segment] = []
    for _t, _orig, frame in _pcap_records(path):
        st.packets += 1
        ip = _tcp_of(frame)
        if ip is None:
            st.other_packets += 1
            continue
        src, dst, th, tcp_len = ip
        if len(frame) < th + 20:
            st.options_truncated += 1
            continue
        sport, dport, seq, _ack, off_flags = struct.unpack_from("!HHIIH", frame, th)
        doff, flags = (off_flags >> 12) * 4, off_flags & 0x3F
        opts, cut = _mptcp_options(frame[th + 20: th + doff])
        if cut or len(frame) < th + doff:
            st.options_truncated += 1
        key: FourTuple = (src, sport, dst, dport)
        if flags & SYN:
            for o in opts:
                sub = o[2] >> 4
                if flags & ACK:
                    # The passive side's SYN-ACK: it is the sender we count; its ISN anchors the mapping.
                    token = None
                    if sub == MPTCP_CAPABLE and len(o) >= 12:
                        token = mptcp_token(o[4:12])
                    elif sub == MPTCP_JOIN:
                        token = joins.pop(key, None)
                    if token is not None:
                        sid = next_sid.get(token, 0) + 1
                        next_sid[token] = sid
                        subflows[key] = _Subflow(token, sid, seq, dst)
                        st.subflows[f"{src}:{sport}-{dst}:{dport}"] = {"conn": token, "subflow_id": sid, "peer": dst,
                                                                       "seq_data_bytes": 0}
                elif sub == MPTCP_JOIN and len(o) >= 8:
                    joins[(dst, dport, src, sport)] = o[4:8].hex()
            continue
        sf = subflows.get(key)
        payload = tcp_len - doff
        if sf is None or payload <= 0:
            st.other_packets += 1
            continue
        _advance_seq_end(st.subflows[f"{src}:{sport}-{dst}:{dport}"], (seq - sf.isn + payload) & 0xFFFFFFFF)
        st.data_segments += 1
        mapping = None
        for o in opts:
            if o[2] >> 4 == MPTCP_DSS and len(o) >= 4:
                mapping = _dss_mapping(o) or mapping
        if mapping is None:
            st.unmapped_segments += 1
            continue
        dsn, is64, ssn, dlen = mapping
        if not is64:
            # A 32-bit DSN: its upper bits are those of the connection's last DSN nearest to it.
            base = last_dsn.get(sf.conn, 0)
            dsn = min((((base >> 32) + k) << 32 | dsn for k in (-1, 0, 1) if (base >> 32) + k >= 0),
                      key=lambda x: abs(x - base))
        rel = (seq - sf.isn) & 0xFFFFFFFF
        offset = (rel - ssn) & 0xFFFFFFFF
        if dlen and offset >= dlen:
            st.mapping_mismatch += 1
            continue
        last_dsn[sf.conn] = dsn + offset
        segs.append(Segment(sf.conn, sf.sid, dsn + offset, payload))
    return segs, st


def analyse(path: Path) -> dict[str, Any]:
    """The summary's wire-switch record for one capture at the sender."""
    segs, st = segments_from_pcap(path)
    counts = count_switches(segs)
    return {
        "file": path.name,
        "totals": totals(counts),
        "connections": {k: v.as_dict() for k, v in sorted(counts.items())},
        "parse": {k: v for k, v in asdict(st).items() if k != "subflows"},
        "subflows": st.subflows,
        "definitions": DEFINITIONS,
    }


__all__ = ["ConnCount", "DEFINITIONS", "ParseStats", "Segment", "analyse", "count_switches", "mptcp_token",
           "segments_from_pcap", "totals"]
