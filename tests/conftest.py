"""Session-wide, in one place (tests/policy.py): what each test needs, decided from its markers
(root, netns, chromium, dashjs, slurm, tools), with every skip a failure under MPVLAB_EXPECT_ALL=1
(.ci/run); the CPU steal recorded during every test and summarised at the end; and, for a
whole-suite run (unless MPVLAB_TEST_PARALLEL=0), pytest-xdist with eight workers more than the CPUs,
tests distributed by file, never more than the CPUs' worth running at once, `cpu` tests never two at a
time and `cpu_light` tests (half a CPU each) at most one per CPU."""

from __future__ import annotations

import os

import pytest

from policy import (  # noqa: F401 — pytest finds hooks and fixtures by name in this module
    _record_steal, pytest_collection_modifyitems, pytest_configure, pytest_configure_node,
    pytest_make_collect_report, pytest_runtest_makereport, pytest_runtest_protocol, pytest_runtest_setup,
    pytest_sessionfinish, pytest_terminal_summary, pytest_unconfigure,
)

CPUS = os.cpu_count() or 1
# Eight workers more than the CPUs: a worker whose next test waits for the CPU lock holds no share of
# the CPUs (tests/policy.py, _slot), so a spare worker runs a plain test meanwhile; never more than the
# CPUs' worth runs. With two spares, a `cpu` test ran beside nothing for 488 s of S5's 1,608 s (three
# workers waiting for the lock behind it). Replaying S5's durations under today's rule (light tests
# half a CPU, joining; docs/testing.md "Light tests as half a CPU"): 1,368 s on 10 workers (1,304–1,345 s with every
# duration moved by up to ±15 %) against 1,626 s for S5's rule on its 4 workers.
WORKERS = CPUS + 8
PARALLEL_ENV = "MPVLAB_TEST_PARALLEL"   # =0: the whole suite in one process


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole suite (no paths given: pyproject's testpaths) runs on WORKERS xdist workers, distributed
    by file, in the order tests/policy.py gives the files (xdist's own reordering by test count is off:
    it handed the longest file out last). A run of chosen files stays in one process (so -s and --pdb
    work) unless -n is given; `-n 0` or MPVLAB_TEST_PARALLEL=0 runs the whole suite in one process."""
    if not hasattr(config.option, "numprocesses") or hasattr(config, "workerinput"):
        return
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    # CI's default since whole-suite runs side by side passed on idle machines (docs/testing.md "Side by
    # side in CI"); the dash.js hang that kept it opt-in was dash.js 3.0.3's own race, fixed at the page.
    if whole_suite and config.option.numprocesses is None and CPUS > 1 and os.environ.get(PARALLEL_ENV, "1") != "0":
        config.option.numprocesses = WORKERS
    if config.option.numprocesses and config.option.dist == "no":
        config.option.dist = "loadfile"
    if config.option.numprocesses:
        config.option.loadscopereorder = False
