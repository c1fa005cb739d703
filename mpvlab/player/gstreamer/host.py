"""What the GStreamer player asks of its host to explain a failure or a cost: a connection test that
names why a request failed, the libsoup souphttpsrc loaded, and the process's CPU use."""

from __future__ import annotations

import resource
import socket
import ssl
import time
import urllib.parse
from pathlib import Path


def diagnose_connect(url: str, ca_file: Path | None = None) -> str:
    """One plain TCP connect to the URL's host:port (and for https:// a TLS handshake that trusts
    the same certificate file), to name a connection failure: souphttpsrc reports a refused
    connection and a rejected certificate alike as "Internal data stream error"."""
    u = urllib.parse.urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        with socket.create_connection((u.hostname or "", port), timeout=2.0) as sock:
            if u.scheme != "https":
                return f"TCP connect to {u.hostname}:{port} succeeded; HTTP request failed"
            ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
            ctx.set_alpn_protocols(["h2", "http/1.1"])
            with ctx.wrap_socket(sock, server_hostname=u.hostname) as tls:
                return (f"TCP connect and TLS handshake to {u.hostname}:{port} succeeded "
                        f"({tls.version()}, ALPN {tls.selected_alpn_protocol()}); HTTP request failed")
    except ssl.SSLError as e:
        return f"TLS handshake with {u.hostname}:{port} failed: {e.reason or e}"
    except OSError as e:
        return f"TCP connect to {u.hostname}:{port}: {e.strerror or e}"


def libsoup_loaded() -> str | None:
    """The libsoup that souphttpsrc loaded at run time (it prefers 3, falls back to 2.4): read
    from this process's mappings, since GStreamer does not expose it.  Only libsoup 3 speaks
    HTTP/2."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for name, ver in (("libsoup-3.0.so", "3"), ("libsoup-2.4.so", "2.4")):
        if name in maps:
            return ver
    return None


def cpu_use(t_start_ns: int) -> dict[str, float]:
    """This process's CPU time (every thread: souphttpsrc, demuxer, decoder threads, sink) over its
    wall time, as a share of one core: the cost of playing on a machine the emulation shares."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    wall = (time.monotonic_ns() - t_start_ns) / 1e9
    return {"user_s": round(ru.ru_utime, 3), "system_s": round(ru.ru_stime, 3), "wall_s": round(wall, 3),
            "share_of_core": round((ru.ru_utime + ru.ru_stime) / wall, 4) if wall > 0 else 0.0}
