"""summary.json is built part by part (mpvlab/results/summary_parts/): each part is checked against its model
where the runner makes it, so a wrong key, a wrong type or a number JSON cannot hold (NaN, ±Infinity) fails
at the line that made it, with an error naming the part and the field (issue 46 item 3) — and no summary
holding NaN or Infinity is ever written (issue 43 item 7, the write side; the reader already refuses one)."""

from __future__ import annotations

import copy
import math
import traceback
from pathlib import Path
from typing import Any, Callable, cast

import pytest
from pydantic import ValidationError

from mpvlab.core.errors import MpvlabError
from mpvlab.results import summary as model
from mpvlab.runner import fidelity, shared, steps
from mpvlab.runner.workloads import video
from test_summary_model import _bulk_summary


def _competition() -> Any:
    rtp = {"received_per_second": [{"second": s, "received_bps": 1_000_000} for s in range(10)]}
    return shared.competition_view(10_000_000, rtp, {"start_s": 1.0, "seconds": 5.0, "goodput_bps": math.nan})


def _player_qoe() -> Any:
    return video.player_view({"underflows": 0, "stall_ratio": math.inf, "frames_expected": 600})


def _fidelity_row() -> Any:
    fid = {"run": {"wifi-down": {"path": "wifi", "rate": {"configured_bps": 3_000_000, "achieved_bps": 0,
                                                          "ratio": math.nan, "backlogged_s": 0.0}}}}
    return fidelity.table(fid, cast(Any, None))


def _mptcp() -> Any:
    return steps.mptcp_view({"server": {"MPTCPRetrans": 0, "AddAddr": "two"}, "client": {}})


def _mptcp_numeric_string() -> Any:
    # pydantic's lax mode reads "900" as 900; summary.json would hold the string
    return steps.mptcp_view({"server": {"MPTCPRetrans": "900"}, "client": {}})


def _player_qoe_bool_count() -> Any:
    return video.player_view({"underflows": True, "frames_expected": 600})


# (a builder the runner calls, the file that holds it, the part it makes, the field it got wrong, the words)
WRONG: list[tuple[Callable[[], Any], str, str, str, str]] = [
    (_competition, "mpvlab/runner/shared_summary.py", "competition", "bulk_goodput_bps", "NaN"),
    (_player_qoe, "mpvlab/runner/workloads/video.py", "player QoE", "stall_ratio", "Infinity"),
    (_fidelity_row, "mpvlab/runner/fidelity.py", "fidelity_table[0]", "rate_ratio", "NaN"),
    (_mptcp, "mpvlab/runner/steps.py", "mptcp", "mib.server.AddAddr", "valid integer"),
    (_mptcp_numeric_string, "mpvlab/runner/steps.py", "mptcp", "reinjected_segments: '900' is not of",
     "would read it as 900"),
    (_player_qoe_bool_count, "mpvlab/runner/workloads/video.py", "player QoE", "underflows: True is not of",
     "the field's type"),
]


@pytest.mark.parametrize("make, where, part, field, words", WRONG, ids=[w[2] for w in WRONG])
def test_a_wrong_value_fails_where_its_part_is_made(make: Callable[[], Any], where: str, part: str, field: str,
                                                     words: str) -> None:
    with pytest.raises(MpvlabError) as e:
        make()
    msg = str(e.value)
    assert msg.startswith(f"summary part {part} ("), msg
    assert f"{field}" in msg and words in msg, msg
    # raised from the builder's own line (the frame that called build), not at the end of the run
    frames = traceback.extract_tb(e.value.__traceback__)
    callers = [f for f in frames if not f.filename.endswith("summary_parts/base.py")]
    assert callers and Path(callers[-1].filename).as_posix().endswith(where), [f.filename for f in frames]


def test_a_whole_number_in_a_float_field_is_the_same_value() -> None:
    """JSON has one kind of number: 0 where the model says float is read as given, not as a rewrite."""
    steal = {"fraction": 0, "window_s": 1, "per_cpu_s": [0]}
    assert model.build(model.Steal, "host_steal_during_playback", steal) is steal


def test_a_part_with_an_unknown_key_fails_where_it_is_made() -> None:
    with pytest.raises(MpvlabError) as e:
        model.build(model.Steal, "host_steal_during_playback",
                    {"fraction": 0.0, "window_s": 1.0, "per_cpu_s": [0.0], "per_cpu": [0.0]})
    assert "host_steal_during_playback (Steal): per_cpu: Extra inputs are not permitted" in str(e.value)


@pytest.mark.parametrize("where, value", [
    (("duration_s",), math.nan),                                   # a typed float
    (("paths", "wifi", "bottleneck"), {"queue": {"p99": math.inf}}),   # an open record's extra key
    (("cross_checks", "collector_lost_events", "ratio"), -math.inf),   # a free-form record
])
def test_a_summary_holding_nan_or_infinity_is_refused_as_a_whole(where: tuple[str, ...], value: Any) -> None:
    """The last line before summary.json is written (session.py) refuses what the reader would."""
    s = copy.deepcopy(_bulk_summary())
    node = s
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    with pytest.raises(ValidationError) as e:
        model.validated(s)
    assert any(w in str(e.value) for w in ("NaN", "Infinity", "finite")), str(e.value)


def test_the_parts_of_a_summary_are_named_as_the_runner_builds_them() -> None:
    s = _bulk_summary()
    assert model.validated_by_part(s) == [
        "run head", "run fields", "player QoE", "host_steal_during_playback", "paths.wifi", "subflows[0]",
        "cross_checks.collector_lost_events", "mptcp",
        "bulk"]
    bad = copy.deepcopy(s)
    bad["bulk"]["goodput_bps"] = math.nan
    with pytest.raises(MpvlabError, match=r"summary part bulk \(BulkRecord\): goodput_bps is NaN"):
        model.validated_by_part(bad)
