"""Test helper: real OpenSSH servers inside network namespaces standing in for remote hosts.

    held = ensure_privsep_dir()
    d = Path(tempfile.mkdtemp(prefix="hph-", dir="/run"))    # root-only parents: sshd's StrictModes holds
    make_client_key(d)                                      # d/client_key (+ .pub, authorized_keys)
    sshd = start_sshd(Netns("hph-x-srv"), "10.203.0.1", 2222, d, "srv")   # own host key, known_hosts line
    ...
    stop_sshd(sshd); release_privsep_dir(held)

Every sshd: its own host key (`<tag>_host_key`), the one authorized client key, root login by key
only, UsePAM no, listening only on the given address. Its host key is appended to d/known_hosts.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from mpvlab.core import proc
from mpvlab.core.netns import Netns

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")
PRIVSEP_MADE = Path("/run/hph-sshd-made")   # present while /run/sshd is a directory a lab made


def make_client_key(d: Path) -> Path:
    proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hph-client_key", "-f", str(d / "client_key")])
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    (d / "authorized_keys").chmod(0o600)
    (d / "known_hosts").touch()
    return d / "client_key"


def ensure_privsep_dir() -> int:
    """Hold sshd's privilege-separation directory (compiled in: /run/sshd) for one lab; made if absent.

    Labs overlap (test files on two pytest-xdist workers, or two sessions): a lab that made the
    directory must not remove it while another lab's sshd still needs it. So every lab holds a
    shared flock on the directory itself for as long as it runs; the last lab out (the one that can
    then flock it alone) removes it, and only if a lab made it (the PRIVSEP_MADE mark). Making,
    taking and giving up a hold happen under an exclusive flock on the sshd binary (a file every lab
    has, so nothing is left behind). Returns the hold, for release_privsep_dir."""
    mutex = os.open(SSHD, os.O_RDONLY)
    try:
        fcntl.flock(mutex, fcntl.LOCK_EX)
        if not PRIVSEP_DIR.exists():
            PRIVSEP_DIR.mkdir(mode=0o755)
            PRIVSEP_MADE.touch()
        hold = os.open(PRIVSEP_DIR, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(hold, fcntl.LOCK_SH)
        return hold
    finally:
        os.close(mutex)


def release_privsep_dir(hold: int | None) -> None:
    if hold is None:
        return
    mutex = os.open(SSHD, os.O_RDONLY)
    try:
        fcntl.flock(mutex, fcntl.LOCK_EX)
        os.close(hold)
        probe = os.open(PRIVSEP_DIR, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return                           # another lab still holds it: the last one removes it
        finally:
            os.close(probe)
        if PRIVSEP_MADE.exists():
            try:
                PRIVSEP_DIR.rmdir()
            except OSError:
                pass
            PRIVSEP_MADE.unlink(missing_ok=True)
    finally:
        os.close(mutex)


def start_sshd(ns: Netns, addr: str, port: int, d: Path, tag: str, timeout: float = 10.0) -> subprocess.Popen[bytes]:
    key = d / f"{tag}_host_key"
    proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"hph-{tag}", "-f", str(key)])
    host_pub = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    with (d / "known_hosts").open("a") as f:
        f.write(f"[{addr}]:{port} {host_pub}\n")
    conf = d / f"{tag}_sshd_config"
    conf.write_text("\n".join([
        f"Port {port}", f"ListenAddress {addr}", f"HostKey {key}", f"PidFile {d / f'{tag}_sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}", "PermitRootLogin prohibit-password",
        "AllowUsers root", "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes yes", "X11Forwarding no",
        "AllowTcpForwarding no", "PermitTunnel no", "PrintMotd no", "PrintLastLog no",
        "MaxStartups 50", "MaxSessions 50", "LogLevel VERBOSE", "",
    ]))
    proc.run([SSHD, "-t", "-f", str(conf)])
    log = (d / f"{tag}_sshd.log").open("wb")
    p = ns.popen([SSHD, "-D", "-e", "-f", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + timeout
    while f"{addr}:{port}" not in ns.run(["ss", "-ltnH"]).stdout:
        if p.poll() is not None or time.monotonic() > deadline:
            proc.stop_child(p, grace=1)
            raise RuntimeError(f"sshd {tag} did not start: {(d / f'{tag}_sshd.log').read_text()}")
        time.sleep(0.02)
    return p
