"""Deterministic test-video generation for mpvlab.

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

import argparse
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from core.errors import MpvlabError

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


def _validate(duration_s: float, bitrate_bps: int, width: int, height: int, fps: int,
              gop_s: float) -> None:
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
    _validate(duration_s, bitrate_bps, width, height, fps, gop_s)
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


# --- DASH -----------------------------------------------------------------
# Recipe (the Vargas et al. WWW 2021 study, docs/studies.md §2): one
# representation per bitrate, every one encoded exactly like the progressive
# file (testsrc2, x264 ultrafast, one thread, CBR with a 1 s VBV, no scene-cut
# keyframes) with GOP == segment length, so every segment starts with an IDR
# and a player can switch representation at any segment boundary.  Packaged by
# ffmpeg's dash muxer (GPAC is not packaged for Debian 12): SegmentTemplate with
# $Number$ (no SegmentTimeline), one init segment per representation.
DASH_RECIPE_VERSION = 1

# docs/studies.md §2: "11 quality levels from 1 to 25 Mbit/s in 2.5 Mbit/s
# steps": 1, then 2.5 .. 25 in 2.5 Mbit/s steps (11 levels; the paper's text
# cannot be met exactly otherwise, 1 + 10 x 2.5 = 26).
STUDY_DASH_BITRATES_BPS = [1_000_000] + [int(2_500_000 * k) for k in range(1, 11)]
STUDY_DASH_SEGMENT_S = 5.0
STUDY_DASH_DURATION_S = 600.0
DASH_MPD_NAME = "manifest.mpd"


@dataclasses.dataclass(frozen=True)
class DashInfo:
    """A generated DASH ladder (mirrors the sidecar JSON).

    ``representations`` is ordered by bitrate, index == quality level
    (0 = lowest); each has id, level, bitrate_bps (the MPD's @bandwidth, the
    encoder's target), width, height, init {file, size_bytes, sha256},
    segments [{number, file, size_bytes, sha256, start_s, duration_s,
    bitrate_bps (size*8/duration: what the network carries)}] and
    mean_bitrate_bps (all media segment bytes * 8 / duration).
    """

    dir: Path                    # directory served over HTTP (holds the MPD and segments)
    mpd: Path
    sidecar: Path
    params: dict[str, Any]
    mpd_sha256: str
    mpd_size_bytes: int
    duration_s: float
    segment_s: float
    n_segments: int
    representations: list[dict[str, Any]]
    total_bytes: int
    ffmpeg_version: str
    encode_s: float
    cached: bool

    @property
    def bitrates_bps(self) -> list[int]:
        return [r["bitrate_bps"] for r in self.representations]

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in ("dir", "mpd", "sidecar"):
            d[k] = str(d[k])
        return d


def _per_level(v: int | list[int], n: int, what: str) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    vals = [int(x) for x in v]
    if len(vals) != n:
        raise ValueError(f"{what}: {len(vals)} values for {n} bitrate levels")
    return vals


def _dash_params(duration_s: float, bitrates_bps: list[int], segment_s: float,
                 widths: list[int], heights: list[int], fps: int) -> dict[str, Any]:
    return {
        "kind": "dash",
        "recipe_version": DASH_RECIPE_VERSION,
        "source": "testsrc2",
        "codec": "h264/libx264",
        "preset": "ultrafast",
        "packager": "ffmpeg dash muxer (SegmentTemplate $Number$, no timeline)",
        "duration_s": float(duration_s),
        "bitrates_bps": [int(b) for b in bitrates_bps],
        "segment_s": float(segment_s),
        "widths": widths,
        "heights": heights,
        "fps": int(fps),
        "gop_frames": int(round(segment_s * fps)),
    }


def _validate_dash(duration_s: float, bitrates_bps: list[int], segment_s: float,
                   widths: list[int], heights: list[int], fps: int) -> None:
    if not bitrates_bps or len(bitrates_bps) > 20:
        raise ValueError(f"need 1..20 bitrate levels, got {len(bitrates_bps)}")
    if any(b2 <= b1 for b1, b2 in zip(bitrates_bps, bitrates_bps[1:])):
        raise ValueError(f"bitrates_bps must be strictly increasing (level order), got {bitrates_bps}")
    for b, w, h in zip(bitrates_bps, widths, heights):
        _validate(duration_s, b, w, h, fps, segment_s)
    if any(w * heights[0] != widths[0] * h for w, h in zip(widths, heights)):
        # ffmpeg's dash muxer refuses mixed aspect ratios in one adaptation set.
        raise ValueError(f"all levels need the same aspect ratio, got "
                         f"{[f'{w}x{h}' for w, h in zip(widths, heights)]}")
    if abs(segment_s * fps - round(segment_s * fps)) > 1e-9:
        raise ValueError(f"segment_s * fps must be a whole number of frames (GOP), got {segment_s}*{fps}")
    if segment_s > duration_s:
        raise ValueError(f"segment_s {segment_s} is longer than the video ({duration_s} s)")


def dash_name(params: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    b = params["bitrates_bps"]
    return (f"dash_v{params['recipe_version']}_{max(params['widths'])}x{max(params['heights'])}"
            f"_{params['fps']}fps_{len(b)}lv_{b[0] // 1000}-{b[-1] // 1000}kbps"
            f"_{_fmt_num(params['duration_s'])}s_seg{_fmt_num(params['segment_s'])}_{digest}")


def _dash_encode_cmd(outdir: Path, p: dict[str, Any]) -> list[str]:
    cmd = ["ffmpeg", "-hide_banner", "-nostdin", "-y", "-loglevel", "error"]
    n = len(p["bitrates_bps"])
    # One lavfi input per level (its own size): no scaler, nothing threaded.
    for w, h in zip(p["widths"], p["heights"]):
        cmd += ["-f", "lavfi", "-i",
                f"testsrc2=size={w}x{h}:rate={p['fps']}:duration={p['duration_s']}"]
    for i in range(n):
        cmd += ["-map", f"{i}:v"]
    g = str(p["gop_frames"])
    cmd += ["-c:v", "libx264", "-preset", "ultrafast", "-threads", "1",
            "-x264-params", "threads=1:nal-hrd=cbr:force-cfr=1",
            "-g", g, "-keyint_min", g, "-sc_threshold", "0", "-pix_fmt", "yuv420p"]
    for i, b in enumerate(p["bitrates_bps"]):
        cmd += [f"-b:v:{i}", str(b), f"-minrate:v:{i}", str(b), f"-maxrate:v:{i}", str(b),
                f"-bufsize:v:{i}", str(b)]
    cmd += ["-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1",
            "-f", "dash", "-seg_duration", f"{p['segment_s']:g}",
            "-use_template", "1", "-use_timeline", "0",
            "-adaptation_sets", "id=0,streams=v",
            "-init_seg_name", "init-$RepresentationID$.m4s",
            "-media_seg_name", "seg-$RepresentationID$-$Number%05d$.m4s",
            str(outdir / DASH_MPD_NAME)]
    return cmd


def parse_mpd(mpd: Path) -> list[dict[str, Any]]:
    """Representations of the (single) video AdaptationSet of an mpvlab MPD:
    id, bandwidth, width, height, init/media templates, timescale, duration,
    startNumber; sorted by bandwidth (index == quality level)."""
    import xml.etree.ElementTree as ET
    ns = {"m": "urn:mpeg:dash:schema:mpd:2011"}
    root = ET.parse(mpd).getroot()
    reps = []
    for rep in root.iterfind(".//m:AdaptationSet/m:Representation", ns):
        st = rep.find("m:SegmentTemplate", ns)
        if st is None:
            raise ContentError(f"{mpd}: representation {rep.get('id')} has no SegmentTemplate")
        reps.append({
            "id": rep.get("id"),
            "bandwidth": int(rep.get("bandwidth", "0")),
            "width": int(rep.get("width", "0")),
            "height": int(rep.get("height", "0")),
            "init": st.get("initialization"),
            "media": st.get("media"),
            "timescale": int(st.get("timescale", "1")),
            "duration": int(st.get("duration", "0")),
            "start_number": int(st.get("startNumber", "1")),
        })
    reps.sort(key=lambda r: r["bandwidth"])
    return reps


def _expand(template: str, rep_id: str, number: int | None = None) -> str:
    out = template.replace("$RepresentationID$", rep_id)
    if number is not None:
        m = re.search(r"\$Number(%0(\d+)d)?\$", out)
        if m:
            width = int(m.group(2)) if m.group(2) else 0
            out = out[:m.start()] + f"{number:0{width}d}" + out[m.end():]
    return out


def _dash_sidecar(outdir: Path, params: dict[str, Any], encode_s: float) -> dict[str, Any]:
    mpd = outdir / DASH_MPD_NAME
    reps_mpd = parse_mpd(mpd)
    if [r["bandwidth"] for r in reps_mpd] != params["bitrates_bps"]:
        raise ContentError(f"MPD bandwidths {[r['bandwidth'] for r in reps_mpd]} != requested "
                           f"{params['bitrates_bps']}")
    dur, seg = params["duration_s"], params["segment_s"]
    n_seg = int(-(-round(dur * 1e6) // round(seg * 1e6)))     # ceil without float error
    reps: list[dict[str, Any]] = []
    total = mpd.stat().st_size
    for level, r in enumerate(reps_mpd):
        if abs(r["duration"] / r["timescale"] - seg) > 1e-6:
            raise ContentError(f"MPD segment duration {r['duration']}/{r['timescale']} != {seg}")
        init = outdir / _expand(r["init"], r["id"])
        segs = []
        media_bytes = 0
        for k in range(n_seg):
            number = r["start_number"] + k
            f = outdir / _expand(r["media"], r["id"], number)
            if not f.is_file():
                raise ContentError(f"missing segment {f.name} (expected {n_seg} per representation)")
            size = f.stat().st_size
            start = k * seg
            d = min(seg, dur - start)
            segs.append({"number": number, "file": f.name, "size_bytes": size,
                         "sha256": sha256_file(f), "start_s": round(start, 6),
                         "duration_s": round(d, 6), "bitrate_bps": round(size * 8 / d, 1)})
            media_bytes += size
        extra = outdir / _expand(r["media"], r["id"], r["start_number"] + n_seg)
        if extra.exists():
            raise ContentError(f"more segments than expected: {extra.name} exists")
        total += init.stat().st_size + media_bytes
        reps.append({"id": r["id"], "level": level, "bitrate_bps": r["bandwidth"],
                     "width": r["width"], "height": r["height"],
                     "init": {"file": init.name, "size_bytes": init.stat().st_size,
                              "sha256": sha256_file(init)},
                     "segments": segs, "mean_bitrate_bps": round(media_bytes * 8 / dur, 1)})
    return {
        "params": params,
        "dir": outdir.name,
        "mpd": DASH_MPD_NAME,
        "mpd_sha256": sha256_file(mpd),
        "mpd_size_bytes": mpd.stat().st_size,
        "duration_s": dur,
        "segment_s": seg,
        "n_segments": n_seg,
        "representations": reps,
        "total_bytes": total,
        "ffmpeg_version": ffmpeg_version(),
        "ffmpeg_cmd": _dash_encode_cmd(Path(outdir.name), params),
        "encode_s": round(encode_s, 3),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _dash_files(sc: dict[str, Any]) -> list[tuple[str, int, str]]:
    files = [(sc["mpd"], sc["mpd_size_bytes"], sc["mpd_sha256"])]
    for r in sc["representations"]:
        files.append((r["init"]["file"], r["init"]["size_bytes"], r["init"]["sha256"]))
        files += [(s["file"], s["size_bytes"], s["sha256"]) for s in r["segments"]]
    return files


def _valid_cached_dash(outdir: Path, sidecar: Path, params: dict[str, Any]) -> dict[str, Any] | None:
    sc = _load_sidecar(sidecar)
    if sc is None or sc.get("params") != params or not outdir.is_dir():
        return None
    try:
        files = _dash_files(sc)
        expected = {name for name, _, _ in files}
        if {p.name for p in outdir.iterdir()} != expected:
            return None
        for name, size, digest in files:      # sizes first (free), then hashes
            if (outdir / name).stat().st_size != size:
                return None
        for name, _, digest in files:
            if sha256_file(outdir / name) != digest:
                return None
    except (KeyError, OSError):
        return None
    return sc


def _dash_info(outdir: Path, sidecar: Path, sc: dict[str, Any], cached: bool) -> DashInfo:
    return DashInfo(dir=outdir, mpd=outdir / sc["mpd"], sidecar=sidecar, params=sc["params"],
                    mpd_sha256=sc["mpd_sha256"], mpd_size_bytes=sc["mpd_size_bytes"],
                    duration_s=sc["duration_s"],
                    segment_s=sc["segment_s"], n_segments=sc["n_segments"],
                    representations=sc["representations"], total_bytes=sc["total_bytes"],
                    ffmpeg_version=sc["ffmpeg_version"], encode_s=sc["encode_s"], cached=cached)


def ensure_dash(cache_dir: Path, duration_s: float = STUDY_DASH_DURATION_S,
                bitrates_bps: list[int] | None = None, segment_s: float = STUDY_DASH_SEGMENT_S,
                width: int | list[int] = 1280, height: int | list[int] = 720,
                fps: int = 30) -> DashInfo:
    """Return a valid cached DASH ladder for these parameters, encoding it if needed.

    ``width``/``height`` are one value for all levels or one per level.  The
    ladder lives in ``cache_dir/<name>/`` (``manifest.mpd``, ``init-<id>.m4s``,
    ``seg-<id>-<number>.m4s``, representation id == level index) with the
    sidecar ``cache_dir/<name>.json`` holding the sha256 and size of the MPD
    and of every segment and each segment's bitrate.  A cache hit requires the
    parameters to match and every file's size and hash to match the sidecar
    (and no extra files).  Concurrency-safe (flock per name; the directory is
    built under a temporary name and renamed); files 0644, directories 0755.
    """
    if bitrates_bps is None:
        bitrates_bps = list(STUDY_DASH_BITRATES_BPS)
    bitrates = [int(b) for b in bitrates_bps]
    widths = _per_level(width, len(bitrates), "width")
    heights = _per_level(height, len(bitrates), "height")
    _validate_dash(duration_s, bitrates, segment_s, widths, heights, fps)
    params = _dash_params(duration_s, bitrates, segment_s, widths, heights, fps)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    name = dash_name(params)
    outdir = cache_dir / name
    sidecar = cache_dir / f"{name}.json"

    with open(cache_dir / f".{name}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        sc = _valid_cached_dash(outdir, sidecar, params)
        if sc is not None:
            return _dash_info(outdir, sidecar, sc, cached=True)

        tmp = cache_dir / f".{name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            t0 = time.monotonic()
            res = subprocess.run(_dash_encode_cmd(tmp, params), capture_output=True, text=True)
            encode_s = time.monotonic() - t0
            if res.returncode != 0:
                raise ContentError(f"ffmpeg dash encode failed (exit {res.returncode}): "
                                   f"{res.stderr.strip()}")
            # Every representation must hold exactly duration*fps frames.
            expected = int(round(duration_s * fps))
            for r in parse_mpd(tmp / DASH_MPD_NAME):
                init = tmp / _expand(r["init"], r["id"])
                segs = sorted(tmp.glob(_expand(r["media"], r["id"], None)
                                       .replace("$Number%05d$", "*").replace("$Number$", "*")))
                frames = _count_frames([init, *segs], tmp / f".probe-{r['id']}.mp4")
                if frames != expected:
                    raise ContentError(f"representation {r['id']}: {frames} frames, expected {expected}")
            sc = _dash_sidecar(tmp, params, encode_s)
            os.chmod(tmp, 0o755)
            for f in tmp.iterdir():
                os.chmod(f, 0o644)
            sc["dir"] = name
            if outdir.exists():
                shutil.rmtree(outdir)            # invalid leftover (we hold the lock)
            os.replace(tmp, outdir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        tmp_sc = sidecar.with_suffix(".json.tmp")
        tmp_sc.write_text(json.dumps(sc, indent=2) + "\n")
        os.chmod(tmp_sc, 0o644)
        os.replace(tmp_sc, sidecar)
        return _dash_info(outdir, sidecar, sc, cached=False)


def _count_frames(parts: list[Path], scratch: Path) -> int:
    """Frames of a representation: init + media segments concatenated (a valid
    fragmented MP4), counted by ffprobe's demuxer."""
    try:
        with open(scratch, "wb") as out:
            for p in parts:
                out.write(p.read_bytes())
        res = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0",
                              "-show_entries", "stream=nb_read_packets", "-of", "json", str(scratch)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise ContentError(f"ffprobe failed on {scratch}: {res.stderr.strip()}")
        return int(json.loads(res.stdout)["streams"][0]["nb_read_packets"])
    finally:
        scratch.unlink(missing_ok=True)


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


if __name__ == "__main__":
    sys.exit(main())
