#!/usr/bin/env python3
"""Player CPU cost at the study's format: 720p H.264 at 5.24 Mbit/s, 30 s of video.

Runs Apache (mpm_event, own ServerRoot) and the player in one private network
namespace (``hplb<pid>``, over its loopback), and reads the player's CPU time
from /proc/PID/stat (utime+stime, all threads) while it plays; the child's
rusage at exit is printed beside it as a cross-check.  Not a test: prints
figures with the configured values beside them.

    .venv/bin/python bench/bench_player.py [--duration 30] [--no-decode-too]
"""

from __future__ import annotations

import argparse
import sys

from mpvlab.testbed.playbench import PORT, content_cache, describe, play, served  # noqa: E402
from mpvlab.content import ensure_progressive  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--bitrate", type=int, default=5_240_000)
    ap.add_argument("--no-decode-too", action="store_true", help="also measure --no-decode")
    a = ap.parse_args()
    cache = content_cache("/tmp/hpl-content-cache")
    info = ensure_progressive(cache, a.duration, a.bitrate)
    print(f"content: {info.path.name}  {info.frames} frames, "
          f"{info.stream_bitrate_bps / 1e6:.3f} Mbit/s (configured {a.bitrate / 1e6:.3f}), "
          f"{info.size_bytes / 1e6:.1f} MB")
    with served("hplb", cache) as (ns, tmp):
        url = f"http://127.0.0.1:{PORT}/{info.path.name}"
        modes = [("decode", [])] + ([("no-decode", ["--no-decode"])] if a.no_decode_too else [])
        for name, extra in modes:
            print(describe(name, play(ns, url, tmp / name, extra, a.duration * 2 + 30), a.duration))
    return 0


if __name__ == "__main__":
    sys.exit(main())
