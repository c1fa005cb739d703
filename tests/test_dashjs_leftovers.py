"""A dash.js run killed half-way leaves nothing behind (player README, "Chromium's scratch folders").

Chromium makes its singleton socket in a folder `org.chromium.Chromium.XXXXXX` of its TMPDIR (a
socket path must fit 108 bytes, so not in the deep profile) and links it from its profile. The
driver removes both when it ends normally or on SIGTERM; a SIGKILLed driver runs no `finally`, so
before the fix one such folder stayed in /tmp per killed run, and the profile in the run's data/.

The two run tests each run a real `mpvlab run` with a TMPDIR of its own (other runs on the machine
cannot touch it), check that Chromium did make its singleton folder somewhere below that TMPDIR while
playing, kill, and then require the TMPDIR exactly as before and no profile in the results. Before
the fix both failed on the `org.chromium.Chromium.*` folder left directly in that TMPDIR.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpvlab.core import ledger, naming
from mpvlab.core.paths import checkout_root
from mpvlab.player.dashjs import browser

REPO = checkout_root()
SCENARIO: dict[str, Any] = {
    "name": "dashjs-kill", "seed": 1, "topology": {"kind": "dumbbell"},
    "paths": {"wired": {"down": {"rate": "20mbit", "buffer": "100KB", "delay": "10ms"}}},
    "transport": {"cc": "cubic"},
    # long enough that playback is still going when the driver is killed
    "video": {"kind": "dash", "duration": "20s", "bitrates": ["500kbit", "1mbit"], "segment": "2s",
              "width": 640, "height": 360},
    "player": {"kind": "dashjs"},
    "server": {"protocol": "h2"},
    "fidelity": {"probe_duration": "2s"},
}


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _driver_pid(run_dir: Path) -> int | None:
    """The dash.js driver of this run (its --data-dir is inside the run's folder)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mpvlab.player.dashjs.player" in argv and any(str(run_dir).encode() in a for a in argv):
            return int(d)
    return None


class _Run:
    """`mpvlab run` of SCENARIO in the background, with its own TMPDIR (short: Chromium's socket path
    in it must fit 108 bytes)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="mpvlab-tk-", dir="/tmp"))
        (self.tmp / "keep.txt").write_text("before the run\n")
        self.before = _tree(self.tmp)
        f = tmp_path / "kill.yaml"
        f.write_text(yaml.safe_dump(SCENARIO))
        self.results = tmp_path / "r"
        self.out = (tmp_path / "run.out").open("wb")
        self.p = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(self.results)],
                                  stdout=self.out, stderr=subprocess.STDOUT, cwd=REPO,
                                  env={**os.environ, "TMPDIR": str(self.tmp)}, start_new_session=True)
        self.log = tmp_path / "run.out"

    def playing(self, timeout_s: float = 180) -> tuple[Path, int]:
        """Once the player has started playback (its first event) and Chromium's singleton folder is
        there: the run's folder and the driver's pid."""
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.p.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no playback within 180 s: " + self.log.read_text()[-3000:]
            runs = list(self.results.glob(f"{SCENARIO['name']}/*"))
            events = runs[0] / "logs" / "player-events.jsonl" if runs else None
            if events is not None and events.exists() and events.read_text().strip():
                pid = _driver_pid(runs[0])
                assert pid is not None, "the run plays, but no dash.js driver of it runs"
                time.sleep(2.0)      # well into playback
                # Chromium's singleton socket's folder is below this test's TMPDIR (where, is the fix)
                assert list(self.tmp.rglob("org.chromium.Chromium.*")), _tree(self.tmp)
                return runs[0], pid
            time.sleep(0.2)

    def close(self) -> None:
        if self.p.poll() is None:       # a failed assertion: the run ends by its own teardown
            self.p.terminate()
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.out.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _nothing_left(run: _Run, run_dir: Path) -> None:
    after = _tree(run.tmp)
    assert after == run.before, sorted(after ^ run.before)
    assert not list(run_dir.rglob("chromium-profile")), "the browser's profile is scratch, removed with the run"
    assert not (ledger.LEDGER_DIR / f"{run_dir.name}.json").exists(), "the run's ledger is kept: something stayed"


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu
def test_a_sigkilled_dashjs_driver_leaves_nothing(tmp_path: Path) -> None:
    """The driver SIGKILLed mid-playback: the run fails saying so, and its own teardown removes what
    the driver could not (the singleton folder, the profile)."""
    run = _Run(tmp_path)
    try:
        run_dir, pid = run.playing()
        os.kill(pid, signal.SIGKILL)
        assert run.p.wait(timeout=180) != 0
        status = yaml.safe_load((run_dir / "status.json").read_text())
        assert status["state"] == "failed" and "SIGKILL" in status["reason"], status
        _nothing_left(run, run_dir)
    finally:
        run.close()


@pytest.mark.dashjs
@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.cpu
def test_a_crashed_dashjs_run_is_cleaned_by_its_ledger(tmp_path: Path) -> None:
    """The runner and the driver both SIGKILLed mid-playback (a crash): nothing runs its teardown;
    the ledger's cleanup of the dead run (what the next run or `mpvlab cleanup` does for it) removes
    the singleton folder and the profile."""
    run = _Run(tmp_path)
    try:
        run_dir, pid = run.playing()
        run.p.send_signal(signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
        run.p.wait(timeout=30)
        led = ledger.read(ledger.LEDGER_DIR / f"{run_dir.name}.json")
        deadline = time.monotonic() + 10
        while led.owner_alive():
            assert time.monotonic() < deadline, "the killed runner still counts as alive"
            time.sleep(0.1)
        # what a later run's reap_stale does for this dead run, and only for it
        ledger.cleanup_run(led, by="the test")
        _nothing_left(run, run_dir)
        status = yaml.safe_load((run_dir / "status.json").read_text())
        assert status["state"] == "failed", status
    finally:
        run.close()


@pytest.mark.chromium
@pytest.mark.cpu
def test_chromium_makes_its_singleton_socket_in_the_given_tmpdir(tmp_path: Path) -> None:
    """The real browser, as the driver starts it: its singleton socket is in the TMPDIR it was given
    (a folder the driver made, named as a run names it), at a path that fits a socket address; the
    driver's removal leaves neither that TMPDIR nor the profile."""
    made = browser.make_tmpdir(Path(tempfile.gettempdir()) / naming.scratch_name(naming.new_run_id(), "dashjs-client0"))
    profile = tmp_path / "profile"
    try:
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
        p, _port = browser.start_browser(profile, made, None, tmp_path / "chromium.log")
        try:
            link = Path(os.readlink(profile / "SingletonSocket"))
            assert link.parent.parent == made and re.fullmatch(r"org\.chromium\.Chromium\.\w{6}", link.parent.name), link
            assert stat.S_ISSOCK(link.lstat().st_mode)
            # the path Chromium bound is the one make_tmpdir measured, within sun_path's 107 bytes
            assert len(os.fsencode(link)) == len(os.fsencode(made / browser.SINGLETON_SOCKET)) <= browser.SOCKET_PATH_MAX
        finally:
            browser.stop_browser(p, profile)
        browser.remove_profile(profile, made)
        assert not made.exists() and not profile.exists()
    finally:
        shutil.rmtree(made, ignore_errors=True)


def test_the_driver_makes_its_tmpdir_or_refuses(tmp_path: Path) -> None:
    """The driver removes the TMPDIR it made, so it makes it itself: a folder already there (`/tmp`
    given by hand) is refused and left as it is, so is a path too long for Chromium's socket."""
    there = Path(tempfile.mkdtemp(prefix="hzt-", dir="/tmp"))
    try:
        (there / "keep.txt").write_text("someone's\n")
        with pytest.raises(browser.TmpdirError, match="exists: the driver makes it"):
            browser.make_tmpdir(there)
        browser.remove_profile(tmp_path / "profile", None)      # nothing made: nothing of `there` touched
        assert (there / "keep.txt").exists()
        deep = there / ("d" * (browser.SOCKET_PATH_MAX - len(str(there)) - len(browser.SINGLETON_SOCKET) - 1))
        assert len(os.fsencode(deep / browser.SINGLETON_SOCKET)) == browser.SOCKET_PATH_MAX + 1
        with pytest.raises(browser.TmpdirError, match=f"must fit {browser.SOCKET_PATH_MAX}"):
            browser.make_tmpdir(deep)
        assert not deep.exists()
        assert browser.make_tmpdir(Path(str(deep)[:-1])).is_dir()     # one byte shorter fits
    finally:
        shutil.rmtree(there)


def test_the_ledger_removes_a_runs_scratch_folders_and_nothing_else(tmp_path: Path) -> None:
    """cleanup_run (the run's own teardown, or a later run's for a dead one) removes the scratch folders
    its ledger lists, and any folder of the temporary directory named with its run id, however the
    player ended; it never removes a folder of another run id, one outside its results folder, or what
    a link points to. A ledger a crash or a person left may list anything."""
    rid, other = naming.new_run_id(), naming.new_run_id()
    tmp = Path(tempfile.gettempdir())
    listed, unlisted = tmp / naming.scratch_name(rid, "dashjs"), tmp / naming.scratch_name(rid, "dashjs-client1")
    theirs = tmp / naming.scratch_name(other, "dashjs")           # another run's, live or not
    link, target = tmp / naming.scratch_name(rid, "link"), tmp_path / "target"
    run_dir, elsewhere = tmp_path / "results" / rid, tmp_path / "results" / "notarun"
    profile, foreign = run_dir / "data" / "dashjs" / "chromium-profile", elsewhere / "chromium-profile"
    made = [listed, unlisted, theirs, target, profile, foreign]
    try:
        for d in made:
            (d / "org.chromium.Chromium.AbC123").mkdir(parents=True)
            (d / "org.chromium.Chromium.AbC123" / "SingletonCookie").write_text("x")
        link.symlink_to(target)
        led = ledger.Ledger(rid, 0, 0, str(run_dir))
        # refused when a run adds it: not named with its id, nor inside its results folder
        for bad in (theirs, foreign, Path("/tmp"), Path(naming.scratch_name(rid, "rel")), run_dir / ".." / "x"):
            with pytest.raises(ValueError, match=f"not a scratch folder of run {rid}"):
                led.add_scratch(bad)
        led.scratch = [str(listed), str(profile), str(link), str(theirs), str(foreign), "/tmp", str(run_dir),
                       str(run_dir / ".." / "notarun")]
        removed = ledger.cleanup_run(led, mark=False)
        assert not listed.exists() and not unlisted.exists() and not profile.exists() and not link.is_symlink()
        assert theirs.is_dir() and foreign.is_dir() and (target / "org.chromium.Chromium.AbC123").is_dir()
        assert run_dir.is_dir() and Path("/tmp").is_dir()
        assert sorted(r for r in removed if r.startswith("scratch folder")) == sorted(
            f"scratch folder {p}" for p in (listed, profile, link, unlisted)), removed
        assert ledger.cleanup_run(led, mark=False) == []        # nothing left: nothing to say
    finally:
        link.unlink(missing_ok=True)
        for d in (listed, unlisted, theirs):
            shutil.rmtree(d, ignore_errors=True)
