"""Netns.run / popen reach the named namespace whichever way the command is started: `ip netns
exec` for any program, iproute2's own switch for ip, tc and ss (`-n`, `-n`, `-N`: one exec fewer),
a thread that joined the namespace for ethtool and for sysctls (no `ip` exec; sysctls in-process)."""

from __future__ import annotations

import os
import random
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpvlab.core import proc
from mpvlab.core.netns import Netns, delete_netns


@pytest.fixture()
def ns() -> Iterator[Netns]:
    n = Netns(f"hnx-{secrets.token_hex(3)}")
    proc.run(["ip", "netns", "add", n.name])
    try:
        n.run(["ip", "link", "set", "lo", "up"])
        yield n
    finally:
        delete_netns(n.name)


def test_argv_uses_iproute2s_own_switch_and_ip_netns_exec_otherwise() -> None:
    n = Netns("mpv-abc123-server")
    assert n.argv(["ip", "link", "show"]) == ["ip", "-n", "mpv-abc123-server", "link", "show"]
    assert n.argv(["tc", "qdisc", "show"]) == ["tc", "-n", "mpv-abc123-server", "qdisc", "show"]
    assert n.argv(["ss", "-tinH"]) == ["ss", "-N", "mpv-abc123-server", "-tinH"]
    assert n.argv(["sysctl", "-n", "x"]) == ["ip", "netns", "exec", "mpv-abc123-server", "sysctl", "-n", "x"]


@pytest.mark.netns
def test_ip_tc_ss_act_inside_the_namespace_only(ns: Netns) -> None:
    dev = f"hnx{secrets.token_hex(3)}"
    ns.run(["ip", "link", "add", dev, "type", "veth", "peer", "name", dev + "p"])
    ns.run(["ip", "link", "set", dev, "up"])
    ns.run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", "1mbit", "burst", "3000", "limit", "30000"])
    assert "tbf" in ns.run(["tc", "qdisc", "show", "dev", dev]).stdout
    assert dev in ns.run(["ip", "-o", "link", "show"]).stdout
    assert proc.run(["ip", "link", "show", dev], check=False).returncode != 0      # not in the root namespace
    ns.ip_batch([["link", "set", dev, "down"], ["addr", "add", "10.251.0.1/24", "dev", dev]])
    assert "10.251.0.1/24" in ns.run(["ip", "-o", "addr", "show", "dev", dev]).stdout
    port = random.randrange(20000, 60000)
    listener = ns.popen([sys.executable, "-c", "import socket, time; s = socket.socket(); "
                         f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True); time.sleep(30)"],
                        stdout=subprocess.PIPE)
    try:
        assert listener.stdout is not None and listener.stdout.readline() == b"up\n"
        deadline = time.monotonic() + 10
        while f":{port}" not in ns.run(["ss", "-tlnH"]).stdout:
            assert time.monotonic() < deadline, "the listener never showed in the namespace's ss"
            time.sleep(0.05)
        assert f"127.0.0.1:{port} " not in proc.run(["ss", "-tlnH"]).stdout
    finally:
        proc.stop_child(listener, grace=1)


@pytest.mark.netns
def test_delete_netns_all_stops_members_and_removes_every_name() -> None:
    from mpvlab.core.netns import delete_netns_all, list_netns
    names = [f"hnx-{secrets.token_hex(3)}" for _ in range(3)]
    for n in names:
        proc.run(["ip", "netns", "add", n])
    member = Netns(names[1]).popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 10      # inside once `ip netns exec` has switched and exec'd sleep
        while Path(f"/proc/{member.pid}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        delete_netns_all([*names, f"hnx-{secrets.token_hex(3)}"])     # one never existed: no error
        assert member.wait(timeout=10) is not None
        assert not set(names) & set(list_netns())
    finally:
        for n in names:
            proc.run(["ip", "netns", "delete", n], check=False)
        if member.poll() is None:
            member.kill()


@pytest.mark.netns
def test_call_runs_fn_on_a_thread_inside_the_namespace_and_the_caller_stays_put(ns: Netns) -> None:
    here = os.stat("/proc/thread-self/ns/net").st_ino
    assert ns.call(lambda: os.stat("/proc/thread-self/ns/net").st_ino) == ns.inode() != here
    assert os.stat("/proc/thread-self/ns/net").st_ino == here
    with pytest.raises(ZeroDivisionError):          # fn's own error reaches the caller
        ns.call(lambda: 1 // 0)
    with pytest.raises(proc.CommandError, match="hnx-nothere"):
        Netns("hnx-nothere").call(lambda: None)


@pytest.mark.netns
def test_sysctls_are_set_and_read_back_in_the_namespace_never_the_hosts(ns: Netns) -> None:
    keys = ["net.ipv4.ip_forward", "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_rmem"]
    host_before = {k: Path("/proc/sys", *k.split(".")).read_text() for k in keys}
    want = {"net.ipv4.ip_forward": "1", "net.ipv4.tcp_no_metrics_save": "1", "net.ipv4.tcp_rmem": "4096 131071 6291457"}
    ns.sysctls(want)
    got = ns.read_sysctls(keys)
    # the same text `sysctl -n` prints inside the namespace (multi-value keys tab-separated)
    assert list(got.values()) == proc.run(["ip", "netns", "exec", ns.name, "sysctl", "-n", *keys]).stdout.splitlines()
    assert got == {"net.ipv4.ip_forward": "1", "net.ipv4.tcp_no_metrics_save": "1", "net.ipv4.tcp_rmem": "4096\t131071\t6291457"}
    assert {k: Path("/proc/sys", *k.split(".")).read_text() for k in keys} == host_before
    with pytest.raises(ValueError, match="kernel.hostname"):     # only per-namespace keys
        ns.sysctls({"kernel.hostname": "x"})
    with pytest.raises(proc.CommandError, match="net.ipv4.no_such_key"):
        ns.sysctls({"net.ipv4.no_such_key": "1"})


@pytest.mark.netns
def test_ethtool_runs_in_the_namespace_without_ip_netns_exec(ns: Netns) -> None:
    dev = f"hnx{secrets.token_hex(3)}"
    ns.run(["ip", "link", "add", dev, "type", "veth", "peer", "name", dev + "p"])
    ns.run(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"])
    feats = ns.run(["ethtool", "-k", dev]).stdout
    assert feats == proc.run(["ip", "netns", "exec", ns.name, "ethtool", "-k", dev]).stdout
    for k in ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"):
        assert f"\n{k}: off" in feats
    with pytest.raises(proc.CommandError):      # not in the root namespace
        proc.run(["ethtool", "-k", dev])
