"""Where a scenario's roles run on physical hosts: the local machine, a remote machine over SSH, or
(as before) a local network namespace — all behind one `Host` interface.

    Host               .name, .run(argv) -> CompletedProcess[str], .popen(argv) -> Popen,
                       .sysctl(key, value) (set + read back), .read_sysctl(key)
    LocalHost()        this machine's root namespace: argv runs directly
    SshHost(...)       a remote machine: argv runs through `ssh ... user@host -- <command>`
    Netns(name)        (core.netns) a local network namespace

Quoting over SSH: the remote sshd hands the command STRING to the account's login shell, so every
argv element is quoted with shlex.quote (POSIX single quotes). That is exact for sh/dash/bash/ksh/
zsh; a csh/tcsh/fish login shell would mis-parse it, which `SshHost.verify()` detects by echoing a
canary argument back byte-exact. Nothing from a scenario is ever interpreted by a shell.

Long-running remote processes (`SshHost.popen`) run as
    exec setsid -w sh -c 'echo "$$ <starttime>"; exec "$@"' mpvlab-remote ARGV...
so the process is the leader of a new session/process group on the remote host and its pid (and
its /proc start time, to never signal a recycled pid) is the first line of the ssh session's
stdout; that line is consumed here and the rest is pumped to the caller's stdout. `terminate()` /
`kill()` signal the remote process group over a second SSH connection, after which `setsid -w`
exits and the ssh session closes; if the remote signal cannot be delivered, the local ssh client
is terminated anyway.

If the SSH link drops: the local ssh client notices within ServerAliveInterval x CountMax
(5 s x 3) and exits 255. The remote process keeps running — it is in its own session, and sshd
sends no SIGHUP to a session without a tty — until it writes to its (now closed) stdout/stderr
and gets SIGPIPE, or forever if it never writes. `RemoteProcess.remote_pid`/`.remote_start` identify
it; after reconnecting, `SshHost.signal_remote(pid, start, "TERM")` ends it (the runner should keep
them in its ledger, as it does local pids).

Requirements on a remote host: OpenSSH (or any server that runs the command through a POSIX
shell), util-linux `setsid` with `-w`, coreutils `env` with `-C` (for popen cwd), procps `sysctl`,
iproute2 with `-j`; and an account that may change qdiscs/sysctls (root) whose shell startup files
print nothing for non-interactive sessions.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shlex
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Protocol, runtime_checkable

from mpvlab.core import proc
# The local ssh client of a long-running remote command (SshHost.popen's result); importable from here.
from mpvlab.core.remoteproc import RemoteProcess
from mpvlab.core.validators import (
    _ENVKEY_RE, HostConfigError, validate_host, validate_key_path, validate_port, validate_sysctl_key, validate_user,
)

# --------------------------------------------------------------------------------------------
# The Host interface
# --------------------------------------------------------------------------------------------


@runtime_checkable
class Host(Protocol):
    """What every component needs of 'a place to run commands': Netns, LocalHost, SshHost."""

    @property
    def name(self) -> str: ...

    def run(self, argv: list[str], *, check: bool = True, timeout: float = 60.0,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]: ...

    def popen(self, argv: list[str], *, stdout: IO[Any] | int | None = None, stderr: IO[Any] | int | None = None,
              env: dict[str, str] | None = None, cwd: Path | None = None,
              stdin: IO[Any] | int = subprocess.DEVNULL) -> subprocess.Popen[bytes]: ...

    def sysctl(self, key: str, value: str) -> None: ...

    def read_sysctl(self, key: str) -> str: ...


class _SysctlMixin:
    @property
    def name(self) -> str:
        """Each host class names itself (a field of LocalHost, user@host:port for SshHost)."""
        raise NotImplementedError

    def run(self, argv: list[str], *, check: bool = True, timeout: float = 60.0,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        raise NotImplementedError

    def sysctl(self, key: str, value: str) -> None:
        """Set and read back (same contract as Netns.sysctl)."""
        key = validate_sysctl_key(key)
        self.run(["sysctl", "-q", "-w", f"{key}={value}"])
        got = self.run(["sysctl", "-n", key]).stdout.split()
        if got != value.split():
            raise proc.CommandError(f"{self.name}: sysctl {key} reads back {' '.join(got)!r}, wanted {value!r}")

    def read_sysctl(self, key: str) -> str:
        return self.run(["sysctl", "-n", validate_sysctl_key(key)]).stdout.strip()


@dataclass(frozen=True)
class LocalHost(_SysctlMixin):
    """The machine's own root network namespace."""

    name: str = "localhost"

    def argv(self, argv: list[str]) -> list[str]:
        return list(argv)

    def run(self, argv: list[str], *, check: bool = True, timeout: float = 60.0,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        return _run_local(argv, check=check, timeout=timeout, input_text=input_text, label=self.name)

    def popen(self, argv: list[str], *, stdout: IO[Any] | int | None = None, stderr: IO[Any] | int | None = None,
              env: dict[str, str] | None = None, cwd: Path | None = None,
              stdin: IO[Any] | int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        # start_new_session for the same reason as Netns.popen: Ctrl-C reaches only the runner.
        return subprocess.Popen(list(argv), stdout=stdout, stderr=stderr, stdin=stdin,
                                env=env, cwd=cwd, start_new_session=True)


def _run_local(argv: list[str], *, check: bool, timeout: float, input_text: str | None,
               label: str) -> subprocess.CompletedProcess[str]:
    # stdin is /dev/null unless input is given: an ssh client must never read the runner's terminal.
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input_text,
                            stdin=None if input_text is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise proc.CommandError(f"{label}: timed out after {timeout:g} s: {shlex.join(argv)}") from None
    except FileNotFoundError:
        raise proc.CommandError(f"{label}: program not found: {argv[0]}") from None
    if check and cp.returncode != 0:
        raise proc.CommandError(f"{label}: command failed (exit {cp.returncode}): {shlex.join(argv)}\n"
                                f"{cp.stderr.strip()}")
    return cp


# --------------------------------------------------------------------------------------------
# SSH
# --------------------------------------------------------------------------------------------

SSH_ERROR_EXIT = 255   # ssh's own failure (also what a remote command exiting 255 looks like)

# Run by the remote login shell's `exec sh -c`: print our pid and its /proc start time (field 22;
# comm is "sh", so the fields after the last ") " are space-separated), then become the command.
_POPEN_SCRIPT = ('st=$(sed "s/.*) //" /proc/$$/stat | cut -d" " -f20); echo "$$ $st"; '
                 'exec "$@"')
# Signal a process group only if its leader is still the process we started (pid + start time).
_SIGNAL_SCRIPT = ('st=$(sed "s/.*) //" /proc/"$1"/stat 2>/dev/null | cut -d" " -f20); '
                  '[ -n "$st" ] && [ "$st" = "$2" ] || exit 3; kill -s "$3" -- "-$1"')
_ALIVE_SCRIPT = ('s=$(sed "s/.*) //" /proc/"$1"/stat 2>/dev/null); '
                 '[ -n "$s" ] || exit 1; set -- "$2" $s; [ "$2" != Z ] && [ "$1" = "${21}" ]')
_SIGNALS = ("TERM", "KILL", "INT", "HUP")

VERIFY_CANARY = "mpvlab canary: ' \" $HOME `id` $(id) \\ ; | & > < * ? ! # ~ {a,b} %\n\tend"


@dataclass(frozen=True)
class SshHost(_SysctlMixin):
    """A remote machine reached with key-only, strictly host-key-checked SSH.

    `via` is where the ssh client itself runs (LocalHost by default; a Netns in tests, or to reach
    the remote through an emulated path). `key_dir`, if given, is the only directory the identity
    and known_hosts files may be in.
    """

    user: str
    host: str
    port: int
    identity_file: Path
    known_hosts_file: Path
    key_dir: Path | None = None
    via: Any = field(default_factory=LocalHost)
    connect_timeout: int = 10
    control_path: Path | None = None     # set by ssh_master(): share one authenticated connection

    def __post_init__(self) -> None:
        object.__setattr__(self, "user", validate_user(self.user))
        object.__setattr__(self, "host", validate_host(self.host))
        object.__setattr__(self, "port", validate_port(self.port))
        if self.key_dir is not None:
            object.__setattr__(self, "identity_file", validate_key_path(self.identity_file, self.key_dir))
            object.__setattr__(self, "known_hosts_file",
                               validate_key_path(self.known_hosts_file, self.key_dir, private=False))
        else:
            object.__setattr__(self, "identity_file", Path(self.identity_file))
            object.__setattr__(self, "known_hosts_file", Path(self.known_hosts_file))

    @property
    def name(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    def ssh_options(self) -> list[str]:
        """ssh and the options every connection uses."""
        return [
            "ssh", "-F", "/dev/null",            # no user/system config can add options
            "-T",                                 # never a tty: exact bytes, exit codes, no echo
            "-o", "BatchMode=yes",               # never prompt
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts_file}",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "IdentitiesOnly=yes",
            "-o", "PasswordAuthentication=no",
            "-o", "KbdInteractiveAuthentication=no",
            "-o", f"ConnectTimeout={self.connect_timeout}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", "LogLevel=ERROR",              # ssh's own chatter would pollute stderr
            "-i", str(self.identity_file), "-p", str(self.port),
        ]

    def ssh_argv(self, command: str, *, stdin: bool = False) -> list[str]:
        """The local argv that runs `command` (already a quoted string) on the remote host."""
        argv = self.ssh_options()
        if self.control_path is not None:
            argv += ["-o", "ControlMaster=no", "-o", f"ControlPath={self.control_path}"]
        if not stdin:
            argv.append("-n")
        return self.via.argv([*argv, f"{self.user}@{self.host}", "--", command])

    def run(self, argv: list[str], *, check: bool = True, timeout: float = 60.0,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        if not argv:
            raise ValueError("empty argv")
        cp = _run_local(self.ssh_argv(shlex.join(argv), stdin=input_text is not None), check=False,
                        timeout=timeout, input_text=input_text, label=self.name)
        cp.args = list(argv)
        if check and cp.returncode != 0:
            why = (" (ssh itself failed, or the command exited 255)" if cp.returncode == SSH_ERROR_EXIT else "")
            raise proc.CommandError(f"{self.name}: command failed (exit {cp.returncode}){why}: "
                                    f"{shlex.join(argv)}\n{cp.stderr.strip()}")
        return cp

    def verify(self, timeout: float = 20.0) -> None:
        """Connect once and check that an argument full of shell syntax arrives byte-exact (i.e. the
        remote login shell parses POSIX quoting) and that setsid -w exists."""
        cp = self.run(["printf", "%s", VERIFY_CANARY], check=False, timeout=timeout)
        if cp.returncode != 0:
            raise proc.CommandError(f"{self.name}: cannot run commands over ssh (exit {cp.returncode}): "
                                    f"{cp.stderr.strip()}")
        if cp.stdout != VERIFY_CANARY:
            raise proc.CommandError(f"{self.name}: the remote login shell does not parse POSIX quoting "
                                    f"(sent {VERIFY_CANARY!r}, got back {cp.stdout!r}); use sh/bash/dash/zsh")
        cp = self.run(["setsid", "--help"], check=False, timeout=timeout)
        if "--wait" not in cp.stdout:
            raise proc.CommandError(f"{self.name}: util-linux setsid with --wait is missing on the remote host")

    def popen(self, argv: list[str], *, stdout: IO[Any] | int | None = None, stderr: IO[Any] | int | None = None,
              env: dict[str, str] | None = None, cwd: Path | None = None,
              stdin: IO[Any] | int = subprocess.DEVNULL, start_timeout: float | None = None) -> RemoteProcess:
        if not argv:
            raise ValueError("empty argv")
        # Host.popen's stdin: the ssh client's own stdin stays /dev/null (it must never read the
        # runner's terminal), so a remote program cannot be fed a pipe here; say so, not hang.
        if stdin != subprocess.DEVNULL:
            raise ValueError(f"{self.name}: a remote program's stdin is /dev/null (no pipe over SSH)")
        if "=" in argv[0]:
            raise ValueError(f"program name {argv[0]!r} contains '=' (env would take it for a variable)")
        remote = list(argv)
        if env is not None or cwd is not None:
            # env [-i] [-C DIR] -- [NAME=VALUE]... PROGRAM ARGS (no shell; '--' ends env's options)
            pre = ["env"]
            if env is not None:
                pre.append("-i")
            if cwd is not None:
                pre += ["-C", str(cwd)]
            pre.append("--")
            for k, v in (env or {}).items():
                if not _ENVKEY_RE.fullmatch(k):
                    raise ValueError(f"environment variable name {k!r} is not allowed")
                pre.append(f"{k}={v}")
            remote = [*pre, *remote]
        command = shlex.join(["exec", "setsid", "-w", "sh", "-c", _POPEN_SCRIPT, "mpvlab-remote", *remote])
        return RemoteProcess(self, self.ssh_argv(command), list(argv), stdout=stdout, stderr=stderr,
                             start_timeout=start_timeout or self.connect_timeout + 5.0)

    def signal_remote(self, pid: int, start: int, sig: str = "TERM", timeout: float = 15.0) -> bool:
        """Signal the remote process group led by `pid` if it is still the process that started at
        `start`. True if the signal was delivered; False if it is gone (or a different process)."""
        if sig not in _SIGNALS:
            raise ValueError(f"signal {sig!r}: one of {_SIGNALS}")
        cp = self.run(["sh", "-c", _SIGNAL_SCRIPT, "mpvlab-signal", str(int(pid)), str(int(start)), sig],
                      check=False, timeout=timeout)
        if cp.returncode == 0:
            return True
        if cp.returncode == 3:
            return False
        raise proc.CommandError(f"{self.name}: could not signal remote pid {pid} (exit {cp.returncode}): "
                                f"{cp.stderr.strip()}")

    def remote_alive(self, pid: int, start: int, timeout: float = 15.0) -> bool:
        cp = self.run(["sh", "-c", _ALIVE_SCRIPT, "mpvlab-alive", str(int(pid)), str(int(start))],
                      check=False, timeout=timeout)
        if cp.returncode in (0, 1):
            return cp.returncode == 0
        raise proc.CommandError(f"{self.name}: could not check remote pid {pid} (exit {cp.returncode}): "
                                f"{cp.stderr.strip()}")


@contextmanager
def ssh_master(host: SshHost, control_dir: Path, start_timeout: float = 20.0,
               on_start: Callable[[int], None] | None = None) -> Iterator[SshHost]:
    """One authenticated SSH connection shared by every command (OpenSSH ControlMaster): each
    run()/popen() then costs a channel open instead of a key exchange (measured over a veth on the
    shared 2-core test machine: median 0.29 s per command without, 0.10 s with). Yields a copy of `host` that uses it. The master is our own
    child process (no -f, no ControlPersist), stopped on exit — which also ends every session still
    multiplexed over it, so stop remote processes first. `on_start(pid)` is told the master's local
    pid as soon as it exists (a run ledger records it, so a crashed runner's master gets stopped)."""
    control_dir = Path(control_dir)
    path = control_dir / f"mpvlab-ssh-{os.getpid()}-{secrets.token_hex(4)}"
    if len(str(path)) > 100:
        raise HostConfigError(f"control socket path {path} is too long for a unix socket (max ~100 chars)")
    argv = host.via.argv([*host.ssh_options(), "-n", "-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no",
                          "-o", f"ControlPath={path}", f"{host.user}@{host.host}"])
    master = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        if on_start is not None:
            on_start(master.pid)
        deadline = time.monotonic() + start_timeout
        while not path.exists():
            if master.poll() is not None:
                err = master.stderr.read().decode(errors="replace") if master.stderr else ""
                raise proc.CommandError(f"{host.name}: ssh master connection failed (exit {master.returncode}): "
                                        f"{err.strip()}")
            if time.monotonic() > deadline:
                raise proc.CommandError(f"{host.name}: ssh master connection not up within {start_timeout:g} s")
            time.sleep(0.01)
        yield dataclasses.replace(host, control_path=path)
    finally:
        proc.stop_child(master, grace=3.0)
        if master.stderr:
            master.stderr.close()
        path.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------
# Host records: how the ledger remembers a host to reach it again after a crash
# --------------------------------------------------------------------------------------------


def host_record(host: Host) -> dict[str, Any]:
    """A JSON-able description of a host, enough to reach it again (the ledger stores it)."""
    if isinstance(host, LocalHost):
        return {"kind": "local", "name": host.name}
    if isinstance(host, SshHost):
        return {"kind": "ssh", "user": host.user, "host": host.host, "port": host.port,
                "identity_file": str(host.identity_file), "known_hosts_file": str(host.known_hosts_file)}
    raise TypeError(f"cannot record host {host!r}")


def host_from_record(rec: dict[str, Any]) -> LocalHost | SshHost:
    if rec.get("kind") == "local":
        return LocalHost(name=str(rec.get("name", "localhost")))
    if rec.get("kind") == "ssh":
        # No key_dir check here: the record was written by a run that checked it.
        return SshHost(str(rec["user"]), str(rec["host"]), int(rec["port"]), Path(rec["identity_file"]),
                       Path(rec["known_hosts_file"]))
    raise ValueError(f"unknown host record {rec!r}")
