"""The rules a test video must meet for ffmpeg to make it (mpvlab/content/ encodes it): one place,
below both the content maker and the scenario's validation (mpvlab/input/scenario.py), so `validate`
refuses exactly what `run` would when it makes the content (issue 45: repeated bitrates, sub-frame
segments and a segment longer than the video passed `validate`, then failed after the network was up).
Pure functions: ValueError naming the rule."""

from __future__ import annotations


def check_progressive(duration_s: float, bitrate_bps: int, width: int, height: int, fps: int,
                      gop_s: float) -> None:
    """ValueError unless ffmpeg can make this progressive video (or one DASH level)."""
    if not (0 < duration_s <= 3600):
        raise ValueError(f"duration_s must be in (0, 3600], got {duration_s}")
    if not (10_000 <= bitrate_bps <= 200_000_000):
        raise ValueError(f"bitrate_bps must be in [1e4, 2e8], got {bitrate_bps}")
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise ValueError(f"width/height must be positive and even (yuv420p), got {width}x{height}")
    if not (1 <= fps <= 120):
        raise ValueError(f"fps must be in [1, 120], got {fps}")
    if round(gop_s * fps) < 1:
        raise ValueError(f"gop_s * fps must be >= 1 frame, got {gop_s} s at {fps} fps")


def _per_level(v: int | list[int], n: int, what: str) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    vals = [int(x) for x in v]
    if len(vals) != n:
        raise ValueError(f"{what}: {len(vals)} values for {n} bitrate levels")
    return vals


def _validate_dash(duration_s: float, bitrates_bps: list[int], segment_s: float,
                   widths: list[int], heights: list[int], fps: int) -> None:
    if not bitrates_bps or len(bitrates_bps) > 20:
        raise ValueError(f"need 1..20 bitrate levels, got {len(bitrates_bps)}")
    if any(b2 <= b1 for b1, b2 in zip(bitrates_bps, bitrates_bps[1:])):
        raise ValueError(f"bitrates_bps must be strictly increasing (level order), got {bitrates_bps}")
    for b, w, h in zip(bitrates_bps, widths, heights):
        check_progressive(duration_s, b, w, h, fps, segment_s)
    if any(w * heights[0] != widths[0] * h for w, h in zip(widths, heights)):
        # ffmpeg's dash muxer refuses mixed aspect ratios in one adaptation set.
        raise ValueError(f"all levels need the same aspect ratio, got "
                         f"{[f'{w}x{h}' for w, h in zip(widths, heights)]}")
    if abs(segment_s * fps - round(segment_s * fps)) > 1e-9:
        raise ValueError(f"segment_s * fps must be a whole number of frames (GOP), got {segment_s}*{fps}")
    if segment_s > duration_s:
        raise ValueError(f"segment_s {segment_s} is longer than the video ({duration_s} s)")


def check_dash(duration_s: float, bitrates_bps: list[int], segment_s: float, width: int | list[int],
               height: int | list[int], fps: int) -> tuple[list[int], list[int], list[int]]:
    """ValueError unless ensure_dash can make this ladder; (bitrates, widths, heights) per level. The
    scenario's validation calls it too (input/scenario.py), so `validate` refuses what `run` would
    (issue 45: repeated bitrates, sub-frame segments, a segment longer than the video)."""
    bitrates = [int(b) for b in bitrates_bps]
    widths = _per_level(width, len(bitrates), "width")
    heights = _per_level(height, len(bitrates), "height")
    _validate_dash(duration_s, bitrates, segment_s, widths, heights, fps)
    return bitrates, widths, heights
