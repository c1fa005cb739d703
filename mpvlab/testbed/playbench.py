"""Shared by bench/bench_player.py and bench/bench_dash.py: Apache and the player in one private
network namespace of a testbed.bed.Bed (over its loopback: ample bandwidth), and the player's CPU
use read from /proc while it plays, with the child's rusage at exit as a cross-check."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from mpvlab.core.proc import cpu_ticks, stop_child
from mpvlab.core.netns import Netns
from mpvlab.testbed.apache import httpd_conf, start_httpd
from mpvlab.testbed.bed import Bed
from mpvlab.player.gstreamer.kind import PROGRAM
from mpvlab.testbed.player import PY

CLK_TCK = os.sysconf("SC_CLK_TCK")
PORT = 8080


def content_cache(default: str) -> Path:
    cache = Path(os.environ.get("MPVLAB_TEST_CONTENT_DIR", default))
    cache.mkdir(parents=True, exist_ok=True)
    os.chmod(cache, 0o755)     # Apache's www-data children read it
    return cache


@contextlib.contextmanager
def served(prefix: str, docroot: Path) -> Iterator[tuple[str, Path]]:
    """A bed namespace (role `prefix`) with Apache serving docroot on its loopback; yields
    (namespace name, workdir). Everything is removed on the way out."""
    if os.geteuid() != 0:
        sys.exit("needs root (network namespace)")
    with Bed() as bed:
        ns = bed.node(prefix)
        apache = start_httpd(bed, ns, httpd_conf(bed.workdir, docroot, PORT), PORT)
        try:
            yield ns.name, bed.workdir
        finally:
            stop_child(apache, grace=5)


def play(ns: str, url: str, out: Path, extra: list[str], timeout_s: float) -> dict[str, Any]:
    """Play url to the end; the player's summary plus its CPU use (% of one core)."""
    out.mkdir(parents=True, exist_ok=True)
    # A plain child (not via the bed's popen): wait4 below must reap it itself. It lives inside the
    # bed's namespace, so a killed bench's player goes with that namespace.
    argv = Netns(ns).argv([PY, "-m", PROGRAM, "--url", url, "--events", str(out / "events.jsonl"),
                           "--summary", str(out / "summary.json"), "--timeout-s", str(timeout_s), *extra])
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
