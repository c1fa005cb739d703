"""What every host of a physical run shares, and the small operations that work the same on every
Host (LocalHost or SshHost): the mpvlab checkout at the same path as here, Debian's python3, the
per-run working folders, files written/read/tested and the host's clock offset to ours."""

from __future__ import annotations

import base64
import time
from pathlib import Path

from mpvlab.core.paths import checkout_root
from mpvlab.core import proc
from mpvlab.core.hosts import Host, LocalHost
from mpvlab.player.gstreamer.kind import PROGRAM as PLAYER_MODULE

REPO = checkout_root()
PLAYER = REPO.joinpath(*PLAYER_MODULE.split(".")).with_suffix(".py")   # the file every client host must have
PLAYER_PYTHON = "/usr/bin/python3"          # Debian's python3: the one with PyGObject (gi)


def player_argv() -> list[str]:
    """Debian's python3 running the player as a module of the checkout (no mpvlab install there: the
    checkout at the same path is what every host has, so it goes on PYTHONPATH)."""
    return ["env", f"PYTHONPATH={REPO}", PLAYER_PYTHON, "-m", PLAYER_MODULE]
REMOTE_BASE = Path("/run/mpvlab/remote")    # per-run working folders on every host (tmpfs)


def write_file(host: Host, path: str, text: str) -> None:
    host.run(["sh", "-c", 'cat > "$1"', "mpvlab-write", path], input_text=text)


def read_file(host: Host, path: str) -> bytes | None:
    """A file's bytes (base64 over the channel, so any content survives), None if it is absent."""
    cp = host.run(["sh", "-c", 'test -f "$1" || exit 3; base64 -w0 "$1"', "mpvlab-read", path], check=False,
                  timeout=60)
    if cp.returncode == 3:
        return None
    if cp.returncode != 0:
        raise proc.CommandError(f"{host.name}: cannot read {path}: {cp.stderr.strip()}")
    return base64.b64decode(cp.stdout)


def exists(host: Host, path: str) -> bool:
    return host.run(["test", "-e", path], check=False).returncode == 0


def pull_files(host: Host, remote_dir: str, names: tuple[str, ...], local_dir: Path) -> None:
    """Copy the named files of a folder on the host into a local folder; absent ones are skipped (a
    component that failed early may not have written them, and the run's error says why)."""
    for name in names:
        data = read_file(host, f"{remote_dir}/{name}")
        if data is not None:
            (local_dir / name).write_bytes(data)


def clock_offset_ns(host: Host) -> tuple[int, int]:
    """(offset, bound): the host's CLOCK_MONOTONIC minus ours. The remote reading happens between
    sending and receiving; taking the receipt time makes the estimate early by at most the return
    leg; `bound` is the whole round trip of the best of 3 tries (the true offset lies within
    [estimate, estimate + bound])."""
    if isinstance(host, LocalHost):
        return 0, 0
    best: tuple[int, int] | None = None
    for _ in range(3):
        t_send = time.monotonic_ns()
        out = host.run([PLAYER_PYTHON, "-c", "import time; print(time.monotonic_ns())"]).stdout
        t_recv = time.monotonic_ns()
        est = (int(out.strip()) - t_recv, t_recv - t_send)
        if best is None or est[1] < best[1]:
            best = est
    assert best is not None
    return best
