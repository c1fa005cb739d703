"""The GStreamer player's summary (mpvlab/player/gstreamer/player.py): player-summary.json's QoE counters
(player/README.md defines each), with the DASH session's part when there is one."""

from __future__ import annotations

from typing import Any

from mpvlab.player.gstreamer.host import libsoup_loaded
from mpvlab.player.gstreamer.player_bus import BusWatch
from mpvlab.player.gstreamer.player_state import ns_to_s


class PlayerReport(BusWatch):
    """What a playback measured, as the summary's fields."""

    def summary(self) -> dict[str, Any]:
        fe, fe_src = self._frames_expected()
        video_len = ns_to_s(self.duration_ns)
        if video_len is None and fe is not None and self.fps:
            video_len = fe * self.fps[1] / self.fps[0]
        playback = None
        if self.t_first_frame is not None and self.t_eos is not None:
            playback = self.t_eos - self.t_first_frame
        stall = None
        if playback is not None and video_len:
            # Clamped at 0 as defined in mpvlab/results/metrics.py (stall_ratio): playback ending a few ms
            # before the container's duration is timing noise, not a negative stall.
            stall = max(0.0, (playback - video_len) / video_len)
        eps = [[round(s, 6), round(e, 6)] for s, e in self.under.episodes]
        out = {
            "url": self.a.url,
            "mode": self.a.mode,
            "decode": not self.a.no_decode,
            "buffer_ms": self.a.buffer_ms,
            "max_lateness_ms": self.a.max_lateness_ms,
            "rebuffer_resume_ms": self.a.rebuffer_resume_ms,
            "startup_buffer_ms": self.a.startup_buffer_ms,
            "underflow_merge_ms": self.a.underflow_merge_ms,
            "t0_ns": self.t0_ns,
            "status": self.status,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "frames_expected": fe,
            "frames_expected_source": fe_src,
            "frames_rendered": self.rendered,
            "picture_discards": self.discards,
            "picture_discards_no_underflow": self.discards_no_underflow,
            "frames_rendered_late": self.late_rendered,
            "frames_accounted": (fe is not None and self.rendered + self.discards == fe),
            "fps": None if self.fps is None else self.fps[0] / self.fps[1],
            "underflows": len(eps),
            "underflow_total_s": round(self.under.total_s, 6),
            "underflow_empty_s": round(self.under.empty_s, 6),
            "underflow_episodes": eps,
            "t_start": self.t_start,
            "t_playing": self.t_playing,
            "t_first_frame": self.t_first_frame,
            "t_eos": self.t_eos,
            "startup_delay_s": (None if self.t_first_frame is None or self.t_start is None
                                else round(self.t_first_frame - self.t_start, 6)),
            "playback_s": None if playback is None else round(playback, 6),
            "video_length_s": video_len,
            "stall_ratio": None if stall is None else round(stall, 6),
            "bytes_received": self.bytes,
            "download_complete": self.upstream_eos,
            "libsoup": libsoup_loaded(),
            "tls_ca_file": None if self.a.ca_file is None else str(self.a.ca_file),
            "tls_sources": self.http_sources,
            "dash": False,
        }
        if self.dash is not None:
            out.update(self.dash.summary())
            # Vargas et al.'s stall rate: (total playback time - video length) / video length,
            # never below 0 (discard mode ends on schedule; a few ms early is not "negative stall").
            out["stall_rate"] = None if stall is None else round(max(0.0, stall), 6)
            out["rebuffer_events"] = len(eps)
            out["rebuffer_ratio"] = (None if not playback else round(self.under.total_s / playback, 6))
        return out
