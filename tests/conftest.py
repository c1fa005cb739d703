"""Session-wide, in one place (tests/policy.py): what each test needs, decided from its markers
(root, netns, chromium, dashjs, slurm, tools), with every skip a failure under MPVLAB_EXPECT_ALL=1
(.ci/run); the CPU steal recorded during every test and summarised at the end; and, for a
whole-suite run (what CI runs), pytest-xdist with one worker per CPU, tests distributed by file, and
`cpu` tests never two at a time (MPVLAB_TEST_PARALLEL=0: one process)."""

from __future__ import annotations

import os

import pytest

from policy import (  # noqa: F401 — pytest finds hooks and fixtures by name in this module
    _record_steal, pytest_collection_modifyitems, pytest_configure, pytest_configure_node,
    pytest_make_collect_report, pytest_runtest_makereport, pytest_runtest_protocol, pytest_runtest_setup,
    pytest_sessionfinish, pytest_terminal_summary, pytest_unconfigure,
)

WORKERS = os.cpu_count() or 1
PARALLEL_ENV = "MPVLAB_TEST_PARALLEL"   # =0: the whole suite in one process (default: one xdist worker per CPU)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A whole-suite run (no paths given: pyproject's testpaths) runs on one xdist worker per CPU,
    distributed by file; MPVLAB_TEST_PARALLEL=0 keeps it in one process. A run of chosen files stays in
    one process (so -s and --pdb work) unless -n is given; `-n 0` runs the whole suite in one process."""
    if not hasattr(config.option, "numprocesses") or hasattr(config, "workerinput"):
        return
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    # Side by side since issue 44: three whole-suite runs in a row on an idle machine, 0 failures
    # (docs/testing.md); the `cpu`/`alone` groups keep the timing tests from their neighbours.
    if whole_suite and config.option.numprocesses is None and WORKERS > 1 and os.environ.get(PARALLEL_ENV) != "0":
        config.option.numprocesses = WORKERS
    if config.option.numprocesses and config.option.dist == "no":
        config.option.dist = "loadfile"
