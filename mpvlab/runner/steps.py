"""The steps every run kind shares, written once: content, congestion control, HTTP/TLS, Apache,
the player, the wait for run time zero, fidelity records and the subflow checks."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time

from pathlib import Path
from typing import Any, Callable, Iterable

from mpvlab.core import ledger, naming, proc
import mpvlab.content as content
from mpvlab.runner import server, tls
from mpvlab.input.scenario import Scenario
from mpvlab.collectors import qdiscstat
from mpvlab.core.errors import RunFailed
from mpvlab.player.entry import Launch
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.network import Mptcp
from mpvlab.runner.context import RunContext





# The players run as modules (`python -m`), never as scripts with their folder on sys.path: each file
# is loaded under its one import name. Each kind's program, page and command line: mpvlab/player/kinds.py.


# Outside the checkout on purpose: Apache serves as www-data, which cannot traverse a checkout or results
# folder made by root with mode 0700 (mktemp -d). Both are world-readable system cache/runtime paths.
CONTENT_DIR = Path(os.environ.get("MPVLAB_CONTENT_DIR", "/var/cache/mpvlab/content"))


def ensure_content(sc: Scenario) -> content.ContentInfo | content.DashInfo:
    """The scenario's video, generated once and cached by its parameters (also `mpvlab prepare`)."""
    v = sc.video
    if v.kind == "dash":
        return content.ensure_dash(CONTENT_DIR, v.duration / 1e9, sc.dash_ladder, v.segment / 1e9,
                                   v.width, v.height, v.fps,
                                   None if v.mpd_min_buffer_time is None else v.mpd_min_buffer_time / 1e9)
    return content.ensure_progressive(CONTENT_DIR, v.duration / 1e9, v.bitrate, v.width, v.height, v.fps)


def ensure_contents(scenarios: Iterable[Scenario]) -> None:
    """Each distinct video these scenarios play, encoded once before any run starts (a sweep, on a
    cluster on the submitting node: other nodes need the same cache, see docs/cluster.md)."""
    seen: set[str] = set()
    for sc in scenarios:
        # bulk sends no video and rtp encodes its own test picture: their registry entries say so
        if sc.workload_kind.plays_video_section and (key := sc.video.model_dump_json()) not in seen:
            seen.add(key)
            ensure_content(sc)


def content_provenance(video: content.ContentInfo | content.DashInfo) -> dict[str, Any]:
    if isinstance(video, content.DashInfo):
        # The full per-segment listing stays in the ladder's sidecar; provenance names it and its hash.
        return {"kind": "dash", "sidecar": str(video.sidecar), "mpd_sha256": video.mpd_sha256,
                "params": video.params, "n_segments": video.n_segments, "bitrates_bps": video.bitrates_bps,
                "total_bytes": video.total_bytes, "ffmpeg_version": video.ffmpeg_version, "cached": video.cached,
                "mpd_attributes": content.mpd_attributes(video.mpd)}
    return {"kind": "progressive", **video.to_json()}


def frames_of(sc: Scenario) -> int:
    return round(sc.video.duration / 1e9 * sc.video.fps)


def setup_cc(ctx: RunContext, stack: contextlib.ExitStack) -> str:
    """The scenario's congestion control for this run (mpvlab/cc/registry.py); returns the kernel's name of it.
    A BPF CC gets a run-scoped name, in the ledger before it exists, and is unregistered by `stack`."""
    sc = ctx.scenario
    entry = sc.transport.cc_entry
    if entry.bpf:
        ctx.ledger.add_bpf_cc(entry.kernel_name(ctx.run_id))
    extra = {"scenario_dir": ctx.scenario_file.parent} if entry.needs_scenario_dir else {}
    run = stack.enter_context(entry.setup(ctx.run_id, entry.parse_params(sc.transport.cc_params), ctx.data,
                                          ctx.logs, float(sc.observe.sample_hz), **extra))
    if run.pid is not None:
        ctx.ledger.add_proc(proc.ProcRef.of(run.pid, f"{entry.name} loader"))
    return run.kernel_name


def cc_record(sc: Scenario, kernel_name: str) -> dict[str, Any]:
    """Provenance's `cc`: what the scenario asked for, the name the kernel runs it under (a BPF CC's is
    run-scoped), and its parameters as given. The subflow checks compare each subflow with `kernel_name`."""
    return {"requested": sc.transport.cc, "kernel_name": kernel_name, "params": dict(sc.transport.cc_params)}


def http_setup(ctx: RunContext, server_addr: str, stack: contextlib.ExitStack) -> server.HttpSetup:
    """The scenario's HTTP version; with TLS a fresh certificate for the server's address (and loopback,
    for the readiness check) in the run directory, whose key is deleted when the run ends."""
    spec = ctx.scenario.server
    if not spec.tls_enabled:
        return server.HttpSetup(spec.protocol)
    ctx.ledger.add_secret(ctx.run_dir / tls.RUN_TLS_DIR / tls.KEY_FILE)   # removed even after a SIGKILL
    material = tls.make_self_signed(ctx.run_dir / tls.RUN_TLS_DIR, [server_addr, "127.0.0.1"])
    stack.callback(material.discard_key)   # registered before Apache's stop, so it runs after it
    return server.HttpSetup(spec.protocol, material)


def wait_for_t0(ctx: RunContext, check_links: Callable[[], None]) -> float:
    """Until run time zero, checking that the delay lines live; returns how late we woke (ms)."""
    while (wait := ctx.t0_ns - time.monotonic_ns()) > 0:
        check_links()
        time.sleep(min(wait / 1e9, 0.1))
    return (time.monotonic_ns() - ctx.t0_ns) / 1e6


# A scenario with `fidelity.probe: false` skips the pre-run check; the whole-run verdict
# (fidelity.judge_run) still decides fidelity_ok, so the flag means the same for every workload: the
# checks that ran found nothing. The reason the pre-run part did not run is recorded beside it.
NO_FIDELITY_PROBE: dict[str, Any] = {
    "ok": None, "skipped": True, "warnings": [],
    "skipped_reason": "pre-run probe off in the scenario (fidelity.probe: false): the verdict is the whole run's "
                      "checks alone (delay-line lateness and drops, applied delays, shaper rate while backlogged)"}


def record_fidelity(ctx: RunContext, fid: dict[str, Any]) -> None:
    """The fidelity check goes into provenance; its warnings are shown as the run goes."""
    ctx.extra_prov["fidelity"] = fid
    for w in fid.get("warnings", []):
        ctx.opts.log(f"fidelity warning: {w}")


def start_server(ctx: RunContext, stack: contextlib.ExitStack, video: content.ContentInfo | content.DashInfo,
                 ns: Any, cc_name: str, server_env: dict[str, str], server_addr: str,
                 client_ns: Any) -> tuple[server.ApacheServer, str, server.HttpSetup]:
    """Apache in `ns` serving the run's video with the scenario's HTTP version, stopped by `stack`.
    Before returning it has checked, from `client_ns` over the emulated path, that the server speaks
    that protocol. Returns the server, the video's URL path and the HTTP setup."""
    docroot = ledger.docroot(ctx.run_id)
    # The file (progressive) or the ladder's folder (DASH) is linked into the run's web root.
    if isinstance(video, content.DashInfo):
        os.symlink(video.dir, docroot / video.dir.name)
        if (page := ctx.scenario.player_kind.web_page) is not None:
            # A player's page (dash.js and mpvlab's page) reaches the browser from this run's server, like
            # the video. Copied (~0.6 MB), not linked: Apache serves as www-data, which cannot traverse a
            # checkout made by root with mode 0700 (mktemp -d; see CONTENT_DIR) — a link there gave 403.
            shutil.copytree(page, docroot / str(ctx.scenario.player_kind.page_folder), ignore=shutil.ignore_patterns("__pycache__"))
        video_name = f"{video.dir.name}/{video.mpd.name}"
    else:
        video_name = "video.mp4"
        os.symlink(video.path, docroot / video_name)
    http = http_setup(ctx, server_addr, stack)
    apache = server.start_apache(ns, ctx.logs / "apache", docroot, cc=cc_name, http=http, extra_env=server_env)
    ctx.ledger.add_proc(apache.ref)
    stack.callback(apache.stop)
    ctx.extra_prov["http"] = http.describe()
    ctx.extra_prov["apache_ready_s"] = round(
        server.wait_serving(apache, http.url("127.0.0.1", video_name), http=http), 4)
    ctx.opts.progress("protocol check")
    try:
        ctx.extra_prov["http"]["preflight"] = server.verify_protocol(client_ns, http,
                                                                     http.url(server_addr, video_name))
    except server.ProtocolMismatch as e:
        raise RunFailed(str(e)) from None
    return apache, video_name, http


def start_player(ctx: RunContext, ns: Any, server_addr: str, video_name: str, frames: int, out_dir: Path,
                 http: server.HttpSetup, label: str = "player",
                 staged: bool = False) -> tuple[subprocess.Popen[bytes], Any]:
    """One player in namespace `ns`, writing player-events.jsonl, player-summary.json and player.log
    into out_dir. `staged`: it gets ready and waits for `release_player` to give it t0. Its command
    line is its kind's (mpvlab/player/kinds.py), run under mptcpize: the player (and every process it
    starts, which inherit LD_PRELOAD, Chromium's included) opens MPTCP sockets."""
    sc = ctx.scenario
    kind = sc.player_kind
    launch = Launch(
        url=http.url(server_addr, video_name), events=out_dir / "player-events.jsonl",
        summary=out_dir / "player-summary.json", data_dir=player_data_dir(ctx, label),
        t0_ns=None if staged else ctx.t0_ns, timeout_s=sc.player_timeout_s, frames=frames,
        buffer_ns=sc.playout_buffer_ns, seed=sc.seed, player=sc.player, video=sc.video, server=sc.server,
        ca_file=http.tls.cert if http.tls is not None else None,
        spki=tls.spki_sha256_b64(http.tls.cert) if http.tls is not None and kind.browser else None,
        page_url=http.url(server_addr, f"{kind.page_folder}/player.html") if kind.web_page is not None else None,
        tmp_dir=player_tmp_dir(ctx, label) if kind.tmp_dir else None)
    for folder in kind.scratch(launch):
        # before the player makes it: a SIGKILLed player (or run) leaves it to the ledger's cleanup
        ctx.ledger.add_scratch(folder)
    argv = ["mptcpize", "run", *kind.argv(launch)]
    if sc.player.cpu is not None:
        if sc.player.cpu >= (os.cpu_count() or 1):
            raise RunFailed(f"player.cpu = {sc.player.cpu}, but this machine has CPUs 0..{(os.cpu_count() or 1) - 1}")
        argv = ["taskset", "-c", str(sc.player.cpu), *argv]
    with (out_dir / "player.log").open("wb") as out:
        p = ns.popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.PIPE if staged else subprocess.DEVNULL)
    return p, proc.ProcRef.of(p.pid, label)


def player_data_dir(ctx: RunContext, label: str) -> Path:
    """data/<kind>/ (one player) or data/<kind>/<role>/ (several): a player's own raw records (dash.js:
    its raw record, browser log, profile)."""
    sub = label.replace("player", "").strip()
    top = ctx.data / ctx.scenario.player_kind.name
    return top / sub if sub else top


def player_tmp_dir(ctx: RunContext, label: str) -> Path:
    """The player's short folder in the temporary directory, named with the run id: mpvlab-<run id>-
    <kind>[-<role>] (Chromium's TMPDIR: its singleton socket's path must fit 108 bytes)."""
    sub = label.replace("player", "").strip()
    tag = ctx.scenario.player_kind.name + (f"-{sub}" if sub else "")
    return Path(tempfile.gettempdir()) / naming.scratch_name(ctx.run_id, tag)


def wait_page_loaded(ctx: RunContext, p: subprocess.Popen[bytes], label: str, timeout_s: float = 90.0,
                     out_dir: Path | None = None) -> None:
    """A dash.js player has loaded its page (dash.js itself, ~0.6 MB, over the emulated path) and
    found it ready (mpvlab/player/dashjs/player.py) before the pre-run check starts, so that this traffic
    does not overlap the check's probes. A driver that gave up says why in its summary's `reason`."""
    ready = player_data_dir(ctx, label) / str(ctx.scenario.player_kind.page_ready_file)
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        if p.poll() is not None:
            reason = read_json(out_dir / "player-summary.json").get("reason") if out_dir is not None else None
            raise RunFailed(f"{label} exited while loading the dash.js page (exit code {p.returncode}"
                            f"{': ' + str(reason)[:1500] if reason else ''}; see "
                            f"{player_data_dir(ctx, label) / 'browser-events.jsonl'} and its player.log)")
        if time.monotonic() > deadline:
            raise RunFailed(f"{label}: the browser did not load the dash.js page within {timeout_s:g} s")
        time.sleep(0.05)


def release_player(p: subprocess.Popen[bytes], t0_ns: int, label: str, start_ns: int | None = None) -> None:
    """Give a staged player its t0 and, when it starts later (topology.client_stagger), its start
    instant (it starts at once when that has passed, else sleeps until it; its clock stays t0's)."""
    assert p.stdin is not None
    line = f"t0 {t0_ns}" if start_ns is None or start_ns == t0_ns else f"t0 {t0_ns} start {start_ns}"
    try:
        p.stdin.write(f"{line}\n".encode())
        p.stdin.close()
    except BrokenPipeError:
        raise RunFailed(f"{label} exited before t0 (exit code {p.poll()}; see its log)") from None






def read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def mptcp_view(mib: dict[str, dict[str, int]], trace_summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """MPTCP-level events during playback, from the kernel's MIB of each end's namespace and the msk's
    own byte counters (read by the scheduler trace). Re-sent data (the server sending again, on another
    subflow, data a stalled subflow had taken) is handed to a subflow twice, so the scheduler trace
    counts it twice. `reinjected_bytes` (the msk's `bytes_retrans`) is only part of that surplus: the
    kernel counts the retransmit timer's reinjections (`__mptcp_retrans`) but not the re-sends after a
    subflow is marked stale or closes (`__mptcp_retransmit_pending_data`); a path blacked out
    mid-transfer gave 515,896 B handed twice against a `bytes_retrans` of 109,752
    (tests/test_collectors.py). The MIB's
    `MPTCPRetrans` counts one per skb built by `__mptcp_retrans`, and one skb may carry many segments'
    worth of payload (a CI run saw 12220 bytes under a count of 1), so it is a count, not a size.
    Every MIB counter that moved is kept in `mib`."""
    conns = (trace_summary or {}).get("connections", [])
    return build(Mptcp, "mptcp", {
        "reinjected_segments": mib["server"].get("MPTCPRetrans", 0),
        "reinjected_bytes": sum(int(c.get("msk_bytes_retrans", 0)) for c in conns),
        "sent_bytes": sum(int(c.get("msk_bytes_sent", 0)) for c in conns),
        "duplicate_data_segments_received": mib["client"].get("DuplicateData", 0),
        "mib": {side: {k: v for k, v in d.items() if v} for side, d in mib.items()},   # non-zero only
    })


def check_subflows(sc: Scenario, subflows: list[dict[str, Any]], expected_cc: str,
                   per_path: dict[str, dict[str, Any]]) -> None:
    """What every MPTCP run must have seen (emulated or physical hosts): each subflow on the expected
    congestion control, a subflow per path, and — when the scenario expects every path — each path
    carrying at least observe.min_path_share of the bytes; otherwise the run measured something else."""
    wrong_cc = [s for s in subflows if s["cc"] != expected_cc]
    if wrong_cc:
        raise RunFailed(f"subflows not running {expected_cc}: {wrong_cc}")
    if len(subflows) < sc.expected_subflows:
        raise RunFailed(f"expected {sc.expected_subflows} MPTCP subflows (one per path), saw {len(subflows)}: "
                        f"{subflows}")
    if sc.expected_subflows > 1:
        thin = {n: v["share"] for n, v in per_path.items() if v["share"] < sc.observe.min_path_share}
        if thin:
            raise RunFailed(
                "path(s) carried less than {:.0%} of the bytes although the scenario expects every path: {} "
                "(per path: {})".format(sc.observe.min_path_share, thin,
                                        {n: v["rx_bytes"] for n, v in per_path.items()}))

def queue_view(out_dir: Path, rows_by_dir: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Peak and mean backlog and the drops of each shaping qdisc (tbf) on a router during playback.
    The rows read are kept in `rows_by_dir` (by str(out_dir)) for the whole-run verdict."""
    rows = qdiscstat.load_samples(out_dir, links=False)[0]
    if rows_by_dir is not None:
        rows_by_dir[str(out_dir)] = rows
    out: dict[str, Any] = {}
    by_dev: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["kind"] == "tbf":
            by_dev.setdefault(str(r["dev"]), []).append(r)
    for dev, rs in by_dev.items():
        backlog = [int(r["backlog_bytes"]) for r in rs]
        out[dev] = {"samples": len(rs), "backlog_bytes_max": max(backlog),
                    "backlog_bytes_mean": round(sum(backlog) / len(backlog)),
                    "drops": int(rs[-1]["drops"]) - int(rs[0]["drops"])}
    return out
