"""Tests of mpvlab/content/ (progressive.py): determinism, caching, bitrate, container layout."""

from __future__ import annotations

import json
import struct
import subprocess
import time
from pathlib import Path

import pytest
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
from mpvlab.content import ensure_progressive, probe, sha256_file  # noqa: E402


def top_level_boxes(path: Path) -> list[str]:
    """ISO-BMFF top-level box types in file order."""
    out: list[str] = []
    with open(path, "rb") as f:
        while True:
            hdr = f.read(8)
            if len(hdr) < 8:
                return out
            size, typ = struct.unpack(">I4s", hdr)
            hdr_len = 8
            if size == 1:
                size = struct.unpack(">Q", f.read(8))[0]
                hdr_len = 16
            out.append(typ.decode("latin-1"))
            if size == 0:
                return out
            f.seek(size - hdr_len, 1)


def test_deterministic_encode(tmp_path: Path) -> None:
    a = ensure_progressive(tmp_path / "a", 4.0, 1_000_000, 640, 360, 30)
    b = ensure_progressive(tmp_path / "b", 4.0, 1_000_000, 640, 360, 30)
    assert not a.cached and not b.cached
    assert a.sha256 == b.sha256 == sha256_file(a.path) == sha256_file(b.path)
    assert a.size_bytes == b.size_bytes == a.path.stat().st_size
    assert a.frames == 120


def test_cache_hit_fast_and_invalidation(tmp_path: Path) -> None:
    first = ensure_progressive(tmp_path, 4.0, 1_000_000, 640, 360, 30)
    t = time.monotonic()
    again = ensure_progressive(tmp_path, 4.0, 1_000_000, 640, 360, 30)
    hit_s = time.monotonic() - t
    assert again.cached and again.sha256 == first.sha256
    assert hit_s < 0.5, hit_s            # a size check and one sha256 of ~0.5 MB
    sc = json.loads(first.sidecar.read_text())
    assert sc["sha256"] == first.sha256 and sc["params"]["bitrate_bps"] == 1_000_000
    assert sc["frames"] == 120 and sc["ffmpeg_version"].startswith("ffmpeg version")
    # Different parameters are a different file, never a false hit.
    other = ensure_progressive(tmp_path, 4.0, 1_200_000, 640, 360, 30)
    assert not other.cached and other.path != first.path
    # A corrupted file (same size, one byte flipped) is detected and re-encoded,
    # and the re-encode reproduces the original bytes.
    data = bytearray(first.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    first.path.write_bytes(bytes(data))
    fixed = ensure_progressive(tmp_path, 4.0, 1_000_000, 640, 360, 30)
    assert not fixed.cached and fixed.sha256 == first.sha256 == sha256_file(fixed.path)


def test_study_format_bitrate_and_layout(tmp_path: Path) -> None:
    """720p at the study's 5.24 Mbit/s (short variant: 10 s instead of 180 s)."""
    info = ensure_progressive(tmp_path, 10.0, 5_240_000)
    assert abs(info.stream_bitrate_bps / 5_240_000 - 1) <= 0.10, info.stream_bitrate_bps
    assert abs(info.file_bitrate_bps / 5_240_000 - 1) <= 0.10, info.file_bitrate_bps
    pr = probe(info.path)
    assert (pr["codec"], pr["width"], pr["height"], pr["avg_frame_rate"]) == ("h264", 1280, 720, "30/1")
    assert info.frames == pr["frames"] == 300
    assert abs(info.duration_s - 10.0) < 1e-3
    # Progressive streaming needs the moov box before the media data (faststart).
    boxes = top_level_boxes(info.path)
    assert "moov" in boxes and "mdat" in boxes
    assert boxes.index("moov") < boxes.index("mdat"), boxes
    # Fixed 2 s GOP: exactly one keyframe every 60 frames.
    res = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "packet=flags", "-of", "csv=p=0", str(info.path)],
                         capture_output=True, text=True, check=True)
    keys = [i for i, fl in enumerate(res.stdout.split()) if "K" in fl]
    assert keys == [0, 60, 120, 180, 240], keys
    assert (info.path.stat().st_mode & 0o777) == 0o644   # Apache (www-data) must read it


def test_invalid_parameters(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ensure_progressive(tmp_path, 2.0, 1_000_000, 641, 360)     # odd width: no yuv420p
    with pytest.raises(ValueError):
        ensure_progressive(tmp_path, 0.0, 1_000_000)


def test_cli(tmp_path: Path) -> None:
    py = str(REPO / ".venv" / "bin" / "python")
    h = subprocess.run([py, "-m", "mpvlab.content", "--help"], cwd=REPO, capture_output=True,
                       text=True)
    assert h.returncode == 0 and "progressive" in h.stdout
    r = subprocess.run([py, "-m", "mpvlab.content", "progressive", "--cache-dir", str(tmp_path),
                        "--duration", "2", "--bitrate", "800k", "--width", "320", "--height", "180"],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["frames"] == 60 and j["params"]["bitrate_bps"] == 800_000
    assert Path(j["path"]).is_file()
    bad = subprocess.run([py, "-m", "mpvlab.content", "progressive", "--cache-dir", str(tmp_path),
                          "--width", "321"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 1 and "even" in bad.stderr
