"""Deterministic DASH ladders (MPD + segments) for mpvlab, encoded like the progressive file
(progressive.py) with GOP == segment length."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from mpvlab.content.progressive import ContentError, _fmt_num, _load_sidecar, ffmpeg_version, sha256_file
from mpvlab.workloads.content_rules import check_dash


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


def _dash_params(duration_s: float, bitrates_bps: list[int], segment_s: float,
                 widths: list[int], heights: list[int], fps: int,
                 mpd_min_buffer_s: float | None = None) -> dict[str, Any]:
    extra = {} if mpd_min_buffer_s is None else {"mpd_min_buffer_s": float(mpd_min_buffer_s)}
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
        # Only when set, so every ladder packaged as ffmpeg writes it keeps its cache name.
        **extra,
    }


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
    reps: list[dict[str, Any]] = []
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


# The MPD element's attributes a player reads before its first request (dash.js: minBufferTime
# decides BUFFER_LOADED; maxSegmentDuration and the profile its fetch plan), recorded in provenance.
MPD_KEY_ATTRIBUTES = ("profiles", "type", "mediaPresentationDuration", "maxSegmentDuration", "minBufferTime")


def mpd_attributes(mpd: Path) -> dict[str, str | None]:
    """The MPD element's key attributes as written (ISO 8601 durations stay text), plus those of its
    first AdaptationSet that shape switching (segmentAlignment, startWithSAP, bitstreamSwitching)."""
    import xml.etree.ElementTree as ET
    root = ET.parse(mpd).getroot()
    out: dict[str, str | None] = {k: root.get(k) for k in MPD_KEY_ATTRIBUTES}
    aset = root.find(".//{urn:mpeg:dash:schema:mpd:2011}AdaptationSet")
    for k in ("segmentAlignment", "startWithSAP", "bitstreamSwitching"):
        out[f"AdaptationSet@{k}"] = None if aset is None else aset.get(k)
    return out


def _set_min_buffer_time(mpd: Path, seconds: float) -> None:
    """Rewrite the MPD element's minBufferTime in place (ffmpeg's dash muxer has no option for it and
    writes 2 x the segment duration); only that attribute's text changes."""
    text = mpd.read_text()
    new, n = re.subn(r'(<MPD\b[^>]*?\sminBufferTime=")PT[0-9.]+S(")', rf"\g<1>PT{seconds:g}S\g<2>", text, count=1)
    if n != 1:
        raise ContentError(f"{mpd}: no minBufferTime attribute on the MPD element to set")
    mpd.write_text(new)


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
        for name, size, _digest in files:      # sizes first (free), then hashes
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
                fps: int = 30, mpd_min_buffer_s: float | None = None) -> DashInfo:
    """Return a valid cached DASH ladder for these parameters, encoding it if needed.

    ``mpd_min_buffer_s``: the MPD's minBufferTime; None keeps what ffmpeg's dash muxer writes
    (2 x the segment duration). GPAC's MP4Box writes 1.5 s unless told (its ``-min-buffer``).

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
    bitrates, widths, heights = check_dash(duration_s, bitrates_bps, segment_s, width, height, fps)
    params = _dash_params(duration_s, bitrates, segment_s, widths, heights, fps, mpd_min_buffer_s)
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
            if mpd_min_buffer_s is not None:
                _set_min_buffer_time(tmp / DASH_MPD_NAME, mpd_min_buffer_s)
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
