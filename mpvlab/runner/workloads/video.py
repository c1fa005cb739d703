"""The video workload: Apache serves the scenario's video (progressive or DASH) and the GStreamer
player (player/) plays it in real time at the client, counting every frame. Its part of the summary
is the player's QoE and the HTTP record; it fails the run when Apache or the player dies, when the
player does not finish in time, or when a request used another HTTP version than the scenario's."""

from __future__ import annotations

import contextlib
from collections import Counter
import subprocess
import time
from pathlib import Path
from typing import Any

from mpvlab.core.errors import RunFailed
import mpvlab.content as content
from mpvlab.runner import server
from mpvlab.runner import liveness, steps
from mpvlab.runner.context import RunContext
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.network import HttpRecord
from mpvlab.results.summary_parts.player import CpuUse, PlayerQoE
from mpvlab.runner.workloads.base import Ends, Outcome, still_running
from mpvlab.workloads.video import VIDEO
from mpvlab.player import kinds


# Requests a player's page makes for itself (dash.js: mpvlab/player/dashjs/player.py): the page's folder and
# the icon the browser asks for on every navigation. They are made BEFORE run time zero, when the scheduler
# trace is not yet running (it starts at t0), so a connection that carried only these cannot be in the trace.
PAGE_REQUEST_PREFIXES = (*(f"/{k.page_folder}/" for k in kinds.REGISTRY.values() if k.page_folder), "/favicon.ico")


def _request_path(line: str) -> str:
    """The path of an access-log line's request ("GET /a/b HTTP/2.0" → /a/b), "" if it has none."""
    try:
        return line.split('"', 2)[1].split()[1]
    except IndexError:
        return ""


def body_bytes_by_client(access_log: Path) -> dict[str, int]:
    """Response body bytes (%B) Apache logged per client address for the video's requests over the
    emulated paths (loopback, the pre-run protocol check and the dash.js page's own requests left
    out, as in apache_connections)."""
    out: dict[str, int] = {}
    try:
        lines = access_log.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) < 3 or parts[0].startswith("127.") or parts[0] == "::1" or server.PREFLIGHT_QUERY in line \
                or _request_path(line).startswith(PAGE_REQUEST_PREFIXES):
            continue
        try:
            body = line.split('"', 2)[2].split()[1]       # after the request: status, %B ("-" for none)
        except IndexError:
            continue
        out[parts[0]] = out.get(parts[0], 0) + (int(body) if body.isdigit() else 0)
    return out


def player_bytes_check(players: dict[str, int | None], addrs: dict[str, str], logged: dict[str, int],
                       exact: bool) -> dict[str, Any]:
    """cross-check player_bytes_vs_access_log: each player's bytes_received against the body bytes
    Apache logged for its requests. A player cannot read more than Apache sent; the own DASH client
    reads every response it asks for to the end, so for it the two are equal (`exact`); dash.js can
    abandon a fragment and GStreamer may stop reading at the end, and Apache logs what it wrote, so
    for them the player's count may be lower. With one player every address is its (MPTCP subflows
    may come from any path's address); with several, each player's own address."""
    per: dict[str, Any] = {}
    for role, got in players.items():
        sent = sum(logged.values()) if len(players) == 1 else logged.get(addrs.get(role, ""), 0)
        ok = isinstance(got, int) and (got == sent if exact else 0 <= got <= sent)
        per[role] = {"player_bytes": got, "apache_body_bytes": sent, "ok": ok}
    return {"exact": exact, "players": per, "ok": bool(per) and all(v["ok"] for v in per.values())}


# dash.js 3.0.3's STALL_THRESHOLD: below this level (s) it raises BUFFER_EMPTY and halts playback
# (player/README.md "Start-up stall"); a constant of that version, not a setting.
DASHJS_STALL_THRESHOLD_S = 0.5
HAVE_FUTURE_DATA = 3          # HTMLMediaElement.readyState: data beyond the current frame
# Page ms are mapped to run seconds rounded to 1 µs (6 decimals): the counted stall's start and its
# `waiting` in the page's record are the same event when they are this close.
PAGE_MATCH_MS = 0.002


def _element_ahead_s(detail: Any) -> float | None:
    """Seconds the element held beyond its playhead in a page snapshot (None without one)."""
    if not isinstance(detail, dict) or not isinstance(detail.get("buffered"), list) or "t_media" not in detail:
        return None
    t = float(detail["t_media"])
    return next((float(end) - t for start, end in detail["buffered"] if float(start) <= t < float(end)), 0.0)


def stalls_vs_element_check(ps: dict[str, Any], raw: dict[str, Any], frame_s: float) -> dict[str, Any]:
    """cross-check stalls_vs_element_buffered (dash.js): every stall the stall figures count
    (`underflow_episodes`) must open at a `waiting` of the <video> element in the page's own record
    (data/dashjs/dashjs-raw.json), and the element's snapshot there must show it had no video to play:
    readyState < HAVE_FUTURE_DATA, or less than dash.js's STALL_THRESHOLD (0.5 s: below it dash.js
    halts playback itself, a real stall it raises just before the element runs dry) plus one frame
    (the playhead's advance between dash.js's level reading and the snapshot) beyond the playhead.
    An episode whose `waiting` has no snapshot (a record from before the page took them) is listed
    as unverified, not failed."""
    t0, offset = ps.get("t0_ns"), ps.get("page_offset_ns")
    bound = DASHJS_STALL_THRESHOLD_S + frame_s
    waits = [(float(t), d) for t, name, d in raw.get("events") or [] if name == "video.waiting"]
    per: list[dict[str, Any]] = []
    for start, end in ps.get("underflow_episodes") or []:
        rec: dict[str, Any] = {"start_s": start, "end_s": end}
        at = None if t0 is None or offset is None else (start * 1e9 + t0 - offset) / 1e6
        hit = [d for t, d in waits if at is not None and abs(t - at) <= PAGE_MATCH_MS]
        if not hit:
            rec.update({"waiting_in_page_record": False, "ok": False})
        else:
            ahead, ready = _element_ahead_s(hit[0]), (hit[0] or {}).get("ready_state")
            rec.update({"waiting_in_page_record": True,
                        "element_ahead_s": None if ahead is None else round(ahead, 3), "ready_state": ready,
                        "ok": None if ahead is None else (
                            (isinstance(ready, int) and ready < HAVE_FUTURE_DATA) or ahead < bound)})
        per.append(rec)
    return {"counted_stalls": len(per), "bound_ahead_s": round(bound, 4),
            "unverified": sum(1 for r in per if r["ok"] is None), "stalls": per,
            "tolerance": f"each counted stall opens at a page `waiting` whose element had readyState < "
                         f"{HAVE_FUTURE_DATA} or < {DASHJS_STALL_THRESHOLD_S:g} s + one frame beyond its playhead",
            "ok": all(r["ok"] is not False for r in per)}


def apache_connections(access_log: Path) -> int:
    """Distinct client connections (address, port) that made video requests over the emulated paths:
    what the MPTCP scheduler trace must have seen (views.py, collector_saw_every_connection).

    Left out: loopback and the pre-run protocol check (not over the paths), and the dash.js page's own
    requests. The trace runs from t0; the page is loaded before t0 (dashjs_player.py's timeline).
    Chromium sometimes fetches the MPD and segments on a fresh connection; the page's connection is then
    idle through the traced window, and if it also closes outside it there is no scheduler decision of
    it to trace (measured, HTTP/2 run mtxdtk: page on client port 39634, loaded 0.9 s before t0, never
    traced; video on 39648, traced from t = 0.077 s). Counting it compared a pre-t0 connection with a
    trace that starts at t0. A page connection Chromium reuses for the video is counted, by its video
    requests. An idle connection that closes while tracing IS traced (by size its TLS close_notify, 24 bytes;
    63 with HTTP/2's GOAWAY), so the trace may count more than this: the check is traced >= this."""
    return len(video_requests_by_connection(access_log))


def video_requests_by_connection(access_log: Path) -> Counter[tuple[str, str]]:
    """(client address, client port) → the video's requests on that connection (the MPD, init and
    media segments), as apache_connections() counts them: not loopback, not the pre-run protocol
    check, not the dash.js page's own files. Empty when the log cannot be read."""
    conns: Counter[tuple[str, str]] = Counter()
    try:
        for line in access_log.read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and not parts[0].startswith("127.") and server.PREFLIGHT_QUERY not in line \
                    and not _request_path(line).startswith(PAGE_REQUEST_PREFIXES):
                conns[(parts[0], parts[1])] += 1
    except OSError:
        pass
    return conns


class VideoWorkload:
    name = VIDEO.name

    def __init__(self) -> None:
        self.video: content.ContentInfo | content.DashInfo | None = None
        self.apache: server.ApacheServer | None = None
        self.video_name = ""
        self.http: server.HttpSetup | None = None
        self.players: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}   # role → (player, its log folder)
        self.addrs: dict[str, str] = {}     # role → the client's address (its requests in Apache's log)
        self.several = False
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
        kind = ctx.scenario.player_kind
        if kind.provenance is not None:      # a third-party player's versions and settings as run
            ctx.extra_prov[kind.name] = kind.provenance(ctx.scenario.player)

    def serve(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        assert self.video is not None
        ctx.opts.progress("server")
        self.apache, self.video_name, self.http = steps.start_server(
            ctx, stack, self.video, ends.server, ends.cc_kernel_name, ends.server_env, ends.server_addr, ends.client)

    def stage(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        """The players start now and build their pipelines (interpreter, GStreamer, plugins: ~0.5 s
        of CPU each) while the pre-run check runs; each then waits for t0 on its stdin."""
        assert self.http is not None
        sc = ctx.scenario
        several = len(ends.clients) > 1
        for c in ends.clients:
            # One client: its files in logs/ as always; several: logs/<role>/ each.
            out_dir = ctx.logs / c.role if several else ctx.logs
            out_dir.mkdir(parents=True, exist_ok=True)
            player, ref = steps.start_player(ctx, c.ns, ends.server_addr, self.video_name, steps.frames_of(sc),
                                             out_dir, self.http, label=f"player {c.role}" if several else "player",
                                             staged=True)
            ctx.ledger.add_proc(ref)
            self.players[c.role] = (player, out_dir)
            self.addrs[c.role] = c.addr
        if sc.player_kind.page_ready_file is not None:     # its page loaded before the pre-run check
            for c in ends.clients:
                steps.wait_page_loaded(ctx, self.players[c.role][0], f"player {c.role}" if several else "player",
                                       out_dir=self.players[c.role][1])
        self.several = several

    def start(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        sc = ctx.scenario
        # Client i starts at t0 + i × topology.client_stagger (the players dict is in client order); its
        # clock stays the run's, so its times and the run's windows share one zero.
        starts = dict(zip(self.players, sc.client_starts_ns))
        if self.several:
            # t0 on the wall clock too: Apache's access log (%t) and other hosts' logs are on that clock
            ctx.extra_prov["client_starts"] = {
                "client_stagger_s": sc.topology.client_stagger / 1e9,
                "configured_s": {role: ns / 1e9 for role, ns in starts.items()},
                "t0_realtime_ns": time.time_ns() - (time.monotonic_ns() - ctx.t0_ns)}
        for role, (player, _) in self.players.items():
            steps.release_player(player, ctx.t0_ns, f"player {role}" if self.several else "player",
                                 ctx.t0_ns + starts.get(role, 0))
        self.timeout_s = sc.player_timeout_s
        self.deadline = time.monotonic() + self.max_run_s(ctx)

    def max_run_s(self, ctx: RunContext) -> float:
        """The last player's start (topology.client_stagger), its own limit (player_timeout_s, counted
        from its start) and 10 s for it to notice and exit."""
        return max(ctx.scenario.client_starts_ns) / 1e9 + ctx.scenario.player_timeout_s + 10

    def running(self, wait_s: float = 0.0) -> bool:
        return still_running([p for p, _ in self.players.values()], wait_s)

    def check(self, ctx: RunContext) -> None:
        assert self.apache is not None
        if not self.apache.alive():
            raise RunFailed(f"apache exited with code {self.apache.process.returncode} during playback")
        if time.monotonic() > self.deadline:
            for p, _ in self.players.values():
                p.kill()
            what = "players" if self.several else "player"
            raise RunFailed(f"{what} did not finish within {self.timeout_s:.0f} s")

    def progress(self, ctx: RunContext) -> str:
        line = (f"playing ({min((time.monotonic_ns() - ctx.t0_ns) / 1e9, ctx.scenario.video.duration / 1e9):5.1f} s "
                f"of {ctx.scenario.video.duration / 1e9:g} s video")
        if self.several:
            running = sum(p.poll() is None for p, _ in self.players.values())
            line += f"; {running} of {len(self.players)} players running"
        return line + ")"

    def finish(self, ctx: RunContext) -> Outcome:
        assert self.http is not None
        sc, http = ctx.scenario, self.http
        per_client: dict[str, dict[str, Any]] = {}
        for role, (player, out_dir) in self.players.items():
            ps = steps.read_json(out_dir / "player-summary.json")
            if player.returncode != 0:
                reason = ps.get("reason") or ps.get("error") if ps else None
                where = f"logs/{role}/player.log" if self.several else "logs/player.log"
                who = f"player {role}" if self.several else "player"
                # in words (`killed by SIGKILL`, `exited with status 1`), with when, as for any component
                when = (time.monotonic_ns() - ctx.t0_ns) / 1e9
                raise RunFailed(f"{who} (pid {player.pid}) {liveness.describe_status(player.returncode)} "
                                f"by {when:.1f} s after run time zero: {reason or 'see ' + where}")
            per_client[role] = ps
        # Every request a player made must have used the scenario's protocol (and TLS), or the run
        # measured something else than it claims.
        tally = server.tally_access_log(ctx.logs / "apache" / "access.log", http)
        if not tally["ok"]:
            raise RunFailed(f"not every player request used {tally['expected']}"
                            f"{' over TLS' if http.tls else ''}: {tally}")
        warnings = []
        for role, ps in per_client.items():
            if sc.player_kind.browser:
                warnings += decode_limited_warnings(role if self.several else "", ps)
            if ps.get("picture_discards_no_underflow"):
                who = f"{role}: " if self.several else ""
                warnings.append(f"{who}{ps['picture_discards_no_underflow']} picture discard(s) happened while the "
                                "playout buffer had data: the CPU was late, not the network (set player.cpu to "
                                "reserve a core)")
        http_record = {"protocol": http.protocol, "tls": http.tls is not None, "port": http.port,
                       **{k: tally[k] for k in ("requests", "by_protocol", "by_tls_version", "by_cipher", "excluded")},
                       "preflight": ctx.extra_prov.get("http", {}).get("preflight")}
        fields: dict[str, Any] = {"video_length_s": sc.video.duration / 1e9, "player_mode": sc.player.mode,
                                  "http": http_record}
        duration = max((ps.get("playback_s") or 0 for ps in per_client.values()), default=0)
        if not self.several:
            (ps,) = per_client.values()
            fields.update({"duration_s": ps.get("playback_s") or 0, **player_view(ps), "player_cpu": ps.get("cpu")})
            http_record["player_libsoup"] = ps.get("libsoup")
            if ps.get("cpu") is not None:
                build(CpuUse, "player_cpu", ps["cpu"])
        build(HttpRecord, "http", http_record)
        # What each player read, against Apache's log (checks.py player_bytes_vs_access_log) and, for
        # dash.js, the page's record of the element at each stall (stalls_vs_element_buffered)
        evidence: dict[str, Any] = {"player_bytes": {
            "received": {r: ps.get("bytes_received") for r, ps in per_client.items()}, "addrs": dict(self.addrs),
            "own": sc.player_kind.reads_whole_responses}}
        if sc.player_kind.checks_element:
            evidence["dashjs_raw"] = {
                role: steps.player_data_dir(ctx, f"player {role}" if self.several else "player") / "dashjs-raw.json"
                for role in per_client}
        return Outcome(fields, duration, "apache_connections",
                       apache_connections(ctx.logs / "apache" / "access.log"), warnings, per_client,
                       evidence=evidence)


def network_discards(total: Any, cpu_late: Any) -> int | None:
    """Discards while an underflow episode was open (total less the CPU-late ones); None unless both
    counts are known integers."""
    if isinstance(total, int) and isinstance(cpu_late, int) and not isinstance(total, bool) \
            and not isinstance(cpu_late, bool):
        return total - cpu_late
    return None


def player_view(ps: dict[str, Any]) -> dict[str, Any]:
    """The player's QoE as the summary carries it (built as PlayerQoE: its keys are that model's)."""
    return build(PlayerQoE, "player QoE", {
        "underflows": ps.get("underflows"),
        "underflow_total_s": ps.get("underflow_total_s"),
        "picture_discards": ps.get("picture_discards"),
        # discards while the playout buffer had data: the CPU, not the network, was late
        "picture_discards_no_underflow": ps.get("picture_discards_no_underflow"),
        "picture_discards_network": network_discards(ps.get("picture_discards"), ps.get("picture_discards_no_underflow")),
        "frames_rendered_late": ps.get("frames_rendered_late"),
        "frames_accounted": ps.get("frames_accounted"),
        "underflow_episodes": ps.get("underflow_episodes"),
        "frames_expected": ps.get("frames_expected"),
        "frames_rendered": ps.get("frames_rendered"),
        "startup_delay_s": ps.get("startup_delay_s"),
        "stall_ratio": ps.get("stall_ratio"),
        "dash": dash_view(ps) if ps.get("dash") else None,
    })



def dash_view(ps: dict[str, Any]) -> dict[str, Any]:
    """docs/studies.md §2: average quality level over downloaded segments, stall rate, switches."""
    return {k: ps.get(k) for k in ("abr", "representations", "segment_s", "quality_avg", "bitrate_avg_bps",
                                   "bitrate_switches", "stall_rate", "rebuffer_events", "rebuffer_ratio",
                                   "abr_policy_mismatches")} | {
        "segments": len(ps.get("segments") or [])}


def decode_limited_warnings(who: str, ps: dict[str, Any]) -> list[str]:
    """A player in a browser (dash.js in Chromium; entry.PlayerKind.browser): frames the browser dropped (droppedVideoFrames) mean decoding or rendering,
    not the network, limited playback, when they happened although the buffer held video."""
    out = []
    if ps.get("page_load_failures"):
        out.append(f"{who + ': ' if who else ''}the dash.js page needed {len(ps['page_load_failures']) + 1} loads "
                   "before t0 (it was not ready: player-summary.json page_load_failures says what was missing "
                   "and what the browser reported)")
    if ps.get("stalls_with_data"):
        out.append(f"{who + ': ' if who else ''}dash.js halted playback for {ps['stalls_with_data_s']:.2f} s in "
                   f"{len(ps['stalls_with_data'])} episode(s) while the element held ≥ 1 s of video (the player, "
                   "not the network; player/README.md): excluded from underflows, rebuffer ratio and stall rate "
                   "(player-summary.json stalls_with_data says why for each)")
    dropped, decoded = ps.get("picture_discards") or 0, ps.get("frames_decoded") or 0
    if not dropped:
        return out
    cpu = (ps.get("cpu") or {}).get("share_of_core")
    return out + [f"{who + ': ' if who else ''}Chromium dropped {dropped} of {decoded} frames "
            f"({dropped / max(decoded, 1):.1%}; the browser used {cpu if cpu is not None else '?'} of a core): "
            "decoding/rendering, not the network, limited playback there"]
