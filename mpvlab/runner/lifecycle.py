"""The one life cycle of an emulated run, whatever its topology kind and workload:

    workload.prepare          content and the workload's own inputs, before any network exists
    backend.bring_up          topology, host settings, congestion control, links; run time zero fixed
    workload.serve            the server side answering
    workload.stage            client programs started, waiting for t0 (their start-up is not the run's)
    network.precheck          the emulator's pre-run fidelity check (scenario `fidelity.probe`)
    network.before_t0         collectors that take time to come up (packet capture)
    network.ready             preparation done: run time zero fixed now (mpvlab/runner/runzero.py)
    wait for time zero        the links watched meanwhile
    network.start_collectors  samplers, queue counters, scheduler trace, cross traffic …
    workload.start            the client side(s), at time zero
    poll                      links, workload and collectors watched until the workload ends
    network.stop_collectors   collectors stop and write their files
    workload.finish           the workload's part of the summary
    network.summarise         the network's part around it; the run head is added here, once
    network.judge             after teardown: the whole-run fidelity verdict from the emulator's own
                              evidence (delay lines' lateness, shapers' counters; mpvlab/runner/fidelity.py)

Everything started is undone by one ExitStack on success, error or Ctrl-C, in reverse order; the
session (session.py) around it owns the ledger, the result directory and provenance. A topology
kind is a `bring_up` function returning a `Network` (network.py); a workload is a `Workload`
(workloads/base.py).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Mapping

from mpvlab.core import hoststeal
from mpvlab.core.errors import RunFailed
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.kinds import RunHead
from mpvlab.results.summary_parts.network import Steal
from mpvlab.results.summary import run_fields
from mpvlab.runner import liveness
from mpvlab.runner.context import RunContext
from mpvlab.runner.network import BringUp, Network, run_head
from mpvlab.runner import crosschecks
from mpvlab.runner.steps import NO_FIDELITY_PROBE, record_fidelity, wait_for_t0
from mpvlab.runner.workloads.base import Outcome, Workload
from mpvlab.runner.workloads.registry import WORKLOADS, WorkloadFactory

POLL_S = 0.2      # how often the links, workload and collectors are checked during the run


def execute(ctx: RunContext, bring_up: BringUp, workloads: Mapping[str, WorkloadFactory] = WORKLOADS) -> dict[str, Any]:
    """Run the scenario on the network `bring_up` builds; returns the summary (summary.py's model).
    `workloads`: where the kind runs its workloads' programs differently (physical hosts), its own."""
    sc, phase = ctx.scenario, ctx.opts.progress
    run_started = time.monotonic()
    steps = ctx.timeline
    if sc.workload.kind not in workloads:
        raise RunFailed(f"workload {sc.workload.kind} does not run on topology {sc.topology.kind} "
                        f"(it runs: {', '.join(sorted(workloads))})")
    workload = workloads[sc.workload.kind]()
    steps.mark("prepare")
    workload.prepare(ctx)

    with contextlib.ExitStack() as stack:
        # Run time zero is provisional when the links come up (the delay lines start on the clock the
        # workload and samplers use) and fixed by network.ready once everything is prepared.
        steps.mark("bring_up")
        net = bring_up(ctx, stack)

        fid = _up_to_t0(ctx, stack, net, workload)
        playing_steal = _play(ctx, stack, net, workload)
        phase("checks")
        steps.mark("finish")
        outcome = workload.finish(ctx)
        steps.mark("summarise")
        body = net.summarise(ctx, outcome, fid)
        warnings = body.pop("warnings", []) + outcome.warnings
        summary = {**run_head(ctx, fid), **body, "warnings": warnings,
                   "host_steal_during_playback": build(Steal, "host_steal_during_playback",
                                                         playing_steal.window.as_dict())}
        # the kind's plain fields (duration_s, bytes_total, path_switches …) are complete here, typed now
        run_fields(sc.topology.kind, summary)
        steps.mark("teardown")
    return _conclude(ctx, net, outcome, fid, summary, run_started)


def _up_to_t0(ctx: RunContext, stack: contextlib.ExitStack, net: Network, workload: Workload) -> dict[str, Any]:
    """From the network up to time zero: the server, the staged clients, the pre-run check, the
    kind's last preparations, the wait. Returns the pre-run check's fidelity record."""
    sc, phase, steps = ctx.scenario, ctx.opts.progress, ctx.timeline
    # The server answers before the pre-run check: a physical network measures its paths' rate
    # with a download from it; the emulated ones bring their own probe server.
    steps.mark("serve")
    workload.serve(ctx, stack, net.ends)
    # Client programs start up now, while the check runs, and wait for t0 (workloads/base.py).
    steps.mark("stage")
    workload.stage(ctx, stack, net.ends)

    if sc.fidelity.probe:
        phase("fidelity probes")
        steps.mark("precheck")
        fid = net.precheck(ctx)
        net.check()
    else:
        fid = dict(NO_FIDELITY_PROBE)
    record_fidelity(ctx, fid)
    steps.mark("before_t0")
    net.before_t0(ctx, stack)
    steps.mark("ready")
    net.ready(ctx)

    phase("waiting for time zero")
    steps.mark("wait_t0")
    late_ms = wait_for_t0(ctx, net.check)
    ctx.extra_prov["player_start_late_ms"] = round(late_ms, 3)
    return fid


def _play(ctx: RunContext, stack: contextlib.ExitStack, net: Network, workload: Workload) -> hoststeal.StealMeter:
    """From time zero to the workload's end: collectors and workload started, everything watched
    until it ends, collectors stopped. Returns the host-steal meter of the playing time."""
    phase, steps = ctx.opts.progress, ctx.timeline
    phase(workload.progress(ctx))
    steps.mark("start_collectors")
    net.start_collectors(ctx, stack, workload.port, workload.max_run_s(ctx))
    steps.mark("start")
    workload.start(ctx, stack, net.ends)
    # Every registered process and every node's shell, watched: a death is named (which
    # component, when, how), not its symptom in some later step (liveness.py).
    watch = liveness.Watch.for_run(ctx, net.nodes)
    # CPU time the hypervisor took while the workload ran, recorded beside the results.
    steps.mark("play")
    with hoststeal.StealMeter() as playing_steal:
        while workload.running(wait_s=POLL_S):     # back as soon as the workload ends
            net.check()
            watch.check()
            workload.check(ctx)
            net.poll(ctx)
            phase(workload.progress(ctx))
    watch.check()       # a death that ended the workload is named, not its symptom
    steps.mark("stop_collectors")
    net.stop_collectors(ctx)
    return playing_steal


def _conclude(ctx: RunContext, net: Network, outcome: Outcome, fid: dict[str, Any], summary: dict[str, Any],
              run_started: float) -> dict[str, Any]:
    """After teardown: the fidelity verdict, the cross-checks, the wall time, the run head checked."""
    steps = ctx.timeline
    steps.mark("judge")
    net.judge(ctx, fid, summary)
    # every check of the registry for the workload, once, over the finished summary (crosschecks.py)
    state = net.check_state(ctx, outcome, summary)
    if state is not None:
        crosschecks.apply(summary, fid, crosschecks.run(summary, state), ctx.opts.log)
    summary["run_wall_s"] = round(time.monotonic() - run_started, 2)
    # The head is complete only now (the verdict and the wall time come last); the kind's own fields
    # were built as their parts where they were made, the whole is validated before it is written.
    build(RunHead, "run head", {k: summary[k] for k in RunHead.model_fields if k in summary})
    return summary
