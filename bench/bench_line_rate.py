"""How fast a token bucket's saved burst leaves the emulated router, with and without `line_rate`
(mpvlab/links/spec.py; mpvlab/testbed/burst.py builds the rig and measures on the receiver's wire).

For each line rate (none = the veth's own speed: as fast as the host forwards) and each burst size,
the frames of one burst (all within the bucket) are sent back to back after an idle second; printed:
the configured line rate beside the measured drain rate (median and range over --repeats), and the
host's load average, which moves these figures (a one-frame peak bucket needs one timer wake-up per
frame: at 1 Gbit/s a frame every 12 µs, where this VM's wake-ups alone cost 16–24 µs).

    sudo .venv/bin/python bench/bench_line_rate.py [--repeats 5] [--frames 100,600]
"""

from __future__ import annotations

import argparse
import os
import statistics

from mpvlab.links.spec import LinkDirection
from mpvlab.testbed import burst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--frames", default="100,600", help="burst sizes in full frames (600 ≈ 0.9 MB)")
    ap.add_argument("--line-rates", default="none,100mbit,1gbit")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    print(f"{'line_rate':>10} {'frames':>6} {'measured Mbit/s: median [min, max]':>38}")
    for lr in args.line_rates.split(","):
        for n in (int(x) for x in args.frames.split(",")):
            spec = LinkDirection.model_validate({"rate": "2mbit", "burst": "1MB", "buffer": "2MB",
                                                 **({} if lr == "none" else {"line_rate": lr})})
            rates = [burst.measure(spec, n).rate_bps / 1e6 for _ in range(args.repeats)]
            print(f"{lr:>10} {n:>6} {statistics.median(rates):>14.1f} [{min(rates):.1f}, {max(rates):.1f}]")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
