"""Bench/test bed for the AF_XDP delay line prototype (links/delayline/xdp) on testbed.delayline's
client - router - server line: the line takes the frames entering the router on one veth ('rs':
server->client) and sends them out of the other ('rc') itself, bypassing the router's stack.

A FORWARD DROP rule for the ingress veth (`guard`) makes a dead line mean 100 % loss, as the NFQUEUE
line's rule without --queue-bypass does: once the kernel detaches the line's XDP program (its BPF
link closes with the process), frames reach the stack and the rule drops them instead of forwarding
them undelayed. Used by tests/test_delayline_xdp.py and bench/bench_delayline.py (--backend xdp).
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpvlab.core import proc
from mpvlab.testbed.delayline import DELAYLINE_DIR, Line, stop_and_read_stats

XDP_DIR = DELAYLINE_DIR / "xdp"
BINARY = XDP_DIR / "build" / "mpvlab-xdpline"
WAKECOST = XDP_DIR / "build" / "mpvlab-wakecost"


def build() -> Path:
    proc.run(["make", "-s", "-C", str(XDP_DIR)], timeout=120)
    return BINARY


def mac_of(line: Line, ns: str, dev: str) -> str:
    out = line.nsx(ns, "ip", "-j", "link", "show", dev).stdout
    return str(json.loads(out)[0]["address"])


def xdp_prog_id(line: Line, dev: str) -> int | None:
    """Id of the XDP program attached to the router's device dev, None if none is."""
    info = json.loads(line.nsx(line.ns_r, "ip", "-j", "-d", "link", "show", line.ifn(dev)).stdout)[0]
    xdp = info.get("xdp")
    if not xdp:
        return None
    prog = xdp.get("prog") or (xdp.get("attached") or [{}])[0].get("prog") or {}
    return int(prog["id"]) if "id" in prog else None


def bpf_prog_exists(prog_id: int) -> bool:
    """Whether the kernel still holds BPF program prog_id (bpftool exits non-zero once it is freed)."""
    cp = subprocess.run(["bpftool", "prog", "show", "id", str(prog_id)], capture_output=True, text=True,
                        timeout=30)
    return cp.returncode == 0


def guard(line: Line, in_dev: str = "rs") -> None:
    """Drop what reaches the router's stack from in_dev: only the line forwards that direction."""
    line.nsx(line.ns_r, "iptables", "-A", "FORWARD", "-i", line.ifn(in_dev), "-j", "DROP")


@dataclass
class XdpDaemon:
    proc: subprocess.Popen[str]
    ready: Path
    stats: Path

    def wait_ready(self, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.ready.exists():
                return
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"xdp line exited {self.proc.returncode}: {err}")
            time.sleep(0.005)
        raise RuntimeError("xdp line did not become ready")

    def stop(self, timeout: float = 5.0) -> dict[str, Any]:
        """SIGTERM, wait, return the stats JSON (raises on non-zero exit)."""
        return stop_and_read_stats(self.proc, self.stats, "xdp line", timeout)

    def cpu_ticks(self) -> int:
        ticks = proc.cpu_ticks(self.proc.pid)
        if ticks is None:
            raise ProcessLookupError(f"xdp line {self.proc.pid} is gone")
        return ticks


def start(line: Line, delay_us: int, in_dev: str = "rs", out_dev: str = "rc", peer: tuple[str, str] = ("c", "c0"),
          tolerance_us: int | None = None, frames: int | None = None, rt_prio: int = 50,
          name: str = "xdp") -> XdpDaemon:
    """Start the line in the router: frames entering on in_dev leave on out_dev towards the
    peer (role, device) after delay_us."""
    ns_peer = line.bed.nodes[peer[0]].name
    ready, stats = line.tmp / f"{name}.ready", line.tmp / f"{name}.stats.json"
    ready.unlink(missing_ok=True)
    args = [str(BINARY), "--in", line.ifn(in_dev), "--out", line.ifn(out_dev),
            "--dst-mac", mac_of(line, ns_peer, line.ifn(peer[1])), "--delay-us", str(delay_us),
            "--rt-prio", str(rt_prio), "--ready-file", str(ready), "--stats", str(stats)]
    if tolerance_us is not None:
        args += ["--batch-tolerance-us", str(tolerance_us)]
    if frames is not None:
        args += ["--frames", str(frames)]
    d = XdpDaemon(proc=line.spawn(line.ns_r, args), ready=ready, stats=stats)
    d.wait_ready()
    return d
