"""Link capacity, loss models and outages of one direction of one path, as applied by the C delay line
(links/delayline, docs/scenarios.md: capacity, outages, loss models).

- RateSpec: `constant`, `square`, `piecewise` (a fluid serialiser at a piecewise-constant rate) or
  `trace` with `format: mahimahi` (Mahimahi's packet-delivery opportunities, exactly its semantics) or
  `format: time-rate` (`time_ms rate_mbit` lines, served like `piecewise`).
- QueueSpec: the drop-tail queue in front of the link, in packets and/or bytes (Mahimahi's
  `droptail` with `packets=`/`bytes=`); no limit = Mahimahi's default infinite queue, bounded here
  only by the kernel queue's maxlen.
- LossSpec: `independent` or `gilbert-elliott` (p_good_to_bad, p_bad_to_good, loss_in_bad,
  loss_in_good = the literature's p, r, 1-h, 1-k), seeded from the run's seed.
- OutageSpec: [start, end) intervals of run time in which the direction carries nothing.

`delayline_args()` turns a spec into the delay line's command-line arguments (writing the rate
schedule file it needs); the trace readers (mpvlab/links/traces.py) validate untrusted trace files
strictly; the reference model `mahimahi_departures()` recomputes Mahimahi's departures independently (tests, fidelity checks).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Sequence

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from mpvlab.core.paths import checkout_root
from mpvlab.core import units
from mpvlab.core.errors import InputError
from mpvlab.core.quantities import RATE_PATTERN, Duration, Period, Probability, QueueLimitT, Rate, Size, Strict, written_as
from mpvlab.links.schedule import Schedule
# The trace files' readers live in mpvlab/links/traces.py (issue 46); they are imported here under
# their old names, so `from mpvlab.links.capacity import read_mahimahi_trace` and `capacity.TraceError`
# keep working for the tests, benches and the input limits.
from mpvlab.links.traces import (MAHIMAHI_OPPORTUNITY_BYTES, MAHIMAHI_OVERHEAD, MTU_IP_BYTES, MahimahiTrace,
                                 read_mahimahi_trace, read_time_rate_trace)
from mpvlab.links.traces import (RATE_MAX_BPS as RATE_MAX_BPS, TRACE_MAX_BYTES as TRACE_MAX_BYTES,  # re-exported
                                 TRACE_MAX_LINES as TRACE_MAX_LINES, TRACE_MAX_MS as TRACE_MAX_MS,
                                 TraceError as TraceError)

REPO = checkout_root()
SHIPPED_TRACES = REPO / "links" / "traces"

MAX_OUTAGE_TIME_NS = 24 * 3600 * 10**9     # as a delay schedule's times (mpvlab/input/limits.py)
MAX_OUTAGES = 4096                      # capacity.h DL_MAX_OUTAGES


# ----------------------------------------------------------------------------------- spec models

def _rate_or_zero(v: Any) -> Any:
    """Rates inside schedules may be 0 (the link holds packets); '0' and 0 need no unit."""
    if not isinstance(v, bool) and v in (0, "0", "0mbit", "0kbit", "0bit", "0gbit"):   # false == 0 in Python
        return 0
    return units.parse_rate(v)


# The JSON Schema (docs/schemas/) says what a file may write: a rate with its unit, or 0.
RateOrZero = Annotated[int, BeforeValidator(_rate_or_zero), WithJsonSchema(
    {"anyOf": [{"type": "string", "pattern": RATE_PATTERN}, {"enum": [0, "0", "0mbit", "0kbit", "0bit", "0gbit"]}],
     "x-unit": "bit/s", "x-written": "a rate (3mbit) or 0"})]


class ConstantRate(Strict):
    kind: Literal["constant"] = Field("constant", description="A fixed link capacity.")
    value: Rate = Field(description="Capacity of the delay line's link, counted in IP bytes.")


class SquareRate(Strict):
    """`low` during the first duty·period of each cycle (the dip), `high` otherwise; cycles start at
    t = phase. "Wi-Fi drops to 2 Mbit/s for 5 s every 20 s": high 20mbit, low 2mbit, period 20s,
    duty 0.25."""

    kind: Literal["square"] = Field(description="A capacity that alternates between high and low.")
    high: Rate = Field(description="Capacity outside the dip.")
    low: RateOrZero = Field(description="Capacity during the first duty·period of each cycle (0 = carries nothing).")
    period: Period = Field(description="Length of one cycle (> 0).")
    duty: float = Field(0.5, gt=0.0, lt=1.0, description="Fraction of each cycle spent at `low`.")
    phase: Duration = Field(0, description="Run time at which the first cycle starts.")


class PiecewiseRate(Strict):
    """points: [[time, rate], ...] from time 0, strictly increasing; `repeat` makes it periodic
    (0 = the last rate holds)."""

    kind: Literal["piecewise"] = Field(description="A capacity that steps at given times.")
    points: list[tuple[Duration, RateOrZero]] = Field(min_length=1, max_length=100_000, description="[time, rate] breakpoints from time 0, strictly increasing; each rate holds until the next point.")
    repeat: Duration = Field(0, description="Period after which the points start again; 0 = play once, the last rate holds.")


class TraceRate(Strict):
    """A capacity trace file. mahimahi: packet-delivery opportunities (repeats with its last
    timestamp). time-rate: `time_ms rate_mbit` lines, served like piecewise (`repeat` as there).
    The file is relative to the scenario's folder (and must stay inside it) or to links/traces/."""

    kind: Literal["trace"] = Field(description="A capacity read from a trace file.")
    file: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,200}$", description="Trace path, relative to (and inside) the scenario's folder, or to links/traces/.")
    format: Literal["mahimahi", "time-rate"] = Field("mahimahi", description="mahimahi: one ms timestamp per packet-delivery opportunity; time-rate: `time_ms rate_mbit` lines.")
    repeat: Duration = Field(0, description="time-rate only: period after which the trace starts again; 0 = the last rate holds (a mahimahi trace repeats with its last timestamp).")

    @model_validator(mode="after")
    def _repeat_only_time_rate(self) -> TraceRate:
        if ".." in Path(self.file).parts:
            raise ValueError("trace file must not contain '..': give a file inside the scenario's folder or links/traces/")
        if self.format == "mahimahi" and self.repeat:
            raise ValueError("a mahimahi trace repeats with its own last timestamp; 'repeat' is for time-rate")
        return self


RateSpec = Annotated[ConstantRate | SquareRate | PiecewiseRate | TraceRate, Field(discriminator="kind")]


@written_as(QueueLimitT)
def _queue_shorthand(v: Any) -> Any:
    """`queue: 100pkt` / `queue: 150KB` are shorthands for {packets: 100} / {bytes: 150KB}."""
    if isinstance(v, str):
        q = units.parse_queue_limit(v)
        return {"packets": q.packets} if q.packets is not None else {"bytes": units.format_size(q.bytes or 0)}
    return v


class QueueSpec(Strict):
    """Drop-tail queue in front of the link (Mahimahi droptail): a packet is refused iff the queue
    with it would exceed a limit. The packet being carried by the link is not in the queue. Bytes
    count each packet as IP length + packet_overhead (4 for mahimahi traces, like Mahimahi)."""

    packets: int | None = Field(None, ge=1, le=1 << 24, description="Queue limit in packets; null = no packet limit.")
    bytes: Size | None = Field(None, description="Queue limit in bytes (IP length + packet_overhead each); null = no byte limit.")

    @model_validator(mode="after")
    def _one_limit(self) -> QueueSpec:
        if self.packets is None and self.bytes is None:
            raise ValueError("a queue needs a limit in packets or bytes (leave the queue out for no limit)")
        if self.bytes is not None and not 1 <= self.bytes <= 1 << 34:
            raise ValueError("queue bytes must lie in [1 B, 16 GiB]")
        return self


class CapacitySpec(Strict):
    rate: RateSpec = Field(description="The link's capacity over time.")
    queue: Annotated[QueueSpec | None, BeforeValidator(_queue_shorthand)] = Field(None, description="Drop-tail queue in front of the link; null = unlimited (bounded only by the kernel queue), like Mahimahi.")
    packet_overhead: int | None = Field(None, ge=0, le=1024, description="Bytes added to each IP packet's length for capacity and queue accounting; null = 4 for mahimahi traces, else 0.")

    def overhead(self) -> int:
        """Bytes added to each IP packet's length: 4 for mahimahi traces (Mahimahi's TUN header),
        0 for rates (a rate counts IP bytes)."""
        if self.packet_overhead is not None:
            return self.packet_overhead
        is_mm = isinstance(self.rate, TraceRate) and self.rate.format == "mahimahi"
        return MAHIMAHI_OVERHEAD if is_mm else 0


class IndependentLoss(Strict):
    kind: Literal["independent"] = Field(description="Each packet lost independently.")
    probability: Probability = Field(description="Per-packet loss probability.")


class GilbertElliottLoss(Strict):
    """Two states; per packet: lost with the current state's loss probability, then the state moves.
    Literature: p = p_good_to_bad, r = p_bad_to_good, 1-h = loss_in_bad, 1-k = loss_in_good.
    Defaults give the simple Gilbert model (all lost in Bad, none in Good). Starts in Good."""

    kind: Literal["gilbert-elliott"] = Field(description="Bursty two-state (Good/Bad) loss, starting in Good.")
    p_good_to_bad: float = Field(gt=0.0, le=1.0, description="Per-packet probability of moving Good → Bad (the literature's p).")
    p_bad_to_good: float = Field(gt=0.0, le=1.0, description="Per-packet probability of moving Bad → Good (the literature's r).")
    loss_in_bad: float = Field(1.0, ge=0.0, le=1.0, description="Loss probability in Bad (1-h); default: every packet lost.")
    loss_in_good: float = Field(0.0, ge=0.0, le=1.0, description="Loss probability in Good (1-k); default: none lost.")

    def model_loss_rate(self) -> float:
        return ge_model(self)[0]

    def model_burst_mean(self) -> float:
        return ge_model(self)[1]


LossSpec = Annotated[IndependentLoss | GilbertElliottLoss, Field(discriminator="kind")]


def ge_model(g: GilbertElliottLoss) -> tuple[float, float]:
    """(stationary loss rate, mean loss-burst length) — the same formulas as the C side
    (loss.c dl_loss_model): mean burst = P(lost) / P(previous delivered and this lost)."""
    p, r, lb, lg = g.p_good_to_bad, g.p_bad_to_good, g.loss_in_bad, g.loss_in_good
    pb = p / (p + r)
    pg = 1.0 - pb
    rate = pg * lg + pb * lb
    start = pg * (1 - lg) * ((1 - p) * lg + p * lb) + pb * (1 - lb) * (r * lg + (1 - r) * lb)
    return rate, (rate / start if start > 0 else 0.0)


def _check_outages(v: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if len(v) > MAX_OUTAGES:
        raise ValueError(f"at most {MAX_OUTAGES} outages")
    prev_end = -1
    for s, e in v:
        if not s < e:
            raise ValueError(f"outage [{units.format_duration(s)}, {units.format_duration(e)}]: start must be before end")
        if s < prev_end:
            raise ValueError("outages must be sorted and must not overlap")
        if s % 1000 or e % 1000:
            raise ValueError("outage times must be whole microseconds")
        if e > MAX_OUTAGE_TIME_NS:
            # the delay line would hold the path down for that long (1e12 s was accepted; issue 33)
            raise ValueError(f"outage [{units.format_duration(s)}, {units.format_duration(e)}]: outages must end "
                             "within 24h of run time zero (no run lasts longer)")
        prev_end = e
    return v


OutageSpec = Annotated[list[tuple[Duration, Duration]], Field(max_length=MAX_OUTAGES)]


class Impairments(Strict):
    """What this module adds to one direction of one path (the lead composes it into the link spec)."""

    capacity: CapacitySpec | None = None
    loss_model: LossSpec | None = None
    outages: OutageSpec = []

    @field_validator("outages")
    @classmethod
    def _outages(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return _check_outages(v)


# ----------------------------------------------------------------------------------- lowering

def rate_schedule(spec: ConstantRate | SquareRate | PiecewiseRate, *, time_rate: list[tuple[int, int]] | None = None,
                  repeat_ns: int = 0) -> Schedule:
    """The piecewise-constant rate (bit/s) the delay line serves at (links.schedule.Schedule holds
    any non-negative integer values)."""
    if time_rate is not None:
        return Schedule.piecewise(time_rate, repeat_ns)
    if isinstance(spec, ConstantRate):
        return Schedule.constant(spec.value)
    if isinstance(spec, SquareRate):
        return Schedule.square(spec.high, spec.low - spec.high, spec.period, spec.duty, spec.phase)
    return Schedule.piecewise([(t, r) for t, r in spec.points], spec.repeat)


def rate_schedule_text(s: Schedule) -> str:
    """The delay line's --rate-schedule format: `period_us N` and `t_us rate_bps` lines."""
    if any(t % 1000 for t in s.times_ns) or s.period_ns % 1000:
        raise InputError("rate schedule times must be whole microseconds")
    if s.period_ns == 0 and s.delays_ns[-1] == 0:
        raise InputError("the rate would stay 0 forever after the last point; use an outage to cut the link")
    if s.period_ns and max(s.delays_ns) == 0:
        raise InputError("every rate of the repeating schedule is 0; use an outage to cut the link")
    lines = ["# mpvlab rate schedule: t_us rate_bps, piecewise constant", f"period_us {s.period_ns // 1000}"]
    lines += [f"{t // 1000} {r}" for t, r in zip(s.times_ns, s.delays_ns)]
    return "\n".join(lines) + "\n"


def resolve_trace(spec: TraceRate, base_dir: Path) -> Path:
    """The trace file: relative to the scenario's folder and inside it, or else a shipped trace
    under links/traces/ (e.g. `mahimahi/Verizon-LTE-short.down`)."""
    found: list[str] = []     # why a name that is there was not taken: said, instead of "not found"
    for root in (Path(base_dir), SHIPPED_TRACES):
        p = (root / spec.file).resolve()
        if not p.is_relative_to(root.resolve()):
            if (root / spec.file).exists() or (root / spec.file).is_symlink():
                found.append(f"{root / spec.file} leads out of {root} (symbolic link); a trace must be a file inside it")
            continue
        if p.is_file():
            return p
        if p.exists():
            found.append(f"{root / spec.file} is not a regular file")
    if found:
        raise InputError(f"trace file {spec.file!r}: " + "; ".join(found))
    where = SHIPPED_TRACES if Path(base_dir).resolve() == SHIPPED_TRACES.resolve() else f"{base_dir} or {SHIPPED_TRACES}"
    raise InputError(f"trace file {spec.file!r} not found in {where}")


def validate_capacity(spec: CapacitySpec, base_dir: Path) -> MahimahiTrace | list[tuple[int, int]] | None:
    """Read and check a trace before anything runs (for `mpvlab validate`)."""
    if isinstance(spec.rate, TraceRate):
        path = resolve_trace(spec.rate, base_dir)
        if spec.rate.format == "mahimahi":
            return read_mahimahi_trace(path)
        pts = read_time_rate_trace(path)
        rate_schedule_text(rate_schedule(ConstantRate(value="1mbit"), time_rate=pts, repeat_ns=spec.rate.repeat))
        return pts
    rate_schedule_text(rate_schedule(spec.rate))
    return None


def delayline_args(imp: Impairments, *, workdir: Path, label: str, seed: int, base_dir: Path,
                   release_log: Path | None = None) -> list[str]:
    """Command-line arguments for links/delayline/build/mpvlab-delayline (added to --queue,
    --schedule, --t0-ns, ...). Writes `capacity-<label>.rate` into workdir for rate kinds. The
    caller must not also pass --loss when imp.loss_model is set."""
    args: list[str] = []
    cap = imp.capacity
    if cap is not None:
        if isinstance(cap.rate, TraceRate) and cap.rate.format == "mahimahi":
            path = resolve_trace(cap.rate, base_dir)
            read_mahimahi_trace(path)
            args += ["--capacity-trace", str(path)]
        else:
            if isinstance(cap.rate, TraceRate):
                pts = read_time_rate_trace(resolve_trace(cap.rate, base_dir))
                sched = rate_schedule(ConstantRate(value="1mbit"), time_rate=pts, repeat_ns=cap.rate.repeat)
            else:
                sched = rate_schedule(cap.rate)
            f = Path(workdir) / f"capacity-{label}.rate"
            f.write_text(rate_schedule_text(sched))
            args += ["--rate-schedule", str(f)]
        args += ["--packet-overhead", str(cap.overhead())]
        if cap.queue is not None:
            if cap.queue.packets is not None:
                args += ["--queue-packets", str(cap.queue.packets)]
            if cap.queue.bytes is not None:
                args += ["--queue-bytes", str(cap.queue.bytes)]
    lm = imp.loss_model
    if isinstance(lm, IndependentLoss) and lm.probability > 0:
        args += ["--loss", repr(lm.probability), "--seed", str(seed)]
    elif isinstance(lm, GilbertElliottLoss):
        args += ["--ge-p", repr(lm.p_good_to_bad), "--ge-r", repr(lm.p_bad_to_good),
                 "--ge-loss-bad", repr(lm.loss_in_bad), "--ge-loss-good", repr(lm.loss_in_good),
                 "--seed", str(seed)]
    for s, e in imp.outages:
        args += ["--outage", f"{s // 1000}:{e // 1000}"]
    if release_log is not None:
        args += ["--release-log", str(release_log)]
    return args


def kernel_queue_maxlen(imp: Impairments, max_delay_ns: int, base_dir: Path, floor: int = 4096) -> int:
    """NFQUEUE maxlen for a line with this capacity: the capacity queue's packet limit (or bytes /
    64, the smallest TCP/IP packet with options) plus the packets in propagation at the peak rate
    (MTU-sized) over the largest delay, with 2x headroom. An unlimited queue gets 65536."""
    cap = imp.capacity
    if cap is None:
        return floor
    if cap.queue is None:
        qpk = 65536
    else:
        lims = [x for x in (cap.queue.packets, (cap.queue.bytes or 0) // 64 or None) if x]
        qpk = min(lims)
    if isinstance(cap.rate, TraceRate) and cap.rate.format == "mahimahi":
        peak = read_mahimahi_trace(resolve_trace(cap.rate, base_dir)).peak_bps(10)
    elif isinstance(cap.rate, TraceRate):
        peak = max(r for _, r in read_time_rate_trace(resolve_trace(cap.rate, base_dir)))
    else:
        peak = rate_schedule(cap.rate).max_delay_ns  # the Schedule's values are rates here
    in_flight = peak / 8 / MTU_IP_BYTES * max_delay_ns / 1e9
    return min(1 << 24, max(floor, int(2 * (qpk + in_flight)) + 64))


# ----------------------------------------------------------------------------------- reference model

def mahimahi_departures(trace: MahimahiTrace, arrivals_ns: Sequence[int], ip_lens: Sequence[int], *,
                        limit_packets: int = 0, limit_bytes: int = 0,
                        opportunity_bytes: int = MAHIMAHI_OPPORTUNITY_BYTES,
                        overhead: int = MAHIMAHI_OVERHEAD) -> list[int | None]:
    """Mahimahi's LinkQueue::rationalize + DropTailPacketQueue, event by event (no outages): for each
    packet (arrival ns relative to t0, sorted) its departure time, or None if the drop-tail queue
    refused it. Written as Mahimahi's loop, independently of the C side's closed form, so a test can
    compare the two packet for packet."""
    out: list[int | None] = [None] * len(arrivals_ns)
    queue: deque[int] = deque()
    qbytes = 0
    transit: int | None = None
    transit_left = 0
    i, n = 0, len(arrivals_ns)
    if n == 0:
        return out
    g = trace.first_after(arrivals_ns[0])
    while i < n or queue or transit is not None:
        t_opp = trace.opportunity_ns(g)
        if i < n and (arrivals_ns[i] < t_opp):
            cost = ip_lens[i] + overhead
            ok = (not limit_packets or len(queue) + 1 <= limit_packets) and \
                 (not limit_bytes or qbytes + cost <= limit_bytes)
            if ok:
                queue.append(i)
                qbytes += cost
            i += 1
            continue
        if transit is None and not queue:
            # nothing to carry: the opportunities before the next arrival are lost
            g = trace.first_after(arrivals_ns[i])
            continue
        left = opportunity_bytes
        while left > 0:
            if transit is None:
                if not queue:
                    break
                transit = queue.popleft()
                transit_left = ip_lens[transit] + overhead
                qbytes -= transit_left
            amount = min(left, transit_left)
            transit_left -= amount
            left -= amount
            if transit_left == 0:
                out[transit] = t_opp
                transit = None
        g += 1
    return out


def windows(start_ns: int, end_ns: int, window_ns: int) -> Iterable[tuple[int, int]]:
    t = start_ns
    while t + window_ns <= end_ns:
        yield t, t + window_ns
        t += window_ns


def capacity_series(spec: CapacitySpec, outages: Sequence[tuple[int, int]], base_dir: Path, bin_ns: int,
                    end_ns: int) -> list[tuple[float, float]]:
    """The configured capacity per bin [t, t + bin) of run time, as (bin centre s, bit/s of IP
    packets): a trace's opportunities × 1500 B (Mahimahi's MTU-sized packets), a rate schedule's mean
    over the bin; zero inside outages. For figures beside the achieved throughput."""
    trace = validate_capacity(spec, base_dir)
    sched: Schedule | None = None
    if isinstance(spec.rate, TraceRate) and not isinstance(trace, MahimahiTrace):
        assert trace is not None
        sched = Schedule.piecewise(trace, spec.rate.repeat)             # a time-rate trace
    elif not isinstance(spec.rate, TraceRate):
        sched = rate_schedule(spec.rate)
    step_ns = max(bin_ns // 20, 1_000_000)        # a rate schedule is sampled at 20 points per bin
    out: list[tuple[float, float]] = []
    for start, stop in windows(0, end_ns, bin_ns):
        if isinstance(trace, MahimahiTrace):
            bits = trace.count_between(start, stop) * MTU_IP_BYTES * 8
            bps = bits / ((stop - start) / 1e9)
        else:
            assert sched is not None
            pts = range(start, stop, step_ns)
            bps = sum(sched.delay_at(t) for t in pts) / len(pts)
        # the share of the bin inside outages carries nothing
        cut = sum(max(0, min(stop, b) - max(start, a)) for a, b in outages)
        out.append(((start + stop) / 2e9, bps * (1 - cut / (stop - start))))
    return out
