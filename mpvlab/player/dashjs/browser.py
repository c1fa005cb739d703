"""Chromium as a process of the run: started with a profile of the run's own (every file it writes inside
it), ended with the driver however the driver ends, and removed without a trace (its singleton
socket's folder in the temporary directory included)."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from mpvlab.player.dashjs import parts

CHROMIUM = str(parts.CHROMIUM)   # the binary itself: the /usr/bin wrapper script adds user flags
# The flags the run needs and nothing else: no sandbox (root), no GPU, no QUIC (the study compares TCP
# variants; QUIC would bypass MPTCP), no background traffic that would appear on the emulated paths.
BASE_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-default-apps", "--disable-extensions", "--mute-audio",
              "--autoplay-policy=no-user-gesture-required", "--remote-debugging-address=127.0.0.1",
              "--remote-debugging-port=0"]
# Chromium's singleton socket lives in a folder it makes in the temporary directory (a socket path
# must fit 108 bytes, so not in the profile), linked from the profile as SingletonSocket. Chromium
# removes it on a clean exit only; a browser ended by a signal, as every run ends it, left one behind
# (this host's /tmp held 515 of them).
SINGLETON_FOLDER = re.compile(r"org\.chromium\.Chromium\.[A-Za-z0-9]{6}")


def browser_env(profile: Path) -> dict[str, str]:
    """This process's environment with HOME and the XDG folders inside `profile`."""
    folders = {"HOME": "home", "XDG_CONFIG_HOME": "config", "XDG_CACHE_HOME": "cache", "XDG_DATA_HOME": "data"}
    for sub in (*folders.values(), "crash"):
        (profile / sub).mkdir(parents=True, exist_ok=True)
    return {**os.environ, **{var: str(profile / sub) for var, sub in folders.items()}}


def _die_with_parent() -> None:
    """In the browser's process before exec: SIGTERM when the driver dies, however it dies. A SIGKILLed
    driver runs no `finally`; without this its Chromium (and the renderers it takes down with it on
    SIGTERM) would outlive it in the namespace (tests/test_player_contract.py)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start_browser(profile: Path, spki: str | None,
                  log: Path) -> tuple[subprocess.Popen[bytes], int, Path | None]:
    """Chromium with a fresh profile; returns it, its DevTools port (DevToolsActivePort) and its
    singleton folder (read now, while it runs: remove_profile removes it with the profile)."""
    if not os.access(CHROMIUM, os.X_OK):
        raise FileNotFoundError(f"{CHROMIUM} not found: install Debian's chromium (./setup.sh does)")
    profile.mkdir(parents=True, exist_ok=True)
    port_file = profile / "DevToolsActivePort"
    port_file.unlink(missing_ok=True)   # a stale one would name another browser's port
    # Everything Chromium writes stays in the run's profile, which the run removes: --user-data-dir alone
    # still left crashpad's database in $HOME/.config/chromium/Crash Reports (issue 45), and the
    # font/shader caches go to $XDG_CACHE_HOME. HOME and the XDG folders point into the profile too.
    flags = [*BASE_FLAGS, f"--user-data-dir={profile}", f"--crash-dumps-dir={profile / 'crash'}",
             f"--disk-cache-dir={profile / 'cache'}"]
    if spki:
        # Trusts exactly the run's key (its SPKI's SHA-256): no CA store is touched, no other
        # certificate error is ignored.
        flags.append(f"--ignore-certificate-errors-spki-list={spki}")
    with log.open("ab") as out:
        p = subprocess.Popen([CHROMIUM, *flags, "about:blank"], stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=browser_env(profile), preexec_fn=_die_with_parent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f"chromium exited with code {p.returncode} at start (see {log})")
        try:
            port = int(port_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            time.sleep(0.05)
            continue
        return p, port, singleton_folder(profile)
    raise RuntimeError("chromium wrote no DevToolsActivePort within 60 s")


def stop_browser(browser: subprocess.Popen[bytes]) -> None:
    """SIGTERM: Chromium's browser process takes its renderer, GPU and utility children down with it."""
    if browser.poll() is None:
        browser.terminate()
        try:
            browser.wait(timeout=5)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


def singleton_folder(profile: Path) -> Path | None:
    """The folder the profile's SingletonSocket link names, read while the browser runs (a browser
    ending on SIGTERM may unlink the link and leave the folder): only a folder of Chromium's name
    pattern directly in the temporary directory."""
    try:
        folder = Path(os.readlink(profile / "SingletonSocket")).parent
    except OSError:
        return None
    ok = folder.parent == Path(tempfile.gettempdir()) and SINGLETON_FOLDER.fullmatch(folder.name)
    return folder if ok else None


def remove_profile(profile: Path, singleton: Path | None) -> None:
    """The profile, and the browser's singleton folder if it holds nothing but Chromium's singleton
    files (a link in it, never followed)."""
    try:
        if singleton is not None and {f.name for f in singleton.iterdir()} <= {"SingletonSocket", "SingletonCookie"}:
            shutil.rmtree(singleton, ignore_errors=True)
    except OSError:       # already gone: Chromium removed it on a clean exit
        pass
    shutil.rmtree(profile, ignore_errors=True)
