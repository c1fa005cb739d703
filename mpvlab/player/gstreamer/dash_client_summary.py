"""The summary of mpvlab's own DASH client (mpvlab/player/gstreamer/dash_client.py): its part of
player-summary.json, the same field set as the dashdemux session's (dash.py) plus its transport,
requests and SABRE's checks."""

from __future__ import annotations

from typing import Any

from mpvlab.player.contract import AbrRecord
from mpvlab.player.gstreamer.dash_client_state import ClientState


class ClientSummary(ClientState):
    """The session's records, each segment joined with how it played."""

    def summary(self) -> dict[str, Any]:
        with self._lock:
            segs = list(self.segments)
            for rec in segs:
                p = self._play.get(rec.index)
                if p is not None:
                    rec.t_play, rec.frames_rendered, rec.frames_discarded = p[0], p[1], p[2]
        levels = [s.level for s in segs]
        params = self.abr.p.model_dump(by_alias=True) if self.abr is not None else self.abr_params
        return {
            "dash": True,
            "fetcher": "own",
            "transport": {"protocol": self.http_version, "tls": self.tls, "alpn": self.alpn,
                          "tls_version": self.tls_version, "mptcp": self.mptcp, "rcvbuf_bytes": self.rcvbuf,
                          "rcvbuf_source": self.rcvbuf_source,
                          "rcvbuf_effective": self.rcvbuf_effective,
                          "so_protocol": self.so_protocol},
            "abr": AbrRecord(self.abr_name, params, seed=self.seed),
            "representations": [{"level": r.level, "id": r.id, "bitrate_bps": r.bandwidth,
                                 "width": r.width, "height": r.height} for r in self.reps],
            "segment_s": self.segment_s,
            "mpd_duration_s": self.mpd_duration_s,
            "segments": [s.to_json() for s in segs],
            "segments_downloaded": len(segs),
            "segments_expected": self.n_segments,
            "quality_avg": (sum(levels) / len(levels)) if levels else None,
            "bitrate_avg_bps": (sum(s.bitrate_bps for s in segs) / len(segs)) if segs else None,
            "bitrate_switches": sum(1 for a, b in zip(levels, levels[1:]) if a != b),
            "abr_decisions": self.decisions,
            # The client requests exactly what the rule decided (it builds the URL from the level),
            # so this is 0 by construction; kept for the same field set as the dashdemux player.
            "abr_policy_mismatches": 0,
            "abr_policy_mismatch_segments": [],
            "init_downloads": self.init_downloads,
            "sabre_checks": self.ticks,
            "sabre_events": self.sabre_events,
            "read_log": self.read_log,
            "dash_error": self.error,
        }
