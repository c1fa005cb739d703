"""Provenance of a run: enough to say exactly what produced its numbers."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEBIAN_PACKAGES = ("iproute2", "iptables", "mininet", "mptcpize", "apache2", "gstreamer1.0-tools",
                   "gstreamer1.0-plugins-good", "gstreamer1.0-libav", "ffmpeg", "libbpf1", "bpftool", "clang",
                   "libnetfilter-queue1", "openssl", "curl", "libsoup-3.0-0", "glib-networking", "libnghttp2-14")
PY_PACKAGES = ("pydantic", "PyYAML", "rich", "pandas", "pyarrow", "matplotlib", "numpy")


def _out(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_state() -> dict[str, Any]:
    commit = _out(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    dirty = _out(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit or None, "dirty": bool(dirty)}


def package_versions() -> dict[str, Any]:
    fmt = "${Package}\t${Version}\n"
    deb = {}
    for line in _out(["dpkg-query", "-W", f"-f={fmt}", *DEBIAN_PACKAGES]).splitlines():
        name, _, version = line.partition("\t")
        deb[name] = version
    py: dict[str, str | None] = {}
    for name in PY_PACKAGES:
        try:
            py[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            py[name] = None
    return {"debian": deb, "python": py}


def host_info() -> dict[str, Any]:
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "mem_total_kb": mem_kb,
        "python": platform.python_version(),
        "os": _os_release(),
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _os_release() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return ""


def collect(scenario_file: Path, seed: int, run_id: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "scenario_file": str(scenario_file),
        "seed": seed,
        "git": git_state(),
        "host": host_info(),
        "packages": package_versions(),
        **extra,
    }
