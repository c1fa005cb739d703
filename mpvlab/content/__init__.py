"""Deterministic test videos: every QoE number the player reports (frames, bytes, underflows) is only
comparable across runs if the served file is byte-identical and its properties are known, so content
is generated here from a synthetic source with a recipe x264 reproduces bit for bit, each file with a
sidecar JSON of its provenance. `progressive.py`: the MP4 of the Wi-Fi/LTE study; `dash.py`: the DASH
ladders; `cli.py`: `python -m mpvlab.content`."""

from mpvlab.content.cli import _parse_bitrate, default_cache_dir, main
from mpvlab.content.dash import (
    DASH_MPD_NAME, DASH_RECIPE_VERSION, STUDY_DASH_BITRATES_BPS, STUDY_DASH_DURATION_S, STUDY_DASH_SEGMENT_S,
    DashInfo, dash_name, ensure_dash, mpd_attributes, parse_mpd,
)
from mpvlab.content.progressive import (
    RECIPE_VERSION, STUDY_BITRATE_BPS, STUDY_DURATION_S, ContentError, ContentInfo, ensure_progressive,
    ffmpeg_version, probe, progressive_name, sha256_file,
)

__all__ = [
    "DASH_MPD_NAME", "DASH_RECIPE_VERSION", "RECIPE_VERSION", "STUDY_BITRATE_BPS", "STUDY_DASH_BITRATES_BPS",
    "STUDY_DASH_DURATION_S", "STUDY_DASH_SEGMENT_S", "STUDY_DURATION_S", "ContentError", "ContentInfo", "DashInfo",
    "_parse_bitrate", "dash_name", "default_cache_dir", "ensure_dash", "ensure_progressive", "ffmpeg_version", "main",
    "mpd_attributes", "parse_mpd", "probe", "progressive_name", "sha256_file",
]
