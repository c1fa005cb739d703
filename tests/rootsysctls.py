"""The root namespace's sysctls that shape every run: Mininet's fixLimits() list, the buffers every
new namespace starts from, and the MPTCP/forwarding defaults. Read straight from /proc/sys by the
session guard (tests/policy.py: the whole session must leave them as it found them) and by
tests/test_host_untouched.py (each command must)."""

from __future__ import annotations

import os
from pathlib import Path

WATCHED = (
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max",
    "net.core.rmem_default", "net.core.wmem_default", "net.core.netdev_max_backlog",
    "net.ipv4.neigh.default.gc_thresh1", "net.ipv4.neigh.default.gc_thresh2", "net.ipv4.neigh.default.gc_thresh3",
    "net.ipv6.neigh.default.gc_thresh1", "net.ipv6.neigh.default.gc_thresh2", "net.ipv6.neigh.default.gc_thresh3",
    "net.ipv4.route.max_size", "kernel.pty.max", "fs.file-max", "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_no_metrics_save", "net.ipv4.ip_forward", "net.mptcp.enabled", "net.mptcp.pm_type",
    "net.ipv4.conf.all.rp_filter",
)
# Not watched: read-only lists such as tcp_available_congestion_control, which any live run's BPF
# congestion control (registered host-wide under its run id) lengthens while it runs.
# The policy's own test points the guard at a folder of fake sysctl files; nothing else sets it.
DIR_ENV = "MPVLAB_TEST_SYSCTL_DIR"


def root_sysctls(keys: tuple[str, ...] = WATCHED) -> dict[str, str]:
    """key -> value with whitespace collapsed (tcp_rmem's tabs), or '<absent>'. Read in this process's
    namespace: pytest and the commands it starts run in the root namespace."""
    base = Path(os.environ.get(DIR_ENV, "/proc/sys"))
    out = {}
    for key in keys:
        try:
            out[key] = " ".join((base / key.replace(".", "/")).read_text().split())
        except OSError:
            out[key] = "<absent>"
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """'key: before -> after' for every key whose value differs."""
    return [f"{k}: {before[k]} -> {after.get(k, '<absent>')}" for k in before if after.get(k) != before[k]]
