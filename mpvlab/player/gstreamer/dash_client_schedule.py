"""The request scheduling of mpvlab's own DASH client (mpvlab/player/gstreamer/dash_client.py): when to ask the
ABR for the next segment's level, the requests that answer it (an init segment whenever the level
changes), and the records of each decision and each segment as its response is read.

One request at a time, sent once the buffer level <= abr.request_threshold_s(), except with SABRE,
which keeps its pipeline depth of media requests outstanding (abr/sabre.py)."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from mpvlab.player.gstreamer.abr import Download, Sabre
from mpvlab.player.gstreamer.dash_client_http import HttpExchange
from mpvlab.player.gstreamer.dash_client_net import Request
from mpvlab.player.gstreamer.dash_client_state import SegmentRecord

SCHEDULE_POLL_S = 0.02


@dataclass
class StreamProgress:
    """Where the fetch thread is in the presentation: one per `_stream` call, kept between its steps."""

    sabre: bool                                  # SABRE keeps several requests outstanding
    outstanding: deque[Request] = field(default_factory=deque)
    next_index: int = 0                          # the next segment to decide and request
    init_level: int | None = None                # the level whose init segment the demuxer has last
    prev_done_t: float | None = None             # last byte of the previous response on the connection
    init_bytes_pending: int = 0                  # init bytes read since the last media segment


class Scheduler(HttpExchange):
    """Requests what the ABR decides, reads the responses in order and records both."""

    def _prefetch_inits(self) -> None:
        """HTTP/2: every representation's init segment, once, before the first media request (as dash.js
        caches them). Requested with its media segment instead, the init came after it: Apache's
        mod_http2 sent an 805 B init after the 15.6 MB media segment requested right behind it, even
        with the media stream depending on the init's (mpvlab/player/gstreamer/h2_conn.py), so the decoder, which needs
        the init first, starved for the whole 5 s segment."""
        reqs = [Request("init", self._abs(r.init), level=r.level, t_request=self._now()) for r in self.reps]
        self._send(reqs)
        for r in reqs:
            body, t_fb, t_lb = self._read_response(r, push=False)
            assert isinstance(body, bytes)
            self.add_bytes(len(body))
            self._init_cache[r.level] = body
            self.init_downloads.append({"level": r.level, "uri": r.path, "bytes": len(body),
                                        "t_first_byte": round(t_fb, 6), "t_last_byte": round(t_lb, 6)})

    def _stream(self) -> None:
        st = StreamProgress(sabre=isinstance(self.abr, Sabre))
        while not self._stop.is_set() and (st.next_index < self.n_segments or st.outstanding):
            # Send what the policy allows.
            while st.next_index < self.n_segments and not self._stop.is_set():
                if not self._room_for_request(st):
                    break
                self._request_next(st)
            if not st.outstanding:
                continue
            self._take_response(st)

    def _room_for_request(self, st: StreamProgress) -> bool:
        """SABRE: fewer media requests outstanding than its depth. Others: nothing outstanding, and
        (after the first segment) the buffer down to the ABR's request threshold, waited for here."""
        if st.sabre:
            depth = self.abr.pipeline_depth(self.rcvbuf, self.abr.level)
            if sum(1 for r in st.outstanding if r.kind == "media") >= depth:
                return False
        else:
            if st.outstanding:
                return False
            thr = self.abr.request_threshold_s()
            while not self._stop.is_set() and st.next_index > 0 and self.buffer_level_s() > thr:
                self._service(SCHEDULE_POLL_S)
        return True

    def _request_next(self, st: StreamProgress) -> None:
        """The ABR's level for the next segment, its requests sent, the decision recorded."""
        next_index = st.next_index
        buf = self.buffer_level_s()
        hist = list(self.history)
        level_before = self.abr.level
        choice = self.abr.decide(buf, hist, self._now())
        if st.sabre:
            self._sabre_events()
        lvl = choice.level
        rep = self.reps[lvl]
        reqs: list[Request] = []
        if lvl != st.init_level:
            reqs.append(Request("init", self._abs(rep.init), level=lvl, cached=self._init_cache.get(lvl)))
            st.init_level = lvl
        number = rep.start_number + next_index
        media = Request("media", self._abs(_fill_number(rep.media, number)), level=lvl,
                        number=number, index=next_index, decision=choice.info,
                        buffer_s=None if next_index == 0 else round(buf, 6))
        reqs.append(media)
        now = self._now()
        for r in reqs:
            r.t_request = now
        st.outstanding.extend(reqs)
        media.depth = sum(1 for r in st.outstanding if r.kind == "media")
        self._send(reqs)
        dec = {"t": round(now, 6), "index": next_index, "buffer_s": round(buf, 6),
               "level_before": level_before, "level": lvl, "outstanding": media.depth,
               **choice.info}
        self.decisions.append(dec)
        self.emit("abr_decision", **{k: v for k, v in dec.items() if k != "t"}, t=dec["t"])
        st.next_index += 1

    def _take_response(self, st: StreamProgress) -> None:
        """The oldest outstanding response read to its end (its body to the appsrc) and recorded."""
        req = st.outstanding.popleft()
        body_len, t_fb, t_lb = self._read_response(req, push=True)
        if req.kind == "init":
            st.init_bytes_pending += body_len
            if req.cached is None:       # a prefetched init never had the connection here
                self.init_downloads.append({"level": req.level, "uri": req.path, "bytes": body_len,
                                            "t_first_byte": round(t_fb, 6), "t_last_byte": round(t_lb, 6)})
                st.prev_done_t = t_lb
            return
        # Pipelined: a response has the connection from the later of its request and the
        # end of the previous response.
        start = req.t_request if st.prev_done_t is None else max(req.t_request, st.prev_done_t)
        st.prev_done_t = t_lb
        dl_s = max(t_lb - start, 1e-6)
        with self._lock:
            self._pushed_media_s += self.segment_s
        d = Download(level=req.level, bytes=body_len, download_s=dl_s, t_end_s=t_lb)
        self.history.append(d)
        if st.sabre:
            self.abr.on_segment(d, t_lb)
            self._sabre_events()
        self._record_segment(st, req, d, t_fb)

    def _record_segment(self, st: StreamProgress, req: Request, d: Download, t_fb: float) -> None:
        """The segment's record (summary) and its event; the init bytes read before it go with it."""
        rep = self.reps[req.level]
        body_len, dl_s, t_lb = d.bytes, d.download_s, d.t_end_s
        rec = SegmentRecord(
            index=req.index, number=req.number, level=req.level, rep_id=rep.id,
            bitrate_bps=rep.bandwidth, uri=req.path, bytes=body_len, init_bytes=st.init_bytes_pending,
            t_request=req.t_request, t_first_byte=t_fb, t_last_byte=t_lb, download_s=dl_s,
            throughput_bps=d.throughput_bps, buffer_s_at_decision=req.buffer_s,
            buffer_s_at_done=round(self.buffer_level_s(), 6), outstanding=req.depth,
            abr_info=req.decision)
        st.init_bytes_pending = 0
        with self._lock:
            self.segments.append(rec)
        self.emit("segment", index=rec.index, level=rec.level, bitrate_bps=rec.bitrate_bps,
                  bytes=rec.bytes, t_request=round(rec.t_request, 6),
                  t_first_byte=round(t_fb, 6), t_last_byte=round(t_lb, 6),
                  download_s=round(dl_s, 6), throughput_bps=round(rec.throughput_bps, 1),
                  buffer_s_at_decision=rec.buffer_s_at_decision)

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else self.base + path


def _fill_number(media: str, number: int) -> str:
    def sub(m: re.Match[str]) -> str:
        fmt = m.group(1)
        return (("%" + fmt[1:]) % number) if fmt else str(number)
    return re.sub(r"\$Number(%0\d+d)?\$", sub, media)
