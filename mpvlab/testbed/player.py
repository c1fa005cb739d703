"""A two-namespace bed for testing and benchmarking the player: Apache in a server namespace, the
player in a client namespace, one veth between them whose server side carries a tbf the test
changes over time. Shared by tests/test_player.py, test_dash.py, test_dash_client.py, test_http2.py
and bench/bench_abr_client.py.

Reno on the server: these beds check the player, and Reno returns to the link rate within a few
RTTs after a throttle, whereas BBR (the host default) keeps its low-rate bandwidth estimate for ~10
round trips and then probes up by 1.25x per cycle (measured: ~2 s at 3 of 8 Mbit/s).

`srv` and `cli` are given as roles; up() makes them namespaces of a testbed.bed.Bed (run ledger,
owner lock) and from then on they hold the namespaces' full names.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc
from mpvlab.core.netns import Netns
from mpvlab.testbed.apache import httpd_conf, start_httpd
from mpvlab.testbed.bed import Bed
from mpvlab.player.gstreamer.kind import PROGRAM

REPO = checkout_root()
PY = str(REPO / ".venv" / "bin" / "python")


def run_cmd(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


@dataclass
class Net:
    srv: str
    cli: str
    srv_if: str
    cli_if: str
    srv_ip: str
    cli_ip: str
    rmem: tuple[int, int, int]                      # client tcp_rmem: what TCP holds ahead of the player
    wmem: tuple[int, int, int] | None = None        # server tcp_wmem (None: the namespace default)
    tbf_burst: int = 10_000
    tbf_limit: int = 32_000
    bed: Bed = field(default_factory=Bed, repr=False)

    def ns(self, ns: str, argv: list[str]) -> list[str]:
        return Netns(ns).argv(argv)

    def up(self) -> None:
        self.bed.open()
        srv, cli = self.bed.node(self.srv), self.bed.node(self.cli)
        self.srv, self.cli = srv.name, cli.name
        self.bed.veth(srv, self.srv_if, cli, self.cli_if)
        for ns, dev, ip in ((srv, self.srv_if, self.srv_ip), (cli, self.cli_if, self.cli_ip)):
            ns.run(["ip", "addr", "add", f"{ip}/24", "dev", dev])
            # Full-size frames only, so tbf shapes what TCP actually sends.
            ns.run(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"], check=False)
            ns.run(["sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1"])
        cli.run(["sysctl", "-q", "-w", "net.ipv4.tcp_rmem=" + " ".join(map(str, self.rmem))])
        if self.wmem:
            srv.run(["sysctl", "-q", "-w", "net.ipv4.tcp_wmem=" + " ".join(map(str, self.wmem))])
        srv.run(["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"])

    def set_rate(self, bps: int | None) -> None:
        if bps is None:
            proc.run(self.ns(self.srv, ["tc", "qdisc", "del", "dev", self.srv_if, "root"]), check=False)
            return
        proc.run(self.ns(self.srv, ["tc", "qdisc", "replace", "dev", self.srv_if, "root", "tbf",
                                    "rate", f"{bps}bit", "burst", str(self.tbf_burst), "limit", str(self.tbf_limit)]))

    def down(self) -> None:
        # The bed stops what it started and deletes the namespaces (the veth pair and qdisc with them).
        self.bed.close()


class Apache:
    """apache2 in the foreground in its own ServerRoot, inside the server namespace; the same settings
    that matter as mpvlab/runner/server.py (wildcard Listen, AcceptFilter none, keep-alive, sendfile)."""

    def __init__(self, net: Net, docroot: Path, root: Path, port: int = 8080, flush_max: int = 65536) -> None:
        self.net, self.port, self.root = net, port, root
        root.mkdir(parents=True, exist_ok=True)
        # %D: request duration in microseconds, the server's view of each download.
        conf = httpd_conf(root, docroot, port, f"""KeepAlive On
MaxKeepAliveRequests 0
EnableSendfile On
FlushMaxThreshold {flush_max}
LogFormat "%h %t \\"%r\\" %>s %B %D" timed
CustomLog {root}/access.log timed
""")
        self.proc = start_httpd(net.bed, Netns(net.srv), conf, port, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def url(self, path: str) -> str:
        return f"http://{self.net.srv_ip}:{self.port}/{path}"

    def log(self) -> list[tuple[str, int, int, int]]:
        """(path, status, bytes, duration_us) per request, in log order."""
        out = []
        rx = re.compile(r'"GET (\S+) HTTP/[\d.]+" (\d+) (\d+|-) (\d+)$')
        for line in (self.root / "access.log").read_text().splitlines():
            m = rx.search(line)
            if m:
                out.append((m.group(1), int(m.group(2)), 0 if m.group(3) == "-" else int(m.group(3)),
                            int(m.group(4))))
        return out

    def stop(self) -> None:
        proc.stop_child(self.proc, grace=5)


@dataclass
class Result:
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]


def start_player(net: Net, url: str, out: Path, t0_ns: int, *extra: str) -> subprocess.Popen[bytes]:
    argv = [PY, "-m", PROGRAM, "--url", url, "--events", str(out / "events.jsonl"),
            "--summary", str(out / "summary.json"), "--t0-ns", str(t0_ns), "--timeout-s", "45", *extra]
    return net.bed.popen(net.cli, argv, "player", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish_player(proc: subprocess.Popen[bytes], out: Path, timeout: float = 60) -> Result:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("player hung past the test's own timeout") from None
    summ = json.loads((out / "summary.json").read_text())
    evs = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line]
    return Result(proc.returncode, summ, evs)


def wait_event(out: Path, type_: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    p = out / "events.jsonl"
    while time.monotonic() < deadline:
        if p.exists():
            for line in p.read_text().splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue        # a line still being written
                if e.get("type") == type_:
                    return e
        time.sleep(0.02)
    raise AssertionError(f"no {type_} event within {timeout} s")


def t_now(t0_ns: int) -> float:
    return (time.monotonic_ns() - t0_ns) / 1e9
