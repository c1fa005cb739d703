"""The steal-aware bounds themselves (tests/hostnoise.py, mpvlab/hoststeal.py): pure arithmetic."""

from __future__ import annotations

import os

import pytest

from hostnoise import assert_playback_accounted, cpu_late_frames_allowed, longest_stall_s, lowered, tail_quantile
from mpvlab.core.hoststeal import StealMeter, StealWindow, read_steal_ticks

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def test_quiet_host_keeps_first_principles_bounds() -> None:
    quiet = StealWindow(wall_s=10.0, steal_s=(0.0, 0.0))
    assert lowered(1000.0, 0.03, quiet.lost) == pytest.approx((970.0, 1030.0))
    assert cpu_late_frames_allowed(quiet, 30) == 0          # no steal: no CPU-late discard
    # The tail moves only by the counter's resolution: 2 CPUs x 1 tick over 10 s.
    assert tail_quantile(0.99, quiet) == pytest.approx(0.99 - 2 * TICK_S / 10.0)


def test_stolen_share_moves_lower_bounds_and_tail_only() -> None:
    w = StealWindow(wall_s=3.0, steal_s=(0.07, 0.06))
    assert w.lost == pytest.approx(0.13 / 3.0)
    assert w.lost_at_most == pytest.approx((0.13 + 2 * TICK_S) / 3.0)
    lo, hi = lowered(1000.0, 0.03, w.lost)
    assert lo == pytest.approx(1000 * (1 - 0.03 - 0.13 / 3.0)) and hi == pytest.approx(1030.0)
    assert tail_quantile(0.99, w) == pytest.approx(0.99 - w.lost_at_most)
    assert tail_quantile(0.99, StealWindow(1.0, (0.9, 0.9))) == 0.5   # never below the median


def test_cpu_late_frames_scale_with_stolen_time() -> None:
    # 130 ms + 2 ticks of resolution stolen, at 30 fps: 2 x 30 x 0.15 s = 9 frames.
    w = StealWindow(wall_s=20.0, steal_s=(0.07, 0.06))
    assert cpu_late_frames_allowed(w, 30) == int(2 * 30 * (0.13 + 2 * TICK_S))
    # A CI run lost 8 of 600 frames at 66 % steal over 20 s: well inside.
    assert cpu_late_frames_allowed(StealWindow(20.0, (6.6, 6.6)), 30) >= 8


def test_recorded_window_round_trips() -> None:
    w = StealWindow(wall_s=21.5, steal_s=(0.31, 0.29))
    back = StealWindow.from_dict(w.as_dict())
    assert back == w and back.lost == pytest.approx(0.6 / 21.5)


def test_meter_reads_this_machine() -> None:
    n_cpus = len(read_steal_ticks())
    assert n_cpus == os.cpu_count()
    m = StealMeter().start()
    w = m.stop()
    assert len(w.steal_s) == n_cpus and all(s >= 0 for s in w.steal_s) and w.wall_s >= 0


def test_longest_stall_is_one_cpus_loss() -> None:
    assert longest_stall_s(StealWindow(5.0, (0.0, 0.0))) == 0.0
    assert longest_stall_s(StealWindow(5.0, (0.07, 0.12))) == pytest.approx(0.12 + TICK_S)


def test_playback_accounting_allows_network_stalls_not_cpu_ones() -> None:
    # The clean-CI smoke run: 2 underflows (0.67 s), 2 discards both inside them, no steal.
    s = {"frames_expected": 600, "frames_rendered": 598, "picture_discards": 2, "picture_discards_no_underflow": 0,
         "underflows": 2, "underflow_episodes": [[5.982643, 6.02467], [6.349309, 6.976946]],
         "underflow_total_s": 0.669664}
    quiet = StealWindow(22.0, (0.0, 0.0))
    assert_playback_accounted(s, quiet, 30)
    with pytest.raises(AssertionError):      # a discard away from any underflow with nothing stolen
        assert_playback_accounted({**s, "picture_discards_no_underflow": 1}, quiet, 30)
    with pytest.raises(AssertionError):      # a frame neither rendered nor discarded
        assert_playback_accounted({**s, "frames_rendered": 597}, quiet, 30)
    with pytest.raises(AssertionError):      # episodes that do not add up to the total
        assert_playback_accounted({**s, "underflow_total_s": 0.9}, quiet, 30)
