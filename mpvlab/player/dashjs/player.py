"""The dash.js reference player in Debian's headless Chromium, driven over the DevTools protocol.

Same contract as mpvlab/player/gstreamer/player.py (the run treats both alike): started in the client's
namespace (under `mptcpize run`, so Chromium and every child it spawns open MPTCP sockets), it writes
player-events.jsonl and player-summary.json with the same QoE fields, and its exit codes mean the same
(0 played to the end, 2 playback error, 3 timeout, 4 SIGINT/SIGTERM, 1 bad arguments / no browser).

Timeline: the browser starts and loads the page (player/dashjs/player.html, served by the run's own
Apache) before run time zero; at t0 the driver calls the page's mpvlabStart(), which creates the
dash.js player and requests the MPD. The page records dash.js's own events, every request it made
(FRAGMENT_LOADING_COMPLETED) and its buffer level; the driver maps the page's clock
(performance.now()) onto CLOCK_MONOTONIC by a calibration round trip just before t0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from mpvlab.player.dashjs import parts, qoe
from mpvlab.player.dashjs.kind import DASHJS_ABRS
from mpvlab.player.dashjs.browser import (TmpdirError, make_tmpdir, process_tree, remove_profile, start_browser,
                                          stop_browser)
from mpvlab.player.dashjs.cdp import BrowserLog, Cdp, NetlinkWatch
from mpvlab.player.contract import (EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK,
                                    EXIT_TIMEOUT, AbrRecord, add_common_args, finish)
from mpvlab.player.start_signal import wait_for_t0

def tree_cpu_s(root: int) -> tuple[float, float, int]:
    """CPU seconds (user, system; each including reaped children) of `root` and every live descendant,
    and how many processes that is: Chromium's browser, renderer, GPU and network-service processes."""
    tree = process_tree(root)
    hz = os.sysconf("SC_CLK_TCK")
    user = system = 0
    for pid in tree:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            user += int(f[11]) + int(f[13])     # utime + cutime
            system += int(f[12]) + int(f[14])   # stime + cstime
        except (OSError, ValueError, IndexError):
            pass
    return user / hz, system / hz, len(tree)


def page_target(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
        targets = json.loads(r.read())
    pages = [t for t in targets if t.get("type") == "page"]
    if not pages:
        raise RuntimeError("chromium has no page target")
    return str(pages[0]["webSocketDebuggerUrl"])


def calibrate(cdp: Cdp) -> tuple[float, float]:
    """The page's performance.now() (ms) at CLOCK_MONOTONIC 0, from the shortest of 5 round trips;
    returns (offset_ns, half the round trip in ms: the mapping's uncertainty)."""
    best: tuple[float, float] | None = None
    for _ in range(5):
        a = time.monotonic_ns()
        page_ms = float(cdp.evaluate("performance.now()"))
        b = time.monotonic_ns()
        rtt = (b - a) / 1e6
        if best is None or rtt < best[1] * 2:
            best = ((a + b) / 2 - page_ms * 1e6, rtt / 2)
    assert best is not None
    return best


PAGE_STATE = ("JSON.stringify([location.href, document.readyState, typeof window.mpvlabStart, "
              "performance.getEntriesByType('resource').map(e => [e.name, e.transferSize, e.encodedBodySize, "
              "e.responseStatus, Math.round(e.duration)])])")
# What the page must hold before run time zero, each part judged separately so that the error names
# what is missing: dash.js ran (its global, its version, its MediaPlayer), Media Source Extensions
# with H.264 in MP4 (the content's codec), and the page's own functions (mpvlab-dashjs.js ran).
READINESS = """(() => {
  const d = (typeof window.dashjs === "object" && window.dashjs !== null) ? window.dashjs : null;
  return {
    href: location.href, ready_state: document.readyState, stale: window.mpvlabStale === true,
    dashjs: d !== null, dashjs_version: d && typeof d.Version === "string" ? d.Version : null,
    media_player: d !== null && typeof d.MediaPlayer === "function",
    mse: typeof window.MediaSource === "function",
    h264: typeof window.MediaSource === "function" && MediaSource.isTypeSupported('video/mp4; codecs="avc1.42c01e"'),
    page_functions: ["mpvlabStart", "mpvlabState", "mpvlabDump"].filter((f) => typeof window[f] === "function"),
  };
})()"""
PAGE_FUNCTIONS = ("mpvlabStart", "mpvlabState", "mpvlabDump")


class PageNotReady(RuntimeError):
    """The page loaded without what playback needs (see READINESS); the message names what, and
    `failures` holds every attempt's record."""

    def __init__(self, message: str, failures: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.failures = failures


def missing_parts(r: dict[str, Any], want_version: str | None) -> list[str]:
    """What the readiness record lacks, in words; empty when the page is ready."""
    out = []
    if not r.get("dashjs"):
        out.append("dash.js did not run (window.dashjs is undefined)")
    else:
        if want_version is not None and r.get("dashjs_version") != want_version:
            out.append(f"dash.js reports version {r.get('dashjs_version')!r}, the vendored one is {want_version!r}")
        if not r.get("media_player"):
            out.append("dashjs.MediaPlayer is not a function")
    if not r.get("mse"):
        out.append("Media Source Extensions are not available (window.MediaSource)")
    elif not r.get("h264"):
        out.append('MediaSource does not support video/mp4; codecs="avc1.42c01e"')
    absent = [f for f in PAGE_FUNCTIONS if f not in (r.get("page_functions") or [])]
    if absent:
        out.append(f"mpvlab-dashjs.js did not run ({', '.join(absent)} undefined)")
    return out


def describe_problems(problems: list[dict[str, Any]]) -> str:
    """The browser's own words for what went wrong during a load: failed requests (with Chromium's
    net:: error), other error log entries (an HTTP error status, …) and uncaught exceptions."""
    said: list[str] = []
    # a failed request also makes a log entry "Failed to load resource: <its errorText>": said once
    failed = {p.get("requestId"): str(p.get("errorText")) for p in problems if p["method"] == "Network.loadingFailed"}
    for p in problems:
        if p["method"] == "Network.loadingFailed":
            said.append(f"{p.get('url')}: {p.get('errorText')}{' (canceled)' if p.get('canceled') else ''}")
        elif p["method"] == "Log.entryAdded" and failed.get(p.get("requestId"), "\0") not in str(p.get("text")):
            said.append(f"{p.get('url')}: {p.get('text')}")
        elif p["method"] == "Runtime.exceptionThrown":
            said.append(f"exception {p.get('description') or p.get('text')} at {p.get('url')}:{p.get('line')}")
    return "; ".join(said[:6]) or "the browser reported no failed request and no exception"


def wait_complete(cdp: Cdp, url: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll until the navigated document — not the one before it, which the driver marked stale, and
    at `url` as the browser spells it — reached readyState "complete": every synchronous script has
    then run or failed, so readiness is decided, not still coming."""
    want = cdp.evaluate(f"new URL({json.dumps(url)}).href")     # e.g. without the default port
    deadline = time.monotonic() + timeout_s
    while True:
        r: dict[str, Any] = cdp.evaluate(READINESS)
        if r["href"] == want and not r["stale"] and r["ready_state"] == "complete":
            return r
        if time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def load_page(cdp: Cdp, log: BrowserLog, url: str, want_version: str | None,
              attempts: int = 3) -> list[dict[str, Any]]:
    """Navigate to the player page until it is ready (READINESS). A load that completes without what
    playback needs is recorded — what was missing, the browser's failed requests and exceptions
    during that load, the resource timing entries — and the page loaded again. Returns the failed
    attempts; after `attempts` of them raises PageNotReady naming what was missing and why."""
    failures: list[dict[str, Any]] = []
    for attempt in range(1, attempts + 1):
        mark = log.mark()
        cdp.evaluate("window.mpvlabStale = true")     # the document before this navigation
        nav = cdp.call("Page.navigate", {"url": url})
        r = wait_complete(cdp, url) if not nav.get("errorText") else {}
        cdp.drain(0.05)     # events the browser sent with the load's last ones
        missing = ["the navigation failed: " + str(nav["errorText"])] if nav.get("errorText") else (
            [f"the page did not complete loading within 60 s (readyState {r.get('ready_state')!r})"]
            if r.get("ready_state") != "complete" or r.get("stale") else missing_parts(r, want_version))
        if not missing:
            return failures
        failures.append({"attempt": attempt, "missing": missing, "readiness": r,
                         "browser": log.problems_since(mark), "page": json.loads(cdp.evaluate(PAGE_STATE))})
    last = failures[-1]
    raise PageNotReady(f"the dash.js page {url} was not ready after {attempts} loads: {'; '.join(last['missing'])} "
                       f"(the browser during the last load: {describe_problems(last['browser'])}; every attempt "
                       "in player-summary.json page_load_failures and data/dashjs/browser-events.jsonl)", failures)


# The dash.js `streaming` settings the driver may set (mpvlab/player/dashjs/kind.py DASHJS_BUFFER_SETTINGS).
SETTINGS = ("stableBufferTime", "bufferTimeAtTopQuality", "bufferTimeAtTopQualityLongForm",
            "longFormContentDurationThreshold")


def settings_arg(text: str) -> dict[str, float]:
    """--dashjs-settings: exactly SETTINGS, each a positive number of seconds."""
    try:
        d = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not JSON") from None
    if not isinstance(d, dict) or sorted(d) != sorted(SETTINGS):
        raise argparse.ArgumentTypeError(f"a JSON object with exactly the keys {', '.join(SETTINGS)}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 3600 for v in d.values()):
        raise argparse.ArgumentTypeError("each value a number of seconds, more than 0 and at most 3600")
    return {k: float(v) for k, v in d.items()}


def settings_read_back(configured: dict[str, float], raw: dict[str, Any]) -> dict[str, Any]:
    """What the page read back from dash.js's getSettings() after applying the settings, beside what
    was configured; `ok` is false when dash.js holds anything else (the run then fails: its figures
    would belong to other settings)."""
    got = raw.get("settings_read_back")
    ok = isinstance(got, dict) and all(got.get(k) == v for k, v in configured.items())
    return {"configured": configured, "read_back": got, "ok": ok}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, timeout_default=300.0)
    ap.add_argument("--page-url", required=True, help="player/dashjs/player.html on the same server")
    ap.add_argument("--data-dir", type=Path, required=True, help="raw dash.js metrics go here")
    ap.add_argument("--profile", type=Path, required=True, help="a fresh Chromium profile folder")
    ap.add_argument("--tmpdir", type=Path, required=True,
                    help="Chromium's TMPDIR (its singleton socket's folder): a short path that does not exist yet; "
                         "the driver makes it and removes it with the profile, its caller after a SIGKILL")
    ap.add_argument("--abr", required=True, choices=DASHJS_ABRS)
    ap.add_argument("--abr-params", default="{}", help="JSON: bba/festive parameters")
    ap.add_argument("--dashjs-settings", type=settings_arg, required=True,
                    help="JSON: dash.js streaming buffer settings in seconds, by dash.js's names "
                         f"({', '.join(SETTINGS)}; the scenario's player.dashjs_* fields)")
    ap.add_argument("--start", default="gated", choices=["gated", "autoplay"],
                    help="gated: play() once dash.js's own buffer level is current (player README, 'Start-up "
                         "stall'); autoplay: dash.js's own autoplay")
    ap.add_argument("--end-of-stream", default="recheck", choices=["recheck", "stock"],
                    help="player README, 'Halt after the last segment': the page's recheck, or dash.js as it is")
    ap.add_argument("--spki", default=None, help="base64 SHA-256 of the run certificate's SPKI (https)")
    ap.add_argument("--video-length-s", type=float, required=True)
    return ap.parse_args(argv)


class Stop(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    a.data_dir.mkdir(parents=True, exist_ok=True)
    stopped: list[int] = []

    def on_signal(sig: int, _frame: Any) -> None:
        stopped.append(sig)
        raise Stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    status, reason, code = "error", None, EXIT_ERROR
    browser: subprocess.Popen[bytes] | None = None
    tmpdir: Path | None = None      # made here: removed with the profile
    cdp: Cdp | None = None
    raw: dict[str, Any] = {}
    cpu: dict[str, Any] = {}
    browser_info: dict[str, Any] = {}
    page_failures: list[Any] = []
    blog = BrowserLog(a.data_dir / "browser-events.jsonl")
    t0 = a.t0_ns
    offset_ns, clock_uncertainty_ms = 0.0, None
    watch: NetlinkWatch | None = None
    try:
        watch = NetlinkWatch(blog)
        tmpdir = make_tmpdir(a.tmpdir)
        browser, port = start_browser(a.profile, tmpdir, a.spki, a.data_dir / "chromium.log")
        u_start, s_start, _ = tree_cpu_s(browser.pid)
        cdp = Cdp(page_target(port), on_event=blog)
        cdp.enable()
        _load_page(a, cdp, blog, page_failures)
        t0 = _wait_until_t0(a, t0)
        offset_ns, clock_uncertainty_ms = calibrate(cdp)
        t0 = t0 if t0 is not None else time.monotonic_ns()
        t_start_ns = _start_playback(a, cdp, t0)
        u_t0, s_t0, _ = tree_cpu_s(browser.pid)
        status, reason, code = _play_until_end(a, cdp, browser)
        raw = json.loads(cdp.evaluate("mpvlabDump()"))
        cpu, browser_info = _cpu_since(browser, t_start_ns, (u_start, s_start), (u_t0, s_t0))
    except Stop:
        status, reason, code = "interrupted", f"signal {stopped[0]}", EXIT_INTERRUPTED
    except (FileNotFoundError, TmpdirError) as e:
        status, reason, code = "error", str(e), EXIT_INTERNAL
    except Exception as e:   # the summary says what failed in every case
        status, reason, code = "error", f"{type(e).__name__}: {e}", EXIT_ERROR
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if cdp is not None:
            try:
                if not raw:
                    raw = json.loads(cdp.evaluate("mpvlabDump()", timeout_s=5))
            except Exception:
                pass
            try:
                cdp.drain(0.1)     # what the browser reported since the last call
            except Exception:
                pass
            cdp.close()
        if watch is not None:
            watch.stop()
        blog.close()
        if browser is not None:
            stop_browser(browser, a.profile)
        remove_profile(a.profile, tmpdir)   # the browser's scratch state, not a result (its log stays in data/)
    return _write_results(a, raw, status, reason, code, t0, offset_ns, clock_uncertainty_ms, cpu, browser_info,
                          page_failures, blog)


def _load_page(a: argparse.Namespace, cdp: Cdp, blog: BrowserLog, page_failures: list[Any]) -> None:
    """The page loaded before t0, its failures kept for the summary even when it never became ready."""
    try:
        page_failures.extend(load_page(cdp, blog, a.page_url, parts.dashjs_version()))
    except PageNotReady as e:
        page_failures.extend(e.failures)
        raise
    # The runner waits for this before its pre-run check (the page load must not overlap it).
    (a.data_dir / "page-loaded").write_text(f"{time.monotonic_ns()}\n")


def _wait_until_t0(a: argparse.Namespace, t0: int | None) -> int | None:
    """Run time zero: from the runner on stdin, or --t0-ns slept up to; None: play at once."""
    if a.t0_from_stdin:
        t0 = wait_for_t0()
        if t0 is None:
            raise RuntimeError("stdin closed before a 't0 NS' line (the runner went away)")
    elif t0 is not None and (w := t0 - time.monotonic_ns()) > 0:
        time.sleep(w / 1e9)
    return t0


def _start_playback(a: argparse.Namespace, cdp: Cdp, t0: int) -> int:
    """dash.js started on the page with the run's settings, checked by reading them back; the start
    time (CLOCK_MONOTONIC ns)."""
    cfg = {"mpd_url": a.url, "abr": a.abr, "settings": a.dashjs_settings, "abr_params": json.loads(a.abr_params),
           "start": a.start, "end_of_stream": a.end_of_stream}
    t_start_ns = time.monotonic_ns()
    # Written at once (the rest of the events follow at the end, from the page's record): a
    # watcher sees that playback began.
    with a.events.open("w") as fh:
        fh.write(json.dumps({"t": round((t_start_ns - t0) / 1e9, 6), "type": "start"}) + "\n")
    cdp.evaluate(f"mpvlabStart({json.dumps(cfg)})")
    # read back from the running dash.js at once: a run on other settings stops before it plays
    applied = settings_read_back(a.dashjs_settings,
                                 {"settings_read_back": cdp.evaluate("mpvlabRecord.settings_read_back")})
    if not applied["ok"]:
        raise RuntimeError(f"dash.js did not take the configured settings: configured {applied['configured']}, "
                           f"getSettings() gave {applied['read_back']}")
    return t_start_ns


def _play_until_end(a: argparse.Namespace, cdp: Cdp, browser: subprocess.Popen[bytes]) -> tuple[str, str | None, int]:
    """Polls the page until playback ends, fails, the browser exits or --timeout-s passes: how it ended
    (status, reason, exit code)."""
    reason = None
    end_by = time.monotonic() + a.timeout_s
    status, code = "timeout", EXIT_TIMEOUT
    while time.monotonic() < end_by:
        st = cdp.evaluate("mpvlabState()")
        if st["error"]:
            status, reason, code = "error", f"dash.js: {st['error']}", EXIT_ERROR
            break
        if st["ended"]:
            status, code = "eos", EXIT_OK
            break
        if browser.poll() is not None:
            status, reason, code = "error", f"chromium exited with code {browser.returncode}", EXIT_ERROR
            break
        time.sleep(0.25)
    if status == "timeout":
        reason = f"playback did not end within {a.timeout_s:g} s"
    return status, reason, code


def _cpu_since(browser: subprocess.Popen[bytes], t_start_ns: int, start: tuple[float, float],
               at_t0: tuple[float, float]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The browser tree's CPU use from t0 on (playback), and before t0 (start-up and page load) apart."""
    (u_start, s_start), (u_t0, s_t0) = start, at_t0
    u_end, s_end, nprocs = tree_cpu_s(browser.pid)
    wall = (time.monotonic_ns() - t_start_ns) / 1e9
    used = (u_end - u_t0) + (s_end - s_t0)
    # From t0 on (playback); the start-up and page load before t0 are kept apart.
    cpu = {"user_s": round(u_end - u_t0, 3), "system_s": round(s_end - s_t0, 3), "wall_s": round(wall, 3),
           "share_of_core": round(used / wall, 4) if wall else None}
    browser_info = {"processes": nprocs, "cpu_before_t0_s": round(u_t0 + s_t0 - u_start - s_start, 3)}
    return cpu, browser_info


def _write_results(a: argparse.Namespace, raw: dict[str, Any], status: str, reason: str | None, code: int,
                   t0: int | None, offset_ns: float, clock_uncertainty_ms: float | None, cpu: dict[str, Any],
                   browser_info: dict[str, Any], page_failures: list[Any], blog: BrowserLog) -> int:
    """The page's raw record, the summary and the events from the page's record; the exit code."""
    (a.data_dir / "dashjs-raw.json").write_text(json.dumps(raw, indent=1) + "\n")
    summ = qoe.summarize(raw, t0_ns=t0 or 0, page_offset_ns=offset_ns, video_length_s=a.video_length_s,
                                frames_expected=a.frames_expected)
    summ.update({"url": a.url, "status": status, "reason": reason, "exit_code": code, "t0_ns": t0,
                 "player": "dashjs", "dashjs_settings": settings_read_back(a.dashjs_settings, raw),
                 "cpu": cpu or None,
                 "browser": browser_info, "page_load_failures": page_failures,
                 "browser_events": blog.summary(),
                 "clock_map_uncertainty_ms": clock_uncertainty_ms,
                 # page ms → run time: run_ns = page_ms × 1e6 + page_offset_ns − t0_ns (the stall
                 # cross-check maps each counted stall back to the page's own record with it)
                 "page_offset_ns": offset_ns})
    summ["abr"] = AbrRecord(a.abr, json.loads(a.abr_params), version=raw.get("dashjs_version"))
    with a.events.open("a") as fh:
        for event in summ.pop("events_out", []):
            fh.write(json.dumps(event) + "\n")
    return finish(a.summary, summ, code)


if __name__ == "__main__":
    sys.exit(main())
