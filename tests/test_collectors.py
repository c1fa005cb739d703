"""Tests of the MPTCP scheduler trace (collectors/: mpvlab-schedtrace + Python wrapper).

Topology (mpvlab/testbed/twopath.py): a server namespace and a client namespace joined by two
veth pairs, each server egress shaped by tbf (3 Mbit/s), offloads off; the client's
in-kernel path manager adds a second subflow over path 2. A Python IPPROTO_MPTCP sender
writes N bytes; the collector traces the server namespace only.

Independent references for the numbers the collector reports:
- a packet socket on the server's veths counts the TCP payload that left on each path
  ("unique" = bytes above the highest sequence seen, so retransmissions are excluded):
  it must equal the collector's bytes handed per subflow, to the byte;
- interface tx counters: a full data segment is an MTU of 1500 = 20 IP + 20 TCP + 12
  timestamps (NOP-padded) + 24 DSS (4 header + 4 DATA_ACK32 + 14 mapping with 64-bit DSN,
  no checksum, padded; 28 with a 64-bit DATA_ACK) + payload P, i.e. P = 1424 (or 1420),
  and 1514 bytes on the veth counter (Ethernet header, no FCS). So wire bytes
  ~= payload x 1514/P (within 2 %: short segments, ACKs, SYN/FIN), and more exactly
  payload + packets x (1514 - P) (within 1 %);
- the sender's byte count: the msk sent N bytes of new data, and the bytes handed to subflows sum
  to N plus what MPTCP handed a second time (re-sent on another subflow: none in a quiet run; a CI
  run under load saw 7,320 B). A capture's data-sequence numbers tell the two apart: the wire
  carries each of the N data-sequence bytes at least once, and the rest is the re-sent surplus.
  The kernel's own `bytes_retrans` counts only the retransmit timer's reinjections
  (`__mptcp_retrans`), not the re-sends after a subflow is marked stale or closes
  (`__mptcp_retransmit_pending_data`), so it is a lower bound of that surplus.
"""

from __future__ import annotations

import csv
import json
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()

from mpvlab import collectors  # noqa: E402
from mpvlab.collectors import CollectorError, load_summary, trace_scheduler  # noqa: E402
from mpvlab.collectors.wire_switches import segments_from_pcap  # noqa: E402
from mpvlab.core import proc  # noqa: E402
from mpvlab.testbed.twopath import Sniffer, TwoPath, unique_tag  # noqa: E402

RATE_MBIT = 3.0
FRAME = 1514  # MTU 1500 + 14 Ethernet header (veth counters exclude FCS)
LEGAL_FULL_PAYLOADS = (1424, 1420)  # DSS with 32-bit / 64-bit DATA_ACK, see docstring


@pytest.fixture(scope="session")
def schedtrace_bin() -> Path:
    return collectors.build()


def run_bin(exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=30)


def bpf_objects(kind: str) -> list[dict]:
    out = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out or "[]")


def bpf_ids_of(pid: int) -> set[tuple[str, int]]:
    """The BPF programs and maps a process holds, from its fds' fdinfo (prog_id:/map_id:). Other
    runs' collectors use the same object names, so names cannot tell them apart."""
    ids: set[tuple[str, int]] = set()
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            text = fdinfo.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key in ("prog_id", "map_id"):
                ids.add((key[:-3] if key == "prog_id" else "map", int(value)))
    return ids


def assert_no_bpf_left(ids: set[tuple[str, int]]) -> None:
    assert ids, "the collector held no BPF objects while running?"
    existing = {(k, o["id"]) for k in ("prog", "map") for o in bpf_objects(k)}
    left = ids & existing
    assert not left, f"BPF objects left behind: {left}"


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def only_conn(summary: dict[str, Any]) -> dict[str, Any]:
    conns = summary["connections"]
    assert len(conns) == 1, f"expected exactly the traced connection, got {len(conns)}"
    return conns[0]


def data_sequence_on_wire(pcap: Path) -> tuple[int, int]:
    """(payload bytes of the server's data segments, data-sequence bytes they cover at least once),
    from a capture at the server: the difference is what the sender put on the wire twice."""
    segs, stats = segments_from_pcap(pcap)
    assert (stats.unmapped_segments, stats.mapping_mismatch, stats.options_truncated) == (0, 0, 0), stats
    assert len({s.conn for s in segs}) == 1, "one connection"
    covered, end = 0, -1
    for seg in sorted(segs, key=lambda x: x.dsn):
        lo, hi = max(seg.dsn, end), seg.dsn + seg.length
        if hi > lo:
            covered += hi - lo
            end = hi
    return sum(seg.length for seg in segs), covered


def check_samples(out: Path, conn: dict[str, Any], hz: int) -> None:
    """Samples are rate-limited per subflow to one per 1/hz, taken on ACKs; the cumulative
    bytes never decrease and end at most at the summary's total."""
    rows = [r for r in read_csv(out / "subflow_samples.csv") if r["source"] == "ack"]
    by_sf: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        assert r["conn"] == conn["conn"]
        by_sf[r["subflow_id"]].append(r)
    for sf in conn["subflows"]:
        if sf["bytes_handed"] == 0:
            continue
        rs = by_sf[str(sf["subflow_id"])]
        ts = [float(r["t"]) for r in rs]
        assert len(ts) >= 2
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        assert min(gaps) >= 1.0 / hz - 1e-4, f"samples closer than 1/{hz} s: {min(gaps)}"
        span = ts[-1] - ts[0]
        assert len(ts) <= span * hz + 1
        # a 3 Mbit/s path delivers ~248 full segments/s, ACKed every 1-2 segments, so a
        # sample is due at most ~8 ms after each period: >= 20/s is a loose floor
        assert len(ts) >= 20 * span, f"only {len(ts)} samples in {span:.2f} s"
        cum = [int(r["bytes_handed_cum"]) for r in rs]
        assert cum == sorted(cum)
        assert cum[-1] <= sf["bytes_handed"]
        assert all(int(r["srtt_us"]) > 0 and int(r["cwnd"]) > 0 for r in rs)
        assert {r["subflow"] for r in rs} == {sf["subflow"]}


def test_cli_rejects_bad_arguments(schedtrace_bin: Path, tmp_path: Path) -> None:
    assert run_bin(schedtrace_bin).returncode == 2
    both = run_bin(schedtrace_bin, "--netns", "/proc/self/ns/net", "--netns-inode", "1",
                   "--out-dir", str(tmp_path))
    assert both.returncode == 2 and "usage" in both.stderr
    bad_hz = run_bin(schedtrace_bin, "--netns", "/proc/self/ns/net", "--out-dir",
                     str(tmp_path), "--sample-hz", "-3")
    assert bad_hz.returncode == 2 and "--sample-hz" in bad_hz.stderr
    missing = run_bin(schedtrace_bin, "--netns", str(tmp_path / "nope"), "--out-dir",
                      str(tmp_path))
    assert missing.returncode == 1 and "cannot open netns" in missing.stderr


def test_wrapper_reports_missing_namespace(schedtrace_bin: Path, tmp_path: Path) -> None:
    with pytest.raises(CollectorError, match="does not exist"):
        with trace_scheduler("hob-no-such-ns", tmp_path, time.monotonic_ns()):
            pass
    with pytest.raises(CollectorError, match="not a network namespace"):
        with trace_scheduler("../etc", tmp_path, time.monotonic_ns()):
            pass


@pytest.mark.netns
def test_two_paths_bytes_switches_and_isolation(schedtrace_bin: Path, tmp_path: Path) -> None:
    """Both paths carry data: bytes per subflow = payload on that path's wire, switches >= 1.
    A concurrent transfer in another namespace pair must not appear."""
    nbytes = 2_000_000
    out = tmp_path / "trace"
    tag = unique_tag()
    other_result: list[Any] = []
    with TwoPath(tag[:7] + "a", RATE_MBIT) as bed, TwoPath(tag[:7] + "b", RATE_MBIT) as other:
        t0 = time.monotonic_ns()
        before = bed.tx_counters()
        with Sniffer(bed, tmp_path / "server.pcap") as sniff:
            with trace_scheduler(bed.server_ns, out, t0, sample_hz=100) as tracer:
                th = threading.Thread(target=lambda: other_result.append(other.transfer(1_000_000)))
                th.start()
                tr = bed.transfer(nbytes)
                th.join(timeout=120)
                pid = tracer.pid
                ids = bpf_ids_of(pid)
        after = bed.tx_counters()
    assert tr.nbytes == nbytes
    assert other_result and other_result[0].nbytes == 1_000_000
    assert not Path(f"/proc/{pid}").exists()
    assert_no_bpf_left(ids)

    s = load_summary(out)
    assert s["lost_events"]["total"] == 0
    conn = only_conn(s)  # the concurrent connection in `other` was filtered out in BPF
    sfs = conn["subflows"]
    assert len(sfs) == 2, "both subflows seen"
    assert {sf["remote"].split(":")[0] for sf in sfs} == {"10.0.1.1", "10.0.2.1"}
    handed = sum(sf["bytes_handed"] for sf in sfs)
    assert conn["bytes_handed"] == handed
    assert conn["msk_bytes_sent"] == nbytes, "the msk's new data: the transfer, once"
    resent = handed - nbytes   # MPTCP re-sends: usually none, 7,320 B in a CI run under load
    assert resent >= conn["msk_bytes_retrans"]
    # The wire carries every data-sequence byte at least once. What was handed but is not on the
    # wire can only be re-sent data still queued when the connection closed, so without re-sends
    # the wire holds exactly the bytes handed, per subflow; with them, between that and less.
    wire_payload, wire_covered = data_sequence_on_wire(tmp_path / "server.pcap")
    assert wire_covered == nbytes
    assert wire_payload == sum(sniff.result[dev]["payload"] for dev in bed.server_ifs)
    assert wire_covered <= wire_payload <= handed

    by_path = {sf["remote"].split(":")[0]: sf for sf in sfs}
    for i, dev in enumerate(bed.server_ifs, start=1):
        sf = by_path[f"10.0.{i}.1"]
        sn = sniff.result[dev]
        assert sn["payload"] == sn["unique"], f"{dev}: TCP retransmissions; the wire check needs none"
        # the collector's bytes handed = TCP payload that left on this path (exact without re-sends)
        assert sn["unique"] <= sf["bytes_handed"] <= sn["unique"] + resent, (dev, sf["bytes_handed"], sn["unique"])
        assert sn["unique"] > 0.2 * nbytes, f"path {i} carried too little to test switches"
        opt = max(sn["tcp_opt_len"], key=lambda k: sn["tcp_opt_len"][k])
        full_payload = 1500 - 20 - 20 - int(opt)
        assert full_payload in LEGAL_FULL_PAYLOADS, f"unexpected TCP option length {opt}"
        wire = after[dev][0] - before[dev][0]
        pkts = after[dev][1] - before[dev][1]
        est_ratio = sn["unique"] * FRAME / full_payload
        assert abs(wire - est_ratio) <= 0.02 * wire, (dev, wire, est_ratio)
        est_pkts = sn["unique"] + pkts * (FRAME - full_payload)
        assert abs(wire - est_pkts) <= 0.01 * wire, (dev, wire, est_pkts)

    # switches: consistent counts and a well-formed chain
    assert conn["path_switches"] >= 1
    rows = read_csv(out / "switches.csv")
    assert len(rows) == conn["path_switches"] == s["totals"]["path_switches"]
    for a, b in zip(rows, rows[1:]):
        assert a["to_subflow_id"] == b["from_subflow_id"]
        assert float(a["t"]) <= float(b["t"])
    assert all(r["from_subflow_id"] != r["to_subflow_id"] for r in rows)
    assert conn["data_carrying_decisions"] >= conn["path_switches"] + 1
    assert conn["decisions"] >= conn["data_carrying_decisions"]
    assert (sum(sf["data_carrying_decisions"] for sf in sfs)
            == conn["data_carrying_decisions"] + conn["multi_subflow_handings"])
    assert all(sf["decisions"] <= conn["decisions"] for sf in sfs)
    assert 0 <= conn["first_t"] <= conn["last_t"] <= s["stop_t"]
    check_samples(out, conn, 100)


@pytest.mark.netns
def test_data_of_a_dead_path_is_handed_again_and_counted_apart(schedtrace_bin: Path, tmp_path: Path) -> None:
    """Path 2 turns into a black hole mid-transfer (its egress qdisc drops everything, before the
    packet socket sees it): MPTCP must re-send path 2's unacknowledged data on path 1. The trace
    then counts those bytes twice in `bytes_handed` (once per subflow it was handed to) while the
    msk's `bytes_sent` counts the transfer once, and the capture shows every data-sequence byte."""
    nbytes = 1_500_000
    out = tmp_path / "trace"
    result: list[Any] = []
    with TwoPath(unique_tag()[:7] + "h", RATE_MBIT) as bed:
        with Sniffer(bed, tmp_path / "server.pcap") as sniff:
            with trace_scheduler(bed.server_ns, out, time.monotonic_ns(), sample_hz=100):
                th = threading.Thread(target=lambda: result.append(bed.transfer(nbytes)))
                th.start()
                time.sleep(1.0)     # ~750 kB sent at 2 x 3 Mbit/s: both subflows carry data
                proc.run(["tc", "-n", bed.server_ns, "qdisc", "replace", "dev", bed.server_ifs[1], "root",
                          "pfifo", "limit", "0"])
                th.join(timeout=120)
    assert result and result[0].nbytes == nbytes, "the client got the whole transfer over path 1"
    conn = only_conn(load_summary(out))
    by_path = {sf["remote"].split(":")[0]: sf for sf in conn["subflows"]}
    live, dead = by_path["10.0.1.1"], by_path["10.0.2.1"]
    on_wire = {i: sniff.result[dev]["unique"] for i, dev in enumerate(bed.server_ifs, start=1)}
    assert sniff.result[bed.server_ifs[0]]["payload"] == on_wire[1] <= live["bytes_handed"]
    never_left = dead["bytes_handed"] - on_wire[2]
    assert never_left > 0, "path 2 was handed data after it died"
    handed = live["bytes_handed"] + dead["bytes_handed"]
    assert conn["msk_bytes_sent"] == nbytes
    # Every byte handed but not on the wire (the dead path's and the live path's re-sends still
    # queued at close) is part of the surplus over the transfer, and so are the kernel's reinjections.
    wire_payload, wire_covered = data_sequence_on_wire(tmp_path / "server.pcap")
    assert wire_covered == nbytes
    assert wire_payload == sum(sniff.result[dev]["payload"] for dev in bed.server_ifs)
    assert handed - nbytes >= max(handed - wire_payload, conn["msk_bytes_retrans"]) >= never_left


@pytest.mark.netns
def test_backup_subflow_pinned_no_switches(schedtrace_bin: Path, tmp_path: Path) -> None:
    """The client's second endpoint is `backup`: the server's default scheduler must keep all
    data on the first subflow, so 0 switches while both subflows are evaluated."""
    nbytes = 1_000_000
    out = tmp_path / "trace"
    with TwoPath(unique_tag()[:7] + "p", RATE_MBIT, backup=True) as bed:
        with Sniffer(bed) as sniff:
            with trace_scheduler(bed.server_ns, out, time.monotonic_ns(), sample_hz=50) as tracer:
                ids = bpf_ids_of(tracer.pid)
                tr = bed.transfer(nbytes)
    assert tr.nbytes == nbytes
    assert_no_bpf_left(ids)
    s = load_summary(out)
    assert s["lost_events"]["total"] == 0
    conn = only_conn(s)
    by_path = {sf["remote"].split(":")[0]: sf for sf in conn["subflows"]}
    assert set(by_path) == {"10.0.1.1", "10.0.2.1"}
    main, bkp = by_path["10.0.1.1"], by_path["10.0.2.1"]
    assert bkp["backup"] is True and main["backup"] is False
    assert bkp["decisions"] > 0, "the backup subflow is evaluated at every decision"
    assert bkp["bytes_handed"] == 0 and bkp["data_carrying_decisions"] == 0
    assert main["bytes_handed"] == nbytes == sniff.result[bed.server_ifs[0]]["unique"]
    assert sniff.result[bed.server_ifs[1]]["payload"] == 0
    assert conn["path_switches"] == 0
    assert read_csv(out / "switches.csv") == []
    check_samples(out, conn, 50)


@pytest.mark.netns
def test_open_connection_at_stop_counts_every_byte(schedtrace_bin: Path, tmp_path: Path) -> None:
    """Stop the trace while the connection is still open after its last byte: the bytes
    handed by the connection's last decision are seen by no later decision and no close,
    only by the final iter/tcp pass. The total must still be exact."""
    nbytes = 600_000
    out = tmp_path / "trace"
    received = threading.Event()
    result: list[Any] = []
    with TwoPath(unique_tag()[:7] + "o", RATE_MBIT) as bed:
        with trace_scheduler(bed.server_ns, out, time.monotonic_ns(), sample_hz=100):
            th = threading.Thread(target=lambda: result.append(
                bed.transfer(nbytes, hold_s=3.0, on_received=received.set)))
            th.start()
            assert received.wait(timeout=60), "transfer did not complete"
            time.sleep(0.3)  # the client has every byte; the connection stays open
        th.join(timeout=60)
    assert result and result[0].nbytes == nbytes
    s = load_summary(out)
    conn = only_conn(s)
    assert conn["bytes_handed"] == nbytes
    assert all(sf["closed_t"] is None for sf in conn["subflows"]), "stopped before any close"
    finals = [r for r in read_csv(out / "subflow_samples.csv") if r["source"] == "final"]
    assert {r["subflow_id"] for r in finals} == {str(sf["subflow_id"]) for sf in conn["subflows"]}
    assert sum(int(r["bytes_handed_cum"]) for r in finals) == nbytes
