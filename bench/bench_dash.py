#!/usr/bin/env python3
"""Player CPU cost in DASH mode at 720p (dashdemux -> qtdemux -> avdec_h264), per ABR.

Runs Apache (mpm_event, own ServerRoot) and the player in one private network
namespace (``hdab<pid>``, over its loopback: ample bandwidth, so both ABRs run the
top level once started) and reads the player's CPU time from /proc/PID/stat
(utime+stime, all threads) while it plays; the child's rusage at exit is printed
beside it.  For comparison it also plays a progressive MP4 of the top level's
bitrate.  Not a test: prints figures with the configured values beside them.

    .venv/bin/python bench/bench_dash.py [--duration 30]
        [--bitrates 1M,2.5M,5.24M] [--segment-s 2] [--no-progressive]
"""

from __future__ import annotations

import argparse
import sys
import time

from mpvlab.testbed.playbench import PORT, content_cache, describe, play, served  # noqa: E402
from mpvlab.content import _parse_bitrate, ensure_dash, ensure_progressive  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--bitrates", type=lambda v: [_parse_bitrate(x) for x in v.split(",")],
                    default=[1_000_000, 2_500_000, 5_240_000])
    ap.add_argument("--segment-s", type=float, default=2.0)
    ap.add_argument("--no-progressive", action="store_true")
    a = ap.parse_args()
    cache = content_cache("/tmp/hda-content-cache")
    t = time.monotonic()
    info = ensure_dash(cache, a.duration, a.bitrates, a.segment_s, 1280, 720, 30)
    print(f"DASH content: {info.dir.name} ({'cached' if info.cached else 'encoded'} in "
          f"{time.monotonic() - t:.1f} s), levels "
          + ", ".join(f"{r['bitrate_bps'] / 1e6:g} (real {r['mean_bitrate_bps'] / 1e6:.3f})"
                      for r in info.representations) + " Mbit/s, 1280x720 30 fps, "
          f"{info.n_segments} x {a.segment_s:g} s segments")
    with served("hdab", cache) as (ns, tmp):
        mpd = f"http://127.0.0.1:{PORT}/{info.dir.name}/{info.mpd.name}"
        runs: list[tuple[str, str, list[str]]] = [
            ("dash gst", mpd, ["--buffer-ms", "10000"]),
            ("dash bba", mpd, ["--buffer-ms", "10000", "--abr", "bba",
                               "--bba-reservoir-s", "2", "--bba-cushion-s", "4"]),
        ]
        if not a.no_progressive:
            prog = ensure_progressive(cache, a.duration, a.bitrates[-1])
            runs.append(("progressive", f"http://127.0.0.1:{PORT}/{prog.path.name}", []))
        for name, url, extra in runs:
            r = play(ns, url, tmp / name.replace(" ", "_"), extra, a.duration * 2 + 30)
            s = r["summary"]
            line = describe(name, r, a.duration)
            if s.get("dash"):
                top = len(s["representations"]) - 1
                line += (f"; quality_avg {s['quality_avg']:.2f} of {top}, segments at top "
                         f"{sum(g['level'] == top for g in s['segments'])}/{len(s['segments'])}, "
                         f"switches {s['bitrate_switches']}, ABR mismatches "
                         f"{s['abr_policy_mismatches']}")
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
