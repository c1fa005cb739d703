"""The video server: Apache httpd per run, foreground, its own generated config, under `mptcpize run`.

`Listen` is on the wildcard address: bound to one address, MP_JOINs towards a second server address
get no SYN-ACK (docs/kernel-facts.md). ServerRoot, PidFile and the runtime directory live inside the run
directory, so two runs never share Apache state.

HTTP version (scenario `server:`): HTTP/1.1 on port 80, or with TLS (mod_ssl, a per-run self-signed
certificate, mpvlab/runner/tls.py) on port 443, HTTP/1.1 or HTTP/2 (mod_http2, `Protocols h2 http/1.1`,
negotiated by ALPN). Every request's protocol, TLS version and cipher go to the access log; the run
checks the server's protocol from the client namespace before the player starts (`verify_protocol`)
and every logged request afterwards (`tally_access_log`).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc
from mpvlab.core.netns import Netns
from mpvlab.runner.tls import TlsMaterial
from mpvlab.core.errors import MpvlabError

MODULES = Path("/usr/lib/apache2/modules")
APACHE_BIN = "/usr/sbin/apache2"
PORT = 80            # plain HTTP
TLS_PORT = 443
# Request duration (us), keep-alive request count and Range: the server's view of download times
# (over h2 %D ends when mod_http2's handler has passed the file on, ms, not at the client: use the
# player's own timing there);
# then the request's protocol (%H) and, with TLS, the negotiated TLS version and cipher (mod_ssl's
# %{..}x; without mod_ssl those specifiers are a config error, hence the literal dashes).
LOG_FORMAT_BASE = r'%h %{remote}p %t \"%r\" %>s %B %D %k \"%{Range}i\" %H'
LOG_FORMAT_TLS = LOG_FORMAT_BASE + " %{SSL_PROTOCOL}x %{SSL_CIPHER}x"
LOG_FORMAT_PLAIN = LOG_FORMAT_BASE + " - -"
# The protocol check's request carries this query, so the post-run tally can leave it out.
PREFLIGHT_QUERY = "mpvlab-preflight=1"

# HTTP/2 settings in force, written into the config explicitly (mod_http2 2.0 defaults, except push
# off) so provenance records exactly what ran. H2WindowSize is the server's *receive* window (uploads);
# the download direction is governed by the client's window (libsoup 3: 32 MiB, player/README.md).
H2_SETTINGS: dict[str, str] = {
    "H2Push": "off",                  # the players never use pushed resources
    "H2MaxSessionStreams": "100",
    "H2WindowSize": "65535",
    "H2StreamMaxMemSize": "65536",    # bytes buffered per stream between handler and connection
    "H2ModernTLSOnly": "on",
    "H2Direct": "off",                # no cleartext h2c: the player cannot use it
}
TLS_SETTINGS: dict[str, str] = {
    "SSLProtocol": "-all +TLSv1.2 +TLSv1.3",
    "SSLHonorCipherOrder": "off",
    "SSLSessionCache": "none",        # one long connection per stream; nothing to resume
}


@dataclass(frozen=True)
class HttpSetup:
    """What the server speaks: `protocol` 'http/1.1' or 'h2'; TLS when `tls` holds the material."""

    protocol: str = "http/1.1"
    tls: TlsMaterial | None = None

    def __post_init__(self) -> None:
        if self.protocol not in ("http/1.1", "h2"):
            raise ValueError(f"unknown HTTP protocol {self.protocol!r}; allowed: http/1.1, h2")
        if self.protocol == "h2" and self.tls is None:
            raise ValueError("h2 needs TLS here: the player negotiates HTTP/2 only by TLS ALPN (no h2c)")

    @property
    def port(self) -> int:
        return TLS_PORT if self.tls else PORT

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def log_version(self) -> str:
        """How Apache's %H names the protocol."""
        return "HTTP/2.0" if self.protocol == "h2" else "HTTP/1.1"

    def url(self, host: str, path: str) -> str:
        return f"{self.scheme}://{host}:{self.port}/{path}"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"protocol": self.protocol, "tls": self.tls is not None, "port": self.port,
                               "apache_protocols": "h2 http/1.1" if self.protocol == "h2" else "http/1.1"}
        if self.protocol == "h2":
            out["h2_settings"] = dict(H2_SETTINGS)
        if self.tls is not None:
            out["tls_settings"] = dict(TLS_SETTINGS)
            out["certificate"] = self.tls.describe()
        return out


def render_config(root: Path, docroot: Path, http: HttpSetup | None = None) -> str:
    http = http or HttpSetup()
    mods = ["mpm_event", "authz_core", "mime", "dir", "headers"]
    if http.tls is not None:
        mods.append("ssl")
    if http.protocol == "h2":
        mods.append("http2")
    lines = [f"LoadModule {m}_module {MODULES}/mod_{m}.so" for m in mods]
    lines += [
        f'ServerRoot "{root}"',
        f'PidFile "{root}/httpd.pid"',
        f'DefaultRuntimeDir "{root}/run"',
        # In-memory mutexes: no lock files a www-data child would have to reach in the run directory,
        # no SysV semaphores that a SIGKILLed run would leak on the host.
        "Mutex pthread default",
        "ServerName mpvlab-server",
        # wildcard on purpose (MPTCP joins); with TLS the listener's protocol is https
        f"Listen 0.0.0.0:{http.port}" + (" https" if http.tls else ""),
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
        f'LogFormat "{LOG_FORMAT_TLS if http.tls else LOG_FORMAT_PLAIN}" mpvlab',
        f'CustomLog "{root}/access.log" mpvlab',
    ]
    if http.tls is not None:
        lines += ["SSLEngine on",
                  f'SSLCertificateFile "{http.tls.cert}"',
                  f'SSLCertificateKeyFile "{http.tls.key}"']
        lines += [f"{k} {v}" for k, v in TLS_SETTINGS.items()]
    if http.protocol == "h2":
        lines.append("Protocols h2 http/1.1")
        lines += [f"{k} {v}" for k, v in H2_SETTINGS.items()]
    else:
        lines.append("Protocols http/1.1")
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
CCWRAP = checkout_root() / "cc" / "preload" / "build" / "libmpvlab-ccwrap.so"


def start_apache(ns: Netns, root: Path, docroot: Path, *, cc: str, http: HttpSetup | None = None,
                 mptcp: bool = True, extra_env: dict[str, str] | None = None) -> ApacheServer:
    """Start Apache with congestion control `cc` on its listener (and so on every subflow).
    extra_env: e.g. MPVLAB_SNDBUF (a scheduler's send-buffer bound, applied by the same shim)."""
    if mptcp and not MPTCPWRAP.exists():
        raise RuntimeError(f"{MPTCPWRAP} is missing: install the mptcpize package (./setup.sh does)")
    if not CCWRAP.exists():
        raise RuntimeError(f"{CCWRAP} is missing: run ./setup.sh (it builds cc/preload)")
    (root / "run").mkdir(parents=True, exist_ok=True)
    conf = root / "httpd.conf"
    conf.write_text(render_config(root, docroot, http))
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


def _curl_trust(http: HttpSetup | None) -> list[str]:
    # Trust exactly the run's certificate; never -k.
    return ["--cacert", str(http.tls.cert)] if http is not None and http.tls is not None else []


def wait_serving(server: ApacheServer, url: str, timeout: float = 5.0, http: HttpSetup | None = None) -> float:
    """Poll until Apache answers a HEAD for the video; returns the time it took. Runs the request from
    inside the server's namespace (its loopback), so no path emulation is involved."""
    t_start = time.monotonic()
    last = ""
    while time.monotonic() - t_start < timeout:
        if not server.alive():
            err = (server.root / "error.log").read_text()[-2000:] if (server.root / "error.log").exists() else ""
            raise RuntimeError(f"apache exited with code {server.process.returncode}: {err.strip()}")
        cp = server.ns.run(["curl", "-sS", *_curl_trust(http), "-o", "/dev/null", "-w", "%{http_code}", "-I", url],
                           check=False, timeout=5)
        if cp.stdout.strip() == "200":
            return time.monotonic() - t_start
        last = (cp.stdout + cp.stderr).strip()
        time.sleep(0.02)
    raise RuntimeError(f"apache did not serve {url} within {timeout:g} s (last answer: {last})")




class ProtocolMismatch(MpvlabError, RuntimeError):
    """The server did not speak the scenario's HTTP version (or TLS did not verify)."""


_ALPN_RE = re.compile(r"ALPN: server accepted (\S+)")
_TLS_RE = re.compile(r"SSL connection using (\S+) / (\S+)")


def verify_protocol(client: Netns, http: HttpSetup, url: str, timeout: float = 15.0) -> dict[str, Any]:
    """One HEAD request from the client's namespace over the emulated path, as the player will make it
    (same URL, same trust anchor): the answer's HTTP version must be the scenario's. curl offers h2 and
    http/1.1 by ALPN for h2 (so a server that only speaks 1.1 shows up as 1.1, not as an error), and
    only HTTP/1.1 otherwise. Returns what was negotiated; raises ProtocolMismatch otherwise."""
    sep = "&" if "?" in url else "?"
    argv = ["curl", "-sS", "-v", "-I", "--max-time", f"{timeout:g}", "-o", "/dev/null",
            "-w", "%{http_version} %{http_code} %{ssl_verify_result}",
            "--http2" if http.protocol == "h2" else "--http1.1", *_curl_trust(http), url + sep + PREFLIGHT_QUERY]
    cp = client.run(argv, check=False, timeout=timeout + 5)
    fields = cp.stdout.split()
    version, code = (fields + ["", ""])[:2]
    alpn = _ALPN_RE.search(cp.stderr)
    tls = _TLS_RE.search(cp.stderr)
    got: dict[str, Any] = {
        "http_version": version, "http_code": code, "curl_exit": cp.returncode,
        "alpn": alpn.group(1) if alpn else None,
        "tls_version": tls.group(1) if tls else None, "tls_cipher": tls.group(2) if tls else None,
    }
    want = "2" if http.protocol == "h2" else "1.1"
    if cp.returncode != 0 or code != "200" or version != want:
        err = "; ".join(line.strip() for line in cp.stderr.splitlines() if line.startswith("curl:"))
        raise ProtocolMismatch(
            f"protocol check from {client.name} to {url}: wanted HTTP/{want} with status 200, got "
            f"HTTP/{version or '?'} status {code or '?'} (curl exit {cp.returncode}{': ' + err if err else ''})")
    if http.tls is not None and (alpn is None or alpn.group(1) != ("h2" if http.protocol == "h2" else "http/1.1")):
        raise ProtocolMismatch(f"protocol check: TLS ALPN selected {got['alpn']!r}, expected "
                               f"{'h2' if http.protocol == 'h2' else 'http/1.1'}")
    return got


# %h %{remote}p [%t] "%r" %>s %B %D %k "%{Range}i" %H TLSPROTO TLSCIPHER
_LOG_RE = re.compile(r'^(\S+) (\S+) \[[^\]]*\] "(.*)" (\d{3}) (\S+) (\d+) (\d+) "(.*)" (\S+) (\S+) (\S+)$')


def tally_access_log(access_log: Path, http: HttpSetup) -> dict[str, Any]:
    """Per protocol, TLS version and cipher: how many requests the client made over the emulated paths
    (loopback readiness checks and the protocol check left out, counted apart). `ok` says every such
    request used the scenario's protocol (and, with TLS, TLS); at least one must exist."""
    by_proto: Counter[str] = Counter()
    by_tls: Counter[str] = Counter()
    by_cipher: Counter[str] = Counter()
    unparsed = preflight = loopback = 0
    try:
        lines = access_log.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        m = _LOG_RE.match(line)
        if m is None:
            unparsed += 1
            continue
        if m.group(1).startswith("127.") or m.group(1) == "::1":
            loopback += 1
            continue
        if PREFLIGHT_QUERY in m.group(3):
            preflight += 1
            continue
        by_proto[m.group(9)] += 1
        by_tls[m.group(10)] += 1
        by_cipher[m.group(11)] += 1
    requests = sum(by_proto.values())
    wrong = requests - by_proto.get(http.log_version, 0)
    no_tls = by_tls.get("-", 0) if http.tls is not None else 0
    return {
        "expected": http.log_version, "requests": requests, "by_protocol": dict(by_proto),
        "by_tls_version": dict(by_tls), "by_cipher": dict(by_cipher),
        "other_protocol": wrong, "without_tls": no_tls, "unparsed_lines": unparsed,
        "excluded": {"preflight": preflight, "loopback": loopback},
        "ok": requests > 0 and wrong == 0 and no_tls == 0 and unparsed == 0,
    }
