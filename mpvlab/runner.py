"""One run, from a validated scenario to a complete (or clearly failed) result directory.

Data flow: scenario → resolved plan → topology (Mininet nodes) → links (tbf + delay lines) →
transport (MPTCP, congestion control) → fidelity probes → server (Apache) → time zero → player +
samplers → checks → results. Everything the run creates is listed in its ledger first, and removed
in `finally` — on success, on error, on Ctrl-C or SIGTERM; after a SIGKILL the next run removes it.
This module runs dual-path and dumbbell scenarios; shared-bottleneck ones (N players and cross
traffic behind one router) run through mpvlab/run_shared.py, which reuses the pieces below.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from links.emulator import DirectionHandle, DirectionPlan, apply_direction, stop_direction
from links.schedule import Schedule, read_trace
import collectors
import schedulers
from collectors import qdiscstat
from mpvlab import content, fidelity, hoststeal, ledger, naming, proc, provenance, results, sampling, server, tls, transport
from mpvlab.scenario import (
    ConstantDelay, LinkDirection, PiecewiseDelay, Scenario, SquareDelay, TraceDelay, dump_yaml, resolved_dict,
)
import topologies
from topologies import dual_path

REPO = Path(__file__).resolve().parent.parent
PLAYER = REPO / "player" / "mpvlab_player.py"
DEFAULT_RESULTS = REPO / "results"
# Outside the checkout on purpose: Apache serves as www-data, which cannot traverse a checkout or results
# folder made by root with mode 0700 (mktemp -d). Both are world-readable system cache/runtime paths.
CONTENT_DIR = Path(os.environ.get("MPVLAB_CONTENT_DIR", "/var/cache/mpvlab/content"))


class RunFailed(Exception):
    """The run could not produce trustworthy results; the message says why."""


class Interrupted(Exception):
    pass


def schedule_for(d: LinkDirection, scenario_dir: Path) -> Schedule:
    delay = d.delay
    if isinstance(delay, ConstantDelay):
        return Schedule.constant(delay.value)
    if isinstance(delay, SquareDelay):
        return Schedule.square(delay.base, delay.amplitude, delay.period, delay.duty, delay.phase)
    if isinstance(delay, PiecewiseDelay):
        return Schedule.piecewise([(t, v) for t, v in delay.points], delay.repeat)
    assert isinstance(delay, TraceDelay)
    return Schedule.piecewise(read_trace(scenario_dir / delay.file), delay.repeat)


@dataclass
class RunOptions:
    results_root: Path = DEFAULT_RESULTS
    progress: Callable[[str], None] = lambda _phase: None
    log: Callable[[str], None] = lambda _msg: None
    key_dir: Path | None = None   # topology physical: where SSH key files must lie (default: MPVLAB_KEY_DIR)


@dataclass
class RunContext:
    scenario: Scenario
    scenario_file: Path
    scenario_text: str
    run_id: str
    run_dir: Path
    ledger: ledger.Ledger
    opts: RunOptions
    extra_prov: dict[str, Any] = field(default_factory=dict)
    t0_ns: int = 0

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def data(self) -> Path:
        return self.run_dir / "data"


@contextlib.contextmanager
def _signals_as_exceptions() -> Iterator[None]:
    """SIGTERM/SIGHUP become an exception in the main thread so `finally` cleanup runs as for Ctrl-C."""
    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(f"interrupted by {signal.Signals(signum).name}")
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_scenario(scenario: Scenario, scenario_file: Path, scenario_text: str, opts: RunOptions) -> Path:
    """Run once; returns the run directory (state complete). Raises RunFailed after marking it failed."""
    if os.geteuid() != 0:
        raise RunFailed("mpvlab run needs root (network namespaces, tc, iptables, BPF)")
    for name in ledger.reap_stale(opts.log):
        opts.log(f"cleaned leftover of an earlier run: {name}")
    run_id = naming.new_run_id()
    run_dir = results.make_run_dir(opts.results_root, scenario.name, run_id)
    led = ledger.Ledger.create(run_id, run_dir)
    ctx = RunContext(scenario, scenario_file, scenario_text, run_id, run_dir, led, opts)
    results.write_text(run_dir / "scenario.yaml", scenario_text)
    results.write_text(run_dir / "resolved.yaml", dump_yaml(resolved_dict(scenario)))
    failure: str | None = None
    try:
        with _signals_as_exceptions():
            summary = _execute(ctx)
    except (KeyboardInterrupt, Interrupted) as e:
        failure = str(e) or "interrupted (Ctrl-C)"
    except RunFailed as e:
        failure = str(e)
    except Exception as e:  # noqa: BLE001 — any other error still must leave a marked result dir
        failure = f"{type(e).__name__}: {e}"
        (ctx.logs / "runner-traceback.txt").write_text(traceback.format_exc())
    finally:
        # Cleanup must not be interrupted by a second Ctrl-C half-way.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            removed = ledger.cleanup_run(led)
            ctx.extra_prov["teardown_leftovers_removed_by_ledger"] = removed
        finally:
            signal.signal(signal.SIGINT, old)
    _write_provenance(ctx)
    if failure is not None:
        results.write_status(run_dir, "failed", reason=failure)
        raise RunFailed(f"run {run_id} failed: {failure}\n  results kept for inspection in {run_dir}")
    results.write_json(run_dir / "summary.json", summary)
    results.write_status(run_dir, "complete", fidelity_ok=summary.get("fidelity_ok"))
    return run_dir


def _write_provenance(ctx: RunContext) -> None:
    prov = provenance.collect(ctx.scenario_file, ctx.scenario.seed, ctx.run_id, ctx.extra_prov)
    results.write_json(ctx.run_dir / "provenance.json", prov)


def _execute(ctx: RunContext) -> dict[str, Any]:
    if ctx.scenario.topology.kind == "physical":
        from mpvlab import physical  # real hosts: its own package (no emulated topology)
        return physical.execute(ctx, ctx.opts.key_dir)
    sc, phase = ctx.scenario, ctx.opts.progress
    run_started = time.monotonic()
    if sc.topology.kind == "shared-bottleneck":
        from mpvlab import run_shared  # imports this module: bound late
        return run_shared.execute(ctx)

    phase("content")
    video = ensure_content(sc)
    ctx.extra_prov["content"] = _content_provenance(video)

    with contextlib.ExitStack() as stack:
        # Run time zero is fixed before the links come up, ahead of the probes, so the delay lines
        # start on the same clock the player and samplers use; the player starts exactly at t0.
        lead_s = (sc.fidelity.probe_duration / 1e9 + 4.0) if sc.fidelity.probe else 2.0
        net = bring_up_network(ctx, stack, lead_s)
        topo, schedules, cc_name, check_links = net.topo, net.schedules, net.cc_name, net.check_links

        if sc.fidelity.probe:
            phase("fidelity probes")
            fid = fidelity.run_probes(topo, sc, schedules, ctx.t0_ns, ctx.logs)
            check_links()
        else:
            fid = dict(NO_FIDELITY_PROBE)
        record_fidelity(ctx, fid)

        phase("server")
        apache, video_name, http = start_server(ctx, stack, video, topo.server.ns, cc_name, net.server_env,
                                                topo.server_addr, topo.client.ns)

        phase("waiting for time zero")
        late_ms = wait_for_t0(ctx, check_links)

        phase("playing")
        sampler = sampling.Sampler(ctx.t0_ns, topo.client.pid, {p.name: p.client_if for p in topo.paths},
                                   topo.server.ns, http.port, ctx.data, sc.observe.sample_hz)
        trace_dir = ctx.data / "schedtrace"
        trace = contextlib.ExitStack()
        stack.enter_context(trace)
        trace_proc = trace.enter_context(
            collectors.trace_scheduler(topo.server.ns.name, trace_dir, ctx.t0_ns, sc.observe.sample_hz))
        ctx.ledger.add_proc(proc.ProcRef.of(trace_proc.pid, "schedtrace"))
        # Bottleneck queues and interface counters of every router, on the same t0 grid.
        for p in topo.paths:
            qp = trace.enter_context(qdiscstat.sample_queues(p.router.ns.name, ctx.data / "queues" / p.name,
                                                              ctx.t0_ns, sc.observe.sample_hz))
            ctx.ledger.add_proc(proc.ProcRef.of(qp.pid, f"qdiscstat {p.name}"))
        sched = trace.enter_context(schedulers.start_scheduler(
            sc.transport.scheduler, sc.transport.scheduler_params, topo.server.ns.name, ctx.data / "scheduler",
            ctx.t0_ns, announce=transport.announce_addresses(topo, sc)))
        if sched.pid is not None:
            ctx.ledger.add_proc(proc.ProcRef.of(sched.pid, f"scheduler {sc.transport.scheduler}"))
        counters_before = sampling.read_net_dev(topo.client.pid)
        mib_ends = {"server": topo.server.pid, "client": topo.client.pid}
        mib_before = {end: sampling.read_mptcp_mib(pid) for end, pid in mib_ends.items()}
        player = start_player(ctx, topo.client.ns, topo.server_addr, video_name, _frames_of(sc), ctx.logs, http)
        ctx.ledger.add_proc(player[1])
        sampler.start()
        stack.callback(sampler.stop)
        ctx.extra_prov["player_start_late_ms"] = round(late_ms, 3)
        timeout_s = sc.video.duration / 1e9 * sc.player.timeout_factor + 30
        deadline = time.monotonic() + timeout_s + 10
        # CPU time the hypervisor took while the video played, recorded beside the results.
        with hoststeal.StealMeter() as playing_steal:
            while player[0].poll() is None:
                check_links()
                if not apache.alive():
                    raise RunFailed(f"apache exited with code {apache.process.returncode} during playback")
                if time.monotonic() > deadline:
                    player[0].kill()
                    raise RunFailed(f"player did not finish within {timeout_s:.0f} s")
                phase(f"playing ({(time.monotonic_ns() - ctx.t0_ns) / 1e9:5.1f} s of "
                      f"{sc.video.duration / 1e9:g} s video)")
                time.sleep(0.2)
        counters_after = sampling.read_net_dev(topo.client.pid)
        mib = {end: sampling.mptcp_mib_delta(mib_before[end], sampling.read_mptcp_mib(pid))
               for end, pid in mib_ends.items()}
        sampler.stop()
        trace.close()  # stops the collectors and the scheduler, which write their summaries
        trace_summary = collectors.load_summary(trace_dir)
        ctx.extra_prov["scheduler"] = _read_json(ctx.data / "scheduler" / "scheduler.json")

        phase("checks")
        player_summary = _read_json(ctx.logs / "player-summary.json")
        if player[0].returncode != 0:
            reason = player_summary.get("reason") or player_summary.get("error") if player_summary else None
            raise RunFailed(f"player exited with code {player[0].returncode}: {reason or 'see logs/player.log'}")
        summary = _summarise(ctx, topo, player_summary, counters_before, counters_after, sampler, fid,
                             trace_summary, sched.summary, http)
        summary["mptcp"] = mptcp_view(mib)
        summary["host_steal_during_playback"] = playing_steal.window.as_dict()
        summary["run_wall_s"] = round(time.monotonic() - run_started, 2)
    return summary


def mptcp_view(mib: dict[str, dict[str, int]]) -> dict[str, Any]:
    """MPTCP-level events during playback, from the kernel's MIB of each end's namespace.
    Reinjections (the server re-sending, on another subflow, data a stalled subflow had taken) are
    handed to a subflow twice, so the scheduler trace counts them twice: this is what explains
    `payload_bytes_handed` above the file size. Every counter that moved is kept in `mib`."""
    return {
        "reinjected_segments": mib["server"].get("MPTCPRetrans", 0),
        "duplicate_data_segments_received": mib["client"].get("DuplicateData", 0),
        "mib": {side: {k: v for k, v in d.items() if v} for side, d in mib.items()},   # non-zero only
    }


@dataclass
class Network:
    """The emulated network of a run, up and configured: what the rest of the run stands on."""

    topo: dual_path.DualPath
    handles: list[DirectionHandle]
    schedules: dict[str, fidelity.PathSchedules]
    cc_name: str
    check_links: Callable[[], None]
    server_env: dict[str, str]


def bring_up_network(ctx: RunContext, stack: contextlib.ExitStack, lead_s: float) -> Network:
    """Topology, host settings, congestion control and link emulation, each undone by `stack`.
    Run time zero is set to now + lead_s."""
    sc, phase = ctx.scenario, ctx.opts.progress
    if sc.topology.kind == "shared-bottleneck":
        raise RunFailed("topology shared-bottleneck is brought up by mpvlab.run_shared (runs only; "
                        "`mpvlab shell` does not support it yet)")
    phase("topology")
    topo = topologies.build(sc, ctx.run_id, ctx.ledger.add_netns)
    stack.callback(dual_path.teardown, topo)
    ctx.extra_prov["topology"] = {
        "kind": sc.topology.kind, "server_addr": topo.server_addr, "server_addressing": topo.addressing,
        "netns": [n.ns.name for n in topo.nodes],
        "paths": {p.name: {"client_if": p.client_if, "client_addr": p.client_addr, "server_addr": p.server_addr,
                           "router": p.router.ns.name} for p in topo.paths},
    }
    ctx.extra_prov["hosts"] = transport.configure_hosts(topo, sc)
    ctx.extra_prov["offloads"] = transport.set_offloads(topo, sc.hosts.offloads)

    phase("congestion control")
    cc_name = _setup_cc(ctx, stack)
    ctx.extra_prov["server_routes"] = transport.set_server_cc(topo, cc_name)
    ctx.extra_prov["cc"] = {"requested": sc.transport.cc, "kernel_name": cc_name,
                            "params": sc.transport.cc_params.model_dump() if sc.transport.cc == "bbr-s" else {}}
    # The scheduler's server-side needs (userspace path manager for the steering policies) must be
    # in place before any MPTCP connection; it returns environment for Apache (send-buffer bound).
    sched_params = schedulers.parse_params(sc.transport.scheduler, sc.transport.scheduler_params)
    server_env = schedulers.prepare_server(sc.transport.scheduler, sched_params, topo.server.ns.name)

    ctx.t0_ns = time.monotonic_ns() + int(lead_s * 1e9)

    phase("links")
    ctx.extra_prov["link_backend"] = {"shaping": "tbf", "delay_and_loss": "nfqueue-delayline",
                                      "netem_available": _netem_available(topo.paths[0].router.ns)}
    schedules: dict[str, fidelity.PathSchedules] = {}
    handles: list[DirectionHandle] = []
    for p in topo.paths:
        spec = sc.paths[p.name]
        sched = fidelity.PathSchedules(down=schedule_for(spec.down, ctx.scenario_file.parent),
                                       up=schedule_for(spec.up, ctx.scenario_file.parent))
        schedules[p.name] = sched
        letter = "ab"[p.index]
        for direction, d, in_if, out_if, qnum in (
            ("down", spec.down, p.router_server_if, p.router_client_if, 0),
            ("up", spec.up, p.router_client_if, p.router_server_if, 1),
        ):
            plan = DirectionPlan(p.name, direction, p.router.ns, in_if, out_if,
                                 naming.ifname(ctx.run_id, f"{letter}i{qnum}"), qnum, d,
                                 getattr(sched, direction), seed=sc.seed * 1000 + p.index * 2 + qnum)
            h = apply_direction(plan, ctx.logs, ctx.t0_ns, ctx.ledger.add_proc)
            handles.append(h)
            stack.callback(_record_delay_stats, ctx, h)
    ctx.extra_prov["links"] = {
        f"{h.plan.label}": {"router": h.plan.router.name, "in_if": h.plan.in_if, "out_if": h.plan.out_if,
                            "order": h.plan.spec.order, "burst_bytes": h.plan.spec.effective_burst(),
                            "limit_bytes": h.plan.spec.buffer.to_bytes(),
                            "delay_backend": "nfqueue-delayline" if h.plan.needs_delay_line else "none",
                            "schedule": h.plan.schedule.to_text().splitlines()[1:],
                            "qdiscs": h.plan.router.run(["tc", "qdisc", "show"]).stdout.strip().splitlines()}
        for h in handles
    }

    def check_links() -> None:
        for h in handles:
            if not h.alive():
                raise RunFailed(h.describe_death() + " — the path lost all packets from then on")

    return Network(topo, handles, schedules, cc_name, check_links, server_env)



def _netem_available(ns: Any) -> bool:
    """Recorded in provenance: the delay line is used either way (one backend, one behaviour), but a
    reader comparing with netem-based testbeds should know whether netem could have been used."""
    cp = ns.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"], check=False)
    if cp.returncode == 0:
        ns.run(["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    return cp.returncode == 0


def ensure_content(sc: Scenario) -> "content.ContentInfo | content.DashInfo":
    """The scenario's video, generated once and cached by its parameters (also `mpvlab prepare`)."""
    v = sc.video
    if v.kind == "dash":
        return content.ensure_dash(CONTENT_DIR, v.duration / 1e9, sc.dash_ladder, v.segment / 1e9,
                                   v.width, v.height, v.fps)
    return content.ensure_progressive(CONTENT_DIR, v.duration / 1e9, v.bitrate, v.width, v.height, v.fps)


def _content_provenance(video: "content.ContentInfo | content.DashInfo") -> dict[str, Any]:
    if isinstance(video, content.DashInfo):
        # The full per-segment listing stays in the ladder's sidecar; provenance names it and its hash.
        return {"kind": "dash", "sidecar": str(video.sidecar), "mpd_sha256": video.mpd_sha256,
                "params": video.params, "n_segments": video.n_segments, "bitrates_bps": video.bitrates_bps,
                "total_bytes": video.total_bytes, "ffmpeg_version": video.ffmpeg_version, "cached": video.cached}
    return {"kind": "progressive", **video.to_json()}


def _frames_of(sc: Scenario) -> int:
    return round(sc.video.duration / 1e9 * sc.video.fps)


def _setup_cc(ctx: RunContext, stack: contextlib.ExitStack) -> str:
    sc = ctx.scenario
    if sc.transport.cc in ("cubic", "bbr"):
        return sc.transport.cc
    import cc as cc_registry  # the cc/ package: BPF congestion controls
    name = naming.cc_name(ctx.run_id, "bbrs")
    ctx.ledger.add_bpf_cc(name)
    p = sc.transport.cc_params
    load = stack.enter_context(cc_registry.load_bbrs(name, p.window, p.percentile, p.factor,
                                                     ctx.data / "bbrs_state.csv", ctx.logs,
                                                     state_hz=float(sc.observe.sample_hz)))
    ctx.ledger.add_proc(proc.ProcRef.of(load.pid, "bbrs-loader"))
    return name


def _http_setup(ctx: RunContext, server_addr: str, stack: contextlib.ExitStack) -> server.HttpSetup:
    """The scenario's HTTP version; with TLS a fresh certificate for the server's address (and loopback,
    for the readiness check) in the run directory, whose key is deleted when the run ends."""
    spec = ctx.scenario.server
    if not spec.tls_enabled:
        return server.HttpSetup(spec.protocol)
    material = tls.make_self_signed(ctx.run_dir / tls.RUN_TLS_DIR, [server_addr, "127.0.0.1"])
    stack.callback(material.discard_key)   # registered before Apache's stop, so it runs after it
    return server.HttpSetup(spec.protocol, material)


def wait_for_t0(ctx: RunContext, check_links: Callable[[], None]) -> float:
    """Until run time zero, checking that the delay lines live; returns how late we woke (ms)."""
    while (wait := ctx.t0_ns - time.monotonic_ns()) > 0:
        check_links()
        time.sleep(min(wait / 1e9, 0.1))
    return (time.monotonic_ns() - ctx.t0_ns) / 1e6


NO_FIDELITY_PROBE: dict[str, Any] = {"ok": None, "skipped": True, "warnings": []}


def record_fidelity(ctx: RunContext, fid: dict[str, Any]) -> None:
    """The fidelity check goes into provenance; its warnings are shown as the run goes."""
    ctx.extra_prov["fidelity"] = fid
    for w in fid.get("warnings", []):
        ctx.opts.log(f"fidelity warning: {w}")


def start_server(ctx: RunContext, stack: contextlib.ExitStack, video: "content.ContentInfo | content.DashInfo",
                 ns: Any, cc_name: str, server_env: dict[str, str], server_addr: str,
                 client_ns: Any) -> tuple[server.ApacheServer, str, server.HttpSetup]:
    """Apache in `ns` serving the run's video with the scenario's HTTP version, stopped by `stack`.
    Before returning it has checked, from `client_ns` over the emulated path, that the server speaks
    that protocol. Returns the server, the video's URL path and the HTTP setup."""
    docroot = ledger.docroot(ctx.run_id)
    # The file (progressive) or the ladder's folder (DASH) is linked into the run's web root.
    if isinstance(video, content.DashInfo):
        os.symlink(video.dir, docroot / video.dir.name)
        video_name = f"{video.dir.name}/{video.mpd.name}"
    else:
        video_name = "video.mp4"
        os.symlink(video.path, docroot / video_name)
    http = _http_setup(ctx, server_addr, stack)
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
                 http: server.HttpSetup, label: str = "player") -> tuple[subprocess.Popen[bytes], Any]:
    """One player in namespace `ns`, writing player-events.jsonl, player-summary.json and player.log
    into out_dir."""
    sc = ctx.scenario
    url = http.url(server_addr, video_name)
    argv = ["mptcpize", "run", sys.executable, str(PLAYER), "--url", url,
            "--events", str(out_dir / "player-events.jsonl"), "--summary", str(out_dir / "player-summary.json"),
            "--mode", sc.player.mode, "--max-lateness-ms", f"{sc.player.max_lateness / 1e6:g}",
            "--buffer-ms", f"{sc.playout_buffer_ns / 1e6:g}",
            "--rebuffer-resume-ms", f"{sc.player.rebuffer_resume / 1e6:g}",
            "--startup-buffer-ms", f"{sc.player.startup_buffer / 1e6:g}",
            "--t0-ns", str(ctx.t0_ns), "--timeout-s", f"{sc.video.duration / 1e9 * sc.player.timeout_factor + 30:g}",
            "--frames-expected", str(frames)]
    if http.tls is not None:
        argv += ["--ca-file", str(http.tls.cert)]
    if not sc.player.decode:
        argv.append("--no-decode")
    if sc.video.kind == "dash":
        argv += ["--dash", "--abr", sc.player.abr, "--bba-reservoir-s", f"{sc.player.bba_reservoir / 1e9:g}",
                 "--bba-cushion-s", f"{sc.player.bba_cushion / 1e9:g}",
                 "--gst-bitrate-limit", f"{sc.player.gst_bitrate_limit:g}"]
    if sc.player.cpu is not None:
        if sc.player.cpu >= (os.cpu_count() or 1):
            raise RunFailed(f"player.cpu = {sc.player.cpu}, but this machine has CPUs 0..{(os.cpu_count() or 1) - 1}")
        argv = ["taskset", "-c", str(sc.player.cpu), *argv]
    with (out_dir / "player.log").open("wb") as out:
        p = ns.popen(argv, stdout=out, stderr=subprocess.STDOUT)
    return p, proc.ProcRef.of(p.pid, label)


def _apache_requests(access_log: Path) -> int:
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


def _record_delay_stats(ctx: RunContext, h: DirectionHandle) -> None:
    ctx.extra_prov.setdefault("delay_lines", {})[h.plan.label] = stop_direction(h)


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _scheduler_view(topo: dual_path.DualPath, sched: dict[str, Any]) -> dict[str, Any]:
    """Per path: payload bytes the MPTCP scheduler handed to that path's subflows (the collector's
    exact count), and the connection-level decision and switch counts."""
    by_addr = {p.client_addr: p.name for p in topo.paths}
    handed = {p.name: 0 for p in topo.paths}
    for conn in sched["connections"]:
        for sf in conn["subflows"]:
            addr = sf["remote"].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
            if addr in by_addr:
                handed[by_addr[addr]] += sf["bytes_handed"]
    t = sched["totals"]
    return {"bytes_handed": handed, "connections": t["connections"], "decisions": t["decisions"],
            "data_carrying_decisions": t["data_carrying_decisions"], "path_switches": t["path_switches"],
            "lost_events": sched["lost_events"]["total"],
            "definition": sched["definitions"].get("path_switch")}


def _dash_view(ps: dict[str, Any]) -> dict[str, Any]:
    """experiments.md §2: average quality level over downloaded segments, stall rate, switches."""
    return {k: ps.get(k) for k in ("abr", "representations", "segment_s", "quality_avg", "bitrate_avg_bps",
                                   "bitrate_switches", "stall_rate", "abr_policy_mismatches")} | {
        "segments": len(ps.get("segments") or [])}


def _steering_view(steer: dict[str, Any]) -> dict[str, Any] | None:
    """How far to trust a steered scheduler: conformance of the kernel's data assignments to the policy
    and steering latency (schedulers/README.md). None for the kernel's own scheduler."""
    if not steer:
        return None
    return {"policy": steer.get("policy"), "conformance": steer.get("conformance"),
            "steering_latency_ms": steer.get("steering_latency_ms"), "set_flags": steer.get("set_flags"),
            "priority_changes": sum(c.get("priority_changes", 0) for c in steer.get("connections", [])),
            "lost_events": steer.get("lost_events")}


def _queue_view(out_dir: Path) -> dict[str, Any]:
    """Peak and mean backlog and the drops of each shaping qdisc (tbf) on a router during playback."""
    rows, _links = qdiscstat.load_samples(out_dir)
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


# Per data segment on the wire beyond its payload: Ethernet 14 + IPv4 20 + TCP 20 + options 36
# (timestamps 12 + MPTCP DSS 24), measured in collectors/README.md.
SEGMENT_OVERHEAD = 90


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


def _retransmitted_segments_by_path(topo: dual_path.DualPath, subflows_csv: Path) -> dict[str, int]:
    """Segments the server's subflows of each path retransmitted (tcpi_total_retrans in the last
    `ss` sample of each subflow; a subflow's peer address names its path)."""
    last: dict[tuple[str, str], int] = {}
    if subflows_csv.exists():
        with subflows_csv.open() as fh:
            for row in csv.DictReader(fh):
                if row["retrans"]:
                    last[(row["local"], row["peer"])] = int(row["retrans"])
    by_addr = {p.client_addr: p.name for p in topo.paths}
    out: dict[str, int] = {}
    for (_local, peer), n in last.items():
        name = by_addr.get(peer.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:"))
        if name is not None:
            out[name] = out.get(name, 0) + n
    return out


def subflow_address_check(topo: dual_path.DualPath, subflows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each subflow must join a path's client address to that path's server address (under `per-path`
    addressing the server address names the path; under `single` it is the same for every path)."""
    def host(endpoint: str) -> str:
        return endpoint.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
    expected = {p.name: [p.client_addr, p.server_addr] for p in topo.paths}
    allowed = {(c, s) for c, s in expected.values()}
    seen = sorted({(host(sf["peer"]), host(sf["local"])) for sf in subflows})
    stray = [list(x) for x in seen if x not in allowed]
    return {"addressing": topo.addressing, "expected": expected, "seen": [list(x) for x in seen],
            "stray": stray, "ok": not stray}


def _summarise(ctx: RunContext, topo: dual_path.DualPath, ps: dict[str, Any], before: dict[str, dict[str, int]],
               after: dict[str, dict[str, int]], sampler: sampling.Sampler, fid: dict[str, Any],
               sched: dict[str, Any], steer: dict[str, Any], http: server.HttpSetup) -> dict[str, Any]:
    sc = ctx.scenario
    # Every request the player made must have used the scenario's protocol (and TLS), or the run
    # measured something else than it claims.
    http_tally = server.tally_access_log(ctx.logs / "apache" / "access.log", http)
    if not http_tally["ok"]:
        raise RunFailed(f"not every player request used {http_tally['expected']}"
                        f"{' over TLS' if http.tls else ''}: {http_tally}")
    per_path: dict[str, dict[str, Any]] = {}
    total = 0
    for p in topo.paths:
        rx = after[p.client_if]["rx_bytes"] - before[p.client_if]["rx_bytes"]
        per_path[p.name] = {"interface": p.client_if, "rx_bytes": rx,
                            "rx_packets": after[p.client_if]["rx_packets"] - before[p.client_if]["rx_packets"]}
        total += rx
    playback_s = ps.get("playback_s") or 0
    for name, v in per_path.items():
        v["share"] = round(v["rx_bytes"] / total, 4) if total else 0.0
        v["mean_throughput_bps"] = round(v["rx_bytes"] * 8 / playback_s) if playback_s else None
    view = _scheduler_view(topo, sched)
    for p in topo.paths:
        per_path[p.name]["bottleneck"] = _queue_view(ctx.data / "queues" / p.name)
    checks: dict[str, Any] = {}
    warnings: list[str] = []
    retrans = _retransmitted_segments_by_path(topo, ctx.data / "subflows.csv")
    for name, v in per_path.items():
        v["payload_bytes_handed"] = view["bytes_handed"][name]
        # Interface bytes less per-packet headers should equal the payload the scheduler handed
        # to this path (within 1 %: pure ACKs and the HTTP header differ). A TCP retransmission
        # whose original also arrived (an RTO, a spurious fast retransmit) crosses the interface
        # twice but is handed once, so the upper bound also allows the path's retransmitted
        # segments at a full payload each (measured: 1.2 % over with 59 retransmissions after 49
        # tail drops on a 3 Mbit/s path).
        wire_payload = v["rx_bytes"] - v["rx_packets"] * SEGMENT_OVERHEAD
        handed = v["payload_bytes_handed"]
        ratio = wire_payload / handed if handed else None
        retrans_allow = retrans.get(name, 0) * (1514 - SEGMENT_OVERHEAD) / handed if handed else 0.0
        checks[f"bytes_{name}_interface_vs_collector"] = {
            "ratio": None if ratio is None else round(ratio, 5), "tolerance": 0.01,
            "retransmitted_segments": retrans.get(name, 0), "retransmission_allowance": round(retrans_allow, 5),
            "ok": ratio is not None and 0.99 <= ratio <= 1.01 + retrans_allow}
    requests = _apache_requests(ctx.logs / "apache" / "access.log")
    checks["collector_saw_every_connection"] = {"apache_connections": requests, "traced": view["connections"],
                                                "ok": view["connections"] >= requests}
    checks["collector_lost_events"] = {"lost": view["lost_events"], "ok": view["lost_events"] == 0}
    warnings += [f"cross-check {k} failed: {v}" for k, v in checks.items() if not v["ok"]]
    if ps.get("picture_discards_no_underflow"):
        warnings.append(f"{ps['picture_discards_no_underflow']} picture discard(s) happened while the playout buffer "
                        "had data: the CPU was late, not the network (set player.cpu to reserve a core)")
    subflows = [{"local": k[0], "peer": k[1], "cc": v} for k, v in sorted(sampler.subflows_seen.items())]
    expected_cc = ctx.extra_prov["cc"]["kernel_name"]
    check_subflows(sc, subflows, expected_cc, per_path)
    checks["subflow_addresses"] = subflow_address_check(topo, subflows)
    if not checks["subflow_addresses"]["ok"]:
        raise RunFailed(f"MPTCP subflows on unexpected (client, server) address pairs: {checks['subflow_addresses']}")
    return {
        "run_id": ctx.run_id,
        "scenario": sc.name,
        "cc": sc.transport.cc,
        "scheduler": sc.transport.scheduler,
        "seed": sc.seed,
        "video_length_s": sc.video.duration / 1e9,
        "duration_s": playback_s,
        "bytes_total": total,
        "paths": per_path,
        "subflows": subflows,
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
        "dash": _dash_view(ps) if ps.get("dash") else None,
        "player_mode": sc.player.mode,
        "player_cpu": ps.get("cpu"),
        "http": {"protocol": http.protocol, "tls": http.tls is not None, "port": http.port,
                 "player_libsoup": ps.get("libsoup"),
                 **{k: http_tally[k] for k in ("requests", "by_protocol", "by_tls_version", "by_cipher",
                                              "excluded")},
                 "preflight": ctx.extra_prov.get("http", {}).get("preflight")},
        "path_switches": view["path_switches"],
        "steering": _steering_view(steer),
        "scheduler_decisions": view["decisions"],
        "path_switch_definition": view["definition"],
        "cross_checks": checks,
        "warnings": warnings,
        "fidelity_ok": fid.get("ok"),
        "fidelity_warnings": fid.get("warnings", []),
        "sampler_errors": sampler.errors,
    }
