"""apache2 in the foreground in a private ServerRoot inside a bed's namespace: the web server of
the player beds (mpvlab/testbed/player.py, mpvlab/testbed/playbench.py). One configuration text for both; the
player tests add the settings that matter as in mpvlab/runner/server.py (keep-alive, sendfile, flush)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from mpvlab.core.netns import Netns
from mpvlab.testbed.bed import Bed

MODULES = "/usr/lib/apache2/modules"


def httpd_conf(root: Path, docroot: Path, port: int, extra: str = "") -> Path:
    """Write root/httpd.conf (wildcard Listen, AcceptFilter none, www-data serving docroot)."""
    conf = root / "httpd.conf"
    conf.write_text(f"""
ServerRoot {root}
PidFile {root}/httpd.pid
DefaultRuntimeDir {root}
Mutex pthread default
ServerName localhost
LoadModule mpm_event_module {MODULES}/mod_mpm_event.so
LoadModule authz_core_module {MODULES}/mod_authz_core.so
LoadModule mime_module {MODULES}/mod_mime.so
TypesConfig /etc/mime.types
AddType application/dash+xml .mpd
AddType video/iso.segment .m4s
AcceptFilter http none
User www-data
Group www-data
Listen {port}
DocumentRoot {docroot}
<Directory {docroot}>
    Require all granted
</Directory>
ErrorLog {root}/error.log
{extra}""")
    return conf


def start_httpd(bed: Bed, ns: Netns, conf: Path, port: int, **popen_kw: object) -> subprocess.Popen[bytes]:
    """Start apache2 -DFOREGROUND in `ns` (listed in the bed's ledger) and wait up to 5 s until it
    listens on `port`; raise (with its stderr when it exited) otherwise."""
    p = bed.popen(ns, ["apache2", "-f", str(conf), "-DFOREGROUND"], "apache2", **popen_kw)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if ns.run(["ss", "-Htln", f"sport = :{port}"], check=False).stdout.strip():
            return p
        if p.poll() is not None:
            err = p.stderr.read().decode() if p.stderr else ""
            raise RuntimeError(f"apache2 exited: {err}")
        time.sleep(0.02)
    p.terminate()
    p.wait()
    raise RuntimeError("apache2 did not start listening within 5 s")
