"""Kernel BBR's modes per connection over INET_DIAG (mpvlab/cc/bbr_diag.py) on the scripted flow of
mpvlab/testbed/bbr_flow.py: the sampling rate reached (samples per second, the longest gap between
samples) beside the period asked for, each connection's mode sequence, time-weighted mode shares and
STARTUP episodes; and the same rows thinned to the `ss` sampler's cadence (one sample every
--coarse-ms, 210 ms as mpvlab/runner/sampling.py reached), to show what that cadence sees of DRAIN.
The rate is a figure of the host (its load average is printed): a busy host moves it.

    sudo .venv/bin/python bench/bench_bbr_diag.py [--period-ms 5] [--rtt-ms 100] [--out /tmp/x.csv]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from mpvlab.cc import bbr_diag
from mpvlab.testbed import bbr_flow


def thinned(rows: list[dict[str, Any]], every_ns: int) -> list[dict[str, Any]]:
    """Per connection, the first row at or after each multiple of `every_ns` from its first row."""
    out: list[dict[str, Any]] = []
    nxt: dict[tuple[Any, ...], int] = {}
    for r in sorted(rows, key=lambda r: r["t_ns"]):
        key = (r["src"], r["sport"], r["dst"], r["dport"])
        if r["t_ns"] >= nxt.get(key, 0):
            out.append(r)
            nxt[key] = r["t_ns"] + every_ns
    return out


def show(conns: dict[Any, bbr_diag.Connection]) -> None:
    for c in conns.values():
        if c.bytes_acked == 0:
            continue
        sh = "  ".join(f"{k} {v * 100:.2f} %" for k, v in c.shares().items() if k != "unknown" or v)
        st = ", ".join(f"{(e.end_ns - e.start_ns) / 1e9:.3f} s / {e.bytes_acked} B" for e in c.startup())
        print(f"  {c.conn[0]}:{c.conn[1]} → {c.conn[2]}:{c.conn[3]} ({c.cong}, {c.samples} samples, "
              f"{c.bytes_acked} B acked)\n    modes {[m for m in c.sequence()]}\n    shares {sh}\n"
              f"    STARTUP episodes: {len(c.startup())} ({st})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--period-ms", type=float, default=5.0)
    ap.add_argument("--rtt-ms", type=float, default=100.0)
    ap.add_argument("--coarse-ms", type=float, default=210.0)
    ap.add_argument("--discover-ms", type=float, default=50.0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="bench-bbr-diag-")) / "bbr-diag.csv"
    print(f"load average before: {os.getloadavg()}")
    s = bbr_flow.run(out, period_ms=a.period_ms, rtt_ms=a.rtt_ms, discover_ms=a.discover_ms)
    print(f"load average after: {os.getloadavg()}")
    print(f"asked: a sample every {a.period_ms:g} ms ({1000 / a.period_ms:.0f} Hz); reached: {s['rate_hz']} Hz over "
          f"{s['samples']} samples, longest gap {s['gap_ms_max']} ms; connections with data: "
          f"{s['connections_with_data']}; the reader's CPU: {s['reader_cpu_share_of_core']} of a core "
          f"(a full dump every {a.discover_ms:g} ms)  (rows: {out})")
    rows, _ = bbr_diag.read_rows(out)
    print("every sample:")
    show(bbr_diag.connections(rows))
    print(f"thinned to one sample every {a.coarse_ms:g} ms (the ss sampler's cadence):")
    show(bbr_diag.connections(thinned(rows, int(a.coarse_ms * 1e6))))


if __name__ == "__main__":
    main()
