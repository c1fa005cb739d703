"""Which code runs a scenario of each topology kind. The session (session.py) is the same for every
kind; the kind's `execute(ctx)` brings its network up, plays and returns the summary."""

from __future__ import annotations

from typing import Any, Callable

from mpvlab.run import emulated, shared
from mpvlab.run.context import RunContext
from mpvlab.run.physical import run as physical


def _physical(ctx: RunContext) -> dict[str, Any]:
    return physical.execute(ctx, ctx.opts.key_dir)


KINDS: dict[str, Callable[[RunContext], dict[str, Any]]] = {
    "dual-path": emulated.execute,
    "dumbbell": emulated.execute,
    "shared-bottleneck": shared.execute,
    "physical": _physical,
}
