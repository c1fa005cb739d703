"""The one builder every rig stands on: a test-bed run with a ledger, its namespaces and processes.

A `Bed` is a run to the platform: a run id from core.naming with the prefix `tb` (so `ip netns`
shows `mpv-tbXXXX-ROLE`), a core.ledger.Ledger written before anything exists and the run's owner
lock held by this process for as long as the bed is open. Every namespace it makes is named
`mpv-<run id>-<role>` and listed in the ledger before it is created; every process it starts is
listed with its start time. So a test killed with SIGKILL leaves a ledger whose owner lock is free:
the next bed (which reaps on open, as a run does) or `mpvlab cleanup` removes exactly what it made,
and a live bed's objects are never taken for an orphan by anyone else's run.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Self, Sequence

from mpvlab.core import ledger, naming, proc
from mpvlab.core.netns import Netns

RUN_PREFIX = "tb"


class Rig:
    """A rig with up() and down(): `with` brings it up and always down again, also when up() fails
    half-way (down() must cope with a half-built rig; the bed's close() does)."""

    def up(self) -> object:
        raise NotImplementedError

    def down(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


class Bed:
    """Open with `with Bed() as bed:` (or open()/close()); close() removes everything, also after a
    half-built bed. `workdir`: where logs and files go (a fresh temporary one, removed on close, if
    not given)."""

    def __init__(self, workdir: Path | None = None) -> None:
        self.run_id = naming.new_run_id(RUN_PREFIX)
        self._own_workdir = workdir is None
        # Made on open(), not here: a rig built but never brought up leaves nothing in /tmp either.
        self.workdir = workdir if workdir is not None else Path(tempfile.gettempdir()) / f"htb-{self.run_id}"
        self.ledger: ledger.Ledger | None = None
        self.nodes: dict[str, Netns] = {}

    def open(self) -> Bed:
        # What earlier killed beds (or runs) left behind goes first, the way every run starts.
        ledger.reap_stale()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ledger = ledger.Ledger.create(self.run_id, self.workdir)
        return self

    def close(self) -> None:
        if self.ledger is not None:
            # The ledger's own cleanup: processes (pid + start time), then namespaces, then the lock.
            ledger.cleanup_run(self.ledger)
            self.ledger = None
        self.nodes = {}
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Bed:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- namespaces and links ---------------------------------------------------------
    def node(self, role: str) -> Netns:
        """A new namespace `mpv-<run id>-<role>` with its loopback up (listed before it exists)."""
        assert self.ledger is not None, "open the bed first"
        ns = Netns(naming.netns_name(self.run_id, role))
        self.ledger.add_netns(ns.name)
        proc.run(["ip", "netns", "add", ns.name])
        self.nodes[role] = ns
        ns.run(["ip", "link", "set", "lo", "up"])
        return ns

    def ifname(self, tag: str) -> str:
        """An interface name carrying the run id (fits IFNAMSIZ)."""
        return naming.ifname(self.run_id, tag)

    def veth(self, a: Netns, a_if: str, b: Netns, b_if: str) -> None:
        """A veth pair created directly inside the two namespaces (never in the host's), both ends up;
        it goes with its namespaces."""
        proc.run(["ip", "link", "add", a_if, "netns", a.name, "type", "veth", "peer", "name", b_if,
                  "netns", b.name])
        a.run(["ip", "link", "set", a_if, "up"])
        b.run(["ip", "link", "set", b_if, "up"])

    def link(self, a: Netns, a_if: str, a_cidr: str, b: Netns, b_if: str, b_cidr: str, *,
             offloads: bool | None = False) -> None:
        """veth() plus an address at each end; offloads False (the default) turns TSO/GSO/GRO off so
        every frame on the wire is at most one MTU (what tbf shapes and what counters compare)."""
        self.veth(a, a_if, b, b_if)
        for ns, dev, cidr in ((a, a_if, a_cidr), (b, b_if, b_cidr)):
            ns.run(["ip", "addr", "add", cidr, "dev", dev])
            if offloads is not None:
                self.offloads(ns, dev, offloads)

    @staticmethod
    def offloads(ns: Netns, dev: str, on: bool) -> None:
        state = "on" if on else "off"
        ns.run(["ethtool", "-K", dev, "tso", state, "gso", state, "gro", state])

    # -- processes ----------------------------------------------------------------------
    def popen(self, ns: Netns | str, argv: Sequence[str], label: str = "", **kw: Any) -> subprocess.Popen[Any]:
        """Start argv inside `ns` (any subprocess.Popen keywords) and list it in the ledger: if the
        test dies, cleanup stops exactly this process (same pid and start time)."""
        assert self.ledger is not None, "open the bed first"
        ns = ns if isinstance(ns, Netns) else Netns(ns)
        p = subprocess.Popen(ns.argv(list(argv)), **kw)
        self.ledger.add_proc(proc.ProcRef.of(p.pid, label or Path(str(argv[0])).name))
        return p

    def watch(self, pid: int, label: str) -> None:
        """List a process a component started for us (a collector, a controller) in the ledger."""
        assert self.ledger is not None, "open the bed first"
        self.ledger.add_proc(proc.ProcRef.of(pid, label))
