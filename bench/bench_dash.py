#!/usr/bin/env python3
"""Player CPU cost in DASH mode at 720p (dashdemux -> qtdemux -> avdec_h264), per ABR.

Runs Apache (mpm_event, own ServerRoot) and the player in one private network
namespace (``hdab<pid>``, over its loopback: ample bandwidth, so both ABRs run the
top level once started) and reads the player's CPU time from /proc/PID/stat
(utime+stime, all threads) while it plays; the child's rusage at exit is printed
beside it.  For comparison it also plays a progressive MP4 of the top level's
bitrate.  Not a test: prints figures with the configured values beside them.

    /work/main/.venv/bin/python bench/bench_dash.py [--duration 30]
        [--bitrates 1M,2.5M,5.24M] [--segment-s 2] [--no-progressive]
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from mpvlab.content import _parse_bitrate, ensure_dash, ensure_progressive  # noqa: E402

PY = str(REPO / ".venv" / "bin" / "python")
PLAYER = str(REPO / "player" / "mpvlab_player.py")
CACHE = Path(os.environ.get("MPVLAB_TEST_CONTENT_DIR", "/tmp/hda-content-cache"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PORT = 8080


def cpu_ticks(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def start_apache(ns: str, root: Path, docroot: Path) -> subprocess.Popen[bytes]:
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


def play(ns: str, url: str, out: Path, extra: list[str], timeout_s: float) -> dict[str, Any]:
    argv = ["ip", "netns", "exec", ns, PY, PLAYER, "--url", url, "--events",
            str(out / "events.jsonl"), "--summary", str(out / "summary.json"),
            "--timeout-s", str(timeout_s), *extra]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv)
    first = cpu_ticks(proc.pid) or 0
    last, t_last = first, t0
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        c = cpu_ticks(proc.pid)
        if c is not None:
            last, t_last = c, time.monotonic()
        time.sleep(0.2)
    wall_total = time.monotonic() - t0
    return {"summary": json.loads((out / "summary.json").read_text()),
            "exit": os.waitstatus_to_exitcode(status),
            "cpu_pct_proc_stat": 100 * (last - first) / CLK_TCK / (t_last - t0),
            "cpu_pct_rusage": 100 * (ru.ru_utime + ru.ru_stime) / wall_total,
            "wall_s": t_last - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--bitrates", type=lambda v: [_parse_bitrate(x) for x in v.split(",")],
                    default=[1_000_000, 2_500_000, 5_240_000])
    ap.add_argument("--segment-s", type=float, default=2.0)
    ap.add_argument("--no-progressive", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespace)", file=sys.stderr)
        return 1
    CACHE.mkdir(parents=True, exist_ok=True)
    os.chmod(CACHE, 0o755)
    t = time.monotonic()
    info = ensure_dash(CACHE, a.duration, a.bitrates, a.segment_s, 1280, 720, 30)
    print(f"DASH content: {info.dir.name} ({'cached' if info.cached else 'encoded'} in "
          f"{time.monotonic() - t:.1f} s), levels "
          + ", ".join(f"{r['bitrate_bps'] / 1e6:g} (real {r['mean_bitrate_bps'] / 1e6:.3f})"
                      for r in info.representations) + " Mbit/s, 1280x720 30 fps, "
          f"{info.n_segments} x {a.segment_s:g} s segments")
    ns = f"hdab{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    apache = None
    tmp: Path | None = None
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        tmp = Path(tempfile.mkdtemp(prefix="hda-bench-"))
        apache = start_apache(ns, tmp, CACHE)
        mpd = f"http://127.0.0.1:{PORT}/{info.dir.name}/{info.mpd.name}"
        runs: list[tuple[str, str, list[str]]] = [
            ("dash gst", mpd, ["--buffer-ms", "10000"]),
            ("dash bba", mpd, ["--buffer-ms", "10000", "--abr", "bba",
                               "--bba-reservoir-s", "2", "--bba-cushion-s", "4"]),
        ]
        if not a.no_progressive:
            prog = ensure_progressive(CACHE, a.duration, a.bitrates[-1])
            runs.append(("progressive", f"http://127.0.0.1:{PORT}/{prog.path.name}", []))
        for name, url, extra in runs:
            out = tmp / name.replace(" ", "_")
            out.mkdir()
            r = play(ns, url, out, extra, a.duration * 2 + 30)
            s = r["summary"]
            line = (f"[{name}] player CPU {r['cpu_pct_proc_stat']:.1f} % of one core over "
                    f"{r['wall_s']:.1f} s wall (video {a.duration:.0f} s) [rusage at exit: "
                    f"{r['cpu_pct_rusage']:.1f} %]; rendered {s['frames_rendered']}/"
                    f"{s['frames_expected']}, discards {s['picture_discards']} (no underflow "
                    f"near: {s['picture_discards_no_underflow']}), underflows {s['underflows']}, "
                    f"playback/video {s['playback_s'] / s['video_length_s']:.4f}, status {s['status']}")
            if s.get("dash"):
                top = len(s["representations"]) - 1
                line += (f"; quality_avg {s['quality_avg']:.2f} of {top}, segments at top "
                         f"{sum(g['level'] == top for g in s['segments'])}/{len(s['segments'])}, "
                         f"switches {s['bitrate_switches']}, ABR mismatches "
                         f"{s['abr_policy_mismatches']}")
            print(line)
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
