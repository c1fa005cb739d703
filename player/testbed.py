"""A two-namespace bed for testing and benchmarking the player: Apache in a server namespace, the
player in a client namespace, one veth between them whose server side carries a tbf the test
changes over time. Shared by tests/test_player.py, tests/test_dash.py and the player benches.

Reno on the server: these beds check the player, and Reno returns to the link rate within a few
RTTs after a throttle, whereas BBR (the host default) keeps its low-rate bandwidth estimate for ~10
round trips and then probes up by 1.25x per cycle (measured: ~2 s at 3 of 8 Mbit/s).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python")
PLAYER = str(REPO / "player" / "mpvlab_player.py")
MODULES = "/usr/lib/apache2/modules"


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

    def ns(self, ns: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv]

    def up(self) -> None:
        run_cmd(["ip", "netns", "add", self.srv])
        run_cmd(["ip", "netns", "add", self.cli])
        run_cmd(["ip", "link", "add", self.srv_if, "netns", self.srv, "type", "veth",
                 "peer", "name", self.cli_if, "netns", self.cli])
        for ns, dev, ip in ((self.srv, self.srv_if, self.srv_ip), (self.cli, self.cli_if, self.cli_ip)):
            run_cmd(self.ns(ns, ["ip", "link", "set", "lo", "up"]))
            run_cmd(self.ns(ns, ["ip", "addr", "add", f"{ip}/24", "dev", dev]))
            run_cmd(self.ns(ns, ["ip", "link", "set", dev, "up"]))
            # Full-size frames only, so tbf shapes what TCP actually sends.
            run_cmd(self.ns(ns, ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"]), check=False)
            run_cmd(self.ns(ns, ["sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1"]))
        run_cmd(self.ns(self.cli, ["sysctl", "-q", "-w", "net.ipv4.tcp_rmem=" + " ".join(map(str, self.rmem))]))
        if self.wmem:
            run_cmd(self.ns(self.srv, ["sysctl", "-q", "-w", "net.ipv4.tcp_wmem=" + " ".join(map(str, self.wmem))]))
        run_cmd(self.ns(self.srv, ["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"]))

    def set_rate(self, bps: int | None) -> None:
        if bps is None:
            run_cmd(self.ns(self.srv, ["tc", "qdisc", "del", "dev", self.srv_if, "root"]), check=False)
            return
        run_cmd(self.ns(self.srv, ["tc", "qdisc", "replace", "dev", self.srv_if, "root", "tbf",
                                   "rate", f"{bps}bit", "burst", str(self.tbf_burst), "limit", str(self.tbf_limit)]))

    def down(self) -> None:
        # Deleting the namespaces removes the veth pair and its qdisc with them.
        for ns in (self.srv, self.cli):
            run_cmd(["ip", "netns", "del", ns], check=False)


class Apache:
    """apache2 in the foreground in its own ServerRoot, inside the server namespace; the same settings
    that matter as mpvlab/server.py (wildcard Listen, AcceptFilter none, keep-alive, sendfile)."""

    def __init__(self, net: Net, docroot: Path, root: Path, port: int = 8080, flush_max: int = 65536) -> None:
        self.net, self.port, self.root = net, port, root
        root.mkdir(parents=True, exist_ok=True)
        conf = root / "httpd.conf"
        # %D: request duration in microseconds, the server's view of each download.
        conf.write_text(f"""
ServerRoot {root}
PidFile {root}/httpd.pid
DefaultRuntimeDir {root}
Mutex pthread default
ServerName localhost
LoadModule mpm_event_module {MODULES}/mod_mpm_event.so
LoadModule authz_core_module {MODULES}/mod_authz_core.so
LoadModule mime_module {MODULES}/mod_mime.so
TypesConfig /etc/mime.types
AddType application/dash+xml .mpd
AddType video/iso.segment .m4s
AcceptFilter http none
User www-data
Group www-data
Listen {port}
KeepAlive On
MaxKeepAliveRequests 0
DocumentRoot {docroot}
<Directory {docroot}>
    Require all granted
</Directory>
EnableSendfile On
FlushMaxThreshold {flush_max}
ErrorLog {root}/error.log
LogFormat "%h %t \\"%r\\" %>s %B %D" timed
CustomLog {root}/access.log timed
""")
        self.proc = subprocess.Popen(net.ns(net.srv, ["apache2", "-f", str(conf), "-DFOREGROUND"]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            r = run_cmd(net.ns(net.srv, ["ss", "-Htln", f"sport = :{port}"]), check=False)
            if r.stdout.strip():
                return
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"apache2 exited: {err}")
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("apache2 did not start listening within 5 s")

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
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Result:
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]


def start_player(net: Net, url: str, out: Path, t0_ns: int, *extra: str) -> subprocess.Popen[bytes]:
    argv = [PY, PLAYER, "--url", url, "--events", str(out / "events.jsonl"),
            "--summary", str(out / "summary.json"), "--t0-ns", str(t0_ns), "--timeout-s", "45", *extra]
    return subprocess.Popen(net.ns(net.cli, argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish_player(proc: subprocess.Popen[bytes], out: Path, timeout: float = 60) -> Result:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("player hung past the test's own timeout")
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
