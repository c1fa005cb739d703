"""The programs a physical run starts on its hosts over Host.popen: Apache on the server (under the
MPTCP wrapper and the CC shim, checked to serve the video before we go on) and the GStreamer player
on the client (at run time zero, translated to the client's CLOCK_MONOTONIC)."""

from __future__ import annotations

import time
from pathlib import Path

import mpvlab.content as content
from mpvlab.runner import server
from mpvlab.runner.physical.hostops import player_argv, read_file, write_file
from mpvlab.runner.physical.state import PhysicalRun, Started
from mpvlab.input.scenario import Scenario
from mpvlab.core.errors import RunFailed


def start_apache(run: PhysicalRun, sc: Scenario, video: content.ContentInfo) -> Started:
    h = run.plan.server
    host = run.plan.host(h)
    d = run.dirs["server"]
    root, docroot = f"{d}/apache", f"{d}/www"
    for sub in (root, f"{root}/run", docroot):
        host.run(["install", "-d", "-m", "0755", sub])
    host.run(["ln", "-s", str(video.path), f"{docroot}/video.mp4"])
    conf = f"{root}/httpd.conf"
    write_file(host, conf, server.render_config(Path(root), Path(docroot)))
    chk = host.run([server.APACHE_BIN, "-t", "-f", conf], check=False)
    if chk.returncode != 0:
        raise RunFailed(f"{host.name}: apache config test failed: {chk.stderr.strip()}")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C",
           "LD_PRELOAD": f"{server.MPTCPWRAP} {server.CCWRAP}", "MPVLAB_CC": sc.transport.cc}
    (run.ctx.logs / "apache").mkdir(exist_ok=True)
    started = run.start(h, [server.APACHE_BIN, "-f", conf, "-DFOREGROUND"], run.ctx.logs / "apache" / "stdout.log",
                        "apache", env=env)
    url = f"http://127.0.0.1:{server.PORT}/video.mp4"
    deadline = time.monotonic() + 10
    while True:
        if started.process.poll() is not None:
            err = read_file(host, f"{root}/error.log") or b""
            raise RunFailed(f"apache on {host.name} exited: {err.decode(errors='replace')[-1000:]}")
        cp = host.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-I", url], check=False, timeout=10)
        if cp.stdout.strip() == "200":
            return started
        if time.monotonic() > deadline:
            raise RunFailed(f"apache on {host.name} did not serve {url} within 10 s")
        time.sleep(0.05)



def start_player(run: PhysicalRun, sc: Scenario, video_url: str, frames: int) -> Started:
    d = run.dirs["client"]
    argv = ["mptcpize", "run", *player_argv(), "--url", video_url,
            "--events", f"{d}/player-events.jsonl", "--summary", f"{d}/player-summary.json",
            "--mode", sc.player.mode, "--max-lateness-ms", f"{sc.player.max_lateness / 1e6:g}",
            "--buffer-ms", f"{sc.playout_buffer_ns / 1e6:g}",
            "--rebuffer-resume-ms", f"{sc.player.rebuffer_resume / 1e6:g}",
            "--startup-buffer-ms", f"{sc.player.startup_buffer / 1e6:g}",
            "--t0-ns", str(run.t0_on(run.plan.client)),
            "--timeout-s", f"{sc.player_timeout_s:g}",
            "--frames-expected", str(frames)]
    if not sc.player.decode:
        argv.append("--no-decode")
    if sc.player.cpu is not None:
        argv = ["taskset", "-c", str(sc.player.cpu), *argv]
    return run.start(run.plan.client, argv, run.ctx.logs / "player.log", "player")

