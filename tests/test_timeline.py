"""lifecycle_s (mpvlab/runner/timeline.py): the whole process, interpreter start included, and
steps that add up to the total."""

from __future__ import annotations

import time

from mpvlab.runner import timeline  # noqa: E402


def test_lifecycle_covers_the_process_and_adds_up() -> None:
    tl = timeline.Timeline()
    tl.mark("setup")
    time.sleep(0.02)
    tl.mark("play")
    time.sleep(0.02)
    tl.mark("setup")            # a step marked twice adds up
    life = timeline.lifecycle(tl)
    assert list(life) == ["process_start_to_run_s", "setup", "play", "total"]
    # this interpreter started (imports, pytest's collection) before the timeline existed
    assert life["process_start_to_run_s"] > 0
    assert life["play"] >= 0.02 and life["setup"] >= 0.0
    # every value rounds to 1 ms; the only time in no step is between the timeline's creation and
    # its first mark (microseconds here, 10 ms would be a generous bound under CPU steal)
    parts = sum(v for k, v in life.items() if k != "total")
    assert abs(life["total"] - parts) <= 0.001 * len(life) + 0.010
    assert life["total"] >= life["process_start_to_run_s"] + 0.04
