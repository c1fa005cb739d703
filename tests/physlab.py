"""Test helper: three "physical hosts" — client, emulator, server — as network namespaces, each with
its own sshd, reached from this machine's root namespace over a management veth each (like a lab's
management network), and veth pairs standing in for the NICs of two paths:

    root ns  hpx<id>m1..3 ── 10.231.k.0/30 ──  hpx<id>n1..3 (management, sshd on 10.B.k.2:2222,
             B the first of 231..250 no root-namespace route uses)

    client  ca 10.232.1.2 ── ea 10.232.1.1 [emulator] fa 10.232.11.1 ── sa 10.232.11.2  server
            cb 10.232.2.2 ── eb 10.232.2.1            fb 10.232.12.1 ── sb 10.232.12.2  (lo 10.232.100.1)

The emulator forwards (ip_forward=1) and picks the server-side interface by the incoming one (one
policy table per path), as a two-path emulator box would. Things the run must leave alone are set
up on purpose: a pfifo root qdisc on the emulator's `ea` (named, but the run only shapes at `fa`/
`fb`'s ingress), an `-A FORWARD -i eb -j ACCEPT` rule (the delay line's rule must still catch
traffic: it is inserted first), an extra veth pair `o`/`p` with a tbf on `o` in the emulator.
Everything carries the `hpx` prefix and is removed by down().
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from mpvlab.core import proc
from mpvlab.core.netns import Netns, delete_netns
from sshlab import ensure_privsep_dir, make_client_key, release_privsep_dir, start_sshd

PORT = 2222
SERVER_ADDR = "10.232.100.1"
ROLES = ("cli", "emu", "srv")



def _free_mgmt_block() -> str:
    """'10.B' for the first B in 231..250 with no route of the root namespace inside 10.B.0.0/16."""
    routes = proc.run(["ip", "-4", "route", "show", "table", "all"]).stdout
    for b in range(231, 251):
        if f" 10.{b}." not in f" {routes}":
            return f"10.{b}"
    raise RuntimeError("no free 10.B.0.0/16 block in 231..250 for the lab's management links")

class PhysLab:
    def __init__(self) -> None:
        self.rid = secrets.token_hex(3)
        self.ns = {r: Netns(f"hpx-{self.rid}-{r}") for r in ROLES}
        self.mgmt_root = {r: f"hpx{self.rid}m{k}" for k, r in enumerate(ROLES, 1)}
        self.mgmt_ns = {r: f"hpx{self.rid}n{k}" for k, r in enumerate(ROLES, 1)}
        # A management block no other address in the root namespace uses: a lab left by a killed
        # pytest keeps its 10.231.k.1/30 routes, and a second lab on the same block would reach
        # that lab's (sshd-less) namespaces instead of its own.
        self.mgmt_net = _free_mgmt_block()
        self.mgmt_addr = {r: f"{self.mgmt_net}.{k}.2" for k, r in enumerate(ROLES, 1)}
        i = lambda tag: f"hpx{self.rid}{tag}"  # noqa: E731
        self.ifs = {tag: i(tag) for tag in ("ca", "cb", "ea", "eb", "fa", "fb", "sa", "sb", "o", "p")}
        self.dir = Path(tempfile.mkdtemp(prefix="hpx-", dir="/run"))   # the key directory (root only)
        self.sshd: dict[str, subprocess.Popen[bytes]] = {}
        self.made_privsep = None

    def run(self, role: str, argv: list[str]) -> str:
        return self.ns[role].run(argv).stdout

    def up(self) -> None:
        for k, r in enumerate(ROLES, 1):
            proc.run(["ip", "netns", "add", self.ns[r].name])
            self.run(r, ["ip", "link", "set", "lo", "up"])
            proc.run(["ip", "link", "add", self.mgmt_root[r], "type", "veth", "peer", "name", self.mgmt_ns[r],
                      "netns", self.ns[r].name])
            proc.run(["ip", "addr", "add", f"{self.mgmt_net}.{k}.1/30", "dev", self.mgmt_root[r]])
            proc.run(["ip", "link", "set", self.mgmt_root[r], "up"])
            self.run(r, ["ip", "addr", "add", f"{self.mgmt_net}.{k}.2/30", "dev", self.mgmt_ns[r]])
            self.run(r, ["ip", "link", "set", self.mgmt_ns[r], "up"])
        f = self.ifs
        for a, ra, b, rb in (("ca", "cli", "ea", "emu"), ("cb", "cli", "eb", "emu"),
                             ("fa", "emu", "sa", "srv"), ("fb", "emu", "sb", "srv")):
            proc.run(["ip", "link", "add", f[a], "netns", self.ns[ra].name, "type", "veth",
                      "peer", "name", f[b], "netns", self.ns[rb].name])
        self.run("emu", ["ip", "link", "add", f["o"], "type", "veth", "peer", "name", f["p"]])
        for r, tag, addr in (("cli", "ca", "10.232.1.2/24"), ("cli", "cb", "10.232.2.2/24"),
                             ("emu", "ea", "10.232.1.1/24"), ("emu", "eb", "10.232.2.1/24"),
                             ("emu", "fa", "10.232.11.1/24"), ("emu", "fb", "10.232.12.1/24"),
                             ("srv", "sa", "10.232.11.2/24"), ("srv", "sb", "10.232.12.2/24")):
            self.run(r, ["ip", "addr", "add", addr, "dev", f[tag]])
        for r, tag in (("cli", "ca"), ("cli", "cb"), ("emu", "ea"), ("emu", "eb"), ("emu", "fa"), ("emu", "fb"),
                       ("srv", "sa"), ("srv", "sb"), ("emu", "o"), ("emu", "p")):
            self.run(r, ["ip", "link", "set", f[tag], "up"])
            # The "NICs" have no offloads, as the emulated topologies (rate samples see real packets).
            self.run(r, ["ethtool", "-K", f[tag], "tso", "off", "gso", "off", "gro", "off"])
        self.run("srv", ["ip", "addr", "add", f"{SERVER_ADDR}/32", "dev", "lo"])
        self.run("srv", ["ip", "route", "add", "10.232.1.0/24", "via", "10.232.11.1", "dev", f["sa"]])
        self.run("srv", ["ip", "route", "add", "10.232.2.0/24", "via", "10.232.12.1", "dev", f["sb"]])
        self.ns["emu"].sysctl("net.ipv4.ip_forward", "1")
        for tag, table, via, dev in (("ea", "101", "10.232.11.2", "fa"), ("eb", "102", "10.232.12.2", "fb")):
            self.run("emu", ["ip", "route", "add", f"{SERVER_ADDR}/32", "via", via, "dev", f[dev], "table", table])
            self.run("emu", ["ip", "rule", "add", "iif", f[tag], "table", table, "priority", "100"])
        # What the run must leave as it found it.
        self.run("emu", ["tc", "qdisc", "add", "dev", f["ea"], "root", "pfifo", "limit", "777"])
        self.run("emu", ["tc", "qdisc", "add", "dev", f["o"], "root", "tbf", "rate", "7mbit", "burst", "5000",
                         "limit", "20000"])
        self.run("emu", ["iptables", "-w", "-A", "FORWARD", "-i", f["eb"], "-j", "ACCEPT"])
        make_client_key(self.dir)
        self.made_privsep = ensure_privsep_dir()
        for r in ROLES:
            self.sshd[r] = start_sshd(self.ns[r], self.mgmt_addr[r], PORT, self.dir, r)

    def down(self) -> None:
        for p in self.sshd.values():
            proc.stop_child(p, grace=3)
        for r in ROLES:
            delete_netns(self.ns[r].name)       # its veth ends (and their root-ns peers) go with it
        for dev in self.mgmt_root.values():
            proc.run(["ip", "link", "del", dev], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        release_privsep_dir(self.made_privsep)

    def scenario(self, name: str, video: str = "{duration: 20s, bitrate: 5.24mbit}") -> str:
        f = self.ifs
        host = f"{{{{kind: ssh, address: {{a}}, port: {PORT}, identity_file: client_key, known_hosts: known_hosts}}}}"
        return f"""\
name: {name}
seed: 2
topology:
  kind: physical
  hosts:
    laptop: {host.format(a=self.mgmt_addr['cli'])}
    emubox: {host.format(a=self.mgmt_addr['emu'])}
    video: {host.format(a=self.mgmt_addr['srv'])}
  roles: {{client: laptop, server: video, emulator: {{wifi: emubox, lte: emubox}}}}
paths:
  wifi:
    physical: {{client_if: {f['ca']}, server_address: {SERVER_ADDR}, gateway: 10.232.1.1,
                emulator_server_if: {f['fa']}, emulator_client_if: {f['ea']}}}
    down: {{rate: 3mbit, buffer: 100KB, delay: 20ms}}
  lte:
    physical: {{client_if: {f['cb']}, server_address: {SERVER_ADDR}, gateway: 10.232.2.1,
                emulator_server_if: {f['fb']}, emulator_client_if: {f['eb']}}}
    down: {{rate: 3mbit, buffer: 100KB, delay: 40ms}}
video: {video}
fidelity: {{probe_duration: 2s}}
"""
