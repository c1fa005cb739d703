"""What the bulk and rtp workloads share: one sender process on the server and one receiver on the
client, both started with the run (nothing staged before t0), given up after the workload's own
`max_run_s`."""

from __future__ import annotations

import abc
import contextlib
import subprocess
import time

from mpvlab.runner.context import RunContext
from mpvlab.runner.workloads.base import Ends


class TwoEnds(abc.ABC):
    def __init__(self) -> None:
        self.sender: subprocess.Popen[bytes] | None = None
        self.receiver: subprocess.Popen[bytes] | None = None
        self.timeout_s = 0.0
        self.deadline = 0.0

    @abc.abstractmethod
    def max_run_s(self, ctx: RunContext) -> float:
        """The longest the workload may run from `start` (Workload.max_run_s)."""

    def stage(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:  # noqa: B027 (a default, not abstract)
        """Nothing ahead of t0: both ends start with the run."""

    def arm_deadline(self, ctx: RunContext) -> None:
        """At start: from now on `overdue()` says when the workload has run longer than it may."""
        self.timeout_s = self.max_run_s(ctx)
        self.deadline = time.monotonic() + self.timeout_s

    def overdue(self) -> bool:
        return time.monotonic() > self.deadline
