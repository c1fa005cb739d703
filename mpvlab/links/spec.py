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
    buffer: QueueLimitT = Field(units.QueueLimit(bytes=100_000), description="tbf queue limit, in bytes or packets ('50p'); packets count as 1514-byte frames.")
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
        if self.ecn_mark is not None:
            check_on_link(self.ecn_mark, self.rate, self.buffer.to_bytes(), self.capacity is not None)
        return self

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
        return max(3028, self.rate // 8 // 1000)
