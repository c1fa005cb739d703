"""One direction of one emulated path, inside that path's router namespace.

    down (server → client):  in_if = server-facing,  out_if = client-facing
    up   (client → server):  in_if = client-facing,  out_if = server-facing

shape-then-delay (default): in_if ingress --mirred--> IFB [tbf rate/burst/limit] --> FORWARD [NFQUEUE
    delay line] --> out_if. The bottleneck queue sits before the delay, so a delay step moves the RTT
    cleanly and the step-down burst does not land in the bottleneck queue.
delay-then-shape: FORWARD [NFQUEUE delay line] --> out_if [tbf]. What an emulator box with netem
    before a shaper does; at a delay step-down the held packets hit the tbf queue as a burst.

The delay line is the C daemon in links/delayline/. It binds its queue before the iptables rule
exists and the rule has no --queue-bypass: if the daemon dies the path loses 100 % of its packets,
which the run detects, instead of silently carrying undelayed traffic.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from mpvlab.core.paths import checkout_root
from mpvlab.links import capacity, ecn
from mpvlab.links.schedule import Schedule
from mpvlab.core import proc
from mpvlab.core.hosts import Host
from mpvlab.core.netns import Netns
from mpvlab.links.spec import LinkDirection
from mpvlab.core.errors import MpvlabError

REPO = checkout_root()
DELAYLINE_BIN = REPO / "links" / "delayline" / "build" / "mpvlab-delayline"
FRAME_BYTES = 1514  # Ethernet frame (no FCS) of a 1500-byte IP packet: what tbf counts on a veth


class LinkError(MpvlabError, RuntimeError):
    pass


@dataclass
class DirectionPlan:
    path: str                 # scenario path name (label only)
    direction: str            # "down" | "up"
    router: Host              # where the path is emulated: a router namespace or a physical emulator host
    in_if: str
    out_if: str
    ifb: str                  # IFB name to use when shaping at ingress
    queue_num: int
    spec: LinkDirection
    schedule: Schedule
    seed: int
    base_dir: Path | None = None   # where a capacity trace is looked up first (the scenario's folder)

    @property
    def label(self) -> str:
        return f"{self.path}-{self.direction}"

    @property
    def needs_delay_line(self) -> bool:
        return self.schedule.max_delay_ns > 0 or self.spec.loss > 0 or self.spec.has_impairments

    @property
    def shaper_dev(self) -> str | None:
        """The device whose tbf shapes this direction (None without a rate)."""
        if self.spec.rate is None:
            return None
        return self.ifb if self.spec.order == "shape-then-delay" else self.out_if

    def _base(self) -> Path:
        return self.base_dir or capacity.SHIPPED_TRACES

    def queue_maxlen(self) -> int:
        """Packets the delay line may hold: ≥ packet rate × max delay (NFQUEUE's default of 1024
        silently caps throughput), with 4× headroom; unshaped paths are sized for 1 Gbit/s."""
        if self.spec.capacity is not None:
            return capacity.kernel_queue_maxlen(self.spec.impairments(), self.schedule.max_delay_ns, self._base())
        rate = self.spec.rate or 10**9
        pkts = rate / 8 / FRAME_BYTES * (self.schedule.max_delay_ns / 1e9)
        return max(4096, int(pkts * 4))


class DelayLines(Protocol):
    """Where a direction's delay line runs and keeps its files: `LocalLines` (a process in the
    router's namespace, files in the run's folder) or a physical emulator host's (runner/physical)."""

    def start(self, handle: DirectionHandle, t0_ns: int, on_process: Callable[[proc.ProcRef], None]) -> None:
        """Start `handle.plan`'s line and return once it is bound to its queue (before the NFQUEUE rule
        exists); sets handle.process and handle.files (with "stats" and the local log "stderr")."""
        ...

    def stats(self, handle: DirectionHandle) -> bytes | None:
        """After the line has stopped: its stats file's content (None when it wrote none)."""
        ...


@dataclass(frozen=True)
class Site:
    """How the link step treats the host it changes.

    owned (a run's own router namespace, deleted with the run): an existing qdisc is replaced and the
    NFQUEUE rule appended; nothing is journalled, the namespace takes everything with it.
    not owned (a physical emulator host, a real machine): the ingress qdisc is added (one that is
    already there is an error, never overwritten), the NFQUEUE rule is inserted first (an earlier
    ACCEPT on a real router would bypass the delay), and `journal(undo_argv, what)` is told each
    change before it is made, so the run can undo exactly what it did."""

    owned: bool = True
    journal: Callable[[list[str], str], None] | None = None
    lines: DelayLines | None = None    # None: LocalLines in the step's workdir

    def will(self, undo: list[str], what: str) -> None:
        if self.journal is not None:
            self.journal(undo, what)


@dataclass
class DirectionHandle:
    plan: DirectionPlan
    files: dict[str, Path] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    ref: proc.ProcRef | None = None
    ecn_marker: ecn.Marker | None = None     # the ECN marker at this direction's tbf (spec.ecn_mark)
    lines: DelayLines | None = None          # where the delay line runs (set when one was started)
    ingress_gro: str | None = None           # GRO at in_if as read back, when the queue's counting set it

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def describe_death(self) -> str:
        assert self.process is not None
        err = self.files["stderr"].read_text()[-2000:] if self.files["stderr"].exists() else ""
        return f"delay line {self.plan.label} exited with code {self.process.returncode}: {err.strip()}"


# Test-only hooks, so tests can show that the fidelity verdict catches a broken emulator: the tbf
# gets rate × MPVLAB_TEST_TBF_RATE_FACTOR, and the delay lines' schedules are shifted by
# MPVLAB_TEST_DELAY_SKEW_US. Never set in a real run (the provenance records them if they are).
TEST_RATE_FACTOR_ENV = "MPVLAB_TEST_TBF_RATE_FACTOR"
TEST_DELAY_SKEW_ENV = "MPVLAB_TEST_DELAY_SKEW_US"


def test_hooks() -> dict[str, str]:
    import os
    return {k: os.environ[k] for k in (TEST_RATE_FACTOR_ENV, TEST_DELAY_SKEW_ENV) if os.environ.get(k)}


def tbf_argv(dev: str, spec: LinkDirection) -> list[str]:
    """The tbf of a direction. buffer_counting bytes: its `limit` is the queue (bytes; a packet count ×
    1514). A packet counting: the tbf gets handle 1: and its queue is the pfifo child of
    `child_argv` (the limit given here only sizes the default bfifo the child replaces)."""
    import os
    assert spec.rate is not None
    rate = round(spec.rate * float(os.environ.get(TEST_RATE_FACTOR_ENV) or 1))
    handle = [] if spec.buffer_counting == "bytes" else ["handle", "1:"]
    argv = ["tc", "qdisc", "replace", "dev", dev, "root", *handle, "tbf", "rate", f"{rate}bit",
            "burst", str(spec.effective_burst()), "limit", str(spec.buffer.to_bytes(FRAME_BYTES))]
    if spec.line_rate is not None:
        # tbf's second bucket: tokens at the peak rate, one frame deep, so no two frames leave closer
        # than a frame's time at the line rate. A GSO packet larger than the frame is segmented by
        # tbf itself (tbf_segment), so nothing is dropped for its size.
        argv += ["peakrate", f"{spec.line_rate}bit", "mtu", str(FRAME_BYTES)]
    return argv


def child_argv(dev: str, spec: LinkDirection) -> list[str] | None:
    """A packet-counted queue: `pfifo limit N` under the tbf (it counts skbs: pfifo_enqueue compares
    the queue length, not bytes); None for buffer_counting bytes. Added after the tbf: a later change
    of the tbf would reset a fifo child's limit to the tbf's (fifo_set_limit), so nothing changes it."""
    if spec.buffer_counting == "bytes":
        return None
    assert spec.buffer.packets is not None
    return ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo", "limit",
            str(spec.buffer.packets)]


def ingress_gro_wanted(spec: LinkDirection) -> bool | None:
    """The GRO state the counting needs at the direction's ingress interface; None = left as the
    hosts' offloads set it (bytes: the queue holds the same bytes either way)."""
    return {"bytes": None, "wire_packets": False, "merged_packets": True}[spec.buffer_counting]


def set_ingress_gro(host: Host, dev: str, on: bool) -> str:
    """GRO on `dev` (in the run's own router namespace), read back: what ethtool reports after."""
    state = "on" if on else "off"
    host.run(["ethtool", "-K", dev, "gro", state])
    feats = host.run(["ethtool", "-k", dev]).stdout
    got = next((ln.split(":", 1)[1].strip() for ln in feats.splitlines()
                if ln.strip().startswith("generic-receive-offload:")), "unknown")
    if got.split()[0] != state:
        raise LinkError(f"{dev}: generic-receive-offload is {got!r} after ethtool -K {dev} gro {state}")
    return got


def apply_direction(plan: DirectionPlan, workdir: Path, t0_ns: int,
                    on_process: Callable[[proc.ProcRef], None], *, data_dir: Path | None = None,
                    site: Site = Site()) -> DirectionHandle:
    """The tbf (and IFB), the ECN marker at the tbf's device when `spec.ecn_mark` (its backlog samples
    in `data_dir`, else `workdir`), and the delay line; `site` says how carefully (Site)."""
    host, spec = plan.router, plan.spec
    handle = DirectionHandle(plan)
    gro = ingress_gro_wanted(spec)
    if gro is not None:
        # the scenario refuses a packet counting on a real machine first (its interfaces are not ours)
        if not (site.owned and isinstance(host, Netns)):
            raise LinkError(f"{plan.label}: buffer_counting {spec.buffer_counting} sets GRO on the run's own "
                            f"router interfaces only, not on {host.name}")
        handle.ingress_gro = set_ingress_gro(host, plan.in_if, gro)
    if spec.rate is not None:
        if spec.order == "shape-then-delay":
            site.will(["ip", "link", "del", plan.ifb], f"IFB {plan.ifb}")
            host.run(["ip", "link", "add", plan.ifb, "type", "ifb"])
            host.run(["ip", "link", "set", plan.ifb, "up"])
            site.will(["tc", "qdisc", "del", "dev", plan.in_if, "ingress"], f"ingress qdisc on {plan.in_if}")
            host.run(["tc", "qdisc", "replace" if site.owned else "add", "dev", plan.in_if, "handle", "ffff:",
                      "ingress"])
            host.run(["tc", "filter", "add", "dev", plan.in_if, "parent", "ffff:", "protocol", "all", "u32",
                      "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", plan.ifb])
            host.run(tbf_argv(plan.ifb, spec))
        else:
            site.will(["tc", "qdisc", "del", "dev", plan.out_if, "root"], f"root qdisc on {plan.out_if}")
            host.run(tbf_argv(plan.out_if, spec))
        child = child_argv(plan.shaper_dev or "", spec)
        if child is not None:
            host.run(child)
        if spec.ecn_mark is not None:
            dev = plan.shaper_dev
            assert dev is not None
            if not isinstance(host, Netns):   # the scenario refuses it first (topology physical)
                raise LinkError(f"{plan.label}: the ECN marker is attached on the run's own emulated links only, "
                                f"not on {host.name}")
            # The marker drains at the configured rate, not the test hook's (TEST_RATE_FACTOR_ENV).
            handle.ecn_marker = ecn.start_marker(
                host, dev, spec.rate, spec.ecn_mark.threshold.to_bytes(spec.rate), spec.buffer.to_bytes(FRAME_BYTES),
                name=ecn.marker_name(plan.ifb),
                label=plan.label, workdir=workdir, samples_dir=data_dir, on_process=on_process)
    if plan.needs_delay_line:
        handle.lines = site.lines or LocalLines(workdir)
        handle.lines.start(handle, t0_ns, on_process)
        rule = ["FORWARD", "-i", plan.in_if, "-o", plan.out_if, "-j", "NFQUEUE", "--queue-num", str(plan.queue_num)]
        if site.owned:
            host.run(["iptables", "-w", "-A", *rule])
        else:
            site.will(["iptables", "-w", "-D", *rule], f"iptables {' '.join(rule)}")
            host.run(["iptables", "-w", "-I", rule[0], "1", *rule[1:]])
    return handle


def delayline_argv(plan: DirectionPlan, files: dict[str, str], t0_ns: int, *,
                   impairments: list[str] | None = None) -> list[str]:
    """The delay line's command line, wherever it runs: its queue, schedule, run time zero, queue
    bound, ready/stats/step files (and the t0 file when `files` has one), loss and the capacity
    model's arguments (`impairments`, from capacity.delayline_args)."""
    argv = [str(DELAYLINE_BIN), "--queue", str(plan.queue_num), "--schedule", files["schedule"],
            "--t0-ns", str(t0_ns), "--maxlen", str(plan.queue_maxlen()), "--ready-file", files["ready"],
            "--stats", files["stats"], "--step-log", files["steps"]]
    if "t0" in files:
        argv += ["--t0-file", files["t0"]]
    if plan.spec.loss > 0:
        argv += ["--loss", repr(plan.spec.loss), "--seed", str(plan.seed)]
    return argv + (impairments or [])


@dataclass(frozen=True)
class LocalLines:
    """Delay lines as processes in the router's namespace on this machine, their files in `workdir`."""

    workdir: Path

    def start(self, handle: DirectionHandle, t0_ns: int, on_process: Callable[[proc.ProcRef], None]) -> None:
        plan, workdir = handle.plan, self.workdir
        if not DELAYLINE_BIN.exists():
            raise LinkError(f"{DELAYLINE_BIN} is missing: run ./setup.sh (it builds links/delayline)")
        label = plan.label
        files = {
            "schedule": workdir / f"delay-{label}.schedule",
            "ready": workdir / f"delay-{label}.ready",
            "stats": workdir / f"delay-{label}.stats.json",
            "steps": workdir / f"delay-{label}.steps.csv",
            "stderr": workdir / f"delay-{label}.log",
            "t0": workdir / f"delay-{label}.t0",
        }
        skew_us = int(os.environ.get(TEST_DELAY_SKEW_ENV) or 0)
        if skew_us:   # test-only: a line that does not follow its schedule
            Schedule.piecewise([(t, v + skew_us * 1000) for t, v in zip(plan.schedule.times_ns, plan.schedule.delays_ns)],
                               plan.schedule.period_ns).to_file(files["schedule"])
        else:
            plan.schedule.to_file(files["schedule"])
        files["ready"].unlink(missing_ok=True)
        impairments = (capacity.delayline_args(plan.spec.impairments(), workdir=workdir, label=label, seed=plan.seed,
                                               base_dir=plan._base()) if plan.spec.has_impairments else [])
        argv = delayline_argv(plan, {k: str(v) for k, v in files.items()}, t0_ns, impairments=impairments)
        cpu = _pinned_cpu(plan)
        if cpu is not None:
            argv = ["taskset", "-c", str(cpu), *argv]
        with files["stderr"].open("wb") as err:
            process = plan.router.popen(argv, stdout=err, stderr=subprocess.STDOUT)
        handle.process = process
        handle.ref = proc.ProcRef.of(process.pid, f"delayline {label}")
        on_process(handle.ref)
        handle.files = files
        proc.wait_ready(process, files["ready"], f"delay line {label}", 5.0, log=files["stderr"], error=LinkError)

    def stats(self, handle: DirectionHandle) -> bytes | None:
        try:
            return handle.files["stats"].read_bytes()
        except OSError:
            return None


# Delay-line CPU placement (issue 16, opt-in while measured): MPVLAB_DELAYLINE_PIN=spread pins each
# line to one CPU, chosen from its IFB name (unique per run and direction), so concurrent runs' lines
# spread over the CPUs instead of migrating between them. Measured on 2 cores, 4 lines (3 with bulk
# TCP): the probe line's lateness p99 86–129 µs pinned (4 runs) vs 124–994 µs unpinned (5 runs);
# but in whole runs (bench/bench_fidelity_parallel.py, --parallel 3 and 4, 8 s videos) lateness p99
# was 0.14 ms pinned vs 0.09–0.10 ms unpinned — no gain shown there, so it stays off by default.
PIN_ENV = "MPVLAB_DELAYLINE_PIN"


def _pinned_cpu(plan: DirectionPlan) -> int | None:
    import os
    import zlib
    if os.environ.get(PIN_ENV) != "spread":
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[zlib.crc32(plan.ifb.encode()) % len(cpus)]


def stop_direction(handle: DirectionHandle) -> dict[str, Any]:
    """Stop the delay line (it releases what it holds and writes its stats) and the ECN marker (it
    detaches and writes its counters); return the stats (the marker's under `ecn_mark`)."""
    stats: dict[str, Any]
    if handle.process is None:
        stats = {"delay_line": "none (no delay or loss configured)"}
    else:
        rc = proc.stop_child(handle.process)
        assert handle.lines is not None
        try:
            stats = json.loads(handle.lines.stats(handle) or b"")
        except ValueError:
            stats = {"error": "no stats written"}
        stats["exit_code"] = rc
    if handle.ecn_marker is not None:
        stats["ecn_mark"] = handle.ecn_marker.stop()
    return stats


def request_t0(t0_file: Path, pid: int, t0_ns: int) -> None:
    """The line's side of the protocol: write the new t0 atomically (the line never reads half a
    number), clear the old acknowledgement, and signal the line (it rereads the file on SIGUSR1)."""
    tmp = t0_file.with_suffix(".t0.tmp")
    tmp.write_text(f"{t0_ns}\n")
    os.replace(tmp, t0_file)
    Path(f"{t0_file}.ack").unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)


def await_t0_ack(t0_file: Path, t0_ns: int, deadline: float, alive: Callable[[], bool],
                 label: str) -> None:
    """Until the line acknowledged `t0_ns` in `<t0_file>.ack`; LinkError if it died or by `deadline`
    (time.monotonic())."""
    ack = Path(f"{t0_file}.ack")
    while True:
        try:
            if int(ack.read_text().strip() or 0) == t0_ns:
                return
        except (OSError, ValueError):
            pass
        if not alive():
            raise LinkError(f"delay line {label} died before taking the new t0")
        if time.monotonic() > deadline:
            raise LinkError(f"delay line {label} did not take the new t0 by its deadline")
        time.sleep(0.001)


def set_t0(handles: list[DirectionHandle], t0_ns: int, timeout_s: float = 2.0) -> None:
    """Move run time zero of running delay lines to `t0_ns` (CLOCK_MONOTONIC): each line reads it
    from its t0 file on SIGUSR1 and acknowledges; returns once every line has. Packets already held
    keep their release times; later ones get delay(arrival − t0_ns); a capacity model's queued
    departures keep theirs, a trace restarts on the new clock and outages are still to come."""
    live = [h for h in handles if h.process is not None]
    for h in live:
        assert h.process is not None
        request_t0(h.files["t0"], h.process.pid, t0_ns)
    deadline = time.monotonic() + timeout_s
    for h in live:
        try:
            await_t0_ack(h.files["t0"], t0_ns, deadline, h.alive, h.plan.label)
        except LinkError:
            if not h.alive():
                raise LinkError(h.describe_death()) from None
            raise LinkError(f"delay line {h.plan.label} did not take the new t0 within {timeout_s:g} s") from None
