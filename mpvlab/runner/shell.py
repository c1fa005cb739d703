"""`mpvlab shell SCENARIO`: a scenario's emulated network, up, in Mininet's interactive CLI.

The same topology, links (tbf, delay lines) and MPTCP settings as a run, without server, player or
measurements. Mininet's own `mn --custom` is deliberately not the entry point: `mn` runs Mininet's
global cleanup on Ctrl-C or any exception, which kills every `mnexec` process and deletes every
`*-ethN` link on the host — other runs' included. Here teardown is the run's own (ledger-scoped).

The CLI itself, with Mininet's commands on the scenario's nodes, is mpvlab/emulation/cli.py.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mpvlab.core import ledger, naming
from mpvlab.emulation import cli
from mpvlab.runner.context import RunContext, RunOptions
from mpvlab.runner.emulated import bring_up_network
from mpvlab.input.scenario import Scenario


def open_shell(scenario: Scenario, scenario_file: Path, scenario_text: str, commands: str | None = None,
               log: Any = print) -> None:
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
            log(f"run {run_id}: nodes {', '.join(n.mn.name for n in topo.nodes)}; server address "
                f"{topo.server_addr} ({topo.addressing}); paths "
                + ", ".join(f"{p.name} via {p.client_if} ({p.client_addr} -> {p.server_addr})" for p in topo.paths))
            log(f"delay-line logs in {workdir / 'logs'} (removed on exit); type 'exit' to tear everything down")
            # A host's address is the one the scenario's traffic uses: the server address (not on
            # its link to the edge router: only it is routed from the client) and path 0's client address.
            cli.run_cli([n.mn for n in topo.nodes],
                        {"server": topo.server_addr, "client": topo.paths[0].client_addr},
                        workdir, commands, log)
    finally:
        if led is not None:
            ledger.cleanup_run(led)
        shutil.rmtree(workdir, ignore_errors=True)   # delay-line logs of an interactive session only
