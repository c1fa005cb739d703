"""Provenance of a run: enough to say exactly what produced its numbers."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from mpvlab.core.paths import checkout_root

REPO = checkout_root()
DEBIAN_PACKAGES = ("iproute2", "iptables", "mininet", "mptcpize", "apache2", "gstreamer1.0-tools",
                   "gstreamer1.0-plugins-good", "gstreamer1.0-libav", "ffmpeg", "libbpf1", "bpftool", "clang",
                   "libnetfilter-queue1", "openssl", "curl", "libsoup-3.0-0", "glib-networking", "libnghttp2-14")
PY_PACKAGES = ("pydantic", "PyYAML", "rich", "pandas", "pyarrow", "matplotlib", "numpy")
DPKG_STATUS = Path("/var/lib/dpkg/status")
CACHE_DIR = Path(os.environ.get("MPVLAB_CACHE_DIR", "/var/cache/mpvlab")) / "provenance"


def _out(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_state() -> dict[str, Any]:
    commit = _out(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    dirty = _out(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit or None, "dirty": bool(dirty)}


def package_versions(cache_dir: Path | None = CACHE_DIR) -> dict[str, Any]:
    """The Debian and Python packages' versions, from a cache when nothing they are read from has
    changed since (`dpkg-query` and the seven metadata reads were ~15 ms of every run's CPU, issue 36).
    The cache is keyed on what any install, upgrade or removal changes: dpkg rewrites its status file
    (a new inode, mtime and size), pip adds and removes `*.dist-info` folders (the mtime of the folder
    on sys.path that holds them). `cache_dir=None`: read them afresh."""
    key = _packages_key() if cache_dir is not None else None
    if cache_dir is not None and key is not None:
        cached = _cache_read(cache_dir, key)
        if cached is not None:
            return cached
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
    out = {"debian": deb, "python": py}
    if cache_dir is not None and key is not None and deb:     # never cache a failed dpkg-query
        _cache_write(cache_dir, key, out)
    return out


def _packages_key() -> list[Any] | None:
    """What package_versions' answer depends on; None when part of it cannot be read (no cache)."""
    parts: list[Any] = [list(DEBIAN_PACKAGES), list(PY_PACKAGES), sys.prefix]
    try:
        st = DPKG_STATUS.stat()
    except OSError:
        return None
    parts.append([str(DPKG_STATUS), st.st_ino, st.st_mtime_ns, st.st_size])
    for entry in sys.path:
        try:
            st = os.stat(entry or ".")
        except OSError:
            continue             # a missing entry: its creation changes its parent, not this key;
        parts.append([entry, st.st_ino, st.st_mtime_ns])   # but an entry that appears is listed here
    return parts


def _cache_file(cache_dir: Path, key: list[Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]
    return cache_dir / f"packages-{digest}.json"


def _cache_read(cache_dir: Path, key: list[Any]) -> dict[str, Any] | None:
    path = _cache_file(cache_dir, key)
    try:
        st = path.stat()
        # only a file this user wrote and nobody else could have changed
        if st.st_uid != os.geteuid() or st.st_mode & 0o022 or cache_dir.stat().st_mode & 0o022:
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("value"), dict):
        return None
    return data["value"]


def _cache_write(cache_dir: Path, key: list[Any], value: dict[str, Any]) -> None:
    """Atomically (a reader sees the old file or the whole new one); a cache that cannot be written
    only costs the next run the same reads."""
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".packages-", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump({"key": key, "value": value}, fh)
        os.replace(tmp, _cache_file(cache_dir, key))
    except OSError:
        pass


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
