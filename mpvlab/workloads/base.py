"""What the platform needs of a workload, outside the run itself: one WorkloadKind per workload
(registry.py lists them). The scenario schema composes `spec`; its cross-field checks read the
fields below instead of naming a workload; the console summary asks `console_lines`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mpvlab.core.quantities import Strict

# (summary, several_clients) -> the workload's console lines; several_clients: the summary is the
# topology's per-client one (players by role) rather than one client's
ConsoleLines = Callable[[Mapping[str, Any], bool], list[str]]


@dataclass(frozen=True)
class WorkloadKind:
    name: str                                   # scenario `workload.kind`, summary `workload`
    spec: type[Strict]                          # its `workload:` model (`kind` is its Literal name)
    transport: Literal["mptcp", "udp"]          # udp: the MPTCP scheduler does not apply
    console_lines: ConsoleLines
    # the scenario's media length in ns, from (workload spec, video spec): a stream that encodes its
    # own picture has its own duration, the others play the `video:` section's
    media_ns: Callable[[Any, Any], int]
    # one line for `mpvlab validate`, from the scenario
    describe: Callable[[Any], str]
    # scenario sections it never reads → what to use instead (a set section is refused, issue 33)
    sections_unused: Mapping[str, str] = field(default_factory=dict)
    default_clients: int = 2                    # on a topology with several clients, when not given
    max_clients: int | None = None              # None: as many as the topology has
    max_clients_why: str = ""                   # said when more are asked for
    topology_note: str = ""                     # said when a topology does not run it
    port: int | None = None                     # a fixed server port (flows of runs without flows.json)
    # what its part of a several-client summary must carry (mpvlab/results/summary.py SharedSummary)
    several_clients_keys: tuple[str, ...] = ()

    @property
    def plays_video_section(self) -> bool:
        """Whether its runs play the scenario's `video:` file (encoded before any run starts)."""
        return "video" not in self.sections_unused


def secs(v: float | None) -> str:
    """A duration for the console, to the millisecond (summary.json keeps the full value)."""
    return "n/a" if v is None else f"{v:.3f} s"
