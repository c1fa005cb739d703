"""The GStreamer player's underflow episodes (mpvlab/player/gstreamer/counters.py), from the playout
queue's underrun/running signals as GStreamer emits them: what is one episode, what ends it, and
how the strict empty time and the episodes' total relate."""

from __future__ import annotations

import io
import json

import pytest

from mpvlab.player.gstreamer.counters import EventLog, Underflows


def test_underruns_within_the_merge_window_are_one_episode_and_the_times_add_up() -> None:
    u = Underflows(merge_s=0.2)
    assert u.on_underrun(1.0) is True                # the queue ran empty: an episode starts
    u.on_running(1.1)
    assert u.on_underrun(1.25) is False              # 0.15 s of data, less than merge_s: the same episode
    u.on_running(1.5)
    assert u.due_close(1.6) is None                  # non-empty for 0.1 s only
    assert u.due_close(1.8) == 1.5                   # non-empty for > merge_s: closed at its last running
    u.on_running(2.0)                                # running after an overrun (a full queue): no episode
    assert u.on_underrun(3.0) is True
    assert u.force_close(3.4) == 3.4                 # end of stream while empty: closed then
    assert u.episodes == [[1.0, 1.5], [3.0, 3.4]]
    assert u.total_s == pytest.approx(0.9)
    # the strict empty time: 1.0-1.1, 1.25-1.5, 3.0-3.4; never more than the episodes span
    assert u.empty_s == pytest.approx(0.75) and u.empty_s <= u.total_s
    assert u.force_close(4.0) is None                # nothing open


def test_an_underrun_after_a_long_spell_of_data_starts_a_new_episode() -> None:
    u = Underflows(merge_s=0.2)
    u.on_underrun(1.0)
    u.on_running(1.1)
    assert u.on_underrun(1.5) is True                # 0.4 s of data since: the first closed at 1.1
    assert u.episodes == [[1.0, 1.1]]


def test_event_log_times_are_run_time() -> None:
    out = io.StringIO()
    log = EventLog(out, t0_ns=10**9)
    assert log.t(3 * 10**9) == 2.0
    log.set_t0(2 * 10**9)
    log.emit("first_frame", t=log.t(3 * 10**9), pts_s=0.0)
    log.flush()
    assert json.loads(out.getvalue()) == {"t": 1.0, "type": "first_frame", "pts_s": 0.0}
