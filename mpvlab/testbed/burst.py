"""How fast a token bucket's saved burst leaves the emulated router: the line rate under the bucket
(`line_rate` of a link direction; tests/test_line_rate.py, bench/bench_line_rate.py).

    a (10.203.1.1) --- r (tbf from links.emulator.tbf_argv on its egress to b) --- b (10.203.2.2)

After an idle second (the bucket full), `a` sends `frames` full-size UDP datagrams as fast as it
can; `b` captures them (tcpdump, kernel receive stamps). The drain rate is the bytes after the
first frame over the time from the first to the last: the rate the burst left the router at. Only
frames within the bucket's depth are sent, so the bucket's own rate never paces them. Offloads are
off on every veth (one frame per packet, as tbf counts them).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mpvlab.links.emulator import FRAME_BYTES, tbf_argv
from mpvlab.links.spec import LinkDirection
from mpvlab.testbed.bed import Bed

PORT = 9911
PAYLOAD = FRAME_BYTES - 14 - 20 - 8    # a full 1514-byte frame on the wire

SENDER = r"""
import socket, sys
n, addr, port, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
b = b"x" * size
for _ in range(n):
    s.sendto(b, (addr, port))
"""


@dataclass(frozen=True)
class Drain:
    frames: int              # captured at the receiver
    span_s: float            # first to last frame's receive stamp
    rate_bps: float          # (frames − 1) × frame bits / span

    def text(self) -> str:
        return f"{self.frames} frames in {self.span_s * 1e3:.2f} ms: {self.rate_bps / 1e6:.1f} Mbit/s"


def _rate(stamps: list[float]) -> Drain:
    span = stamps[-1] - stamps[0]
    return Drain(len(stamps), span, (len(stamps) - 1) * FRAME_BYTES * 8 / span if span > 0 else float("inf"))


def measure(spec: LinkDirection, frames: int, workdir: Path | None = None) -> Drain:
    """Send `frames` back-to-back full frames through a tbf built from `spec` (whose burst must hold
    them all) after one idle second; the drain rate at the receiver."""
    assert frames * FRAME_BYTES <= spec.effective_burst(), "the burst must hold every frame"
    with Bed(workdir) as bed:
        a, r, b = bed.node("a"), bed.node("r"), bed.node("b")
        bed.link(a, bed.ifname("a0"), "10.203.1.1/24", r, bed.ifname("r0"), "10.203.1.2/24")
        bed.link(r, bed.ifname("r1"), "10.203.2.1/24", b, bed.ifname("b0"), "10.203.2.2/24")
        a.run(["ip", "route", "add", "default", "via", "10.203.1.2"])
        b.run(["ip", "route", "add", "default", "via", "10.203.2.1"])
        r.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        r.run(tbf_argv(bed.ifname("r1"), spec))
        pcap = bed.workdir / "burst.pcap"
        cap = bed.popen(b, ["tcpdump", "-i", bed.ifname("b0"), "-n", "-s", "64", "-w", str(pcap),
                            "-j", "adapter_unsynced", "--time-stamp-precision", "nano", "udp", "port", str(PORT)],
                        "tcpdump", stderr=subprocess.PIPE, text=True)
        assert cap.stderr is not None
        cap.stderr.readline()            # "listening on …": capturing from here on
        time.sleep(1.0)                  # idle: the bucket fills
        a.run([sys.executable, "-c", SENDER, str(frames), "10.203.2.2", str(PORT), str(PAYLOAD)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(_stamps(pcap)) < frames:
            time.sleep(0.2)
        cap.terminate()
        cap.wait(timeout=10)
        stamps = _stamps(pcap)
    if len(stamps) < 2:
        raise RuntimeError(f"the receiver captured {len(stamps)} of {frames} frames")
    return _rate(stamps)


def _stamps(pcap: Path) -> list[float]:
    if not pcap.exists():
        return []
    out = subprocess.run(["tcpdump", "-r", str(pcap), "-n", "-tt", "--time-stamp-precision", "nano"],
                         capture_output=True, text=True).stdout
    return [float(line.split()[0]) for line in out.splitlines() if line.strip()]
