"""A scripted BBR flow whose mode sequence is known, read by mpvlab/cc/bbr_diag.py (issue 47;
tests/test_bbr_diag.py, bench/bench_bbr_diag.py).

The dumbbell of mpvlab/testbed/dumbbell.py (DelayDumbbell: a --- r (tbf toward b; the C delay line
on the ACK path) --- b). `a` opens connection 1 with TCP_CONGESTION bbr and sends in bulk for
`bulk_s`, idles `idle_s`, sends again for `bulk_s` on the same socket, closes; then opens connection 2
and sends for `bulk_s`. The reader samples in `a`'s namespace all along. Kernel BBR v1 (tcp_bbr.c)
puts every new connection in STARTUP; once the bandwidth estimate stops growing (3 rounds under
+25 %) it enters DRAIN and, when in-flight is down to the estimated BDP, PROBE_BW. After an idle
period a PROBE_BW connection stays in PROBE_BW (v1 restarts from idle without re-entering STARTUP);
connection 2 is new and starts in STARTUP again. A 100 ms RTT makes DRAIN last about a round, long
enough for a reader sampling every few ms to see it on a busy host.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mpvlab.testbed.dumbbell import RECEIVER_ADDR, DelayDumbbell

PORT = 9922

SINK = r"""
import socket, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", PORT)); srv.listen(8)
def drain(c):
    while c.recv(1 << 20):
        pass
    c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
""".replace("PORT", str(PORT))

SENDER = r"""
import socket, sys, time
addr, port, bulk, idle = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
buf = b"x" * (1 << 16)
def conn():
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"bbr")
    s.connect((addr, port))
    return s
def send(s, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        s.sendall(buf)
s = conn(); send(s, bulk); time.sleep(idle); send(s, bulk); s.close()
s = conn(); send(s, bulk); s.close()
"""


def run(out: Path, bulk_s: float = 4.0, idle_s: float = 1.5, period_ms: float = 5.0,
        rate_bit: int = 20_000_000, rtt_ms: float = 100.0, discover_ms: float = 50.0) -> dict[str, Any]:
    """The scripted flow with the reader sampling in the sender's namespace; the reader's summary.
    The tbf queue holds 2 BDPs (STARTUP's overshoot of up to 2.89 × BDP in flight mostly fits)."""
    from mpvlab.cc import bbr_diag
    bdp = int(rate_bit / 8 * rtt_ms / 1000)
    with DelayDumbbell(prefix="hbdg", rate_bit=rate_bit, limit_bytes=2 * bdp, rtt_ms=rtt_ms) as d:
        assert d.bed is not None
        d.set_cc("bbr")                  # the route's congctl decides at connect (it overrides a setsockopt)
        sink = d.bed.popen(d.ns_b, [sys.executable, "-c", SINK], "bbr-sink")
        reader = d.bed.popen(d.ns_a, [sys.executable, "-m", "mpvlab.cc.bbr_diag", "--out", str(out),
                                      "--port", str(PORT), "--period-ms", f"{period_ms:g}",
                                      "--discover-ms", f"{discover_ms:g}"], "bbr-diag",
                             stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)              # sink listening, reader sampling
            d.ns(d.ns_a, sys.executable, "-c", SENDER, RECEIVER_ADDR, str(PORT), f"{bulk_s:g}", f"{idle_s:g}",
                 timeout=3 * bulk_s + idle_s + 60)
            time.sleep(0.3)              # the last connection's close seen
        finally:
            reader.terminate()
            reader.wait(timeout=10)
            sink.kill()
            sink.wait(timeout=10)
    return bbr_diag.summarize(out)
