"""Every MPTCP scheduler a scenario may name, listed once: its parameter model (params.py), how it
runs here (the kernel's own `default`, or a policy of the steering controller, steer.c + policy.c),
whether it can run on physical hosts, and how the report shows it (label, hatch, line style, order).
The scenario schema, the run and the report read this list; nothing else names schedulers.

Adding a scheduler policy: its decision in policy.c, its parameter model in params.py and one entry
here (schedulers/README.md, "Adding a scheduler policy").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from mpvlab.schedulers.params import BdpParams, DefaultParams, EcfParams, MinRttParams


@dataclass(frozen=True)
class Scheduler:
    name: str
    description: str
    label: str
    hatch: str          # bar fill in the report's grouped bars
    linestyle: str      # line style in time-series figures
    params: type[BaseModel]
    mechanism: Literal["kernel", "steering"]

    @property
    def physical_ok(self) -> bool:
        """The steering controller needs a BPF observer in the server's namespace on this machine."""
        return self.mechanism == "kernel"

    def parse_params(self, values: dict[str, Any] | None) -> BaseModel:
        return self.params.model_validate(values or {})


ENTRIES: tuple[Scheduler, ...] = (
    Scheduler("default", "the kernel's own scheduler (lowest linger time among active non-backup subflows)",
              "default", "", "-", DefaultParams, "kernel"),
    Scheduler("minrtt", "lowest smoothed RTT first among subflows with window space (steering controller)",
              "minRTT", "////", "--", MinRttParams, "steering"),
    Scheduler("bdp", "largest BBR-style bandwidth-delay product, sticky until exhausted (steering controller)",
              "BDP", "\\\\\\\\", ":", BdpParams, "steering"),
    Scheduler("ecf", "earliest completion first: a slower subflow only when the data completes earlier there "
              "(Lim et al., CoNEXT 2017; steering controller)", "ECF", "xx", "-.", EcfParams, "steering"),
)
REGISTRY: dict[str, Scheduler] = {e.name: e for e in ENTRIES}
STEERING: tuple[str, ...] = tuple(e.name for e in ENTRIES if e.mechanism == "steering")


def order(name: str) -> tuple[int, str]:
    """Sort key: registry order, unknown names after."""
    names = list(REGISTRY)
    return (names.index(name) if name in names else len(names), name)
