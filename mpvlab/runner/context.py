"""What every step of a run shares: the run's identity, its result directory, its ledger, the options it
was started with and run time zero (t0_ns, CLOCK_MONOTONIC)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mpvlab.core.paths import checkout_root
from mpvlab.runner.timeline import Timeline

if TYPE_CHECKING:      # annotations only: the CLI reads CPUS_PER_RUN without the scenario's models (issue 36)
    from mpvlab.core.ledger import Ledger
    from mpvlab.input.scenario import Scenario

REPO = checkout_root()


DEFAULT_RESULTS = REPO / "results"


@dataclass
class RunOptions:
    results_root: Path = DEFAULT_RESULTS
    progress: Callable[[str], None] = lambda _phase: None
    log: Callable[[str], None] = lambda _msg: None
    key_dir: Path | None = None   # topology physical: where SSH key files must lie (default: MPVLAB_KEY_DIR)

    def __post_init__(self) -> None:
        # Absolute from the start: the run writes paths under it into configs that other programs read
        # from their own working directory (apache2 resolves a relative -f against its ServerRoot,
        # /etc/apache2), so `--results results` failed with "Could not open configuration file".
        self.results_root = Path(self.results_root).absolute()


@dataclass
class RunContext:
    scenario: Scenario
    scenario_file: Path
    scenario_text: str
    run_id: str
    run_dir: Path
    ledger: Ledger
    opts: RunOptions
    extra_prov: dict[str, Any] = field(default_factory=dict)
    t0_ns: int = 0
    timeline: Timeline = field(default_factory=Timeline)   # recorded in provenance, failed runs too
    # the queue samplers' rows by folder, read once by the summary and reused by the verdict (issue 36)
    queue_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def data(self) -> Path:
        return self.run_dir / "data"


# A run's delay lines, player (decoding video in real time) and samplers keep about one CPU busy, and
# the measured figures (docs/sweeps.md "How many at once", bench/bench_fidelity_parallel.py) hold with one
# run per two CPUs: the default leaves the other for the host, the sweep itself and other tenants.
CPUS_PER_RUN = 2
# Runs at once on one machine (a sweep's --parallel, a cluster node's --per-node, mpvlab.sweep): beyond
# 8 the measured fidelity no longer holds on the machines this was measured on (docs/sweeps.md).
MAX_PARALLEL = 8


def default_parallel(cpus: int) -> int:
    return max(1, min(MAX_PARALLEL, cpus // CPUS_PER_RUN))
