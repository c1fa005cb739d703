"""What a scenario says about one direction of one path: its token bucket, delay schedule, loss and
the order of shaping and delay. The link emulator (emulator.py) applies it; the schedule maths is
in schedule.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, field_validator, model_validator

from core import units
from core.quantities import Duration, Probability, QueueLimitT, Rate, Size, Strict
from links.capacity import CapacitySpec, Impairments, LossSpec, OutageSpec, _check_outages
from links.ecn import EcnMark, check_on_link


class ConstantDelay(Strict):
    kind: Literal["constant"] = "constant"
    value: Duration = 0


class SquareDelay(Strict):
    """base + amplitude during the first duty·period of each cycle; cycles start at t = phase."""

    kind: Literal["square"]
    base: Duration = 0
    amplitude: Duration
    period: Duration
    duty: float = Field(0.5, gt=0.0, lt=1.0)
    phase: Duration = 0

    @field_validator("period")
    @classmethod
    def _period_positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("period must be positive")
        return v


class PiecewiseDelay(Strict):
    """points: [[time, delay], ...] from time 0, strictly increasing; `repeat` makes it periodic."""

    kind: Literal["piecewise"]
    points: list[tuple[Duration, Duration]] = Field(min_length=1)
    repeat: Duration = 0


class TraceDelay(Strict):
    """A file of `time_ms delay_ms` lines, relative to the scenario file's folder (and inside it)."""

    kind: Literal["trace"]
    file: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,200}$")
    repeat: Duration = 0


DelaySpec = Annotated[Union[ConstantDelay, SquareDelay, PiecewiseDelay, TraceDelay], Field(discriminator="kind")]


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

    rate: Rate | None = None
    buffer: QueueLimitT = units.QueueLimit(bytes=100_000)
    burst: Size | None = None
    delay: Annotated[DelaySpec, BeforeValidator(_delay_shorthand)] = ConstantDelay()
    loss: Probability = 0.0
    order: Literal["shape-then-delay", "delay-then-shape"] = "shape-then-delay"
    # Applied by the delay line (links/capacity.py): a capacity that varies (square, piecewise, a
    # Mahimahi or time-rate trace) with its own drop-tail queue, a loss model, outages.
    capacity: CapacitySpec | None = None
    loss_model: LossSpec | None = None
    outages: OutageSpec = []
    # ECN marking at this direction's tbf (links/ecn.py): a tc-BPF virtual queue draining at `rate`
    # sets CE on ECT packets above `threshold`; the run turns on net.ipv4.tcp_ecn in its namespaces.
    ecn_mark: EcnMark | None = None

    @field_validator("outages")
    @classmethod
    def _outages(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return _check_outages(v)

    @model_validator(mode="after")
    def _one_bottleneck_one_loss(self) -> "LinkDirection":
        if self.capacity is not None and self.rate is not None:
            raise ValueError("give either rate (a tc token bucket) or capacity (the delay line's link), not both: "
                             "two bottlenecks in series would make neither the configured one")
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
