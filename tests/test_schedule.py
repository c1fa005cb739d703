"""Delay-schedule maths: the single definition both the delay line and the fidelity check use."""

from __future__ import annotations

import pytest

from mpvlab.links.schedule import Schedule

MS = 1_000_000
S = 1_000_000_000


def test_square_wave_default_phase_starts_high() -> None:
    s = Schedule.square(base_ns=5 * MS, amplitude_ns=60 * MS, period_ns=20 * S, duty=0.5)
    assert s.times_ns == (0, 10 * S) and s.delays_ns == (65 * MS, 5 * MS)
    assert s.delay_at(0) == 65 * MS
    assert s.delay_at(10 * S - 1) == 65 * MS
    assert s.delay_at(10 * S) == 5 * MS
    assert s.delay_at(20 * S) == 65 * MS
    assert s.delay_at(-1) == 5 * MS  # periodic extension before time zero


@pytest.mark.parametrize("phase_s", [0, 3, 10, 17, 25])
@pytest.mark.parametrize("duty", [0.25, 0.5, 0.8])
def test_square_wave_matches_definition(phase_s: int, duty: float) -> None:
    period = 20 * S
    s = Schedule.square(0, 60 * MS, period, duty, phase_s * S)
    for t in range(-40 * S, 60 * S, S // 4):
        on = ((t - phase_s * S) % period) < duty * period
        assert s.delay_at(t) == (60 * MS if on else 0), (t, phase_s, duty)


def test_square_duty_fraction_of_time() -> None:
    s = Schedule.square(0, 60 * MS, 10 * S, 0.3, 2 * S)
    high = sum(1 for t in range(0, 100 * S, 10 * MS) if s.delay_at(t) == 60 * MS)
    assert high / (100 * S / (10 * MS)) == pytest.approx(0.3, abs=1e-3)


def test_steps_between_counts_edges() -> None:
    s = Schedule.square(0, 60 * MS, 10 * S, 0.5)
    steps = s.steps_between(0, 180 * S)
    # 18 cycles, 2 edges each; t = 0 is an edge too, because before time zero the wave is low.
    assert len(steps) == 36
    assert steps[0] == (0, 60 * MS) and steps[1] == (5 * S, 0)
    assert all(b[0] - a[0] == 5 * S for a, b in zip(steps, steps[1:]))


def test_piecewise_and_merge() -> None:
    s = Schedule.piecewise([(0, 10 * MS), (1 * S, 10 * MS), (2 * S, 30 * MS)])
    assert s.times_ns == (0, 2 * S)
    assert s.delay_at(5 * S) == 30 * MS  # holds the last value
    assert s.delay_at(-5 * S) == 10 * MS  # holds the first value before zero


def test_invalid_schedules() -> None:
    with pytest.raises(ValueError):
        Schedule.piecewise([(1, 0)])
    with pytest.raises(ValueError):
        Schedule.piecewise([(0, 1), (0, 2)])
    with pytest.raises(ValueError):
        Schedule.piecewise([(0, 1), (5 * S, 2)], period_ns=5 * S)
    with pytest.raises(ValueError):
        Schedule.square(0, 1, 10, duty=1.0)


def test_file_format() -> None:
    s = Schedule.square(0, 60 * MS, 20 * S, 0.5)
    assert s.to_text().splitlines()[1:] == ["period_us 20000000", "0 60000", "10000000 0"]
