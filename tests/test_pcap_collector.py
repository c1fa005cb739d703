"""mpvlab/collectors/pcap.py on the collectors' two-path MPTCP testbed (mpvlab/testbed/twopath.py): the size limit
stops a capture and says so, a full capture's bytes equal the interface counters, every tcpdump is
registered and gone afterwards, a failing block stops them too. Root, namespaces; ~10 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpvlab.collectors import pcap
from mpvlab.testbed.twopath import TwoPath, unique_tag
from mpvlab.core import proc

pytestmark = pytest.mark.netns
# Per test (issue 44).


@pytest.mark.cpu   # cpu: a capture checked against the interface counters (tcpdump needs the CPU)
def test_size_limit_truncates_and_full_capture_matches_counters(tmp_path: Path) -> None:
    refs: list[proc.ProcRef] = []
    with TwoPath(unique_tag()[:7] + "p", 40.0) as bed:
        server = [pcap.Tap("server", bed.server_ns, i) for i in bed.server_ifs]
        client = [pcap.Tap("client", bed.client_ns, i) for i in bed.client_ifs]
        with pcap.capture(client, tmp_path / "full", 128, 100_000_000, register=refs.append) as full:
            with pcap.capture(server, tmp_path / "cut", 65535, 1_000_000, register=refs.append) as cut:
                tr = bed.transfer(6_000_000)
    assert tr.nbytes == 6_000_000
    assert len(refs) == 4 and not any(r.alive() for r in refs)
    # ~3 MB of frames per path: each server file stops at 1 MB (+ up to 0.1 s of traffic), well short of
    # what the client's full capture of the same path (the veth's other end) saw.
    whole = {r.interface[-1]: r.bytes for r in full.results}
    for r in cut.results:
        assert r.truncated, r
        assert (tmp_path / "cut" / r.file).stat().st_size >= 1_000_000, r
        assert r.bytes < 0.8 * whole[r.interface[-1]], (r, whole)
        assert r.ok, r          # its own window ends at its stop: still checked, still equal
    assert set(cut.summary()["truncated"]) == {r.file for r in cut.results}
    for r in full.results:
        assert not r.truncated and r.ok and r.dropped_by_kernel == 0, r
        assert r.bytes == pcap.pcap_totals(tmp_path / "full" / r.file)[1]
        assert abs(r.bytes - r.counter_bytes) <= pcap.INFLIGHT_FRAMES_ALLOWED * pcap.FULL_FRAME, r


def test_a_failing_block_stops_every_capture(tmp_path: Path) -> None:
    refs: list[proc.ProcRef] = []
    with TwoPath(unique_tag()[:7] + "q", 10.0) as bed:
        taps = [pcap.Tap("server", bed.server_ns, i) for i in bed.server_ifs]
        with pytest.raises(RuntimeError, match="the run failed"):
            with pcap.capture(taps, tmp_path, register=refs.append):
                raise RuntimeError("the run failed")
    assert len(refs) == 2 and not any(r.alive() for r in refs)


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(pcap.CollectorError, match="snaplen"):
        with pcap.capture([], tmp_path, snaplen=10):
            pass
    with pytest.raises(pcap.CollectorError, match="tcpdump on"):
        with pcap.capture([pcap.Tap("x", "hpcb-no-such-ns", "eth0")], tmp_path, ready_timeout_s=5):
            pass
