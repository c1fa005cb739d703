"""The video workload: Apache serves the scenario's video (progressive or DASH) and the GStreamer
player (player/) plays it in real time at the client, counting every frame. Its part of the summary
is the player's QoE and the HTTP record; it fails the run when Apache or the player dies, when the
player does not finish in time, or when a request used another HTTP version than the scenario's."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

from core.errors import RunFailed
from mpvlab import content, server
from mpvlab.run import liveness, steps
from mpvlab.run.context import RunContext
from mpvlab.run.workloads.base import Ends, Outcome


def apache_connections(access_log: Path) -> int:
    """Distinct client connections (address, port) that made requests over the emulated paths."""
    conns = set()
    try:
        for line in access_log.read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and not parts[0].startswith("127.") and server.PREFLIGHT_QUERY not in line:
                conns.add((parts[0], parts[1]))
    except OSError:
        pass
    return len(conns)


class VideoWorkload:
    name = "video"

    def __init__(self) -> None:
        self.video: content.ContentInfo | content.DashInfo | None = None
        self.apache: server.ApacheServer | None = None
        self.video_name = ""
        self.http: server.HttpSetup | None = None
        self.player: subprocess.Popen[bytes] | None = None
        self.deadline = 0.0
        self.timeout_s = 0.0

    @property
    def port(self) -> int:
        assert self.http is not None
        return self.http.port

    def prepare(self, ctx: RunContext) -> None:
        ctx.opts.progress("content")
        self.video = steps.ensure_content(ctx.scenario)
        ctx.extra_prov["content"] = steps.content_provenance(self.video)

    def serve(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        assert self.video is not None
        ctx.opts.progress("server")
        self.apache, self.video_name, self.http = steps.start_server(
            ctx, stack, self.video, ends.server, ends.cc_kernel_name, ends.server_env, ends.server_addr, ends.client)

    def start(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        assert self.http is not None
        sc = ctx.scenario
        self.player, ref = steps.start_player(ctx, ends.client, ends.server_addr, self.video_name,
                                              steps.frames_of(sc), ctx.logs, self.http)
        ctx.ledger.add_proc(ref)
        self.timeout_s = sc.video.duration / 1e9 * sc.player.timeout_factor + 30
        self.deadline = time.monotonic() + self.timeout_s + 10

    def running(self) -> bool:
        assert self.player is not None
        return self.player.poll() is None

    def check(self, ctx: RunContext) -> None:
        assert self.apache is not None and self.player is not None
        if not self.apache.alive():
            raise RunFailed(f"apache exited with code {self.apache.process.returncode} during playback")
        if time.monotonic() > self.deadline:
            self.player.kill()
            raise RunFailed(f"player did not finish within {self.timeout_s:.0f} s")

    def progress(self, ctx: RunContext) -> str:
        return (f"playing ({(time.monotonic_ns() - ctx.t0_ns) / 1e9:5.1f} s of "
                f"{ctx.scenario.video.duration / 1e9:g} s video)")

    def finish(self, ctx: RunContext) -> Outcome:
        assert self.player is not None and self.http is not None
        sc, http = ctx.scenario, self.http
        ps = steps.read_json(ctx.logs / "player-summary.json")
        if self.player.returncode != 0:
            reason = ps.get("reason") or ps.get("error") if ps else None
            # in words (`killed by SIGKILL`, `exited with status 1`), with when, as for any component
            when = (time.monotonic_ns() - ctx.t0_ns) / 1e9
            raise RunFailed(f"player (pid {self.player.pid}) {liveness.describe_status(self.player.returncode)} "
                            f"by {when:.1f} s after run time zero: {reason or 'see logs/player.log'}")
        # Every request the player made must have used the scenario's protocol (and TLS), or the run
        # measured something else than it claims.
        tally = server.tally_access_log(ctx.logs / "apache" / "access.log", http)
        if not tally["ok"]:
            raise RunFailed(f"not every player request used {tally['expected']}"
                            f"{' over TLS' if http.tls else ''}: {tally}")
        warnings = []
        if ps.get("picture_discards_no_underflow"):
            warnings.append(f"{ps['picture_discards_no_underflow']} picture discard(s) happened while the playout "
                            "buffer had data: the CPU was late, not the network (set player.cpu to reserve a core)")
        fields: dict[str, Any] = {
            "video_length_s": sc.video.duration / 1e9,
            "duration_s": ps.get("playback_s") or 0,
            **player_view(ps),
            "player_mode": sc.player.mode,
            "player_cpu": ps.get("cpu"),
            "http": {"protocol": http.protocol, "tls": http.tls is not None, "port": http.port,
                     "player_libsoup": ps.get("libsoup"),
                     **{k: tally[k] for k in ("requests", "by_protocol", "by_tls_version", "by_cipher", "excluded")},
                     "preflight": ctx.extra_prov.get("http", {}).get("preflight")},
        }
        return Outcome(fields, ps.get("playback_s") or 0, "apache_connections",
                       apache_connections(ctx.logs / "apache" / "access.log"), warnings)


def player_view(ps: dict[str, Any]) -> dict[str, Any]:
    """The player's QoE as the summary carries it."""
    return {
        "underflows": ps.get("underflows"),
        "underflow_total_s": ps.get("underflow_total_s"),
        "picture_discards": ps.get("picture_discards"),
        # discards while the playout buffer had data: the CPU, not the network, was late
        "picture_discards_no_underflow": ps.get("picture_discards_no_underflow"),
        "frames_rendered_late": ps.get("frames_rendered_late"),
        "frames_accounted": ps.get("frames_accounted"),
        "underflow_episodes": ps.get("underflow_episodes"),
        "frames_expected": ps.get("frames_expected"),
        "frames_rendered": ps.get("frames_rendered"),
        "startup_delay_s": ps.get("startup_delay_s"),
        "stall_ratio": ps.get("stall_ratio"),
        "dash": dash_view(ps) if ps.get("dash") else None,
    }



def dash_view(ps: dict[str, Any]) -> dict[str, Any]:
    """docs/studies.md §2: average quality level over downloaded segments, stall rate, switches."""
    return {k: ps.get(k) for k in ("abr", "representations", "segment_s", "quality_avg", "bitrate_avg_bps",
                                   "bitrate_switches", "stall_rate", "abr_policy_mismatches")} | {
        "segments": len(ps.get("segments") or [])}
