"""The journal of changes a physical run makes on hosts, each with the command that undoes it:
mirrored into the run ledger BEFORE the change is made (so `mpvlab cleanup` can undo it after a
crash), undone backwards at teardown with every undo's exit status kept for provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mpvlab.core import proc
from mpvlab.core.hosts import Host
from mpvlab.core.hosts import host_record
from mpvlab.runner.context import RunContext



@dataclass
class Journal:
    """Changes made on hosts and how to undo them; mirrored into the ledger before each change."""

    ctx: RunContext
    hosts: dict[str, Host]
    entries: list[dict[str, Any]] = field(default_factory=list)

    def will(self, host_name: str, undo_argv: list[str], what: str) -> None:
        host = self.hosts[host_name]
        self.ctx.ledger.add_undo(host_record(host), undo_argv, what)
        self.entries.append({"host": host_name, "what": what, "undo": list(undo_argv)})

    def undo_all(self) -> None:
        for e in reversed(self.entries):
            if "undo_exit" in e:
                continue
            try:
                cp = self.hosts[e["host"]].run(e["undo"], check=False, timeout=30)
                e["undo_exit"] = cp.returncode
                if cp.returncode != 0 and cp.stderr.strip():
                    e["undo_stderr"] = cp.stderr.strip()[-300:]
            except proc.CommandError as err:
                e["undo_exit"] = None
                e["undo_stderr"] = str(err)[-300:]
        self.ctx.ledger.clear_undo()
