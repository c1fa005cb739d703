"""Deterministic test videos, progressive MP4 (the DASH ladder is in dash.py; the package is
mpvlab.content).

Why this module exists: every QoE number the player reports (frames, bytes,
underflows) is only comparable across runs if the served file is byte-identical
and its properties (frame count, real bitrate) are known.  So content is
generated here, from a synthetic source, with a recipe that x264 reproduces
bit for bit, and every file carries a sidecar JSON with its provenance.

Recipe (progressive MP4, the Kondo et al. INTERNET 2023 study, docs/studies.md §1):
  * source: ffmpeg lavfi ``testsrc2`` (moving pattern + counter, so the encoder
    has real work and every frame differs),
  * H.264 by libx264, ``-preset ultrafast``, ONE thread (``-threads 1`` and x264
    ``threads=1``): with more threads x264's output depends on scheduling and the
    file is no longer bit-identical across runs,
  * near-constant bitrate: ABR at ``bitrate_bps`` with a tight VBV
    (maxrate = minrate = bitrate, bufsize = 1 s) plus ``nal-hrd=cbr``,
  * fixed GOP (default 2 s), no scene-cut keyframes, so segmenting later (DASH)
    can cut on exact GOP boundaries,
  * ``-movflags +faststart``: the moov box goes first, so a player can start
    decoding while the file is still downloading (progressive streaming),
  * bitexact muxing and no metadata, so no timestamps or tool versions leak in.

Cache: files live in ``cache_dir`` under a name derived from every parameter
and the recipe version.  A cache hit requires the sidecar's parameters to match
and the file's size and sha256 to match the sidecar.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from mpvlab.core.errors import MpvlabError
from mpvlab.workloads.content_rules import check_progressive

# Bump when the encoding recipe changes: it is part of the file name and the
# sidecar, so old cached files are never mistaken for new ones.
RECIPE_VERSION = 1

# The study's video (docs/studies.md §1): 180 s, 5.24 Mbit/s, 720p.
STUDY_DURATION_S = 180.0
STUDY_BITRATE_BPS = 5_240_000


class ContentError(MpvlabError, RuntimeError):
    """Generation or verification of a content file failed."""


@dataclasses.dataclass(frozen=True)
class ContentInfo:
    """A generated file and what is known about it (mirrors the sidecar JSON)."""

    path: Path
    sidecar: Path
    params: dict[str, Any]
    sha256: str
    size_bytes: int
    frames: int
    duration_s: float            # container duration reported by ffprobe
    stream_bitrate_bps: float    # video payload bits / duration (what the encoder hit)
    file_bitrate_bps: float      # whole file bits / duration (what the network carries)
    ffmpeg_version: str
    encode_s: float              # wall time of the encode that produced the file
    cached: bool                 # True when this call found a valid cached file

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["path"] = str(self.path)
        d["sidecar"] = str(self.sidecar)
        return d


def _fmt_num(x: float) -> str:
    """Compact, file-name-safe rendering of a number (10.0 -> '10', 2.5 -> '2p5')."""
    s = f"{x:.6g}"
    return s.replace(".", "p").replace("-", "m")


def _progressive_params(duration_s: float, bitrate_bps: int, width: int, height: int,
                        fps: int, gop_s: float) -> dict[str, Any]:
    return {
        "kind": "progressive_mp4",
        "recipe_version": RECIPE_VERSION,
        "source": "testsrc2",
        "codec": "h264/libx264",
        "preset": "ultrafast",
        "duration_s": float(duration_s),
        "bitrate_bps": int(bitrate_bps),
        "width": int(width),
        "height": int(height),
        "fps": int(fps),
        "gop_frames": int(round(gop_s * fps)),
    }


def ffmpeg_version() -> str:
    """First line of ``ffmpeg -version`` (recorded in sidecars: output is only
    bit-identical for one ffmpeg/x264 build)."""
    try:
        out = subprocess.run(["ffmpeg", "-hide_banner", "-version"], capture_output=True,
                             text=True, check=True).stdout
    except FileNotFoundError as e:
        raise ContentError("ffmpeg not found on PATH (Debian package 'ffmpeg')") from e
    return out.splitlines()[0].strip() if out else "unknown"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def probe(path: Path) -> dict[str, Any]:
    """Frame count (packets counted by demuxing, no decode), durations, bitrates."""
    cmd = ["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0",
           "-show_entries",
           "stream=codec_name,width,height,avg_frame_rate,nb_read_packets,nb_frames,"
           "duration,bit_rate:format=duration,size,bit_rate",
           "-of", "json", str(path)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ContentError(f"ffprobe failed on {path}: {res.stderr.strip()}")
    j = json.loads(res.stdout)
    if not j.get("streams"):
        raise ContentError(f"ffprobe found no video stream in {path}")
    st, fm = j["streams"][0], j["format"]
    return {
        "codec": st.get("codec_name"),
        "width": int(st["width"]),
        "height": int(st["height"]),
        "avg_frame_rate": st.get("avg_frame_rate"),
        "frames": int(st["nb_read_packets"]),
        "duration_s": float(st.get("duration") or fm["duration"]),
        "stream_bitrate_bps": float(st["bit_rate"]),
        "file_size": int(fm["size"]),
    }


def _encode_cmd(out: Path, p: dict[str, Any]) -> list[str]:
    b = p["bitrate_bps"]
    return [
        "ffmpeg", "-hide_banner", "-nostdin", "-y", "-loglevel", "error",
        "-f", "lavfi",
        "-i", f"testsrc2=size={p['width']}x{p['height']}:rate={p['fps']}:duration={p['duration_s']}",
        "-an",
        "-c:v", "libx264", "-preset", "ultrafast",
        # One thread in both places: lavc's and x264's own thread pools.
        "-threads", "1",
        "-x264-params", "threads=1:nal-hrd=cbr:force-cfr=1",
        "-b:v", str(b), "-minrate", str(b), "-maxrate", str(b), "-bufsize", str(b),
        "-g", str(p["gop_frames"]), "-keyint_min", str(p["gop_frames"]), "-sc_threshold", "0",
        "-pix_fmt", "yuv420p",
        "-movflags", "+faststart",
        "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1",
        "-f", "mp4", str(out),
    ]


def _load_sidecar(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _info_from_sidecar(mp4: Path, sidecar: Path, sc: dict[str, Any], cached: bool) -> ContentInfo:
    return ContentInfo(
        path=mp4, sidecar=sidecar, params=sc["params"], sha256=sc["sha256"],
        size_bytes=sc["size_bytes"], frames=sc["frames"], duration_s=sc["duration_s"],
        stream_bitrate_bps=sc["stream_bitrate_bps"], file_bitrate_bps=sc["file_bitrate_bps"],
        ffmpeg_version=sc["ffmpeg_version"], encode_s=sc["encode_s"], cached=cached,
    )


def _valid_cached(mp4: Path, sidecar: Path, params: dict[str, Any]) -> dict[str, Any] | None:
    sc = _load_sidecar(sidecar)
    if sc is None or sc.get("params") != params or not mp4.is_file():
        return None
    # Size first (free), then the hash (reads the file; ~0.3 s for the 113 MB study file).
    if mp4.stat().st_size != sc.get("size_bytes"):
        return None
    if sha256_file(mp4) != sc.get("sha256"):
        return None
    return sc


def progressive_name(params: dict[str, Any]) -> str:
    return (f"prog_v{params['recipe_version']}_{params['width']}x{params['height']}"
            f"_{params['fps']}fps_{params['bitrate_bps']}bps_{_fmt_num(params['duration_s'])}s"
            f"_g{params['gop_frames']}")


def ensure_progressive(cache_dir: Path, duration_s: float, bitrate_bps: int, width: int = 1280,
                       height: int = 720, fps: int = 30, gop_s: float = 2.0) -> ContentInfo:
    """Return a valid cached progressive MP4 for these parameters, encoding it if needed.

    Safe against concurrent callers (an flock per file name serialises encodes)
    and against interrupted encodes (output is written to a temp name, then renamed).
    Files are made world-readable (0644): Apache serves them as its unprivileged user.
    """
    check_progressive(duration_s, bitrate_bps, width, height, fps, gop_s)
    params = _progressive_params(duration_s, bitrate_bps, width, height, fps, gop_s)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    name = progressive_name(params)
    mp4 = cache_dir / f"{name}.mp4"
    sidecar = cache_dir / f"{name}.json"

    with open(cache_dir / f".{name}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        sc = _valid_cached(mp4, sidecar, params)
        if sc is not None:
            return _info_from_sidecar(mp4, sidecar, sc, cached=True)

        tmp = cache_dir / f".{name}.{os.getpid()}.tmp.mp4"
        t0 = time.monotonic()
        res = subprocess.run(_encode_cmd(tmp, params), capture_output=True, text=True)
        encode_s = time.monotonic() - t0
        if res.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise ContentError(f"ffmpeg encode failed (exit {res.returncode}): {res.stderr.strip()}")
        pr = probe(tmp)
        size = tmp.stat().st_size
        expected_frames = int(round(duration_s * fps))
        if pr["frames"] != expected_frames:
            tmp.unlink(missing_ok=True)
            raise ContentError(f"encoded {pr['frames']} frames, expected {expected_frames}")
        sc = {
            "params": params,
            "file": mp4.name,
            "sha256": sha256_file(tmp),
            "size_bytes": size,
            "frames": pr["frames"],
            "duration_s": pr["duration_s"],
            "stream_bitrate_bps": pr["stream_bitrate_bps"],
            "file_bitrate_bps": size * 8 / pr["duration_s"],
            "ffmpeg_version": ffmpeg_version(),
            "ffmpeg_cmd": _encode_cmd(mp4, params),
            "encode_s": round(encode_s, 3),
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        os.chmod(tmp, 0o644)
        os.replace(tmp, mp4)
        tmp_sc = sidecar.with_suffix(".json.tmp")
        tmp_sc.write_text(json.dumps(sc, indent=2) + "\n")
        os.chmod(tmp_sc, 0o644)
        os.replace(tmp_sc, sidecar)
        return _info_from_sidecar(mp4, sidecar, sc, cached=False)
