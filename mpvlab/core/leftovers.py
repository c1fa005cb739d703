"""How each kind of object a run's ledger (ledger.py) lists is removed, one function per kind.

ledger.cleanup_run calls these in its order, each inside its own `attempt` (one that fails is one line
of the log, the rest still go); each appends what it removed to `removed` as it goes, so what went
before a failure is still reported. A ledger read from disk may hold anything (a crash or a person
left it): every list field goes through `records`, every record through MALFORMED.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable, Protocol

from mpvlab.core import naming, netns, proc
from mpvlab.core.hosts import SshHost, host_from_record


class Ledger(Protocol):
    """The fields of a run's ledger these functions read and empty (mpvlab/core/ledger.py Ledger, which
    imports this module: described here, not imported, so no import runs back)."""

    run_id: str
    result_dir: str
    netns: list[str]
    procs: list[dict[str, object]]
    bpf_ccs: list[str]
    remote_procs: list[dict[str, object]]
    undo: list[dict[str, object]]
    secrets: list[str]
    scratch: list[str]

# What reading one record of a ledger a crash or a person left may raise: a missing field, a wrong type,
# a value that is not a number or an unknown host kind.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError)


def records(value: object, field_name: str) -> list[object]:
    """A list field of a ledger read from disk: a ledger a crash or a person left may hold anything."""
    if not isinstance(value, list):
        raise TypeError(f"ledger field {field_name} is a {type(value).__name__}, not a list")
    return value


def cleanup_remote(ledger: Ledger) -> list[str]:
    """Processes a physical run started on other hosts (signalled only if pid AND start time still
    match), then its undo commands in reverse order. Best effort: an unreachable host is reported."""
    if not ledger.remote_procs and not ledger.undo:
        return []

    removed: list[str] = []
    unreachable: set[str] = set()   # one failed connection per host is enough: do not wait on it again
    for p in records(ledger.remote_procs, "remote_procs"):
        # One malformed record is said and skipped: the records after it, and the undo commands that
        # give real machines their settings back, still run.
        try:
            host = host_from_record(p["host"])  # type: ignore[index]
            ref = proc.ProcRef.from_record(p)
        except MALFORMED as e:
            removed.append(f"skipped a malformed remote process record ({type(e).__name__}: {e})")
            continue
        if host.name in unreachable:
            continue
        try:
            if isinstance(host, SshHost):
                if host.signal_remote(ref.pid, ref.start, "TERM"):
                    removed.append(f"process {ref.pid} ({ref.label}) on {host.name}")
            elif ref.alive():
                proc.terminate(ref, grace=2.0)
                removed.append(f"process {ref.pid} ({ref.label})")
        except proc.CommandError as e:
            unreachable.add(host.name)
            removed.append(f"could not reach {host.name} to stop process {ref.pid}: {e}")
    for u in reversed(records(ledger.undo, "undo")):
        try:
            host = host_from_record(u["host"])  # type: ignore[index]
            argv = [str(a) for a in records(u["argv"], "undo argv")]  # type: ignore[index]
            what = str(u["what"])  # type: ignore[index]
        except MALFORMED as e:
            removed.append(f"skipped a malformed undo record ({type(e).__name__}: {e})")
            continue
        if host.name in unreachable:
            removed.append(f"not undone (host unreachable): {what} on {host.name}")
            continue
        try:
            cp = host.run(argv, check=False, timeout=20)
            if cp.returncode == 0:
                removed.append(f"{what} on {host.name}")
            elif cp.returncode == 255 and isinstance(host, SshHost):
                unreachable.add(host.name)
                removed.append(f"not undone (ssh failed: {cp.stderr.strip()[-200:]}): {what} on {host.name}")
        except proc.CommandError as e:
            unreachable.add(host.name)
            removed.append(f"could not reach {host.name} to undo {what}: {e}")
    return removed


def stop_procs(ledger: Ledger, removed: list[str], log: Callable[[str], None]) -> None:
    for p in records(ledger.procs, "procs"):
        try:
            ref = proc.ProcRef.from_record(p)
        except MALFORMED as e:      # one bad record must not keep the processes after it alive
            log(f"could not clean a process of run {ledger.run_id}: malformed record ({type(e).__name__}: {e})")
            continue
        if ref.alive():
            proc.terminate(ref, grace=2.0)
            removed.append(f"process {ref.pid} ({ref.label})")


def unregister_bpf_ccs(ledger: Ledger, removed: list[str]) -> None:
    for cc in records(ledger.bpf_ccs, "bpf_ccs"):
        if cc in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split():
            # The loader owns the struct_ops link; if it is gone but the CC is still there, it was
            # registered persistently by someone: unregister by its run-scoped name only.
            proc.run(["bpftool", "struct_ops", "unregister", "name", str(cc)], check=False)
            removed.append(f"congestion control {cc}")


def delete_namespaces(ledger: Ledger, removed: list[str]) -> None:
    """The namespaces the ledger lists and every one carrying its run id (a ledger that could not be
    read lists nothing)."""
    listed = [str(n) for n in records(ledger.netns, "netns")]
    mine = {n for n in listed if naming.run_id_of_netns(n) == ledger.run_id}
    names = mine | {n for n in netns.list_netns() if naming.run_id_of_netns(n) == ledger.run_id}
    present = [n for n in sorted(names) if (netns.NETNS_DIR / n).exists()]
    netns.delete_netns_all(present)
    removed.extend(f"netns {name}" for name in present)


def remove_scratch(ledger: Ledger, removed: list[str]) -> None:
    for path in _scratch_paths(ledger):
        _remove_folder(path)
        removed.append(f"scratch folder {path}")


def remove_secrets(ledger: Ledger, removed: list[str]) -> None:
    for secret in records(ledger.secrets, "secrets"):
        # Files that must not outlive the run (e.g. a TLS private key in its result directory).
        try:
            Path(str(secret)).unlink()
            removed.append(f"secret file {Path(str(secret)).name}")
        except FileNotFoundError:
            pass


def scratch_removable(ledger: Ledger, path: Path) -> bool:
    """Whether `path` may be removed as a scratch folder of this run, whatever the ledger says: an
    absolute path named mpvlab-<its run id>-<tag> (naming.scratch_name), or one strictly inside the
    run's results folder, whose name is its run id. A run id is never another run's, and cleanup_run
    runs only for the run itself or a run whose owner is dead: a live run's folder is never touched."""
    if not path.is_absolute() or ".." in path.parts:
        return False
    if naming.run_id_of_scratch(path.name) == ledger.run_id:
        return True
    top = Path(str(ledger.result_dir))
    return top.is_absolute() and top.name == ledger.run_id and ".." not in top.parts and top in path.parents


def _scratch_paths(ledger: Ledger) -> list[Path]:
    """The scratch folders the ledger lists that are still there and scratch_removable accepts, and any
    folder of the temporary directory named with its run id (a ledger that could not be read lists
    nothing, its file name still gives the run id)."""
    listed = [Path(str(p)) for p in records(ledger.scratch, "scratch")]
    tmp = Path(tempfile.gettempdir())
    try:
        named = [e for e in tmp.iterdir() if naming.run_id_of_scratch(e.name) == ledger.run_id]
    except OSError:
        named = []
    out: list[Path] = []
    for p in [*listed, *named]:
        if p not in out and scratch_removable(ledger, p) and (p.exists() or p.is_symlink()):
            out.append(p)
    return out


def _remove_folder(path: Path) -> None:
    """The folder and everything in it; a symbolic link (not what a run made) is removed, never followed."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, onerror=_gone_is_removed)


def _gone_is_removed(func: Callable[..., object], path: str, exc: tuple[type[BaseException], BaseException, object]) -> None:
    """rmtree's error handler: an entry that went meanwhile (a reaper that waited past REAPER_WAIT_S beside
    another) is what removal wants; any other error still fails the step."""
    if not isinstance(exc[1], FileNotFoundError):
        raise exc[1]


def remove_shell_folder(ledger: Ledger) -> None:
    """A killed `mpvlab shell` leaves its folder (delay-line logs, commands): the ledger's result_dir,
    /tmp/mpvlab-shell-<run id>-*. Only a folder of exactly that name, carrying this run's id, is removed."""
    d = Path(str(ledger.result_dir))
    if (d.parent == Path(tempfile.gettempdir()) and d.name.startswith(f"mpvlab-shell-{ledger.run_id}-")
            and d.is_dir() and not d.is_symlink()):
        shutil.rmtree(d)
