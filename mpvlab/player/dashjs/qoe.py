"""dash.js's own record (player/dashjs/mpvlab-dashjs.js) → the QoE fields every mpvlab player fills.

Definitions, the same as mpvlab/player/gstreamer/player.py's for the GStreamer players:
  * startup_delay_s: the <video> element's first `playing` − the moment the driver started dash.js
    (mpvlabStart: the MPD request follows at once).
  * underflow_episodes: each `waiting` of the <video> element after playback began, up to the next
    `playing` (the element stops its clock while waiting: a stall in the rebuffer sense) — except the
    episodes whose opening `waiting` found the element holding decodable video: readyState ≥
    HAVE_FUTURE_DATA and ≥ EXCLUDE_AHEAD_S beyond the playhead. dash.js halted those itself (its
    start-up race, player/README.md); they are listed in `stalls_excluded` with the reason and kept
    out of every stall figure, so a stall counts only when the element had no video to play.
  * playback_s: `ended` − first `playing`; stall_rate = stall_ratio = max(0, playback − excluded
    stalls − length) / length (Vargas et al.); rebuffer_ratio = counted stalled time / playback_s.
  * quality per segment: the level (dash.js's quality index, 0 = lowest) of each video media segment
    dash.js downloaded, in segment order; quality_avg its mean, bitrate_switches the changes between
    consecutive segments.
  * picture_discards: the element's droppedVideoFrames; frames_rendered = total − dropped.
"""

from __future__ import annotations

import re
from typing import Any


def _run_s(page_ms: float | None, t0_ns: int, offset_ns: float) -> float | None:
    return None if page_ms is None else round((page_ms * 1e6 + offset_ns - t0_ns) / 1e9, 6)


def media_segments(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Video media segments dash.js completed successfully, in the order they finished."""
    return [f for f in raw.get("fragments", [])
            if f.get("mediaType") == "video" and f.get("type") == "MediaSegment" and f.get("ok")]


def stall_episodes(events: list[list[Any]]) -> tuple[float | None, float | None, list[tuple[float, float]]]:
    """(first playing, ended, [(waiting, playing)...]) in page ms, from the <video> element's events."""
    first = ended = None
    eps: list[tuple[float, float]] = []
    open_at = None
    for t, name, _ in events:
        if name == "video.playing":
            if first is None:
                first = t
            elif open_at is not None:
                eps.append((open_at, t))
                open_at = None
        elif name == "video.waiting" and first is not None and open_at is None:
            open_at = t
        elif name == "video.ended" and ended is None:
            ended = t
    if open_at is not None and ended is not None:
        eps.append((open_at, ended))
    return first, ended, eps


def _ahead_of_playhead(detail: Any) -> float | None:
    """Seconds the <video> element held beyond its playhead (the buffered range holding
    `t_media`), from the page's snapshot at an element event; None without a snapshot."""
    if not isinstance(detail, dict) or "buffered" not in detail or "t_media" not in detail:
        return None
    t = float(detail["t_media"])
    for start, end in detail["buffered"]:
        if start <= t < end:
            return end - t
    return 0.0


# A stall is excluded when its opening `waiting` found at least this much video beyond the playhead
# (with the element's readyState ≥ HAVE_FUTURE_DATA): twice dash.js 3.0.3's STALL_THRESHOLD (0.5 s), so
# a stall dash.js raises at its threshold just before the element would run dry still counts.
EXCLUDE_AHEAD_S = 1.0
HAVE_FUTURE_DATA = 3


def stalls_with_data(eps: list[tuple[float, float]], buffer: list[list[float]],
                     events: list[list[Any]] | None = None,
                     min_buffer_s: float = EXCLUDE_AHEAD_S) -> list[dict[str, Any]]:
    """Stall episodes that began while the video was there, so the network did not cause them.

    Where the page recorded the element's buffered ranges at the `waiting` that opened the episode,
    the test is the element's own: at least `min_buffer_s` buffered beyond the playhead
    (`element_ahead_s`). dash.js's buffer level is no judge at that moment: in the start-up stall
    (player/README.md) it is still 0 because dash.js has not yet seen the append end. Records
    without that snapshot fall back to dash.js's level sampled every 100 ms staying at or above
    `min_buffer_s` throughout the episode."""
    waiting_detail = {t: d for t, name, d in (events or []) if name == "video.waiting"}
    out: list[dict[str, Any]] = []
    for a, b in eps:
        levels = [lv for t, lv, *_ in buffer if a <= t <= b and lv is not None]
        detail = waiting_detail.get(a)
        ahead = _ahead_of_playhead(detail)
        ready = detail.get("ready_state") if isinstance(detail, dict) else None
        if ahead is not None:
            held = ahead >= min_buffer_s and (ready is None or ready >= HAVE_FUTURE_DATA)
            why = (f"the element held {ahead:.3f} s beyond its playhead (readyState {ready}) at the opening "
                   f"waiting: dash.js halted playback with video buffered")
        else:
            held = bool(levels) and min(levels) >= min_buffer_s
            why = f"no element snapshot; dash.js's own level stayed ≥ {min_buffer_s:g} s"
        if held:
            out.append({"start_ms": a, "end_ms": b, "ready_state": ready,
                        "element_ahead_s": None if ahead is None else round(ahead, 3),
                        "buffer_s_min": round(min(levels), 3) if levels else None, "why": why})
    return out


def summarize(raw: dict[str, Any], t0_ns: int, page_offset_ns: float, video_length_s: float,
              frames_expected: int | None) -> dict[str, Any]:
    events = raw.get("events", [])
    rs = lambda ms: _run_s(ms, t0_ns, page_offset_ns)   # noqa: E731 - page ms → run seconds
    first, ended, all_eps = stall_episodes(events)
    started = raw.get("started_ms")
    playback = None if first is None or ended is None else (ended - first) / 1000
    with_data = stalls_with_data(all_eps, raw.get("buffer") or [], events)
    excluded = {(x["start_ms"], x["end_ms"]) for x in with_data}
    eps = [e for e in all_eps if e not in excluded]        # the stalls that count
    excluded_s = sum(b - a for a, b in excluded) / 1000
    stalled = sum(b - a for a, b in eps) / 1000
    # playback lasted the video, the counted stalls and the excluded ones: the latter are taken out
    stall = None if playback is None or not video_length_s else max(
        0.0, (playback - excluded_s - video_length_s) / video_length_s)
    rates = {int(b["q"]): int(b["bps"]) for b in raw.get("bitrates", [])}
    segs: list[dict[str, Any]] = []
    for f in sorted(media_segments(raw), key=lambda f: f.get("index") or 0):
        dur = f.get("duration_ms")
        segs.append({
            "index": f.get("index"), "level": f.get("quality"), "bitrate_bps": rates.get(int(f.get("quality") or 0)),
            "bytes": f.get("bytes"), "url": f.get("url"),
            # the segment's real rate (its size over its media duration) beside the manifest's declared one
            "size_bps": round(f["bytes"] * 8 / f["media_duration_s"]) if f.get("media_duration_s") else None,
            "t_request": rs(f.get("request_ms")), "t_first_byte": rs(f.get("first_byte_ms")), "t_last_byte": rs(f.get("end_ms")),
            "ttfb_s": None if f.get("ttfb_ms") is None else round(f["ttfb_ms"] / 1000, 6),
            "download_s": None if dur is None else round(dur / 1000, 6),
            "throughput_bps": None if not dur else round(f["bytes"] * 8000 / dur),
        })
    levels = [s["level"] for s in segs]
    pq = raw.get("playback_quality") or {}
    dropped, total = pq.get("dropped"), pq.get("total")
    ev_out = [{"t": rs(t), "type": name, **({"detail": d} if d is not None else {})} for t, name, d in events]
    return {
        "dash": True, "fetcher": "dashjs",
        "startup_delay_s": None if first is None or started is None else round((first - started) / 1000, 6),
        "t_start": rs(started), "t_first_frame": rs(first), "t_eos": rs(ended),
        "playback_s": None if playback is None else round(playback, 6),
        "video_length_s": video_length_s,
        "underflows": len(eps), "underflow_episodes": [[rs(a), rs(b)] for a, b in eps],
        "underflow_total_s": round(stalled, 6),
        "stall_ratio": None if stall is None else round(stall, 6),
        "stall_rate": None if stall is None else round(stall, 6),
        "rebuffer_events": len(eps),
        "rebuffer_ratio": None if not playback else round(stalled / playback, 6),
        "stalls_with_data": [{"start": rs(x["start_ms"]), "end": rs(x["end_ms"]), "buffer_s_min": x["buffer_s_min"],
                              "element_ahead_s": x["element_ahead_s"], "ready_state": x["ready_state"],
                              "why": x["why"]}
                             for x in with_data],
        "stalls_with_data_s": round(excluded_s, 6),
        # the same episodes, by what the stall figures do with them
        "stalls_excluded": len(with_data), "stalls_excluded_s": round(excluded_s, 6),
        "stalls_excluded_rule": (f"a waiting that found readyState >= {HAVE_FUTURE_DATA} and >= {EXCLUDE_AHEAD_S:g} s "
                                 "buffered beyond the playhead is not a stall (dash.js halted playback with video "
                                 "buffered); excluded from underflows, rebuffer_events, rebuffer_ratio, stall_rate"),
        "start_gate": raw.get("start_gate"),
        "end_of_stream": raw.get("end_of_stream"),
        "frames_expected": frames_expected,
        "frames_decoded": total, "picture_discards": dropped,
        "frames_rendered": None if total is None or dropped is None else total - dropped,
        # Chromium's totalVideoFrames counts frames the element received for display; the check is
        # whether every frame of the stream got there (rendered or dropped).
        "frames_accounted": total is not None and frames_expected is not None and total == frames_expected,
        "picture_discards_no_underflow": None, "frames_rendered_late": None,
        "representations": [{"level": q, "bitrate_bps": b} for q, b in sorted(rates.items())],
        "segments": segs, "segments_downloaded": len(segs),
        # body bytes of every request dash.js completed (init and media segments; the MPD is not in
        # dash.js's fragment record)
        "bytes_received": sum(int(f.get("bytes") or 0) for f in raw.get("fragments", []) if f.get("ok")),
        "download_complete": bool(segs) and ended is not None,
        "segment_s": next((f["media_duration_s"] for f in media_segments(raw) if f.get("media_duration_s")), None),
        "quality_avg": (sum(levels) / len(levels)) if levels else None,
        "bitrate_avg_bps": (sum(s["bitrate_bps"] or 0 for s in segs) / len(segs)) if segs else None,
        "bitrate_switches": sum(1 for x, y in zip(levels, levels[1:]) if x != y),
        "abr_policy_mismatches": 0,
        "throughput_estimates": [[rs(t), v] for t, v in raw.get("throughput_estimates") or []],
        "codec_support": raw.get("codec_support"),
        "dash_error": raw.get("error"),
        "events_out": ev_out,
    }


_REQ_RE = re.compile(r'"GET (\S+) HTTP/[\d.]+" (\d{3}) (\d+|-)')


def access_log_segments(lines: list[str]) -> dict[str, list[int]]:
    """URL path → body bytes of each 200 response in an Apache access log (mpvlab's LogFormat)."""
    out: dict[str, list[int]] = {}
    for line in lines:
        m = _REQ_RE.search(line)
        if m and m.group(2) == "200":
            out.setdefault(m.group(1), []).append(0 if m.group(3) == "-" else int(m.group(3)))
    return out
