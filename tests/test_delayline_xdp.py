"""Tests of the AF_XDP delay line prototype (links/delayline/xdp, mpvlab/testbed/xdpline.py).

Topology: client -- router -- server (veths); the line in the router takes the server->client
frames at the router's server-facing veth (XDP -> AF_XDP socket) and transmits them on the
client-facing veth after the delay; a FORWARD DROP rule for that veth means nothing crosses the
router except through the line. Bounds are derived in each test's docstring.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from pathlib import Path
from typing import Iterator

import pytest

from mpvlab.testbed import delayline as H
from mpvlab.testbed import xdpline as X




# Per test (issue 44).

DELAY_MS = 30.0
# Median of RTT - delay: base RTT ~0.05 ms, the line's wake-up ~0.05 ms, its batching tolerance
# <= 0.15 ms; 1.5 ms leaves ten times that for a loaded host. "Never early" is exact: the
# stamp is taken when the reply enters the router, after the request left the client.
MEDIAN_SLACK_MS = 1.5


@pytest.fixture(scope="session")
def xdp_bin() -> Path:
    H.build()
    return X.build()


@pytest.fixture
def line(xdp_bin: Path) -> Iterator[H.Line]:
    with H.Line() as ln:
        X.guard(ln)
        yield ln


@pytest.mark.netns
@pytest.mark.kernel("af_xdp")
@pytest.mark.alone   # alone: median RTT within a few ms of the delay, all 20000 blasted datagrams received
def test_xdp_line_delays_in_order_without_loss(line: H.Line) -> None:
    """100 echo replies at 10 ms spacing and 20000 UDP datagrams at 20 kpps (1000 B, 160 Mbit/s,
    1 s) cross a 30 ms line. Every RTT >= 30 ms (never early) and the median within 1.5 ms of it;
    the line reads exactly 100 + 20000 IPv4 frames (ARP passes to the stack), releases every one
    (frames 8192 > 20 kpps x 30 ms = 600 held), the kernel drops none at its AF_XDP socket, and
    the receiver gets all 20000 in order (FIFO, the clamp to the previous target)."""
    dl = X.start(line, int(DELAY_MS * 1000))
    smp = line.ping(100, 0.01, wait_s=0.5)
    rtts = [s["rtt_ns"] / 1e6 for s in smp if s["rtt_ns"] is not None]
    tx, res = line.udp_blast(20_000, 20_000, listen_s=10)
    st = dl.stop()
    assert len(rtts) == 100, smp
    assert min(rtts) >= DELAY_MS, rtts
    assert statistics.median(rtts) <= DELAY_MS + MEDIAN_SLACK_MS, rtts
    assert tx["sent"] == 20000
    assert st["packets"] == 100 + 20000, st
    assert st["released"] == st["packets"] and st["lateness_us"]["n"] + st["released_at_exit"] == st["packets"], st
    assert st["xsk_rx_dropped"] == 0 and st["xsk_rx_ring_full"] == 0 and st["drops_nostamp"] == 0, st
    assert st["tx_errors"] == 0 and st["drops_ttl"] == 0 and st["bad_stamp"] == 0, st
    assert st["tx_dev_drops"] == 0 and st["dropped_at_exit"] == 0, st
    assert res == {"received": 20000, "reorders": 0, "duplicates": 0, "max_seq": 19999}, res


@pytest.mark.netns
@pytest.mark.kernel("af_xdp")
@pytest.mark.cpu   # cpu: 5 of 5 echoes within 0.3 s, gone within 5 s
def test_xdp_line_detaches_on_sigterm_and_sigkill(line: H.Line) -> None:
    """The XDP program is attached through a BPF link owned by the line's process. SIGTERM: exit 0,
    the stats written, no program on the device and the program freed by the kernel. SIGKILL: no
    clean-up code runs, yet the kernel closes the link with the process's files, so the program
    is detached and freed all the same (polled for up to 5 s: freeing is RCU-deferred); with the
    guard rule, the dead line then means 100 % loss; and a new line binds the same devices at once
    (no socket or program was left behind)."""
    dl = X.start(line, 5000)
    pid1 = X.xdp_prog_id(line, "rs")
    assert pid1 is not None and X.bpf_prog_exists(pid1)
    st = dl.stop()
    assert st["backend"] == "xdp"
    assert X.xdp_prog_id(line, "rs") is None
    assert _gone_within(pid1, 5.0)

    dl2 = X.start(line, 5000, name="xdp2")
    pid2 = X.xdp_prog_id(line, "rs")
    assert pid2 is not None and pid2 != pid1
    assert sum(s["rtt_ns"] is not None for s in line.ping(5, 0.01, wait_s=0.3)) == 5
    os.kill(dl2.proc.pid, signal.SIGKILL)  # our own child
    dl2.proc.wait(timeout=10)
    assert dl2.proc.returncode == -signal.SIGKILL
    assert not dl2.stats.exists()  # no clean-up code ran
    assert X.xdp_prog_id(line, "rs") is None
    assert _gone_within(pid2, 5.0)
    assert all(s["rtt_ns"] is None for s in line.ping(5, 0.01, wait_s=0.3))

    dl3 = X.start(line, 5000, name="xdp3")
    assert sum(s["rtt_ns"] is not None for s in line.ping(5, 0.01, wait_s=0.3)) == 5
    assert dl3.stop()["packets"] == 5


def _gone_within(prog_id: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not X.bpf_prog_exists(prog_id):
            return True
        time.sleep(0.1)
    return False
