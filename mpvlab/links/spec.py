"""What a scenario says about one direction of one path: its token bucket, delay schedule, loss and
the order of shaping and delay. The link emulator (emulator.py) applies it; the schedule maths is
in schedule.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from mpvlab.core import units
from mpvlab.core.quantities import Duration, Period, Probability, QueueLimitT, Rate, Size, Strict, written_as
from mpvlab.links.capacity import CapacitySpec, Impairments, LossSpec, OutageSpec, _check_outages
from mpvlab.links.ecn import EcnMark, check_on_link


class ConstantDelay(Strict):
    kind: Literal["constant"] = Field("constant", description="A fixed one-way delay.")
    value: Duration = Field(0, description="One-way delay the delay line adds for the whole run (0 = none).")


class SquareDelay(Strict):
    """base + amplitude during the first duty·period of each cycle; cycles start at t = phase."""

    kind: Literal["square"] = Field(description="A delay that alternates between two values.")
    base: Duration = Field(0, description="One-way delay outside the high part of each cycle (and before `phase`).")
    amplitude: Duration = Field(description="Delay added to `base` during the first duty·period of each cycle.")
    period: Period = Field(description="Length of one cycle (> 0).")
    duty: float = Field(0.5, gt=0.0, lt=1.0, description="Fraction of each cycle spent at base + amplitude.")
    phase: Duration = Field(0, description="Run time at which the first cycle starts.")


class PiecewiseDelay(Strict):
    """points: [[time, delay], ...] from time 0, strictly increasing; `repeat` makes it periodic."""

    kind: Literal["piecewise"] = Field(description="A delay that steps at given times.")
    points: list[tuple[Duration, Duration]] = Field(min_length=1, description="[time, delay] breakpoints from time 0, strictly increasing; each delay holds until the next point.")
    repeat: Duration = Field(0, description="Period after which the points start again; 0 = play once, the last delay holds.")


class TraceDelay(Strict):
    """A file of `time_ms delay_ms` lines, relative to the scenario file's folder (and inside it)."""

    kind: Literal["trace"] = Field(description="A delay read from a trace file.")
    file: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,200}$", description="`time_ms delay_ms` lines, path relative to (and inside) the scenario file's folder.")
    repeat: Duration = Field(0, description="Period after which the trace starts again; 0 = play once, the last delay holds.")


DelaySpec = Annotated[ConstantDelay | SquareDelay | PiecewiseDelay | TraceDelay, Field(discriminator="kind")]


# --- a delay given once for a whole path, with the direction(s) it applies to ------------------
# The Wi-Fi/LTE study's "emulator boxes are used to vary each path RTT" does not say whether its
# 60 ms is added in one direction (RTT + 60 ms) or in each (RTT + 120 ms); an inline emulator box
# often delays both. So a path-level delay has no default direction: the scenario must say which
# (docs/studies.md §1).
DelayDirectionT = Literal["down", "up", "both"]
DIRECTION_HELP = ("Which direction(s) of the path the pattern delays: down (server → client), up (client → "
                  "server) or both (the same pattern, in phase, on each: an RTT step of twice the amplitude). "
                  "No default: the published studies do not say, so the scenario must.")


class _Directed(Strict):
    direction: DelayDirectionT = Field(description=DIRECTION_HELP)

    def targets(self) -> tuple[str, ...]:
        """The directions ("down", "up") this pattern is applied to."""
        return ("down", "up") if self.direction == "both" else (self.direction,)

    def pattern(self) -> Any:
        """The per-direction delay this is: the same kind without `direction`."""
        patterns: tuple[type[Strict], ...] = (ConstantDelay, SquareDelay, PiecewiseDelay, TraceDelay)
        base = next(c for c in type(self).__mro__ if c in patterns)   # e.g. DirectedSquareDelay → SquareDelay
        return base.model_construct(**{k: getattr(self, k) for k in base.model_fields})


class DirectedConstantDelay(ConstantDelay, _Directed):
    """A fixed one-way delay on the path's direction(s) `direction`."""


class DirectedSquareDelay(SquareDelay, _Directed):
    """A square-wave delay on the path's direction(s) `direction` (in phase on both when `both`)."""


class DirectedPiecewiseDelay(PiecewiseDelay, _Directed):
    """A stepped delay on the path's direction(s) `direction`."""


class DirectedTraceDelay(TraceDelay, _Directed):
    """A delay trace on the path's direction(s) `direction`."""


PathDelaySpec = Annotated[DirectedConstantDelay | DirectedSquareDelay | DirectedPiecewiseDelay | DirectedTraceDelay,
                          Field(discriminator="kind")]


# How a link direction's queue counts (issue 48 §3; links/README.md "Choosing how the queue counts").
# A Linux qdisc that counts packets counts skbs, and an skb is one wire frame only while nothing
# merged frames on the way in (GRO at the router's ingress, TSO/GSO at the sender).
BufferCountingT = Literal["bytes", "wire_packets", "merged_packets"]
BUFFER_COUNTING_HELP = (
    "How the tbf queue counts `buffer`. bytes (default): tbf's limit in bytes, a packet count converted at 1514 B "
    "per frame. wire_packets: a child `pfifo limit N` counting skbs, each one wire frame (GRO off at the router's "
    "ingress; needs hosts.offloads false); the queue holds at most N × 1514 B. merged_packets: the same pfifo on a "
    "router whose ingress merges packets (GRO on at the direction's ingress interface, tbf burst ≥ 68130 B so a "
    "merged skb is queued whole): N skbs of up to 45 frames each, no byte bound. Both packet countings need "
    "`rate`, `buffer` in packets ('256pkt') and no ecn_mark; merged_packets also order shape-then-delay and no "
    "line_rate.")
BYTE_COUNTING: BufferCountingT = "bytes"
# The wire length of the largest skb GRO builds from full-size TCP segments: GRO keeps an skb under
# 65536 B from its IP header (gro_max_size), so at most 45 segments of 1448 B of payload (MSS with
# timestamps: 45 × 1448 + 52 = 65212 B), and a qdisc counts each segment's whole frame (qdisc_pkt_len_init
# adds the headers of every segment): 45 × 1514 B. tbf refuses or splits (tbf_segment) an skb longer
# than its bucket, so merged_packets needs a burst at least this deep to queue such an skb whole.
MERGED_SKB_MAX_FRAMES = 45
MERGED_MIN_BURST = MERGED_SKB_MAX_FRAMES * 1514


@written_as(Duration)
def _delay_shorthand(v: Any) -> Any:
    """`delay: 20ms` is shorthand for `delay: {kind: constant, value: 20ms}`."""
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return {"kind": "constant", "value": v}
    return v


class LinkDirection(Strict):
    """One direction of one path, as applied in that path's router node.

    rate/buffer/burst: a token bucket (tc tbf) — rate None means unshaped. delay: one-way delay added
    by the delay line. order: which comes first inside the router; `shape-then-delay` (default) keeps
    RTT steps clean because the bottleneck queue sits before the delay (docs/kernel-facts.md).
    """

    rate: Rate | None = Field(None, description="Token-bucket (tc tbf) rate; null = unshaped.")
    buffer: QueueLimitT = Field(units.QueueLimit(bytes=100_000), description="tbf queue limit, in bytes or packets ('50p'); with buffer_counting bytes (the default) packets count as 1514-byte frames.")
    buffer_counting: BufferCountingT = Field(BYTE_COUNTING, description=BUFFER_COUNTING_HELP)
    burst: Size | None = Field(None, description="tbf bucket depth; null = the larger of 3028 B and 1 ms at the rate.")
    # A token-bucket router lets a burst of saved tokens leave at its port's speed (the BBR-S study's
    # router: gigabit Ethernet), and that speed is what BBR's delivery-rate samples see during a burst.
    # A veth has no speed: without a line rate a burst leaves as fast as the host forwards it.
    line_rate: Rate | None = Field(None, description="The rate under the token bucket: how fast a burst of saved tokens leaves (a router port's speed, e.g. 1gbit). Enforced as tbf's peak rate with a one-frame peak bucket; null = no limit but how fast the host forwards (bench/bench_line_rate.py measures it). Needs `rate`, and must exceed it.")
    delay: Annotated[DelaySpec, BeforeValidator(_delay_shorthand)] = Field(ConstantDelay(), description="One-way delay schedule added by the delay line.")
    loss: Probability = Field(0.0, description="Independent per-packet drop probability in the delay line (0 = none).")
    order: Literal["shape-then-delay", "delay-then-shape"] = Field("shape-then-delay", description="Order inside the router: the bottleneck queue before the delay (clean RTT steps) or after it.")
    # Applied by the delay line (mpvlab/links/capacity.py): a capacity that varies (square, piecewise, a
    # Mahimahi or time-rate trace) with its own drop-tail queue, a loss model, outages.
    capacity: CapacitySpec | None = Field(None, description="A time-varying capacity in the delay line with its own drop-tail queue (instead of `rate`); null = none.")
    loss_model: LossSpec | None = Field(None, description="A loss model in the delay line (instead of `loss`); null = none.")
    outages: OutageSpec = Field([], description="[start, end) intervals of run time in which this direction carries nothing (sorted, not overlapping).")
    # ECN marking at this direction's tbf (mpvlab/links/ecn.py): a tc-BPF virtual queue draining at `rate`
    # sets CE on ECT packets above `threshold`; the run turns on net.ipv4.tcp_ecn in its namespaces.
    ecn_mark: EcnMark | None = Field(None, description="CE-mark ECT packets above a threshold of a virtual queue draining at `rate`; null = no marking.")

    @field_validator("outages")
    @classmethod
    def _outages(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return _check_outages(v)

    @model_validator(mode="after")
    def _one_bottleneck_one_loss(self) -> LinkDirection:
        if self.capacity is not None and self.rate is not None:
            raise ValueError("give either rate (a tc token bucket) or capacity (the delay line's link), not both: "
                             "two bottlenecks in series would make neither the configured one")
        if self.line_rate is not None and (self.rate is None or self.line_rate <= self.rate):
            raise ValueError("line_rate is the speed under the token bucket: it needs `rate` (a tc token bucket) "
                             "and must be above it")
        if self.loss_model is not None and self.loss > 0:
            raise ValueError("give either loss (independent, a probability) or loss_model, not both")
        self._check_counting()
        if self.ecn_mark is not None:
            check_on_link(self.ecn_mark, self.rate, self.buffer.to_bytes(), self.capacity is not None)
        return self

    def _check_counting(self) -> None:
        """A packet-counted queue is a tbf with a pfifo child; refuse what cannot be that queue."""
        c = self.buffer_counting
        if c == BYTE_COUNTING:
            return
        allowed = "allowed: bytes, wire_packets, merged_packets"
        if self.rate is None:
            raise ValueError(f"buffer_counting {c}: counts the tbf's queue, so it needs `rate` (a tc token bucket); "
                             "a `capacity` link has its own queue (capacity.queue: packets or bytes), an unshaped "
                             f"direction none ({allowed}; without rate only bytes)")
        if self.buffer.packets is None:
            raise ValueError(f"buffer_counting {c}: `buffer` must be a packet count like '256pkt', not "
                             f"{self.buffer} (a byte limit is buffer_counting bytes)")
        if self.ecn_mark is not None:
            raise ValueError(f"buffer_counting {c}: ecn_mark's virtual queue mirrors a tail drop in bytes, which a "
                             "packet-counted queue does not have; use buffer_counting bytes with ecn_mark")
        if c == "merged_packets":
            if self.order != "shape-then-delay":
                raise ValueError("buffer_counting merged_packets: needs order shape-then-delay (the queue right after "
                                 "the ingress that merges, as built and checked; after the delay line the queue would "
                                 "see the skbs as the line re-injects them, which nothing here checks)")
            if self.line_rate is not None:
                raise ValueError("buffer_counting merged_packets: line_rate's one-frame peak bucket splits every "
                                 "merged skb back into frames (tbf_segment), so the queue would count wire packets; "
                                 "leave line_rate null or use wire_packets")
            if self.burst is not None and self.burst < MERGED_MIN_BURST:
                raise ValueError(f"buffer_counting merged_packets: burst {units.format_size(self.burst)} is below "
                                 f"{MERGED_MIN_BURST} B ({MERGED_SKB_MAX_FRAMES} full frames, the largest skb GRO "
                                 "builds): tbf would split merged skbs into frames; give a burst of at least "
                                 f"{MERGED_MIN_BURST}B or leave it null")

    def queue_byte_bound(self) -> int | None:
        """The most bytes (whole frames) the tbf's queue can hold; None when none exists (merged_packets:
        N skbs of any size GRO made). Bytes: the limit; wire_packets: N frames of at most 1514 B."""
        if self.buffer_counting == "merged_packets":
            return None
        return self.buffer.to_bytes(1514)

    def impairments(self) -> Impairments:
        # Already validated here: constructed, not parsed again (the durations are ns integers now,
        # which the user-facing parser would refuse as "needs a unit").
        return Impairments.model_construct(capacity=self.capacity, loss_model=self.loss_model, outages=self.outages)

    @property
    def has_impairments(self) -> bool:
        return self.capacity is not None or self.loss_model is not None or bool(self.outages)

    def effective_burst(self) -> int:
        """Default burst: the larger of one MTU frame + headroom and 1 ms at the rate (tbf needs
        burst >= rate/HZ; a burst far above that lets BBR see delivery-rate spikes)."""
        if self.burst is not None:
            return self.burst
        if self.rate is None:
            return 0
        default = max(3028, self.rate // 8 // 1000)
        # merged_packets: a bucket deep enough to queue the largest merged skb whole (MERGED_MIN_BURST)
        return max(default, MERGED_MIN_BURST) if self.buffer_counting == "merged_packets" else default
