"""Chromium as a process of the run: started with a profile and a TMPDIR of the run's own (every file it
writes inside one of them), ended with the driver however the driver ends, and removed without a trace.

Chromium's singleton socket lives in a folder it makes in TMPDIR (org.chromium.Chromium.XXXXXX; a
socket path must fit 108 bytes, so not in the deep profile), linked from the profile as
SingletonSocket, and it removes that folder on a clean exit only. In the shared /tmp a browser ended
by a signal left one behind, and so did every driver killed with SIGKILL (which runs no `finally`):
this host's /tmp held 548 of them. So the driver's caller names a short TMPDIR of the run's
(mpvlab-<run id>-dashjs, Launch.tmp_dir), lists it with the profile in the run's ledger, and removes
both after a SIGKILLed driver; the driver makes it and removes it with the profile when it ends."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from mpvlab.core import proc
from mpvlab.player.dashjs import parts

CHROMIUM = str(parts.CHROMIUM)   # the binary itself: the /usr/bin wrapper script adds user flags
# The flags the run needs and nothing else: no sandbox (root), no GPU, no QUIC (the study compares TCP
# variants; QUIC would bypass MPTCP), no background traffic that would appear on the emulated paths.
BASE_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-default-apps", "--disable-extensions", "--mute-audio",
              "--autoplay-policy=no-user-gesture-required", "--remote-debugging-address=127.0.0.1",
              "--remote-debugging-port=0"]
# The path Chromium binds its singleton socket at, below its TMPDIR, and the most a socket address's
# path holds (sun_path: 108 bytes with the terminating NUL).
SINGLETON_SOCKET = "org.chromium.Chromium.XXXXXX/SingletonSocket"
SOCKET_PATH_MAX = 107


class TmpdirError(ValueError):
    """--tmpdir cannot be Chromium's TMPDIR: the message says why."""


def make_tmpdir(path: Path) -> Path:
    """Chromium's TMPDIR, made here (mode 0700) and so removable by remove_profile: a folder that is
    already there is refused (it is not the driver's to remove), so is one whose singleton socket path
    would not fit a socket address."""
    path = path.absolute()
    longest = len(os.fsencode(path / SINGLETON_SOCKET))
    if longest > SOCKET_PATH_MAX:
        raise TmpdirError(f"--tmpdir {path} is too long: Chromium's singleton socket there ({longest} bytes) "
                          f"must fit {SOCKET_PATH_MAX} (a shorter TMPDIR, e.g. /tmp)")
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise TmpdirError(f"--tmpdir {path} exists: the driver makes it, and removes it when it ends") from None
    except OSError as e:
        raise TmpdirError(f"cannot make --tmpdir {path}: {e.strerror}") from None
    return path


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


def start_browser(profile: Path, tmpdir: Path, spki: str | None, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Chromium with a fresh profile and `tmpdir` (make_tmpdir's) as its TMPDIR; returns it and its
    DevTools port (DevToolsActivePort)."""
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
                             stdin=subprocess.DEVNULL, env={**browser_env(profile), "TMPDIR": str(tmpdir)},
                             preexec_fn=_die_with_parent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f"chromium exited with code {p.returncode} at start (see {log})")
        try:
            port = int(port_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            time.sleep(0.05)
            continue
        return p, port
    raise RuntimeError("chromium wrote no DevToolsActivePort within 60 s")


def process_tree(root: int) -> set[int]:
    """`root` and every live process below it: Chromium's browser, zygote, renderer, GPU and
    network-service processes."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                changed = True
    return tree


def crash_handlers(profile: Path) -> set[int]:
    """Crashpad's handlers writing into this profile (an argument `--database=<profile>/…`, here
    <profile>/config/chromium/Crash Reports): Chromium starts them double-forked, so they are no
    descendants of the browser."""
    arg = os.fsencode(f"--database={profile}/")
    users = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if any(a.startswith(arg) for a in Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")):
                    users.add(int(d))
            except OSError:
                pass
    return users


def stop_browser(browser: subprocess.Popen[bytes], profile: Path, grace_s: float = 5.0) -> None:
    """SIGTERM: Chromium's browser process takes its renderer, GPU and utility children down with it.
    Returns once every process of its tree and every other process writing into `profile` (crashpad's
    handlers) is gone, SIGKILLed after `grace_s`: with only the browser process waited for, one still
    shutting down wrote into the profile while remove_profile removed it, and the profile stayed
    (tests/test_player_contract.py, 1 of 4 SIGTERMed drivers)."""
    if browser.poll() is not None:
        return
    others = (process_tree(browser.pid) | crash_handlers(profile)) - {browser.pid, os.getpid()}
    children = [proc.ProcRef.of(pid, "chromium") for pid in others]
    proc.stop_child(browser, grace=grace_s)
    deadline = time.monotonic() + grace_s
    while (left := [c for c in children if c.alive()]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for c in left:
        proc.terminate(c, grace=0)      # SIGKILL at once: it had its grace
    while [c for c in children if c.alive()] and time.monotonic() < deadline + 2:
        time.sleep(0.02)


def remove_profile(profile: Path, tmpdir: Path | None) -> None:
    """The profile, and the TMPDIR make_tmpdir made (None: none was made) with the singleton folder
    Chromium left in it."""
    if tmpdir is not None:
        shutil.rmtree(tmpdir, ignore_errors=True)
    shutil.rmtree(profile, ignore_errors=True)
