"""Freezes and rendered frame rate of the rtp workload (mpvlab/runner/workloads/rtp_freezes.py), on
scripted render times, with the expected values worked out by hand from W3C webrtc-stats' rule:
a freeze is an interval >= max(3 x avg, avg + 150 ms), avg over the last 30 non-freeze intervals,
judged once 5 intervals are known."""

from __future__ import annotations

import pytest

from mpvlab.runner.workloads.rtp_freezes import freezes, from_frames, rendered_fps

F = 1 / 30


def times(gaps: list[float], start: float = 0.0) -> list[float]:
    out = [start]
    for g in gaps:
        out.append(out[-1] + g)
    return out


def test_a_steady_stream_has_no_freeze() -> None:
    r = freezes(times([F] * 100))
    assert (r["count"], r["total_s"], r["longest_s"]) == (0, 0.0, 0.0)


def test_an_interval_of_five_frames_is_not_a_freeze_but_seven_are() -> None:
    # avg = 1/30 s: threshold max(0.1, 0.1833) = 0.1833 s. 4 frames missing: interval 5/30 = 0.167 s
    # (not a freeze); 6 missing: 7/30 = 0.233 s (one).
    assert freezes(times([F] * 10 + [5 * F] + [F] * 10))["count"] == 0
    r = freezes(times([F] * 10 + [7 * F] + [F] * 10))
    assert r["count"] == 1 and r["total_s"] == pytest.approx(7 * F, abs=1e-6) and r["longest_s"] == pytest.approx(7 * F, abs=1e-6)


def test_nothing_is_judged_before_five_intervals() -> None:
    # the 4th interval is 1 s long but only 3 are known before it; the second long gap (after 5 more
    # ordinary ones: 8 known, the 1 s among them) is judged against avg (7 × F + 1) / 8 = 0.154 s:
    # threshold max(0.4625, 0.304) = 0.4625 → 0.5 s is a freeze
    r = freezes(times([F, F, F, 1.0, F, F, F, F, 0.5, F]))
    assert r["count"] == 1 and r["total_s"] == pytest.approx(0.5)


def test_freezes_stay_out_of_the_average() -> None:
    # two freezes of 1 s back to back: the second is judged against the 1/30 s average, not one raised
    # by the first
    r = freezes(times([F] * 10 + [1.0, 1.0] + [F] * 5))
    assert r["count"] == 2 and r["total_s"] == pytest.approx(2.0)


def test_the_average_is_over_the_last_thirty_intervals() -> None:
    # 30 intervals of 0.1 s after 30 of 1/30 s: avg 0.1, threshold max(0.3, 0.25) = 0.3 → 0.28 s is not
    # a freeze (against the overall mean 0.0667 it would be: max(0.2, 0.2167))
    assert freezes(times([F] * 30 + [0.1] * 30 + [0.28]))["count"] == 0
    assert freezes(times([F] * 30 + [0.1] * 30 + [0.31]))["count"] == 1


def test_the_tail_after_the_last_rendered_frame_is_reported_not_counted() -> None:
    r = freezes(times([F] * 10), stream_end_s=2.0)
    assert r["count"] == 0 and r["tail_without_render_s"] == pytest.approx(2.0 - 10 * F)


def test_rendered_fps_per_whole_second() -> None:
    r = rendered_fps(times([F] * 59), 0.0, 2)
    assert r["per_second"] == [30, 30] and r["mean"] == 30.0


def test_from_frames_renders_on_time_decoded_frames_only() -> None:
    rows = []
    for i in range(60):
        status, dec = "on_time", "decoded"
        if 20 <= i < 30:
            status, dec = "late", ""
        elif 30 <= i < 32:
            dec = "undecodable"
        rows.append({"frame": str(i), "capture_s": f"{0.5 + i * F:.6f}", "status": status, "decode": dec})
    r = from_frames(rows)
    # rendered: 0..19 and 32..59; the gap from 19 to 32 is 13 frames = 0.433 s ≥ 0.183 s: one freeze
    assert r["freezes"]["count"] == 1 and r["freezes"]["total_s"] == pytest.approx(13 * F, abs=2e-6)
    assert r["rendered_fps"]["per_second"] == [20, 28] and sum(r["rendered_fps"]["per_second"]) == 48
