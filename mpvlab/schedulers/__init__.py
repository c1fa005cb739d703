"""MPTCP packet schedulers behind one interface.

The schedulers are listed once, in registry.py: `default` (the kernel's own, `net.mptcp.scheduler`,
recorded as such) and the steering policies (every entry with mechanism "steering").

This kernel has only `default` and no bpf_struct_ops for MPTCP schedulers, so the others run as a
steering controller on the sender (`build/mpvlab-steer`): BPF observes every subflow at each of the
kernel's scheduling decisions, the policy (policy.c) picks the allowed subflows, and per-subflow backup
flags (mptcp_pm SET_FLAGS, userspace path manager) exclude the others. See README.md.

Runner sequence for a steering policy (server namespace S):
    env = prepare_server(name, params, S)        # before Apache starts and before any MPTCP connection
    start Apache with env (MPVLAB_SNDBUF when a send-buffer bound is set)
    with start_scheduler(name, params, S, out_dir, t0_ns) as h:   # before the client connects
        ... play ...
    h.summary                                    # steer_summary.json, also on disk
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc as proc_mod
from mpvlab.core.errors import MpvlabError
from mpvlab.schedulers.params import (AnyParams, BdpParams, DefaultParams, EcfParams, MinRttParams, SteerParams,
                               sndbuf_for_paths)
from mpvlab.schedulers.registry import REGISTRY, STEERING

__all__ = ["available", "parse_params", "prepare_server", "start_scheduler", "load_summary", "sndbuf_for_paths",
           "SchedulerError", "SchedulerHandle", "DefaultParams", "MinRttParams", "BdpParams", "EcfParams",
           "kernel_bpf_scheduler_support"]


def parse_params(name: str, values: dict[str, object] | None = None) -> AnyParams:
    """A scheduler's parameters (mpvlab/schedulers/registry.py) with every default filled in."""
    if name not in REGISTRY:
        raise ValueError(f"unknown MPTCP scheduler {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name].parse_params(values)  # type: ignore[return-value]

HERE = checkout_root() / "schedulers"   # the C/BPF sources and their build/
STEER_BIN = HERE / "build" / "mpvlab-steer"
BTF = Path("/sys/kernel/btf/vmlinux")
SUMMARY = "steer_summary.json"
RECORD = "scheduler.json"


class SchedulerError(MpvlabError, RuntimeError):
    pass


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def kernel_bpf_scheduler_support() -> bool:
    """True when the kernel can load MPTCP schedulers written in BPF (struct_ops mptcp_sched_ops):
    its BTF then has the struct_ops wrapper type. Not the case on the 6.18 this project runs on."""
    try:
        return b"bpf_struct_ops_mptcp_sched_ops\x00" in BTF.read_bytes()
    except OSError:
        return False


def _netns_path(netns: str) -> str:
    return netns if netns.startswith("/") else f"/run/netns/{netns}"


def available() -> dict[str, dict[str, Any]]:
    """Each scheduler: can it run here, by which mechanism, what it needs, and if not, why."""
    kernel = _read("/proc/sys/net/mptcp/available_schedulers").split()
    bpf_sched = kernel_bpf_scheduler_support()
    steer_needs = ["CONFIG_MPTCP with the userspace path manager (net.mptcp.pm_type=1)",
                   "generic netlink family mptcp_pm (SET_FLAGS, event group)",
                   "BPF tp_btf on mptcp_subflow_get_send, inet_sock_set_state, net_dev_xmit (BTF)",
                   f"{STEER_BIN} (make -C schedulers)", "root"]
    out: dict[str, dict[str, Any]] = {
        "default": {"available": "default" in kernel or not kernel, "mechanism": "kernel default scheduler",
                    "needs": [], "reason": "" if "default" in kernel or not kernel else
                    f"kernel lists schedulers {kernel}"},
    }
    missing = []
    if not STEER_BIN.exists():
        missing.append(f"{STEER_BIN} not built (make -C schedulers)")
    if not Path("/proc/sys/net/mptcp/pm_type").exists():
        missing.append("kernel has no net.mptcp.pm_type (no userspace path manager)")
    if os.geteuid() != 0:
        missing.append("needs root")
    for name in STEERING:
        out[name] = {"available": not missing,
                     "mechanism": "steering controller (per-subflow backup flags on the kernel default scheduler)",
                     "kernel_native": name in kernel,
                     "kernel_bpf_struct_ops_mptcp_sched": bpf_sched,
                     "needs": steer_needs, "reason": "; ".join(missing)}
    return out


def _sysctl_in(netns: str, key: str, value: str | None = None) -> str:
    base = ["ip", "netns", "exec", netns] if not netns.startswith("/") else ["nsenter", f"--net={netns}"]
    if value is not None:
        subprocess.run([*base, "sysctl", "-q", "-w", f"{key}={value}"], check=True, capture_output=True, text=True)
    return subprocess.run([*base, "sysctl", "-n", key], check=True, capture_output=True, text=True).stdout.strip()


def prepare_server(name: str, params: AnyParams, server_netns: str) -> dict[str, str]:
    """What must be in place before the server accepts connections. For a steering policy: the userspace path
    manager in the server namespace (joins from the client are then accepted only while the controller
    runs). Returns environment variables for the server process (the cc/preload shim reads
    MPVLAB_SNDBUF and sets SO_SNDBUF on the listener; the kernel doubles the value, so we pass half)."""
    if name == "default":
        return {}
    if name not in STEERING:
        raise SchedulerError(f"unknown scheduler {name!r}")
    got = _sysctl_in(server_netns, "net.mptcp.pm_type", "1")
    if got != "1":
        raise SchedulerError(f"net.mptcp.pm_type reads back {got!r} in {server_netns}, wanted 1")
    env: dict[str, str] = {}
    assert isinstance(params, SteerParams)
    if params.sndbuf_bytes:
        env["MPVLAB_SNDBUF"] = str(params.sndbuf_bytes // 2)
    return env


@dataclass
class SchedulerHandle:
    name: str
    params: AnyParams
    out_dir: Path
    process: subprocess.Popen[bytes] | None = None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None


def _record(h: SchedulerHandle, server_netns: str, extra: dict[str, Any]) -> None:
    rec = {"scheduler": h.name, "params": h.params.model_dump(), "server_netns": server_netns,
           "kernel_available_schedulers": _read("/proc/sys/net/mptcp/available_schedulers"),
           "kernel_bpf_struct_ops_mptcp_sched": kernel_bpf_scheduler_support(), **extra}
    (h.out_dir / RECORD).write_text(json.dumps(rec, indent=2) + "\n")


@contextlib.contextmanager
def start_scheduler(name: str, params: AnyParams | dict[str, Any] | None, server_netns: str, out_dir: Path,
                    t0_ns: int, ready_timeout: float = 5.0,
                    announce: list[str] | None = None) -> Iterator[SchedulerHandle]:
    """Run scheduler `name` for the MPTCP connections of `server_netns` (an `ip netns` name or a handle
    path) until the block exits. Call prepare_server() first. Writes into out_dir: scheduler.json, and
    for a steering policy (or default with observe) priority_changes.csv, steering.csv, controller_samples.csv,
    pm_events.csv, announces.csv, steer_summary.json (loaded into handle.summary on exit).

    `announce`: server IPv4 addresses the controller, as the userspace path manager, announces
    (ADD_ADDR, ids 1, 2, … in order) on every connection once it is established — the duty of the
    in-kernel PM's `signal` endpoints. Only for a steering policy; the kernel PM announces for `default`."""
    p = params if isinstance(params, (DefaultParams, SteerParams)) else parse_params(name, params)
    out_dir.mkdir(parents=True, exist_ok=True)
    h = SchedulerHandle(name, p, out_dir)
    announce = announce or []
    if announce and name == "default":
        raise SchedulerError("announce is the userspace path manager's duty (a steering policy); with the default "
                             "scheduler the in-kernel PM's signal endpoints announce")
    if name == "default" and not (isinstance(p, DefaultParams) and p.observe):
        _record(h, server_netns, {"mechanism": "kernel default scheduler", "controller": None})
        yield h
        return
    if not STEER_BIN.exists():
        raise SchedulerError(f"{STEER_BIN} is missing: run make -C schedulers (setup.sh)")
    policy = "observe" if name == "default" else name
    argv = [str(STEER_BIN), "--netns", _netns_path(server_netns), "--out-dir", str(out_dir), "--policy", policy,
            "--t0-ns", str(t0_ns), "--ready-file", str(out_dir / "steer.ready")]
    if isinstance(p, SteerParams):
        argv += p.controller_args()         # each policy's parameter model names its own options
    for addr in announce:
        argv += ["--announce", str(ipaddress.IPv4Address(addr))]
    (out_dir / "steer.ready").unlink(missing_ok=True)
    _record(h, server_netns, {"mechanism": "steering controller" if policy != "observe" else "kernel default "
                              "scheduler (observed)", "controller": argv})
    with (out_dir / "steer.stderr").open("wb") as err:
        h.process = subprocess.Popen(argv, stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
    try:
        proc_mod.wait_ready(h.process, out_dir / "steer.ready", "mpvlab-steer", ready_timeout,
                            log=out_dir / "steer.stderr", error=SchedulerError)
        yield h
    finally:
        proc_mod.stop_child(h.process, grace=10)
        if (out_dir / SUMMARY).exists():
            h.summary = load_summary(out_dir)


def load_summary(out_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out_dir / SUMMARY).read_text())
    if data.get("schema") != "mpvlab.steer/1":
        raise SchedulerError(f"{out_dir / SUMMARY}: unexpected schema {data.get('schema')!r}")
    return data
