"""Host contention as the guest sees it: CPU steal time, and bounds that account for it.

Our tests check timing against first principles (a tbf with a two-frame bucket sends its rate,
a 1 kHz sampler takes 1000 samples a second, a delay line releases within 2 ms). On a
virtual machine those numbers also need the CPUs: when the hypervisor deschedules a vCPU
for 8 % of a window, a tbf whose bucket holds 8 ms of tokens loses the tokens of every
longer stall and sends up to ~8 % less, a sampler skips the ticks it slept through, and a
packet due during a stall leaves late. The guest kernel counts that time as *steal*
(mpvlab/hoststeal.py). On our 2-vCPU machines it was measured at 3-10 % of the window, at
times 25-50 %, for minutes while the tests ran, and a 1 kHz sampling test missed 58 samples
in 2 s while 110 ms were stolen.

So a timing test (1) repeats its measurement, up to ATTEMPTS times, until one ran with its
CPUs losing at most STEAL_LIMIT of the window, else keeps the least contended attempt; and (2)
states its bound for a host that stole a fraction f of the window (`StealWindow.lost`, all
CPUs together, since a stall of either CPU can stall the measured path): what stalls can
only lower (a rate, a sample count) gets its lower bound lowered by f; a tail percentile is
taken at (q - f), because at most a fraction f of the events fell due during a stall; a player
may discard frames only in proportion to the stolen time (`cpu_late_frames_allowed`). Upper
bounds never move: stalls cannot make a tbf send faster or a delay line release early. On a
quiet host f is ~0 and every bound is the first-principles one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from mpvlab.core.hoststeal import StealMeter, StealWindow

T = TypeVar("T")

# An attempt whose CPUs together lost no more than this of the window is judged at once (the
# bounds still account for what it lost); above it, the measurement is repeated in the hope of
# a quieter moment. 2 % of a 5 s window is 10 ticks of the counter, well above its resolution.
STEAL_LIMIT = 0.02
ATTEMPTS = 3


@dataclass(frozen=True)
class Measured(Generic[T]):
    value: T
    steal: StealWindow


def least_contended(measure: Callable[[], T | Measured[T]], *, what: str, attempts: int = ATTEMPTS,
                    limit: float = STEAL_LIMIT) -> Measured[T]:
    """Run `measure()` until an attempt's CPUs together lost at most `limit` of its time to steal;
    if none did, the attempt that lost the least. `measure` must set up and tear down its
    own state so that it can be repeated. It may return a `Measured` of its own when only part of
    it is the measurement (the pings, not the daemon's start): that part's steal is then the one
    judged, since setup time in the window would dilute the stolen share. Prints every
    discarded attempt (visible with -s and in the report of a failing test)."""
    tried: list[Measured[T]] = []
    for attempt in range(1, attempts + 1):
        with StealMeter() as meter:
            value = measure()
        got = value if isinstance(value, Measured) else Measured(value, meter.window)
        tried.append(got)
        if got.steal.lost <= limit:
            break
        print(f"\n[hostnoise] {what}: attempt {attempt} contended: {got.steal.describe()}")
    best = min(tried, key=lambda m: m.steal.lost)
    if len(tried) > 1:
        print(f"\n[hostnoise] {what}: judging the least contended of {len(tried)} attempts: "
              f"{best.steal.describe()}")
    return best


def measured(fn: Callable[[], T]) -> Measured[T]:
    """`fn()` with the steal over exactly its own span (for a `least_contended` measure)."""
    with StealMeter() as meter:
        value = fn()
    return Measured(value, meter.window)


def lowered(ideal: float, rel: float, stolen: float) -> tuple[float, float]:
    """Bounds for a quantity that host stalls can only lower, the host having stolen a fraction
    `stolen` of the window (`StealWindow.lost`): ideal x (1 - rel - stolen) .. ideal x (1 + rel)."""
    return ideal * (1 - rel - stolen), ideal * (1 + rel)


def tail_quantile(q: float, steal: StealWindow) -> float:
    """The quantile to judge instead of q: at most the stolen share of the window's events fell due
    in a stall. The share is taken at its largest (`lost_at_most`: plus the counter's one-tick
    resolution per CPU), and the window must be the events' own span: a measurement window that
    also holds setup dilutes the share (a 3 s ping run in a 4.1 s window lost 130 ms, 3.2 % of
    the window but 4.3 % of the pings, and 4.2 % of them came back late)."""
    return max(0.5, q - steal.lost_at_most)


def stolen_at_most_s(steal: StealWindow) -> float:
    """All CPUs' steal in the window, at most (plus the counter's one-tick resolution per CPU); none
    if nothing was stolen, since any stall that matters here spans ticks."""
    return steal.lost_at_most * steal.wall_s if sum(steal.steal_s) > 0 else 0.0


def longest_stall_s(steal: StealWindow) -> float:
    """The longest single host stall the window can have held: no more than the most any one CPU
    lost, plus the counter's one-tick resolution; none if nothing was stolen. What one event (a
    probe's worst delay, a step's log time) may carry beyond its first-principles bound."""
    if sum(steal.steal_s) <= 0:
        return 0.0
    return max(steal.steal_s) + steal.tick_s


def cpu_late_frames_allowed(steal: StealWindow, fps: float) -> int:
    """How many frames a player may discard for want of CPU (its playout buffer holding data) when
    the host stole `steal` from its CPUs. A frame is decoded once the previous one was shown and
    waits for its due time, so with decode time d a stall s makes the next frame late by
    s + d - 1/fps, and the sink drops it beyond max-lateness (20 ms): only stalls longer than
    ~45 ms discard anything. After one, the decoder catches up at (1/fps - d) per frame, so a
    stall s discards at most s x fps / (1 - d x fps) + 1 frames: <= 2 x fps x s for d below half
    a frame time, the +1 included since s >= 45 ms. Summed over every CPU's steal (the player's
    threads move between CPUs) plus the counter's resolution. Zero steal allows no discard."""
    return int(2 * fps * stolen_at_most_s(steal))


def assert_played_through(summary: dict[str, Any], steal: StealWindow, fps: float) -> None:
    """A player given ample bandwidth: the network never emptied its buffer, every frame was
    rendered or discarded, and every discard came while the buffer held data (late for the CPU,
    `picture_discards_no_underflow`), no more of them than the host's steal can explain."""
    s = summary
    assert s["underflows"] == 0, (s["underflows"], s.get("underflow_episodes"))
    assert s["picture_discards_no_underflow"] == s["picture_discards"], s
    assert_playback_accounted(s, steal, fps)


def assert_playback_accounted(summary: dict[str, Any], steal: StealWindow, fps: float) -> None:
    """A player whose network may stall it (little headroom, delay steps): every frame rendered or
    discarded, every underflow episode timed and summed, and discards away from any underflow (late
    for the CPU) no more than the host's steal explains. How many stalls happen is the experiment's
    result, not a property of the platform."""
    s = summary
    assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"], s
    episodes = s["underflow_episodes"]
    assert len(episodes) == s["underflows"] and all(end > start for start, end in episodes), episodes
    assert abs(sum(end - start for start, end in episodes) - s["underflow_total_s"]) < 1e-3, s
    allowed = cpu_late_frames_allowed(steal, fps)
    assert s["picture_discards_no_underflow"] <= allowed, (s["picture_discards_no_underflow"], allowed,
                                                           steal.describe())
