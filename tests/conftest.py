"""Session-wide, in one place (tests/policy.py): what each test needs, decided from its markers
(root, netns, chromium, dashjs, slurm, tools), with every skip a failure under MPVLAB_EXPECT_ALL=1
(.ci/run); the CPU steal recorded during every test and summarised at the end; and, for a
whole-suite run with MPVLAB_TEST_PARALLEL=1, pytest-xdist with one worker more than the CPUs, tests
distributed by file, never more tests running at once than CPUs, and `cpu` tests never two at a time."""

from __future__ import annotations

import os

import pytest

from policy import (  # noqa: F401 — pytest finds hooks and fixtures by name in this module
    _record_steal, pytest_collection_modifyitems, pytest_configure, pytest_configure_node,
    pytest_make_collect_report, pytest_runtest_makereport, pytest_runtest_protocol, pytest_runtest_setup,
    pytest_sessionfinish, pytest_terminal_summary, pytest_unconfigure,
)

CPUS = os.cpu_count() or 1
# One worker more than the CPUs: a worker whose next test waits for the `cpu` lock holds no CPU's slot
# (tests/policy.py, _slot), so the spare worker runs a plain test meanwhile; never more than CPUS run.
WORKERS = CPUS + 1
PARALLEL_ENV = "MPVLAB_TEST_PARALLEL"   # =1: the whole suite on WORKERS xdist workers


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With MPVLAB_TEST_PARALLEL=1 the whole suite (no paths given: pyproject's testpaths) runs on
    WORKERS xdist workers, distributed by file. A run of chosen files stays in one process (so -s and --pdb work) unless
    -n is given; `-n 0` runs the whole suite in one process."""
    if not hasattr(config.option, "numprocesses") or hasattr(config, "workerinput"):
        return
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    # Opt-in for now: of three whole-suite runs side by side on an idle machine, one failed (a dash.js
    # run that never resumed after its last segment, docs/testing.md "Side by side in CI"), so CI
    # runs one process until that is understood and three runs in a row pass.
    if whole_suite and config.option.numprocesses is None and CPUS > 1 and os.environ.get(PARALLEL_ENV) == "1":
        config.option.numprocesses = WORKERS
    if config.option.numprocesses and config.option.dist == "no":
        config.option.dist = "loadfile"
