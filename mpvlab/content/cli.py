"""`python -m mpvlab.content progressive|dash …`: generate (or find cached) the test videos."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from mpvlab.content.dash import STUDY_DASH_BITRATES_BPS, STUDY_DASH_DURATION_S, STUDY_DASH_SEGMENT_S, DashInfo, ensure_dash
from mpvlab.content.progressive import (
    STUDY_BITRATE_BPS, STUDY_DURATION_S, ContentError, ContentInfo, ensure_progressive,
)


def default_cache_dir() -> Path:
    env = os.environ.get("MPVLAB_CONTENT_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "mpvlab" / "content"


def _parse_bitrate(s: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmM]?)\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"bad bitrate {s!r} (e.g. 5240000, 5240k, 5.24M)")
    mult = {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)]
    return int(round(float(m.group(1)) * mult))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mpvlab.content",
                                 description="Generate (or find cached) deterministic test videos.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("progressive", help="H.264 MP4 with faststart (progressive download)")
    p.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                   help="where files and sidecars live (default $MPVLAB_CONTENT_DIR or ~/.cache/mpvlab/content)")
    p.add_argument("--duration", type=float, default=STUDY_DURATION_S, help="seconds (default 180)")
    p.add_argument("--bitrate", type=_parse_bitrate, default=STUDY_BITRATE_BPS,
                   help="bit/s, k/M suffixes allowed (default 5.24M)")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=720)
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--gop-s", type=float, default=2.0)
    d = sub.add_parser("dash", help="DASH ladder (MPD + segments), docs/studies.md §2 defaults")
    d.add_argument("--cache-dir", type=Path, default=default_cache_dir())
    d.add_argument("--duration", type=float, default=STUDY_DASH_DURATION_S, help="seconds (default 600)")
    d.add_argument("--bitrates", type=lambda v: [_parse_bitrate(x) for x in v.split(",")],
                   default=list(STUDY_DASH_BITRATES_BPS),
                   help="comma-separated, increasing (default 1M,2.5M,5M,...,25M)")
    d.add_argument("--segment-s", type=float, default=STUDY_DASH_SEGMENT_S)
    d.add_argument("--width", type=int, default=1280)
    d.add_argument("--height", type=int, default=720)
    d.add_argument("--fps", type=int, default=30)
    args = ap.parse_args(argv)
    try:
        info: ContentInfo | DashInfo
        if args.cmd == "dash":
            info = ensure_dash(args.cache_dir, args.duration, args.bitrates, args.segment_s,
                               args.width, args.height, args.fps)
        else:
            info = ensure_progressive(args.cache_dir, args.duration, args.bitrate, args.width,
                                      args.height, args.fps, args.gop_s)
    except (ContentError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(info.to_json(), indent=2))
    return 0
