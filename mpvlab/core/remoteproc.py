"""RemoteProcess: the local ssh client of a long-running command SshHost.popen started on a remote host
(hosts.py's docstring says how it is started, identified and stopped). It reads the remote pid and
start time the command prints first, pumps the rest of the output to the caller's target, and
signals the remote process group (through SshHost.signal_remote) before the local client.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import subprocess
import threading
import time
from typing import IO, Any, Protocol

from mpvlab.core import proc


class RemoteHost(Protocol):
    """What a RemoteProcess asks of the host it runs on (mpvlab/core/hosts.py SshHost, which imports
    this module: described here, not imported, so no import runs back)."""

    @property
    def name(self) -> str: ...

    def signal_remote(self, pid: int, start: int, sig: str = "TERM", timeout: float = 15.0) -> bool: ...

    def remote_alive(self, pid: int, start: int, timeout: float = 15.0) -> bool: ...


class RemoteProcess(subprocess.Popen[bytes]):
    """The local ssh client of a remote long-running command. A Popen, so proc.stop_child and
    ProcRef work on it unchanged; terminate()/kill() act on the remote process group first."""

    remote_pid: int
    remote_start: int

    def __init__(self, host: RemoteHost, ssh_argv: list[str], remote_argv: list[str], *,
                 stdout: IO[Any] | int | None, stderr: IO[Any] | int | None, start_timeout: float) -> None:
        if stdout == subprocess.STDOUT:
            raise ValueError("stdout=STDOUT is not meaningful")
        self.host = host
        self.remote_argv = remote_argv
        super().__init__(ssh_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                         start_new_session=True)
        assert self.stdout is not None
        self._ssh_out = self.stdout
        self.stdout = None
        try:
            header, rest = self._read_header(start_timeout)
        except BaseException:
            self._abort()
            raise
        self.remote_pid, self.remote_start = header
        # Where the command's stdout goes: the caller's target, like Popen's `stdout` argument.
        self._pipe_w: int | None = None     # a descriptor we own (pipe write end or dup): closed by the pump
        if stdout == subprocess.PIPE:
            r, w = os.pipe()
            self.stdout = os.fdopen(r, "rb")
            self._pipe_w = w
            dest: int | None = w
        elif stdout == subprocess.DEVNULL:
            dest = None
        else:
            # Our own copy of the descriptor, as a child process would have: the caller may close
            # its file right after popen() returns (the usual `with open(...) as f: popen(...)`).
            fd = 1 if stdout is None else stdout if isinstance(stdout, int) else stdout.fileno()
            dest = self._pipe_w = os.dup(fd)
        self._pump = threading.Thread(target=self._pump_out, args=(rest, dest), daemon=True,
                                      name=f"ssh-pump-{self.remote_pid}")
        self._pump.start()

    def _read_header(self, timeout: float) -> tuple[tuple[int, int], bytes]:
        fd = self._ssh_out.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise proc.CommandError(f"{self.host.name}: remote command did not start within {timeout:g} s: "
                                        f"{shlex.join(self.remote_argv)}")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                rc = self.wait(timeout=5)
                raise proc.CommandError(
                    f"{self.host.name}: remote command failed to start (ssh exit {rc}; output {buf!r}; "
                    f"ssh's stderr went to the stderr given to popen): {shlex.join(self.remote_argv)}")
            buf += chunk
        line, rest = buf.split(b"\n", 1)
        m = re.fullmatch(rb"(\d+) (\d+)", line)
        if not m:
            raise proc.CommandError(f"{self.host.name}: unexpected start line {line!r} from the remote side "
                                    f"(shell startup files printing?): {shlex.join(self.remote_argv)}")
        return (int(m.group(1)), int(m.group(2))), rest

    def _pump_out(self, rest: bytes, dest: int | None) -> None:
        fd = self._ssh_out.fileno()
        try:
            data = rest
            while True:
                if data and dest is not None:
                    view = memoryview(data)
                    while view:
                        n = os.write(dest, view)
                        view = view[n:]
                data = os.read(fd, 65536)
                if not data:
                    break
        except OSError:
            pass
        finally:
            if self._pipe_w is not None:
                os.close(self._pipe_w)
                self._pipe_w = None

    def _abort(self) -> None:
        if self.poll() is None:
            super().kill()
        super().wait()
        self._ssh_out.close()

    def wait(self, timeout: float | None = None) -> int:
        rc = super().wait(timeout)
        pump = getattr(self, "_pump", None)
        if pump is not None:
            pump.join(timeout=5)
            if not pump.is_alive() and not self._ssh_out.closed:
                self._ssh_out.close()
        return rc

    def _signal(self, sig: str) -> bool:
        try:
            return self.host.signal_remote(self.remote_pid, self.remote_start, sig)
        except proc.CommandError:
            return False

    def terminate(self) -> None:
        """SIGTERM to the remote process group; if that cannot be delivered (link down, process
        already gone), close the ssh session instead."""
        if self.poll() is not None:
            return
        if not self._signal("TERM"):
            super().terminate()

    def kill(self) -> None:
        """SIGKILL to the remote process group, and the local ssh client."""
        if self.poll() is not None:
            return
        self._signal("KILL")
        super().kill()

    def remote_alive(self) -> bool:
        return self.host.remote_alive(self.remote_pid, self.remote_start)

    def stop(self, grace: float = 5.0) -> int:
        """Stop the remote process (TERM, KILL after `grace` s) and the ssh session; returns ssh's exit
        code (the command's, or 255 when the session had to be cut)."""
        return proc.stop_child(self, grace)    # terminate()/kill() above reach the remote group first
