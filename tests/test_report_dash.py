"""mpvlab/report/dash.py's pure parts: the CCDF and the bitrate steps, from hand-made records."""

from __future__ import annotations

from mpvlab.report.dash import bitrate_steps, ccdf


def test_ccdf_is_the_share_strictly_above_each_distinct_value() -> None:
    xs, ps = ccdf([3.0, 1.0, 1.0, 2.0])
    assert xs == [1.0, 2.0, 3.0]
    assert ps == [0.5, 0.25, 0.0]          # P(X > 1) = 2/4, P(X > 2) = 1/4, P(X > 3) = 0
    assert ccdf([]) == ([], [])
    xs, ps = ccdf([0.0] * 5)
    assert (xs, ps) == ([0.0], [0.0])


def test_bitrate_steps_hold_each_level_until_the_next_request_and_the_last_until_its_last_byte() -> None:
    ps = {"segments": [
        {"index": 1, "t_request": 2.0, "t_last_byte": 3.5, "bitrate_bps": 2_000_000},
        {"index": 0, "t_request": 0.5, "t_last_byte": 1.0, "bitrate_bps": 500_000},
        {"index": 2, "t_request": 4.0, "t_last_byte": 6.0, "bitrate_bps": 1_000_000},
        {"index": 3, "bitrate_bps": 1_000_000},              # no request time: not drawn
    ]}
    assert bitrate_steps(ps) == ([0.5, 2.0, 4.0, 6.0], [0.5, 2.0, 1.0, 1.0])
    assert bitrate_steps({}) == ([], [])
