"""Three-namespace dumbbell for exercising congestion controls.

    <prefix>-a (sender, 10.201.1.1) --- <prefix>-r (router, tbf on egress to b) --- <prefix>-b (receiver, 10.201.2.2)

The bottleneck is a tbf on the router's egress towards the receiver (as in
the BBR-S study), not on the sender's own interface: a qdisc on the sender
would push back on TCP through TCP Small Queues and hide the queue from the
congestion control.  There is no netem on this kernel, so the only
propagation delay is the veth path (tens of microseconds).

The congestion control is selected the way the orchestrator does it: a
`congctl NAME` attribute on the sender's route to the receiver.
Everything created carries the given prefix and is removed by `close()`.
"""
from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SENDER_ADDR = "10.201.1.1"
ROUTER_A_ADDR = "10.201.1.2"
ROUTER_B_ADDR = "10.201.2.1"
RECEIVER_ADDR = "10.201.2.2"
RECEIVER_NET = "10.201.2.0/24"
SENDER_NET = "10.201.1.0/24"


def run(args: list[str], check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run a command (argument list, never a shell) and fail loudly."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


@dataclass
class Dumbbell:
    prefix: str = "hcc"
    rate_bit: int = 25_000_000
    burst_bytes: int = 15_000
    limit_bytes: int = 150_000
    offloads: bool = False  # gso/tso/gro on every veth
    created: list[str] = field(default_factory=list)

    @property
    def ns_a(self) -> str:
        return f"{self.prefix}-a"

    @property
    def ns_r(self) -> str:
        return f"{self.prefix}-r"

    @property
    def ns_b(self) -> str:
        return f"{self.prefix}-b"

    def ns(self, ns: str, *args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return run(["ip", "netns", "exec", ns, *args], check=check, timeout=timeout)

    def open(self) -> "Dumbbell":
        for ns in (self.ns_a, self.ns_r, self.ns_b):
            if Path(f"/run/netns/{ns}").exists():
                raise RuntimeError(f"namespace {ns} already exists (a previous run did not clean up?)")
        try:
            for ns in (self.ns_a, self.ns_r, self.ns_b):
                run(["ip", "netns", "add", ns])
                self.created.append(ns)
            p = self.prefix
            # Create the veths directly inside the namespaces: nothing touches the host's.
            run(["ip", "link", "add", f"{p}a0", "netns", self.ns_a, "type", "veth",
                 "peer", "name", f"{p}r0", "netns", self.ns_r])
            run(["ip", "link", "add", f"{p}r1", "netns", self.ns_r, "type", "veth",
                 "peer", "name", f"{p}b0", "netns", self.ns_b])
            self._addr(self.ns_a, f"{p}a0", f"{SENDER_ADDR}/24")
            self._addr(self.ns_r, f"{p}r0", f"{ROUTER_A_ADDR}/24")
            self._addr(self.ns_r, f"{p}r1", f"{ROUTER_B_ADDR}/24")
            self._addr(self.ns_b, f"{p}b0", f"{RECEIVER_ADDR}/24")
            self.ns(self.ns_r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
            for ns in (self.ns_a, self.ns_b):
                # Independent runs: no cached metrics (ssthresh, rtt) between connections.
                self.ns(ns, "sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1")
            self.ns(self.ns_b, "ip", "route", "add", SENDER_NET, "via", ROUTER_B_ADDR)
            self.set_cc("cubic")
            for ns, dev in ((self.ns_a, f"{p}a0"), (self.ns_r, f"{p}r0"),
                            (self.ns_r, f"{p}r1"), (self.ns_b, f"{p}b0")):
                state = "on" if self.offloads else "off"
                self.ns(ns, "ethtool", "-K", dev, "gso", state, "tso", state, "gro", state)
            self.ns(self.ns_r, "tc", "qdisc", "replace", "dev", f"{p}r1", "root", "tbf",
                    "rate", f"{self.rate_bit}bit", "burst", str(self.burst_bytes),
                    "limit", str(self.limit_bytes))
        except BaseException:
            self.close()
            raise
        return self

    def _addr(self, ns: str, dev: str, cidr: str) -> None:
        self.ns(ns, "ip", "addr", "add", cidr, "dev", dev)
        self.ns(ns, "ip", "link", "set", dev, "up")
        self.ns(ns, "ip", "link", "set", "lo", "up")

    def set_cc(self, name: str) -> None:
        """Select the sender's CC for new connections to the receiver (route congctl)."""
        self.ns(self.ns_a, "ip", "route", "replace", RECEIVER_NET, "via", ROUTER_A_ADDR,
                "dev", f"{self.prefix}a0", "congctl", name)

    def close(self) -> None:
        # Deleting a namespace deletes its veth ends and qdiscs with it.
        for ns in reversed(self.created):
            for pid in run(["ip", "netns", "pids", ns], check=False).stdout.split():
                # Only processes inside our own namespaces, i.e. started by us.
                run(["kill", "-TERM", pid], check=False)
            run(["ip", "netns", "del", ns], check=False)
        self.created.clear()

    def __enter__(self) -> "Dumbbell":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def iperf(self, seconds: float, omit: float = 2.0, port: int = 5201) -> dict:
        """Bulk TCP from sender to receiver; returns iperf3's JSON summary."""
        srv = subprocess.Popen(["ip", "netns", "exec", self.ns_b, "iperf3", "-s", "-1",
                                "-B", RECEIVER_ADDR, "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if f":{port}" in self.ns(self.ns_b, "ss", "-ltnH").stdout:
                    break
                time.sleep(0.05)
            out = self.ns(self.ns_a, "iperf3", "-c", RECEIVER_ADDR, "-p", str(port), "-J",
                          "-t", str(seconds), "-O", str(omit), timeout=seconds + omit + 30)
            return json.loads(out.stdout)
        finally:
            try:
                srv.wait(timeout=5)
            except subprocess.TimeoutExpired:
                srv.terminate()
                srv.wait(timeout=5)
