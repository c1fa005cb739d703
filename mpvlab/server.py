"""The video server: Apache httpd per run, foreground, its own generated config, under `mptcpize run`.

`Listen` is on the wildcard address: bound to one address, MP_JOINs towards a second server address
get no SYN-ACK (platform-facts.md). ServerRoot, PidFile and the runtime directory live inside the run
directory, so two runs never share Apache state.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from mpvlab import proc
from mpvlab.netns import Netns

MODULES = Path("/usr/lib/apache2/modules")
APACHE_BIN = "/usr/sbin/apache2"
PORT = 80
# Request duration (us), keep-alive request count and Range: the ground truth for download times.
LOG_FORMAT = r'%h %{remote}p %t \"%r\" %>s %B %D %k \"%{Range}i\"'


def render_config(root: Path, docroot: Path, http2: bool = False) -> str:
    mods = ["mpm_event", "authz_core", "mime", "dir", "headers"] + (["http2"] if http2 else [])
    lines = [f"LoadModule {m}_module {MODULES}/mod_{m}.so" for m in mods]
    lines += [
        f'ServerRoot "{root}"',
        f'PidFile "{root}/httpd.pid"',
        f'DefaultRuntimeDir "{root}/run"',
        # In-memory mutexes: no lock files a www-data child would have to reach in the run directory,
        # no SysV semaphores that a SIGKILLed run would leak on the host.
        "Mutex pthread default",
        "ServerName mpvlab-server",
        f"Listen 0.0.0.0:{PORT}",             # wildcard on purpose (MPTCP joins)
        # Apache's default on Linux is TCP_DEFER_ACCEPT, which makes the kernel ignore the bare ACK
        # that completes an MP_JOIN handshake (no data follows on a joined subflow): the join then
        # only succeeds after ~30 s of SYN-ACK retransmissions. Measured here; never defer.
        "AcceptFilter http none",
        "AcceptFilter https none",
        "User www-data",
        "Group www-data",
        "KeepAlive On",
        "MaxKeepAliveRequests 0",
        "KeepAliveTimeout 30",
        "EnableSendfile On",
        "Timeout 120",
        f'DocumentRoot "{docroot}"',
        f'<Directory "{docroot}">',
        "  Options FollowSymLinks",
        "  AllowOverride None",
        "  Require all granted",
        "</Directory>",
        "TypesConfig /etc/mime.types",
        "AddType application/dash+xml .mpd",
        "AddType video/iso.segment .m4s",
        "AddType video/mp4 .mp4",
        f'ErrorLog "{root}/error.log"',
        "LogLevel warn",
        f'LogFormat "{LOG_FORMAT}" mpvlab',
        f'CustomLog "{root}/access.log" mpvlab',
    ]
    if http2:
        lines.append("Protocols h2c http/1.1")
    return "\n".join(lines) + "\n"


@dataclass
class ApacheServer:
    ns: Netns
    root: Path
    process: subprocess.Popen[bytes]
    ref: proc.ProcRef

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        # SIGTERM to the parent stops all children at once ("graceful-stop" would wait for clients).
        proc.stop_child(self.process)


MPTCPWRAP = next(iter(sorted(Path("/usr/lib").glob("*/mptcpize/libmptcpwrap.so.0"))),
                 Path("/usr/lib/x86_64-linux-gnu/mptcpize/libmptcpwrap.so.0"))
CCWRAP = Path(__file__).resolve().parent.parent / "cc" / "preload" / "build" / "libmpvlab-ccwrap.so"


def start_apache(ns: Netns, root: Path, docroot: Path, *, cc: str, http2: bool = False,
                 mptcp: bool = True, extra_env: dict[str, str] | None = None) -> ApacheServer:
    """Start Apache with congestion control `cc` on its listener (and so on every subflow).
    extra_env: e.g. MPVLAB_SNDBUF (a scheduler's send-buffer bound, applied by the same shim)."""
    if mptcp and not MPTCPWRAP.exists():
        raise RuntimeError(f"{MPTCPWRAP} is missing: install the mptcpize package (./setup.sh does)")
    if not CCWRAP.exists():
        raise RuntimeError(f"{CCWRAP} is missing: run ./setup.sh (it builds cc/preload)")
    (root / "run").mkdir(parents=True, exist_ok=True)
    conf = root / "httpd.conf"
    conf.write_text(render_config(root, docroot, http2))
    check = ns.run([APACHE_BIN, "-t", "-f", str(conf)], check=False)
    if check.returncode != 0:
        raise RuntimeError(f"apache config test failed: {check.stderr.strip()}")
    argv = [APACHE_BIN, "-f", str(conf), "-DFOREGROUND"]
    # What `mptcpize run` does (LD_PRELOAD of libmptcpwrap, which turns TCP sockets into MPTCP ones),
    # done by hand because mptcpize replaces LD_PRELOAD and would drop our congestion-control shim.
    preload = [str(MPTCPWRAP)] if mptcp else []
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LANG": "C",
           "LD_PRELOAD": " ".join(preload + [str(CCWRAP)]), "MPVLAB_CC": cc, **(extra_env or {})}
    with (root / "stdout.log").open("wb") as out:
        p = ns.popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    return ApacheServer(ns, root, p, proc.ProcRef.of(p.pid, "apache"))


def wait_serving(server: ApacheServer, url: str, timeout: float = 5.0) -> float:
    """Poll until Apache answers a HEAD for the video; returns the time it took. Runs the request from
    inside the server's namespace (its loopback), so no path emulation is involved."""
    t_start = time.monotonic()
    last = ""
    while time.monotonic() - t_start < timeout:
        if not server.alive():
            err = (server.root / "error.log").read_text()[-2000:] if (server.root / "error.log").exists() else ""
            raise RuntimeError(f"apache exited with code {server.process.returncode}: {err.strip()}")
        cp = server.ns.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-I", url], check=False, timeout=5)
        if cp.stdout.strip() == "200":
            return time.monotonic() - t_start
        last = (cp.stdout + cp.stderr).strip()
        time.sleep(0.02)
    raise RuntimeError(f"apache did not serve {url} within {timeout:g} s (last answer: {last})")


