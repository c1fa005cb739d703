"""`line_rate` (issue 47): the rate under the token bucket, i.e. how fast a burst of saved tokens
leaves the emulated router (a router port's speed). Enforced as tbf's peak rate with a one-frame
peak bucket (mpvlab/links/emulator.py tbf_argv), checked on the wire: 300 full frames sent back to back after
an idle second through a 2 Mbit/s bucket 1 MB deep (so the bucket's own rate never paces them)
arrive at the receiver no faster than the line rate. The bound is the kernel's: tbf releases no two
frames closer than one frame's time at the peak rate; 10 % covers the receiver's stamps bunching
when a softirq delivers several frames at once (a few ms at most over the burst's ~180 ms).
How fast the burst leaves without a line rate, or how close to a high line rate the host gets, is
a figure of the host: bench/bench_line_rate.py prints it.
"""

from __future__ import annotations

import pytest

from mpvlab.core.errors import InputError
from mpvlab.input.scenario import ScenarioError, parse_scenario
from mpvlab.links.emulator import tbf_argv
from mpvlab.links.spec import LinkDirection
from mpvlab.testbed import burst

LINE = 20_000_000
FRAMES = 300


def test_line_rate_becomes_the_tbf_peak_rate_with_a_one_frame_bucket() -> None:
    spec = LinkDirection.model_validate({"rate": "25mbit", "burst": "1MB", "line_rate": "1gbit"})
    argv = tbf_argv("eth9", spec)
    assert argv[argv.index("peakrate") + 1] == "1000000000bit"
    assert argv[argv.index("mtu") + 1] == "1514"
    assert "peakrate" not in tbf_argv("eth9", LinkDirection.model_validate({"rate": "25mbit"}))


@pytest.mark.parametrize("bad", [{"line_rate": "1gbit"}, {"rate": "25mbit", "line_rate": "25mbit"},
                                 {"rate": "25mbit", "line_rate": "10mbit"}])
def test_line_rate_needs_a_bucket_below_it(bad: dict) -> None:
    sc = {"name": "x", "paths": {"a": {"down": bad}, "b": {}}, "video": {"duration": "5s"}}
    with pytest.raises((ScenarioError, InputError), match="line_rate"):
        parse_scenario(sc)


@pytest.mark.netns
def test_burst_leaves_no_faster_than_the_line_rate() -> None:
    spec = LinkDirection.model_validate({"rate": "2mbit", "burst": "1MB", "buffer": "2MB", "line_rate": "20mbit"})
    d = burst.measure(spec, FRAMES)
    assert d.frames == FRAMES, d.text()                    # a burst within the bucket: nothing dropped
    assert d.rate_bps <= LINE * 1.10, d.text()
