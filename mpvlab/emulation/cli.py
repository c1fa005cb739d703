"""Mininet's interactive CLI on a scenario's nodes, for `mpvlab shell` (the run side is
mpvlab/runner/shell.py, which brings the network up with the run's own steps).

Mininet's own commands work on the scenario's nodes: the client and server are Mininet's `hosts`
(what `pingall`, `pingpair` and `iperf` with no arguments use), the routers are listed with them
(`nodes`, `net`, `dump`, `intfs`, `<node> cmd`). A host's address (pingall, iperf) is the one the
scenario's traffic uses: the server address and the client's path-0 address. The interfaces' addresses
are the ones the topology configured (read back from the kernel, since the topology sets them with
`ip`, not through Mininet). `iperf`/`iperfudp` run iperf 2 as Mininet does, but stop only the server
process they started (Mininet's version runs `killall -9 iperf` on the host, other runs' iperf
included). Commands that need an OpenFlow switch, Mininet's Link objects or an X display are refused
with the reason (REFUSED below); the banner lists what works.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Sequence


def run_cli(nodes: Sequence[Any], host_addrs: dict[str, str], workdir: Path, commands: str | None,
            log: Callable[[str], None]) -> None:
    """Mininet's CLI over `nodes` (Mininet Node objects, already wired); the nodes named in
    `host_addrs` are Mininet's hosts and answer `IP()` with the address given there, the others are
    listed as Mininet lists switches. `commands`: a script run instead of the interactive prompt."""
    from mininet.cli import CLI
    from mininet.net import Mininet

    mn = _cli_net(_scenario_net_class(Mininet))
    for node in nodes:
        _learn_addresses(node)
    for name, addr in host_addrs.items():
        _address_node(next(n for n in nodes if n.name == name), addr)
    for node in nodes:
        (mn.hosts if node.name in host_addrs else mn.switches).append(node)
        mn.nameToNode[node.name] = node
    log(BANNER)
    cli_cls = _scenario_cli_class(CLI)
    if commands is None:
        cli_cls(mn)
    else:
        script = workdir / "commands.mn"
        script.write_text(commands)
        cli_cls(mn, script=str(script))


def _cli_net(mininet_cls: Any) -> Any:
    """An empty Mininet object for the CLI. Creating one runs `Mininet.init()` → `fixLimits()`, which
    raises ten host-wide settings of the root namespace (tcp_rmem, tcp_wmem, rmem_max, …) and never
    restores them; new namespaces inherit tcp_rmem/tcp_wmem, so every later run's buffers would depend
    on whether someone had opened a shell. `Mininet.__init__` calls `Mininet.init()` on the base class,
    which returns early once `inited` is set: set for this construction only, in this process only.
    `Mininet.init()` reads the flag of the class that defines it, not of `mininet_cls` (a subclass, the
    scenario's net class), so the flag is set where it is defined: on a subclass it never took effect."""
    owners = [c for c in mininet_cls.__mro__ if "inited" in vars(c)]
    saved = [(c, vars(c)["inited"]) for c in owners]
    for c in owners:
        c.inited = True
    try:
        return mininet_cls(topo=None, build=False, controller=None)
    finally:
        for c, was in saved:
            c.inited = was


# Mininet CLI commands this shell refuses, with the one-line reason printed instead.
REFUSED = {
    "dpctl": "no OpenFlow switch here: the routers are Linux namespaces forwarding by their routes",
    "switch": "no OpenFlow switch to start or stop: the routers are Linux namespaces",
    "ports": "no OpenFlow switch ports: `net` and `intfs` list every node's interfaces",
    "wait": "no controller to wait for: the network is up when the prompt appears",
    "link": "bringing a link up/down by hand bypasses the scenario's delay line and shaping; "
            "write an outage in the scenario (docs: how-to outages) or `<node> ip link set IF down`",
    "links": "the links are veth pairs the topology made, not Mininet Link objects: `net` lists them",
    "pingallfull": "use pingall (reachability) or `client ping -c 10 server` (RTTs over the scenario's paths)",
    "pingpairfull": "use pingpair (reachability) or `client ping -c 10 server` (RTTs over the scenario's paths)",
    "xterm": "no X display in mpvlab shell: use `<node> cmd` (e.g. `client ip route`)",
    "x": "no X display in mpvlab shell: use `<node> cmd`",
    "gterm": "no X display in mpvlab shell: use `<node> cmd`",
}

BANNER = ("Mininet commands that work here: nodes, net, dump, intfs, pingall, pingpair, "
          "iperf, iperf client server, iperfudp BW client server, `<node> cmd …` (node names "
          "become their addresses), py, px, sh, time, source, help, exit. Refused (help gives the reason): "
          + ", ".join(sorted(REFUSED)) + ".")


def _address_node(node: Any, addr: str) -> None:
    """`node.IP()` (what pingall, iperf and `<node>` in a command resolve to) answers `addr`, on this
    shell's node object only; `node.IP(intf)` still answers the interface's own address."""
    own_ip = node.IP

    def ip(intf: Any = None) -> Any:
        return addr if intf is None else own_ip(intf)
    node.IP = ip


def _learn_addresses(node: Any) -> None:
    """Give Mininet's Intf objects the IPv4 address the topology configured with `ip` (Mininet only
    knows addresses it set itself; without this `pingall` pings "None"). The first address of each
    interface, read from the kernel; an interface without one keeps None."""
    for intf in node.intfList():
        out = node.cmd(f"ip -4 -o addr show dev {intf.name}")
        if m := re.search(r"\binet (\d+\.\d+\.\d+\.\d+)/(\d+)", out):
            intf.ip, intf.prefixLen = m.group(1), int(m.group(2))


def _scenario_cli_class(cli_cls: Any) -> Any:
    """Mininet's CLI with REFUSED commands answered by their reason."""

    def refuse(name: str) -> Any:
        def do(self: Any, _line: str) -> None:
            self.stdout.write(f"*** {name}: not available in mpvlab shell: {REFUSED[name]}\n")
        do.__doc__ = f"Refused in mpvlab shell: {REFUSED[name]}"
        return do

    def default(self: Any, line: str) -> None:
        """`<node> cmd args`: node names in args become the node's scenario address (node.IP()); Mininet
        would substitute the first interface's address, which for the server is not routed."""
        first, args, _ = self.parseline(line)
        if first not in self.mn:
            # the command word only, never the rest of the line: a --commands file is untrusted input,
            # and what it holds is not echoed back (issue 45: /etc/shadow came back line by line)
            token = (line.split() or [""])[0]
            word = token if len(token) <= 32 and token.replace("-", "_").isidentifier() else "(not shown)"
            self.stdout.write(f"*** Unknown command: {word}\n")
            return
        if args:
            args = " ".join(self.mn[a].IP() if a in self.mn else a for a in args.split(" "))
            line = f"{first} {args}"
        cli_cls.default(self, line)

    methods = {f"do_{name}": refuse(name) for name in REFUSED}
    methods["default"] = default
    return type("ScenarioCLI", (cli_cls,), methods)


def _listening(node: Any, port: int, timeout_s: float = 10.0) -> bool:
    """Whether a TCP socket listens on `port` in `node`'s namespace, polled with `ss` there (Mininet's
    waitListening connects from the other host without a source address, which is never routed back
    from the server, and then waits forever)."""
    import time
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if node.cmd(f"ss -Htln 'sport = :{port}'").strip():
            return True
        time.sleep(0.1)
    return False


def _scenario_net_class(mininet_cls: Any) -> Any:
    """Mininet with an `iperf` that stops only the iperf server it started (by its pid), never
    `killall -9 iperf` as Mininet's does: that would kill every iperf on the host (namespaces share
    the host's pids), other runs' included. Same arguments, output and return value as Mininet's."""
    from mininet.log import output

    class ScenarioNet(mininet_cls):
        def ping(self, hosts: Any = None, timeout: Any = None) -> float:
            """Mininet's ping, each from the sender's scenario address (`ping -I`): the topology routes
            only those (a reply to the server's edge-link address would have no route back)."""
            packets = lost = 0
            if not hosts:
                hosts = self.hosts
                output("*** Ping: testing ping reachability\n")
            for node in hosts:
                output(f"{node.name} -> ")
                for dest in hosts:
                    if node == dest:
                        continue
                    opts = f"-W {timeout}" if timeout else ""
                    sent, received = self._parsePing(node.cmd(f"ping -c1 {opts} -I {node.IP()} {dest.IP()}"))
                    packets += sent
                    lost += sent - received
                    output(f"{dest.name} " if received else "X ")
                output("\n")
            if not packets:
                output("*** Warning: No packets sent\n")
                return 0.0
            ploss = 100.0 * lost / packets
            output(f"*** Results: {ploss:.0f}% dropped ({packets - lost}/{packets} received)\n")
            return ploss

        def iperf(self, hosts: Any = None, l4Type: str = "TCP", udpBw: str = "10M", fmt: str | None = None,
                  seconds: int = 5, port: int = 5001) -> list[str]:
            hosts = hosts or [self.hosts[0], self.hosts[-1]]
            assert len(hosts) == 2
            client, server = hosts
            if l4Type not in ("TCP", "UDP"):
                raise ValueError(f"Unexpected l4 type: {l4Type}")
            output("*** Iperf: testing", l4Type, "bandwidth between", client, "and", server, "\n")
            args = ["iperf", "-p", str(port)] + (["-u"] if l4Type == "UDP" else []) + (["-f", fmt] if fmt else [])
            srv = server.popen(args + ["-s"], text=True)   # our process: stopped by its pid below
            try:
                if l4Type == "TCP" and not _listening(server, port):
                    raise RuntimeError(f"iperf did not listen on port {port} within 10 s")
                # -B: from the client's scenario address (only those are routed back, see ping)
                cliout = client.cmd(" ".join(args + ["-t", str(seconds), "-B", client.IP(), "-c", server.IP()]
                                             + (["-b", udpBw] if l4Type == "UDP" else [])))
            finally:
                srv.terminate()
                servout, _ = srv.communicate(timeout=10)
            result = [self._parseIperf(servout), self._parseIperf(cliout)]
            if l4Type == "UDP":
                result.insert(0, udpBw)
            output(f"*** Results: {result}\n")
            return result

    return ScenarioNet
