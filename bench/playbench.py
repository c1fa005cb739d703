"""Shared by bench_player.py and bench_dash.py: Apache and the player in one private network
namespace (over its loopback: ample bandwidth), and the player's CPU use read from /proc while it
plays, with the child's rusage at exit as a cross-check."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python")
PLAYER = str(REPO / "player" / "mpvlab_player.py")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PORT = 8080


def content_cache(default: str) -> Path:
    cache = Path(os.environ.get("MPVLAB_TEST_CONTENT_DIR", default))
    cache.mkdir(parents=True, exist_ok=True)
    os.chmod(cache, 0o755)     # Apache's www-data children read it
    return cache


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process (all its threads), in clock ticks."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()   # skip "pid (comm) "; comm may hold spaces
    return int(fields[11]) + int(fields[12])      # fields 14 and 15 of proc(5)


def _start_apache(ns: str, root: Path, docroot: Path) -> subprocess.Popen[bytes]:
    mods = "/usr/lib/apache2/modules"
    conf = root / "httpd.conf"
    conf.write_text(f"""ServerRoot {root}
PidFile {root}/httpd.pid
DefaultRuntimeDir {root}
Mutex pthread default
ServerName localhost
LoadModule mpm_event_module {mods}/mod_mpm_event.so
LoadModule authz_core_module {mods}/mod_authz_core.so
LoadModule mime_module {mods}/mod_mime.so
TypesConfig /etc/mime.types
AddType application/dash+xml .mpd
AddType video/iso.segment .m4s
AcceptFilter http none
User www-data
Group www-data
Listen {PORT}
DocumentRoot {docroot}
<Directory {docroot}>
    Require all granted
</Directory>
ErrorLog {root}/error.log
""")
    p = subprocess.Popen(["ip", "netns", "exec", ns, "apache2", "-f", str(conf), "-DFOREGROUND"])
    for _ in range(250):
        r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Htln", f"sport = :{PORT}"],
                           capture_output=True, text=True)
        if r.stdout.strip():
            return p
        time.sleep(0.02)
    p.terminate()
    raise RuntimeError("apache2 did not start")


@contextlib.contextmanager
def served(prefix: str, docroot: Path) -> Iterator[tuple[str, Path]]:
    """A namespace `<prefix><pid>` with Apache serving docroot on its loopback; yields (ns, workdir).
    Everything is removed on the way out."""
    if os.geteuid() != 0:
        sys.exit("needs root (network namespace)")
    ns = f"{prefix}{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    apache = None
    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}-bench-"))
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        apache = _start_apache(ns, tmp, docroot)
        yield ns, tmp
    finally:
        if apache is not None and apache.poll() is None:
            apache.send_signal(signal.SIGTERM)
            apache.wait(timeout=5)
        subprocess.run(["ip", "netns", "del", ns])
        shutil.rmtree(tmp, ignore_errors=True)


def play(ns: str, url: str, out: Path, extra: list[str], timeout_s: float) -> dict[str, Any]:
    """Play url to the end; the player's summary plus its CPU use (% of one core)."""
    out.mkdir(parents=True, exist_ok=True)
    argv = ["ip", "netns", "exec", ns, PY, PLAYER, "--url", url, "--events",
            str(out / "events.jsonl"), "--summary", str(out / "summary.json"),
            "--timeout-s", str(timeout_s), *extra]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv)
    first = cpu_ticks(proc.pid) or 0
    last, t_last = first, t0
    while True:
        # wait4 (not Popen.poll) so the exact rusage of the finished player is kept.
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            break
        c = cpu_ticks(proc.pid)
        if c is not None:
            last, t_last = c, time.monotonic()
        time.sleep(0.2)
    wall_total = time.monotonic() - t0
    return {"summary": json.loads((out / "summary.json").read_text()), "exit": proc.returncode,
            "cpu_pct_proc_stat": 100 * (last - first) / CLK_TCK / (t_last - t0),
            "cpu_pct_rusage": 100 * (ru.ru_utime + ru.ru_stime) / wall_total,
            "wall_s": t_last - t0}


def describe(name: str, r: dict[str, Any], video_s: float) -> str:
    s = r["summary"]
    return (f"[{name}] player CPU {r['cpu_pct_proc_stat']:.1f} % of one core over {r['wall_s']:.1f} s wall "
            f"(video {video_s:.0f} s) [rusage at exit: {r['cpu_pct_rusage']:.1f} %]; rendered "
            f"{s['frames_rendered']}/{s['frames_expected']} frames, discards {s['picture_discards']} (no underflow "
            f"near: {s['picture_discards_no_underflow']}), underflows {s['underflows']}, playback/video "
            f"{s['playback_s'] / s['video_length_s']:.4f}, startup {s['startup_delay_s'] * 1000:.0f} ms, "
            f"status {s['status']}")
