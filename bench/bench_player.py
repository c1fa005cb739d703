#!/usr/bin/env python3
"""Player CPU cost at the study's format: 720p H.264 at 5.24 Mbit/s, 30 s of video.

Runs Apache (mpm_event, own ServerRoot) and the player in one private network
namespace (``hplb<pid>``, over its loopback), and reads the player's CPU time
from /proc/PID/stat (utime+stime, all threads) while it plays; the child's
rusage at exit is printed beside it as a cross-check.  Not a test: prints
figures with the configured values beside them.

    /work/main/.venv/bin/python bench/bench_player.py [--duration 30] [--no-decode-too]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from mpvlab.content import ensure_progressive  # noqa: E402

PY = str(REPO / ".venv" / "bin" / "python")
PLAYER = str(REPO / "player" / "mpvlab_player.py")
CACHE = Path(os.environ.get("MPVLAB_TEST_CONTENT_DIR", "/tmp/hpl-content-cache"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PORT = 8080


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process (all its threads), in clock ticks."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()   # skip "pid (comm) "; comm may hold spaces
    return int(fields[11]) + int(fields[12])      # fields 14 and 15 of proc(5)


def start_apache(ns: str, root: Path, docroot: Path) -> subprocess.Popen[bytes]:
    mods = "/usr/lib/apache2/modules"
    conf = root / "httpd.conf"
    conf.write_text(f"""ServerRoot {root}
PidFile {root}/httpd.pid
DefaultRuntimeDir {root}
ServerName localhost
LoadModule mpm_event_module {mods}/mod_mpm_event.so
LoadModule authz_core_module {mods}/mod_authz_core.so
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


def play(ns: str, url: str, out: Path, extra: list[str], timeout_s: float) -> dict[str, object]:
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
    summ = json.loads((out / "summary.json").read_text())
    return {"summary": summ, "exit": proc.returncode,
            "cpu_pct_proc_stat": 100 * (last - first) / CLK_TCK / (t_last - t0),
            "cpu_pct_rusage": 100 * (ru.ru_utime + ru.ru_stime) / wall_total,
            "wall_s": t_last - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--bitrate", type=int, default=5_240_000)
    ap.add_argument("--no-decode-too", action="store_true", help="also measure --no-decode")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespace)", file=sys.stderr)
        return 1
    CACHE.mkdir(parents=True, exist_ok=True)
    os.chmod(CACHE, 0o755)
    info = ensure_progressive(CACHE, a.duration, a.bitrate)
    ns = f"hplb{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    apache = None
    tmp: Path | None = None
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        tmp = Path(tempfile.mkdtemp(prefix="hpl-bench-"))
        apache = start_apache(ns, tmp, CACHE)
        url = f"http://127.0.0.1:{PORT}/{info.path.name}"
        modes = [("decode", [])] + ([("no-decode", ["--no-decode"])] if a.no_decode_too else [])
        print(f"content: {info.path.name}  {info.frames} frames, "
              f"{info.stream_bitrate_bps / 1e6:.3f} Mbit/s (configured {a.bitrate / 1e6:.3f}), "
              f"{info.size_bytes / 1e6:.1f} MB")
        for name, extra in modes:
            out = tmp / name
            out.mkdir()
            r = play(ns, url, out, extra, a.duration * 2 + 30)
            s = r["summary"]
            assert isinstance(s, dict)
            print(f"[{name}] player CPU {r['cpu_pct_proc_stat']:.1f} % of one core "
                  f"over {r['wall_s']:.1f} s wall (video {a.duration:.0f} s) "
                  f"[rusage at exit: {r['cpu_pct_rusage']:.1f} %]; "
                  f"rendered {s['frames_rendered']}/{s['frames_expected']} frames, "
                  f"discards {s['picture_discards']} (no underflow near: "
                  f"{s['picture_discards_no_underflow']}), underflows {s['underflows']}, "
                  f"playback/video {s['playback_s'] / s['video_length_s']:.4f}, "
                  f"startup {s['startup_delay_s'] * 1000:.0f} ms, status {s['status']}")
    finally:
        if apache is not None and apache.poll() is None:
            apache.send_signal(signal.SIGTERM)
            apache.wait(timeout=5)
        subprocess.run(["ip", "netns", "del", ns])
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
