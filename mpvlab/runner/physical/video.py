"""The video workload on physical hosts: the same player and Apache as an emulated run
(workloads/video.py), started on the scenario's hosts over Host.popen (remote.py), their files pulled
back into the run directory when the player has ended."""

from __future__ import annotations

import contextlib
import time

from mpvlab.core import proc
from mpvlab.core.errors import RunFailed
import mpvlab.content as content
from mpvlab.runner import server
from mpvlab.runner import steps
from mpvlab.runner.context import RunContext
from mpvlab.runner.physical.backend import PhysicalEnds
from mpvlab.runner.physical.collect import pull_apache_logs, pull_player_files
from mpvlab.runner.physical.remote import start_apache, start_player
from mpvlab.runner.physical.state import PhysicalRun, Started
from mpvlab.runner.workloads.base import Ends, Outcome, still_running
from mpvlab.runner.workloads.video import apache_connections, player_view
from mpvlab.workloads.video import VIDEO


class RemoteVideoWorkload:
    name = VIDEO.name
    port = server.PORT

    def __init__(self) -> None:
        self.video: content.ContentInfo | None = None
        self.run: PhysicalRun | None = None
        self.apache: Started | None = None
        self.player: Started | None = None
        self.deadline = 0.0
        self.timeout_s = 0.0

    def prepare(self, ctx: RunContext) -> None:
        ctx.opts.progress("content")
        video = steps.ensure_content(ctx.scenario)
        assert isinstance(video, content.ContentInfo)       # physical: progressive only (scenario.py)
        self.video = video
        ctx.extra_prov["content"] = {"kind": "progressive", **video.to_json()}

    def serve(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        assert isinstance(ends, PhysicalEnds) and ends.run is not None and self.video is not None
        self.run = ends.run
        ctx.opts.progress("server")
        apache = start_apache(self.run, ctx.scenario, self.video)
        self.apache = apache
        stack.callback(lambda: proc.stop_child(apache.process))

    def stage(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        """Nothing to start ahead of t0."""

    def start(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        assert self.run is not None
        sc = ctx.scenario
        url = f"http://{ends.server_addr}:{server.PORT}/video.mp4"
        self.player = start_player(self.run, sc, url, steps.frames_of(sc))
        self.timeout_s = sc.player_timeout_s
        self.deadline = time.monotonic() + self.max_run_s(ctx)

    def max_run_s(self, ctx: RunContext) -> float:
        """The player's own limit (player_timeout_s), and 10 s for it to notice and exit."""
        return ctx.scenario.player_timeout_s + 10

    def running(self, wait_s: float = 0.0) -> bool:
        assert self.player is not None
        return still_running([self.player.process], wait_s)

    def check(self, ctx: RunContext) -> None:
        assert self.apache is not None and self.player is not None
        if self.apache.process.poll() is not None:
            raise RunFailed(f"apache exited with code {self.apache.process.returncode} during playback")
        if time.monotonic() > self.deadline:
            self.player.process.kill()
            raise RunFailed(f"player did not finish within {self.timeout_s:.0f} s")

    def progress(self, ctx: RunContext) -> str:
        video_s = ctx.scenario.video.duration / 1e9
        return f"playing ({min((time.monotonic_ns() - ctx.t0_ns) / 1e9, video_s):5.1f} s of {video_s:g} s video)"

    def finish(self, ctx: RunContext) -> Outcome:
        assert self.run is not None and self.apache is not None and self.player is not None
        sc = ctx.scenario
        ctx.opts.progress("collecting")
        pull_player_files(self.run)
        proc.stop_child(self.apache.process)
        pull_apache_logs(self.run)
        ps = steps.read_json(ctx.logs / "player-summary.json")
        if self.player.process.returncode != 0:
            reason = (ps.get("reason") or ps.get("error")) if ps else None
            raise RunFailed(f"player exited with code {self.player.process.returncode}: "
                            f"{reason or 'see logs/player.log'}")
        warnings = []
        if ps.get("picture_discards_no_underflow"):
            warnings.append(f"{ps['picture_discards_no_underflow']} picture discard(s) while the playout buffer had "
                            "data: the client's CPU was late, not the network")
        playback_s = ps.get("playback_s") or 0
        fields = {"video_length_s": sc.video.duration / 1e9, "duration_s": playback_s, **player_view(ps),
                  "player_mode": sc.player.mode, "player_cpu": ps.get("cpu")}
        return Outcome(fields, playback_s, "apache_connections",
                       apache_connections(ctx.logs / "apache" / "access.log"), warnings, {"client": ps})
