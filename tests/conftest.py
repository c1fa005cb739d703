"""Session-wide: record the CPU steal during every test (and the whole session) and summarise it
at the end, so a timing bound can be read next to what the hypervisor took at that moment.
Steal during a module's shared fixture (e.g. one end-to-end run) counts in the session total."""

from __future__ import annotations

from typing import Iterator

import pytest

from hostnoise import STEAL_LIMIT
from mpvlab.core.hoststeal import StealMeter, StealWindow

_STEAL_BY_TEST = pytest.StashKey[dict[str, StealWindow]]()
_SESSION = pytest.StashKey[StealMeter]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STEAL_BY_TEST] = {}
    config.stash[_SESSION] = StealMeter().__enter__()


@pytest.fixture(autouse=True)
def _record_steal(request: pytest.FixtureRequest) -> Iterator[None]:
    with StealMeter() as meter:
        yield
    request.config.stash[_STEAL_BY_TEST][request.node.nodeid] = meter.window


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    by_test = config.stash.get(_STEAL_BY_TEST, {})
    session = config.stash.get(_SESSION, None)
    if not by_test or session is None:
        return
    session.__exit__()
    # Windows under a second are below the counter's resolution (one 10 ms tick is 1 % of 1 s).
    contended = sorted(((w.lost, node, w) for node, w in by_test.items()
                        if w.lost > STEAL_LIMIT and w.wall_s >= 1.0), reverse=True)
    terminalreporter.section("host CPU steal (hypervisor contention)")
    terminalreporter.write_line(f"session: {session.window.describe()}; {len(contended)} of {len(by_test)} "
                                f"tests (of 1 s or more) above {STEAL_LIMIT:.0%}"
                                + (", the most contended:" if contended else ""))
    for _, node, w in contended[:15]:
        terminalreporter.write_line(f"  {node}: {w.describe()}")
