"""`mpvlab shell SCENARIO`: a scenario's emulated network, up, in Mininet's interactive CLI.

The same topology, links (tbf, delay lines) and MPTCP settings as a run, without server, player or
measurements. Mininet's own `mn --custom` is deliberately not the entry point: `mn` runs Mininet's
global cleanup on Ctrl-C or any exception, which kills every `mnexec` process and deletes every
`*-ethN` link on the host — other runs' included. Here teardown is the run's own (ledger-scoped).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from core import ledger, naming
from mpvlab.run.context import RunContext, RunOptions
from mpvlab.run.emulated import bring_up_network
from mpvlab.scenario import Scenario


def open_shell(scenario: Scenario, scenario_file: Path, scenario_text: str, commands: str | None = None,
               log: Any = print) -> None:
    from mininet.cli import CLI
    from mininet.net import Mininet

    for name in ledger.reap_stale(log):
        log(f"cleaned leftover of an earlier run: {name}")
    run_id = naming.new_run_id()
    workdir = Path(tempfile.mkdtemp(prefix=f"mpvlab-shell-{run_id}-"))
    led: ledger.Ledger | None = None
    try:   # the folder goes however the shell ends, even if the ledger cannot be written
        (workdir / "logs").mkdir()
        led = ledger.Ledger.create(run_id, workdir)
        ctx = RunContext(scenario, scenario_file, scenario_text, run_id, workdir, led, RunOptions(log=log))
        with contextlib.ExitStack() as stack:
            net = bring_up_network(ctx, stack)
            topo = net.topo
            mn = _cli_net(Mininet)
            for node in topo.nodes:
                mn.hosts.append(node.mn)
                mn.nameToNode[node.mn.name] = node.mn
            log(f"run {run_id}: nodes {', '.join(n.mn.name for n in topo.nodes)}; server address "
                f"{topo.server_addr} ({topo.addressing}); paths "
                + ", ".join(f"{p.name} via {p.client_if} ({p.client_addr} -> {p.server_addr})" for p in topo.paths))
            log(f"delay-line logs in {workdir / 'logs'} (removed on exit); type 'exit' to tear everything down")
            if commands is None:
                CLI(mn)
            else:
                script = workdir / "commands.mn"
                script.write_text(commands)
                CLI(mn, script=str(script))
    finally:
        if led is not None:
            ledger.cleanup_run(led)
        shutil.rmtree(workdir, ignore_errors=True)   # delay-line logs of an interactive session only


def _cli_net(mininet_cls: Any) -> Any:
    """An empty Mininet object for the CLI. Creating one runs `Mininet.init()` → `fixLimits()`, which
    raises ten host-wide settings of the root namespace (tcp_rmem, tcp_wmem, rmem_max, …) and never
    restores them; new namespaces inherit tcp_rmem/tcp_wmem, so every later run's buffers would depend
    on whether someone had opened a shell. `Mininet.__init__` calls `Mininet.init()` on the base class,
    which returns early once `inited` is set: set for this construction only, in this process only."""
    was = mininet_cls.inited
    mininet_cls.inited = True
    try:
        return mininet_cls(topo=None, build=False, controller=None)
    finally:
        mininet_cls.inited = was
