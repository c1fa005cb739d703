"""Netns.run / popen reach the named namespace whichever way the command is started: `ip netns
exec` for any program, iproute2's own switch for ip, tc and ss (`-n`, `-n`, `-N`: one exec fewer)."""

from __future__ import annotations

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
