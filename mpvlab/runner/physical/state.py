"""The state every step of a physical run shares: the plan, the journal, each role's working folder,
the hosts' clock offsets, the client's per-path source addresses and the processes started (each
recorded in the ledger at once); and the error the steps raise."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpvlab.core import proc
from mpvlab.runner.physical.journal import Journal
from mpvlab.core.hosts import RemoteProcess
from mpvlab.topologies.physical import PhysicalPlan
from mpvlab.core.hosts import host_record
from mpvlab.runner.context import RunContext




@dataclass
class Started:
    host_name: str
    label: str
    process: subprocess.Popen[bytes]


@dataclass
class PhysicalRun:
    ctx: RunContext
    plan: PhysicalPlan
    journal: Journal
    dirs: dict[str, str] = field(default_factory=dict)        # role -> working folder on its host
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    client_addrs: dict[str, str] = field(default_factory=dict)  # path -> client source address
    prov: dict[str, Any] = field(default_factory=dict)
    started: list[Started] = field(default_factory=list)

    def start(self, host_name: str, argv: list[str], log: Path, label: str,
              env: dict[str, str] | None = None) -> Started:
        """Start a long-running command on a host; its pid (remote pid + start time over SSH) goes
        into the ledger at once, so a crash of the runner still gets it stopped."""
        host = self.plan.host(host_name)
        with log.open("wb") as out:
            p = host.popen(argv, stdout=out, stderr=out, env=env)
        where = "ssh client" if isinstance(p, RemoteProcess) else "local"
        self.ctx.ledger.add_proc(proc.ProcRef.of(p.pid, f"{label} ({where})"))
        if isinstance(p, RemoteProcess):
            self.ctx.ledger.add_remote_proc(host_record(host), p.remote_pid, p.remote_start, label)
        s = Started(host_name, label, p)
        self.started.append(s)
        return s

    def t0_on(self, host_name: str) -> int:
        return self.ctx.t0_ns + self.offsets[host_name][0]
