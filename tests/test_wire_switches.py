"""Wire-order path switches (mpvlab/collectors/wire_switches.py) on scripted segment sequences and a scripted
capture, the pcap byte reader, and the validation of observe.pcap. No namespaces, no root."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any

import pytest

from mpvlab.collectors import pcap
from mpvlab.collectors.wire_switches import Segment, analyse, count_switches, mptcp_token, segments_from_pcap, totals
from mpvlab.input.scenario import ScenarioError, parse_scenario


def seg(conn: str, sf: int, dsn: int, n: int = 100) -> Segment:
    return Segment(conn, sf, dsn, n)


def test_switches_retransmissions_and_interleaving() -> None:
    segs = [
        seg("a", 1, 0), seg("a", 1, 100),           # burst on subflow 1
        seg("b", 1, 5000),                          # another connection interleaves: its own count
        seg("a", 2, 200),                           # switch 1
        seg("a", 1, 100),                           # retransmission of [100, 200): not in the sequence
        seg("a", 2, 300),                           # same subflow as the last new segment: no switch
        seg("a", 1, 600),                           # switch 2; subflow 1 was handed [600, 700) ...
        seg("a", 2, 400),                           # ... while subflow 2 still sends [400, 500): switch 3
        seg("b", 1, 5100), seg("b", 1, 5000),       # b: one subflow, a retransmission, never a switch
        seg("a", 2, 500),                           # no switch
        seg("a", 1, 650),                           # partial overlap [650, 750): new data, switch 4
        seg("a", 2, 0, 200),                        # reinjection of [0, 200) on the other subflow
    ]
    c = count_switches(segs)
    a, b = c["a"], c["b"]
    assert (a.wire_switches, a.retransmitted_segments, a.new_data_segments) == (4, 2, 8)
    assert a.partial_overlap_segments == 1
    assert a.retransmitted_bytes == 300
    # data-sequence order of the new segments: 0:1 100:1 200:2 300:2 400:2 500:2 600:1 650:1 -> 2 switches
    assert a.dsn_order_switches == 2
    assert a.new_segments_by_subflow == {1: 4, 2: 4}
    assert (b.wire_switches, b.dsn_order_switches, b.retransmitted_segments, b.subflows) == (0, 0, 1, 1)
    t = totals(c)
    assert (t["connections"], t["wire_switches"], t["retransmitted_segments"]) == (2, 4, 3)


def test_one_subflow_is_zero_switches_and_empty_is_empty() -> None:
    c = count_switches([seg("x", 1, i * 1000, 1000) for i in range(50)] + [seg("x", 1, 3000, 1000)])
    assert (c["x"].wire_switches, c["x"].dsn_order_switches, c["x"].retransmitted_segments) == (0, 0, 1)
    assert count_switches([]) == {}
    assert count_switches([seg("x", 1, 0, 0)]) == {}     # no payload: not a data segment


def test_per_segment_alternation_counts_every_segment() -> None:
    # A per-segment round-robin scheduler: every new segment switches.
    c = count_switches([seg("r", 1 + i % 2, i * 100) for i in range(11)])["r"]
    assert (c.wire_switches, c.dsn_order_switches) == (10, 10)


# ---- a scripted capture: Ethernet/IPv4/TCP with MPTCP options, as the server's interface sees it ------

SRV, CL0, CL1 = "10.0.100.1", "10.0.1.2", "10.0.2.2"
KEY = bytes.fromhex("0102030405060708")


def _ip(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


def _frame(src: str, sport: int, dst: str, dport: int, seq: int, flags: int, opts: bytes, payload: int) -> bytes:
    opts += b"\x01" * (-len(opts) % 4)
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq, 0, ((20 + len(opts)) // 4) << 12 | flags, 65535, 0, 0) + opts
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + payload, 0, 0, 64, 6, 0, _ip(src), _ip(dst))
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + b"\x00" * payload


def _dss(dsn: int, ssn: int, dlen: int) -> bytes:
    # A (ack, 8 B) + M (mapping) with a 64-bit DSN, as Linux sends it
    return bytes([30, 28, 0x20, 0x0F]) + struct.pack("!QQIH", 7, dsn, ssn, dlen) + b"\x00\x00"


def _pcap(path: Path, frames: list[bytes], snaplen: int = 128) -> None:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)
    for i, f in enumerate(frames):
        cut = f[:snaplen]
        out += struct.pack("<IIII", 1, i, len(cut), len(f)) + cut
    path.write_bytes(out)


def test_segments_from_a_scripted_capture(tmp_path: Path) -> None:
    token = mptcp_token(KEY)
    assert token == hashlib.sha256(KEY).digest()[:4].hex()
    isn0, isn1 = 1_000, 4_294_967_000           # the second wraps around 2^32
    SYN, ACK = 0x02, 0x10
    frames = [
        _frame(CL0, 40000, SRV, 80, 5, SYN, bytes([30, 4, 0x01, 0x81]), 0),
        _frame(SRV, 80, CL0, 40000, isn0, SYN | ACK, bytes([30, 12, 0x01, 0x81]) + KEY, 0),
        _frame(CL1, 40001, SRV, 80, 9, SYN, bytes([30, 12, 0x10, 0x02]) + bytes.fromhex(token) + b"\0" * 4, 0),
        _frame(SRV, 80, CL1, 40001, isn1, SYN | ACK, bytes([30, 16, 0x10, 0x02]) + b"\0" * 12, 0),
        _frame(CL0, 40000, SRV, 80, 6, ACK, b"", 300),                     # the request: the client's data
        # mapping of 2000 bytes at DSN 10_000 on subflow 1 (ssn 1), sent as two segments
        _frame(SRV, 80, CL0, 40000, isn0 + 1, ACK, _dss(10_000, 1, 2000), 1000),
        _frame(SRV, 80, CL1, 40001, (isn1 + 1) & 0xFFFFFFFF, ACK, _dss(12_000, 1, 1000), 1000),
        _frame(SRV, 80, CL0, 40000, isn0 + 1001, ACK, _dss(10_000, 1, 2000), 1000),
        _frame(SRV, 80, CL0, 40000, isn0 + 1, ACK, _dss(10_000, 1, 2000), 1000),    # TCP retransmission
        _frame(SRV, 80, CL0, 40000, isn0 + 2001, ACK, bytes([30, 8, 0x20, 0x01, 0, 0, 0, 7]), 500),  # no map
    ]
    f = tmp_path / "server.pcap"
    _pcap(f, frames)
    segs, st = segments_from_pcap(f)
    assert segs == [Segment(token, 1, 10_000, 1000), Segment(token, 2, 12_000, 1000),
                    Segment(token, 1, 11_000, 1000), Segment(token, 1, 10_000, 1000)]
    assert (st.unmapped_segments, st.mapping_mismatch, st.options_truncated) == (1, 0, 0)
    c = count_switches(segs)[token]
    assert (c.wire_switches, c.dsn_order_switches, c.retransmitted_segments) == (2, 1, 1)
    assert pcap.pcap_totals(f) == (len(frames), sum(len(x) for x in frames))


@pytest.mark.parametrize("observe, message", [
    ({"pcap": {"points": ["client", "router-mars"]}}, "unknown point 'router-mars'"),
    ({"pcap": {"points": ["client", "client"]}}, "more than once"),
    ({"pcap": {"points": []}}, "points"),
    ({"pcap": {"points": ["server"], "snaplen": 20}}, "snaplen"),
    ({"pcap": {"points": ["server"], "max_mb": 10**6}}, "max_mb"),
])
def test_pcap_validation(observe: dict, message: str) -> None:
    base = {"name": "t", "paths": {"wifi": {"down": {"rate": "3mbit"}}, "lte": {"down": {"rate": "3mbit"}}}}
    ok = parse_scenario({**base, "observe": {"pcap": {"points": ["client", "server", "router-wifi"]}}})
    assert ok.observe.pcap is not None and ok.observe.pcap.snaplen == 128
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**base, "observe": observe})
    assert message in str(e.value), str(e.value)


def test_pcap_path_bytes_against_the_subflow_counters_warn(tmp_path: Path) -> None:
    """cross-check pcap_path_bytes_vs_subflow_counters: a scripted server capture whose subflow on
    path a sends 2000 data bytes (one segment retransmitted: counted once) and on path b 1000 (its
    sequence numbers wrapping 2^32) agrees with ss counters that acknowledged exactly those; planted:
    a counter that acknowledged 500 bytes the capture never saw sent, and one short by 1000 bytes
    while the client's interface received only 100 bytes after its last sample."""
    from mpvlab.results import checks
    from mpvlab.runner import capture
    token = mptcp_token(KEY)
    isn0, isn1 = 1_000, 4_294_967_000
    SYN, ACK = 0x02, 0x10
    frames = [
        _frame(CL0, 40000, SRV, 80, 5, SYN, bytes([30, 4, 0x01, 0x81]), 0),
        _frame(SRV, 80, CL0, 40000, isn0, SYN | ACK, bytes([30, 12, 0x01, 0x81]) + KEY, 0),
        _frame(CL1, 40001, SRV, 80, 9, SYN, bytes([30, 12, 0x10, 0x02]) + bytes.fromhex(token) + b"\0" * 4, 0),
        _frame(SRV, 80, CL1, 40001, isn1, SYN | ACK, bytes([30, 16, 0x10, 0x02]) + b"\0" * 12, 0),
        _frame(SRV, 80, CL0, 40000, isn0 + 1, ACK, _dss(10_000, 1, 2000), 1000),
        _frame(SRV, 80, CL1, 40001, (isn1 + 1) & 0xFFFFFFFF, ACK, _dss(12_000, 1, 1000), 1000),
        _frame(SRV, 80, CL0, 40000, isn0 + 1001, ACK, _dss(10_000, 1, 2000), 1000),
        _frame(SRV, 80, CL0, 40000, isn0 + 1, ACK, _dss(10_000, 1, 2000), 1000),    # TCP retransmission
    ]
    f = tmp_path / "server.pcap"
    _pcap(f, frames)
    subflows = analyse(f)["subflows"]
    assert {k: v["seq_data_bytes"] for k, v in subflows.items()} == {
        f"{SRV}:80-{CL0}:40000": 2000, f"{SRV}:80-{CL1}:40001": 1000}
    path_of = {CL0: "a", CL1: "b"}
    # rx of each client interface: 100 bytes after t = 5 s (the last ss sample is at 10 s)
    links = {"a": [(0.0, 0), (5.0, 4000), (10.0, 4100)], "b": [(0.0, 0), (5.0, 2000), (10.0, 2100)]}

    def ss(acked_a: int, acked_b: int = 1000) -> dict[tuple[str, str], dict[str, float]]:
        # ss spells an IPv4 subflow of an IPv6 listener as [::ffff:a.b.c.d]:port
        row = {"t_s": 10.0, "srtt_ms": 50.0, "rttvar_ms": 5.0}
        return {(f"[::ffff:{SRV}]:80", f"[::ffff:{CL0}]:40000"): {**row, "bytes_acked": acked_a},
                (f"{SRV}:80", f"{CL1}:40001"): {**row, "bytes_acked": acked_b}}
    margin = 0.4        # one ss and one interface-sample period
    r = capture.pcap_vs_subflow_check(subflows, ss(2000), links, path_of, margin)
    assert r["ok"] and r["paths"]["a"]["difference"] == 0 and r["paths"]["b"]["capture_bytes"] == 1000
    assert r["paths"]["a"]["tail_allowance"] == 100      # rx after 10 − 0.27 − 0.4 s: from the 5 s sample
    # the counter acknowledged more than the capture saw sent
    r = capture.pcap_vs_subflow_check(subflows, ss(2500), links, path_of, margin)
    assert not r["ok"] and not r["paths"]["a"]["ok"] and r["paths"]["b"]["ok"] and r["paths"]["a"]["difference"] == -500
    out: dict[str, Any] = {}
    warnings: list[str] = []
    checks.record(out, warnings, "pcap_path_bytes_vs_subflow_counters", r)
    assert warnings[0].startswith("cross-check pcap_path_bytes_vs_subflow_counters failed: ")
    # the capture saw 1000 bytes more than were acknowledged, and only 100 reached the client after the sample
    assert not capture.pcap_vs_subflow_check(subflows, ss(1000), links, path_of, margin)["ok"]
    # … unless the client's interface received them after the sample: then they were in flight
    late = {**links, "a": [(0.0, 0), (5.0, 3000), (10.0, 4100)]}
    assert capture.pcap_vs_subflow_check(subflows, ss(1000), late, path_of, margin)["ok"]
    # a subflow ss never sampled is listed, not compared
    r = capture.pcap_vs_subflow_check(subflows, {k: v for k, v in ss(2000).items() if "40001" in k[1]}, links,
                                      path_of, margin)
    assert r["unsampled_subflows"] == [f"{SRV}:80-{CL0}:40000"] and set(r["paths"]) == {"b"} and r["ok"]
