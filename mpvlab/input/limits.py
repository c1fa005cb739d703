"""The limits a scenario must respect, each with its physical reason, and the checks of the files it
names (delay traces): one set of rules that `mpvlab validate`, `mpvlab run` and every run of a sweep
go through (via mpvlab/input/scenario.py's parse_scenario and load_scenario, and the sweep's expansion),
so nothing the run would refuse later is accepted before the kernel is touched.

`scenario_problems(sc)` and `file_problems(sc, scenario_file)` return a list of
`field: what is wrong; what is allowed` lines (empty: fine). Trace files are read with the safe
reader (mpvlab/input/files.py) and their contents are never quoted in a message: a trace is not a file
the user named on the command line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

from mpvlab.core import units
from mpvlab.core.errors import InputError
from mpvlab.links import capacity
from mpvlab.links.schedule import Schedule
from mpvlab.links.spec import ConstantDelay, LinkDirection, PiecewiseDelay, SquareDelay, TraceDelay
from mpvlab.input import files as inputs

S = 10**9
MS = 10**6

# The C delay line refuses a delay above DL_MAX_DELAY_US (links/delayline/src/schedule.h: holding
# packets longer than a minute is a configuration error). Checked here so validate refuses it too.
MAX_DELAY_NS = 60 * S
# Schedule times and repeat periods: the longest run is a 60 min video × a timeout factor of at most
# 20 (player.timeout_factor); a breakpoint a day away is never reached.
MAX_SCHEDULE_TIME_NS = 24 * 3600 * S
# Points in one delay schedule (piecewise or trace): 100,000 is a 1 ms-resolution trace of 100 s or
# a 10 ms one of 16 min (use `repeat` beyond); the run writes every point to the delay line and the
# fidelity check walks them per sample, so a bound keeps both linear in something sane.
MAX_SCHEDULE_POINTS = 100_000
# tbf rates: below 8 kbit/s one 1514-byte frame takes 1.5 s to leave, longer than TCP's initial RTO
# (1 s), so nothing meaningful is emulated; above 100 Gbit/s is beyond any veth/IFB this machine can
# move (and a rate like 99999999999999999999gbit is not even parsed by tc).
MIN_RATE_BPS = 8_000
MAX_RATE_BPS = 100 * 10**9
# Ethernet frame of a 1500-byte IP packet (mpvlab/links/emulator.py FRAME_BYTES): tbf drops every packet
# larger than its burst, and a queue smaller than one frame holds nothing.
MTU_FRAME_BYTES = 1514
# Queue limits and bursts: 1 GiB is more memory than a test VM gives one queue (and tc takes the
# limit as a 32-bit byte count).
MAX_QUEUE_BYTES = 1 << 30
# tc stores the bucket as the time to send `burst` at `rate`, in 32-bit ticks of 64 ns
# (/proc/net/psched: 1000/64): 2^32 × 64 ns = 274.9 s. Beyond that tc silently wraps it (measured:
# burst 300000B at 8kbit became "burst 25122b"), so the bucket time is bounded below that.
MAX_BURST_TIME_NS = 274 * S
# The fidelity probe measures rate and RTT before playback: under 1 s a tbf has not reached its
# steady rate (its bucket empties first); over 60 s it only delays every run (11 days was accepted).
MIN_PROBE_NS = 1 * S
MAX_PROBE_NS = 60 * S
# Socket buffer sysctls (hosts.client_tcp_rmem, server_tcp_wmem): the kernel keeps them as int, and
# its own minimum is one page.
MIN_SOCKBUF = 4096
MAX_SOCKBUF = 1 << 30
# Video bitrates (video.bitrate, video.bitrates): x264 cannot encode a usable picture below 10 kbit/s,
# and above 1 Gbit/s the encode alone would outlast any run (99999999999999999999gbit was accepted).
MIN_VIDEO_BPS = 10_000
MAX_VIDEO_BPS = 10**9
# topology.client_stagger: the last client's start, at most 1 h after t0 (the longest video is 60 min; a
# player starting later would join a run whose other players have long finished).
MAX_CLIENT_START_NS = 3600 * S
# Cross traffic start/duration: within the longest run (see MAX_SCHEDULE_TIME_NS).
MAX_CROSS_TIME_NS = MAX_SCHEDULE_TIME_NS


def _dur(ns: int) -> str:
    return units.format_duration(ns)


def _direction_problems(where: str, d: LinkDirection) -> Iterator[str]:
    if d.rate is not None and not MIN_RATE_BPS <= d.rate <= MAX_RATE_BPS:
        yield (f"{where}.rate: {units.format_rate(d.rate) if d.rate < 10**15 else 'this rate'} is outside "
               f"8kbit … 100gbit (below, one frame takes longer than TCP's 1 s RTO; above, no link here carries it)")
    q = d.buffer
    qbytes = q.to_bytes(MTU_FRAME_BYTES)
    if not MTU_FRAME_BYTES <= qbytes <= MAX_QUEUE_BYTES:
        yield (f"{where}.buffer: {q if qbytes < 10**15 else 'this size'} is outside one frame (1514B, or 1pkt) "
               "… 1GiB: a queue must hold at least one full-size packet and fit in memory")
    if d.burst is not None:
        if not MTU_FRAME_BYTES <= d.burst <= MAX_QUEUE_BYTES:
            yield (f"{where}.burst: {units.format_size(d.burst) if d.burst < 10**15 else 'this size'} is outside "
                   "1514B … 1GiB: tbf drops every packet larger than its burst, so it must hold one full frame")
        elif d.rate is not None and d.rate > 0 and d.burst * 8 * S // d.rate > MAX_BURST_TIME_NS:
            yield (f"{where}.burst: {units.format_size(d.burst)} takes {d.burst * 8 / d.rate:.0f} s to send at "
                   f"{units.format_rate(d.rate)}; tc keeps that time in 32-bit ticks and wraps above 274 s, so "
                   "burst/rate must stay under 274 s")
    yield from _delay_problems(f"{where}.delay", d.delay)


def _check_points(where: str, points: list[tuple[int, int]], repeat: int, unit_label: str) -> Iterator[str]:
    """Rules of every schedule (links/schedule.Schedule and the C delay line's parser), per point."""
    if len(points) > MAX_SCHEDULE_POINTS:
        yield (f"{where}: {len(points):,} points is more than the limit of {MAX_SCHEDULE_POINTS:,} per schedule "
               "(use repeat for a periodic pattern)")
        return
    if not points:
        yield f"{where}: needs at least one point, the first at time 0"
        return
    if points[0][0] != 0:
        yield f"{where}: the first point must be at time 0 (run time zero), not {_dur(points[0][0])}"
    for i, (t, dl) in enumerate(points):
        at = f"{where}{unit_label.format(i=i)}"
        if i and t <= points[i - 1][0]:
            yield (f"{at}: time {_dur(t)} does not come after the previous point's {_dur(points[i - 1][0])}; "
                   "times must strictly increase")
            return
        if not 0 <= dl <= MAX_DELAY_NS:
            yield f"{at}: delay {_dur(dl)} is outside 0 … 60s (the delay line's range)"
            return
        if t > MAX_SCHEDULE_TIME_NS:
            yield f"{at}: time {_dur(t)} is beyond 24h (no run lasts that long)"
            return
        if repeat and t >= repeat:
            yield f"{at}: time {_dur(t)} is not inside the repeat period {_dur(repeat)}"
            return


def _delay_problems(where: str, delay: Any) -> Iterator[str]:
    if isinstance(delay, ConstantDelay):
        if not 0 <= delay.value <= MAX_DELAY_NS:
            yield f"{where}: {_dur(delay.value)} is outside 0 … 60s (the delay line's range)"
    elif isinstance(delay, SquareDelay):
        hi = delay.base + delay.amplitude
        if not 0 <= delay.base <= MAX_DELAY_NS or not 0 <= hi <= MAX_DELAY_NS:
            yield (f"{where}: base {_dur(delay.base)} and base + amplitude {_dur(hi)} must both lie in 0 … 60s "
                   "(the delay line's range)")
        if delay.period > MAX_SCHEDULE_TIME_NS or abs(delay.phase) > MAX_SCHEDULE_TIME_NS:
            yield f"{where}: period and phase must lie within 24h (no run lasts longer)"
        elif round(delay.duty * delay.period) in (0, delay.period):
            yield f"{where}.duty: duty × period rounds to no time on or off; use a longer period or another duty"
    elif isinstance(delay, PiecewiseDelay):
        if not 0 <= delay.repeat <= MAX_SCHEDULE_TIME_NS:
            yield f"{where}.repeat: {_dur(delay.repeat)} is outside 0 (no repeat) … 24h"
        yield from _check_points(f"{where}.points", [(t, d) for t, d in delay.points], delay.repeat, "[{i}]")
    elif isinstance(delay, TraceDelay):
        if not 0 <= delay.repeat <= MAX_SCHEDULE_TIME_NS:
            yield f"{where}.repeat: {_dur(delay.repeat)} is outside 0 (no repeat) … 24h"


def scenario_problems(sc: Any) -> list[str]:
    """Every limit of a schema-valid scenario (mpvlab.input.scenario.Scenario); [] when all hold."""
    out: list[str] = []
    for pname, p in sc.paths.items():
        for dname in ("down", "up"):
            out += _direction_problems(f"paths.{pname}.{dname}", getattr(p, dname))
    f = sc.fidelity
    if f.probe and not MIN_PROBE_NS <= f.probe_duration <= MAX_PROBE_NS:
        out.append(f"fidelity.probe_duration: {_dur(f.probe_duration)} is outside 1s … 60s (under 1 s the tbf has "
                   "not reached its rate; longer only delays the run)")
    for field in ("client_tcp_rmem", "server_tcp_wmem"):
        v = getattr(sc.hosts, field)
        if not (MIN_SOCKBUF <= v[0] <= v[1] <= v[2] <= MAX_SOCKBUF):
            out.append(f"hosts.{field}: give min ≤ default ≤ max, each within 4096B … 1GiB (the kernel's page "
                       "minimum and its int-sized maximum)")
    for i, rate in ([(None, sc.video.bitrate)] + list(enumerate(sc.video.bitrates or []))):
        if not MIN_VIDEO_BPS <= rate <= MAX_VIDEO_BPS:
            where = "video.bitrate" if i is None else f"video.bitrates[{i}]"
            out.append(f"{where}: {units.format_rate(rate) if rate < 10**15 else 'this rate'} is outside "
                       "10kbit … 1gbit (below, the encoder makes no usable picture; above, the encode outlasts any run)")
    stagger, last = sc.topology.client_stagger, sc.n_clients - 1
    if not 0 <= stagger * last <= MAX_CLIENT_START_NS:
        out.append(f"topology.client_stagger: {_dur(stagger) if abs(stagger) < 10**15 else 'this duration'} puts "
                   f"client{last}'s start at run time {last} × that; allowed: 0s … "
                   f"{_dur(MAX_CLIENT_START_NS // max(last, 1))} with {sc.n_clients} clients (the last client "
                   "starts within 1 h of run time zero)")
    bulk = sc.cross_traffic.bulk if sc.cross_traffic is not None else None
    if bulk is not None:
        if not 0 <= bulk.start <= MAX_CROSS_TIME_NS:
            out.append("cross_traffic.bulk.start: must lie within 0s … 24h of run time zero")
        elif bulk.start >= sc.media_s * S:
            # the run ends with its media: a flow starting later never runs, and the run would report
            # its cross traffic as configured (issue 45)
            out.append(f"cross_traffic.bulk.start: {_dur(bulk.start)} is at or after the end of the run's media "
                       f"({_dur(round(sc.media_s * S))}); the flow would never run")
        if bulk.duration is not None and bulk.duration > MAX_CROSS_TIME_NS:
            out.append("cross_traffic.bulk.duration: at most 24h (no run lasts longer)")
    return out


# --- files a scenario names ------------------------------------------------------------------------


def parse_trace_text(text: str, label: str) -> tuple[list[tuple[int, int]], list[str]]:
    """`time_ms delay_ms` lines ('#' comments, ',' allowed as separator) → (points in ns, problems).
    Problems name `label:line` and what is allowed, never the line's text."""
    points: list[tuple[int, int]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if len(parts) != 2:
            return [], [f"{label} line {lineno}: expected two numbers 'time_ms delay_ms', found "
                        f"{len(parts)} field{'s' if len(parts) != 1 else ''}"]
        try:
            t_ms, d_ms = float(parts[0]), float(parts[1])
        except ValueError:
            return [], [f"{label} line {lineno}: expected two numbers 'time_ms delay_ms' (e.g. '1500 20.5'), "
                        "found something else"]
        if not (math.isfinite(t_ms) and math.isfinite(d_ms)) or t_ms < 0 or d_ms < 0:
            return [], [f"{label} line {lineno}: time and delay must be finite and not negative"]
        if len(points) >= MAX_SCHEDULE_POINTS:
            return [], [f"{label}: more than {MAX_SCHEDULE_POINTS:,} points, the limit per schedule (use repeat)"]
        points.append((round(t_ms * 1e6), round(d_ms * 1e6)))
    if not points:
        return [], [f"{label}: no points; give 'time_ms delay_ms' lines starting at time 0"]
    return points, []


def trace_target(scenario_file: Path, rel: str) -> tuple[Path, str | None]:
    """The trace's real path, and a problem if it leaves the scenario's folder (symlinks resolved)."""
    base = scenario_file.resolve().parent
    target = (base / rel).resolve()
    if not target.is_relative_to(base):
        return target, (f"{rel!r} leaves the scenario's folder {base}; a trace must be a file inside it "
                        "(symbolic links included)")
    return target, None


def file_problems(sc: Any, scenario_file: Path, cache: dict[Path, list[str]] | None = None) -> list[str]:
    """Every trace file of `sc`, as it would be found next to `scenario_file`: inside its folder, a
    regular file within the trace size limit, UTF-8, and a schedule the delay line accepts.
    `cache` (a sweep checks the same trace for many runs) maps resolved trace path → its problems."""
    out: list[str] = []
    if sc.transport.cc == "bpf":
        from mpvlab.cc.user_bpf import BpfCCError, resolve_object
        try:   # the object lies inside the scenario's folder, a regular file of sane size
            obj = resolve_object(scenario_file.parent, sc.transport.cc_params["bpf"])
        except BpfCCError as e:
            out.append(f"transport.{e}")
        else:
            from mpvlab.cc.user_bpf import check_object
            try:   # what the loader would refuse at run time, found now (issue 33: validate ≡ run)
                check_object(obj, sc.transport.cc_params.get("params") or {})
            except BpfCCError as e:
                reason = str(e)
                named = reason.startswith(obj.name)      # the loader's reason names the object itself
                out.append(f"transport.cc.bpf: {reason if named else sc.transport.cc_params['bpf'] + ': ' + reason}")
    for pname, p in sc.paths.items():
        for dname in ("down", "up"):
            cap = getattr(getattr(p, dname), "capacity", None)
            if cap is not None:
                try:   # read and parse the trace now (strict readers, size limits): nothing runs yet
                    capacity.validate_capacity(cap, scenario_file.parent)
                except (InputError, ValueError) as e:
                    out.append(f"paths.{pname}.{dname}.capacity: {e}")
            d = getattr(p, dname).delay
            if not isinstance(d, TraceDelay):
                continue
            where = f"paths.{pname}.{dname}.delay.file"
            target, escape = trace_target(scenario_file, d.file)
            if escape:
                out.append(f"{where}: {escape}")
                continue
            key = target.with_name(target.name + f"#repeat={d.repeat}")
            if cache is None or key not in cache:
                problems = _trace_file_problems(target, d.file, d.repeat)
                if cache is not None:
                    cache[key] = problems
            else:
                problems = cache[key]
            out += [f"{where}: {x}" for x in problems]
    return out


def _trace_file_problems(target: Path, rel: str, repeat: int) -> list[str]:
    try:
        text = inputs.read_text(target, "trace")
    except inputs.InputFileError as e:
        return [str(e)]
    points, problems = parse_trace_text(text, f"trace {rel}")
    if problems:
        return problems
    problems = list(_check_points(f"trace {rel}", points, repeat, " point {i}"))
    if not problems:
        Schedule.piecewise(points, repeat)   # the run's own construction; the checks above imply it passes
    return problems


# --- sweeps ------------------------------------------------------------------------------------------

# Runs in one sweep: the shipped studies have ≤ 105; 10,000 runs of even 40 s are 4.6 days of one
# machine, and the plan (each run a validated scenario in memory) stays in the hundreds of MB. A grid
# of 900,000 runs used to expand for minutes before anything was said; the count is computed from the
# list lengths before anything is expanded.
MAX_SWEEP_RUNS = 10_000
SCENARIO_SUFFIXES = (".yaml", ".yml")


def sweep_size_problem(n_scenarios: int, grid: dict[str, list[Any]], trials: int) -> str | None:
    n = n_scenarios * trials
    for values in grid.values():
        n *= len(values)
        if n > MAX_SWEEP_RUNS * 1000:      # stop multiplying long before the number gets huge
            break
    if n <= MAX_SWEEP_RUNS:
        return None
    dims = " × ".join([f"{n_scenarios} scenario(s)", *(f"{len(v)} {k}" for k, v in grid.items()),
                       f"{trials} trial(s)"])
    return (f"{dims} = {'more than ' + format(MAX_SWEEP_RUNS * 1000, ',') if n > MAX_SWEEP_RUNS * 1000 else format(n, ',')} "
            f"runs, above the limit of {MAX_SWEEP_RUNS:,} runs per sweep; split it into several sweeps")


def sweep_scenario_problem(spec_file: Path, rel: str) -> tuple[Path, str | None]:
    """Where a sweep spec's scenario entry points, and a problem if it may not be read: a scenario is a
    .yaml/.yml file (checked before it is opened), so a spec naming /etc/shadow never reads it; what
    is read is then refused as any scenario is (regular file, size, UTF-8, YAML), and messages about a
    scenario named by a spec carry no excerpt of its values (mpvlab/input/messages.py quote=False)."""
    target = (spec_file.resolve().parent / rel).resolve()
    if target.suffix not in SCENARIO_SUFFIXES:
        return target, f"{rel!r}: not read; a scenario file's name ends in .yaml or .yml"
    return target, None


def key_file_problems(sc: Any, key_dir: Path | None) -> list[str]:
    """For a physical topology, the SSH key files its hosts name, checked as the run will check them
    (inside the key directory, owned by root, a private key not readable by others) — so a bad key
    file is refused by `mpvlab run` before the result directory or anything on a host exists."""
    from mpvlab.topologies import registry as topologies
    kind = topologies.REGISTRY.get(getattr(sc.topology, "kind", None) or "")
    if kind is None or not kind.real_hosts:
        return []
    from mpvlab.core.validators import HostConfigError
    from mpvlab.topologies.physical import key_dir_default, make_plan

    try:
        make_plan(sc.topology, sc.paths, key_dir or key_dir_default())
    except HostConfigError as e:
        return [str(e)]
    return []
