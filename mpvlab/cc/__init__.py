"""Congestion controls for mpvlab runs: a registry plus the BBR-S loader.

`available()` lists the congestion controls a scenario may name:

* ``cubic`` and ``bbr`` are built into the kernel;
* ``bbr-s`` is BBR v1 with a percentile bandwidth estimator, a BPF struct_ops
  CC registered for the duration of one run by ``cc/build/bbrs-loader``
  (see cc/README.md).  Use `load_bbrs()` around the run.

The orchestrator selects the CC per connection with a route attribute in the
server's namespace: ``ip route replace PREFIX ... congctl NAME`` (works for all
three; a namespace-wide sysctl default refuses cubic here).

`read_bbr_info()` reads the kernel BBR's own state through ``ss`` so runs of
bbr and bbr-s can be compared (``ss`` cannot show BPF CC state; BBR-S exports
its state through the loader's CSV instead).
"""
from __future__ import annotations

import json
import math
import re
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc as proc_mod

CC_DIR = checkout_root() / "cc"   # the C/BPF sources and their build/
LOADER = CC_DIR / "build" / "bbrs-loader"
PCT_TEST = CC_DIR / "build" / "pct-test"
MAX_WINDOW = 1024  # PCT_MAX_N in percentile.h
CC_NAME_MAX = 15  # kernel TCP_CA_NAME_MAX - 1
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,15}$")


@dataclass(frozen=True)
class Param:
    name: str
    default: float
    min: float
    max: float
    doc: str
    integer: bool = False

    def check(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{self.name}: expected a number, got {value!r}")
        if self.integer and int(value) != value:
            raise ValueError(f"{self.name}: expected an integer, got {value!r}")
        if not (self.min <= value <= self.max):
            raise ValueError(f"{self.name}={value} outside [{self.min}, {self.max}]")


@dataclass(frozen=True)
class CCInfo:
    name: str
    kind: Literal["builtin", "bpf"]
    description: str
    kernel_name: str | None  # name to pass to congctl; None for bpf (chosen per load)
    params: tuple[Param, ...] = field(default_factory=tuple)


BBRS_PARAMS = (
    Param("window", 100, 1, MAX_WINDOW, "delivery-rate samples kept (N)", integer=True),
    Param("percentile", 85.0, 0.0, 100.0, "percentile of the window used as bandwidth (p), 0.01 resolution"),
    Param("factor", 1.0, 1e-4, 2.0, "multiplier on the percentile (BBR2-S: 0.85)"),
)


def available() -> dict[str, CCInfo]:
    """The congestion controls scenarios may name, with their parameters."""
    return {
        "cubic": CCInfo("cubic", "builtin", "CUBIC (kernel)", "cubic"),
        "bbr": CCInfo("bbr", "builtin", "BBR v1 (kernel tcp_bbr)", "bbr"),
        "bbr-s": CCInfo("bbr-s", "bpf",
                        "BBR v1 with the p-th percentile of the last N delivery-rate "
                        "samples as bandwidth estimate (BPF struct_ops)", None, BBRS_PARAMS),
    }


def kernel_available() -> list[str]:
    """CCs currently registered in the kernel (shared by all namespaces)."""
    return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()


def build() -> None:
    """Build the loader and test helper (idempotent)."""
    p = subprocess.run(["make", "-C", str(CC_DIR)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"make -C {CC_DIR} failed:\n{p.stdout}\n{p.stderr}")


@dataclass(frozen=True)
class BbrsLoad:
    """A registered BBR-S instance; ids are the kernel objects it owns."""
    name: str
    pid: int
    link_id: int
    map_ids: tuple[int, ...]
    prog_ids: tuple[int, ...]
    state_csv: Path | None
    log: Path


@contextmanager
def load_bbrs(name: str, window: int = 100, percentile: float = 85.0, factor: float = 1.0,
              state_csv: Path | None = None, workdir: Path = Path("."), state_hz: float = 100.0,
              timeout: float = 15.0, passthrough: bool = False) -> Iterator[BbrsLoad]:
    """Register BBR-S as CC `name` while the block runs; unregister on exit.

    passthrough=True registers stock BBR behind the same BPF wrappers (a
    baseline for benchmarks), ignoring window/percentile/factor.
    Raises ValueError for bad parameters and RuntimeError (with the loader's
    stderr) if registration fails.
    """
    if not _NAME_RE.match(name):
        raise ValueError(f"CC name {name!r}: 1..{CC_NAME_MAX} characters of [A-Za-z0-9_-]")
    if name in ("cubic", "bbr", "reno"):
        raise ValueError(f"CC name {name!r} is a kernel congestion control")
    for p, v in zip(BBRS_PARAMS, (window, percentile, factor)):
        p.check(v)
    if not (0 < state_hz <= 1000):
        raise ValueError(f"state_hz={state_hz} outside (0, 1000]")
    if not LOADER.exists():
        raise RuntimeError(f"{LOADER} missing: run `make -C {CC_DIR}`")
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / f"{name}.ready.json"
    log = workdir / f"{name}.loader.log"
    ready.unlink(missing_ok=True)
    args = [str(LOADER), "--name", name, "--window", str(int(window)),
            "--percentile", repr(float(percentile)), "--factor", repr(float(factor)),
            "--ready-file", str(ready)]
    if passthrough:
        args.append("--passthrough")
    if state_csv is not None:
        args += ["--state-csv", str(state_csv), "--state-hz", repr(float(state_hz))]
    with open(log, "w") as logf:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
    try:
        proc_mod.wait_ready(proc, ready, f"bbrs-loader ({name!r})", timeout, log=log, error=RuntimeError, poll_s=0.02)
        info = json.loads(ready.read_text())
        yield BbrsLoad(name=name, pid=proc.pid, link_id=int(info["link_id"]),
                       map_ids=tuple(info["map_ids"]), prog_ids=tuple(info["prog_ids"]),
                       state_csv=state_csv, log=log)
    finally:
        # SIGTERM; SIGKILL after 10 s is still clean: the struct_ops link dies with the process.
        proc_mod.stop_child(proc, grace=10)
    if proc.returncode != 0:
        raise RuntimeError(f"bbrs-loader for {name!r} exited with {proc.returncode}:\n"
                           f"{log.read_text().strip()}")


_RATE_UNITS = {"bps": 1.0, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12}
_RATE_RE = re.compile(r"^([0-9.]+)([KMGT]?bps)$")


def _rate(text: str) -> float:
    m = _RATE_RE.match(text)
    if not m:
        raise ValueError(f"unparsable rate {text!r}")
    return float(m.group(1)) * _RATE_UNITS[m.group(2)]


def parse_ss_bbr(text: str) -> list[dict]:
    """Parse `ss -tinH` output; one dict per TCP socket that shows bbr info."""
    out: list[dict] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        head = lines[i].split()
        info = lines[i + 1] if i + 1 < len(lines) and lines[i + 1][:1].isspace() else ""
        i += 2 if info else 1
        if len(head) < 5:
            continue
        m = re.search(r"bbr:\(([^)]*)\)", info)
        if not m:
            continue
        kv = dict(part.split(":", 1) for part in m.group(1).split(",") if ":" in part)
        local, peer = head[3], head[4]
        row: dict = {
            "state": head[0],
            "saddr": local.rsplit(":", 1)[0], "sport": int(local.rsplit(":", 1)[1]),
            "daddr": peer.rsplit(":", 1)[0], "dport": int(peer.rsplit(":", 1)[1]),
            "bw_bps": _rate(kv["bw"]) if "bw" in kv else None,
            "min_rtt_us": float(kv["mrtt"]) * 1000.0 if "mrtt" in kv else None,
            "pacing_gain": float(kv["pacing_gain"]) if "pacing_gain" in kv else None,
            "cwnd_gain": float(kv["cwnd_gain"]) if "cwnd_gain" in kv else None,
        }
        for key, pat in (("cwnd", r"\bcwnd:(\d+)"), ("bytes_acked", r"\bbytes_acked:(\d+)"),
                         ("mss", r"\bmss:(\d+)")):
            mm = re.search(pat, info)
            row[key] = int(mm.group(1)) if mm else None
        for key, pat in (("pacing_rate_bps", r"\bpacing_rate (\S+bps)"),
                         ("delivery_rate_bps", r"\bdelivery_rate (\S+bps)")):
            mm = re.search(pat, info)
            row[key] = _rate(mm.group(1)) if mm else None
        out.append(row)
    return out


def read_bbr_info(netns: str) -> list[dict]:
    """The kernel BBR's state (bw, min RTT, gains) of every TCP socket in `netns`."""
    p = subprocess.run(["ip", "netns", "exec", netns, "ss", "-tinH"], capture_output=True,
                       text=True, timeout=10)
    if p.returncode != 0:
        raise RuntimeError(f"ss in netns {netns!r} failed: {p.stderr.strip()}")
    return parse_ss_bbr(p.stdout)
