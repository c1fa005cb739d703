"""The MPD as mpvlab's DASH players read it (dash.py's dashdemux session and our own client,
dash_client.py): the video representations of a SegmentTemplate with $Number$ (what
mpvlab.content.ensure_dash writes) and the presentation's duration. Standard library only."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

MPD_NS = "{urn:mpeg:dash:schema:mpd:2011}"


# ---- MPD -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Representation:
    level: int              # index in bandwidth order, 0 = lowest
    id: str
    bandwidth: int          # @bandwidth, bit/s
    width: int
    height: int
    init: str               # URL path template with $RepresentationID$ filled in
    media: str              # URL path template, $Number…$ left in
    start_number: int
    segment_s: float


def parse_mpd(text: bytes) -> tuple[list[Representation], float | None]:
    """Video representations (SegmentTemplate with $Number$) and the presentation duration."""
    root = ET.fromstring(text)
    dur = _iso_duration(root.get("mediaPresentationDuration"))
    reps: list[tuple[int, str, int, int, str, str, int, float]] = []
    for aset in root.iter(f"{MPD_NS}AdaptationSet"):
        ctype = aset.get("contentType") or aset.get("mimeType") or ""
        aset_tpl = aset.find(f"{MPD_NS}SegmentTemplate")
        for rep in aset.iter(f"{MPD_NS}Representation"):
            mime = rep.get("mimeType") or aset.get("mimeType") or ""
            if "video" not in ctype and not mime.startswith("video/"):
                continue
            tpl = rep.find(f"{MPD_NS}SegmentTemplate")
            tpl = tpl if tpl is not None else aset_tpl
            if tpl is None or "$Number" not in (tpl.get("media") or ""):
                raise ValueError("only SegmentTemplate with $Number$ is supported "
                                 "(what mpvlab.content.ensure_dash writes)")
            rid = rep.get("id", "")
            ts = int(tpl.get("timescale", "1"))
            reps.append((int(rep.get("bandwidth", "0")), rid, int(rep.get("width", "0")),
                         int(rep.get("height", "0")),
                         (tpl.get("initialization") or "").replace("$RepresentationID$", rid),
                         (tpl.get("media") or "").replace("$RepresentationID$", rid),
                         int(tpl.get("startNumber", "1")), int(tpl.get("duration", "0")) / ts))
    reps.sort(key=lambda r: r[0])
    return [Representation(i, r[1], r[0], r[2], r[3], r[4], r[5], r[6], r[7])
            for i, r in enumerate(reps)], dur


def _iso_duration(s: str | None) -> float | None:
    if not s:
        return None
    m = re.fullmatch(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?"
                     r"(?:(\d+(?:\.\d+)?)S)?)?", s)
    if not m:
        return None
    d, h, mi, se = (float(x) if x else 0.0 for x in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + se


def media_regex(media: str) -> re.Pattern[str]:
    parts = re.split(r"(\$Number(?:%0\d+d)?\$)", media)
    rx = "".join(r"(\d+)" if p.startswith("$Number") else re.escape(p) for p in parts)
    return re.compile(rx + r"$")
