"""The run ledger: what a run created, on disk, so that it can be removed even after a crash.

A run writes /run/mpvlab/runs/<runid>.json before it creates anything and adds every process, BPF
object and scratch folder (before it exists) as it starts them. Its own teardown removes them; a run killed with SIGKILL leaves the ledger
behind with a dead owner, and the next run (or `mpvlab cleanup`) removes exactly what it lists, plus
any namespace carrying its run id. /run is a tmpfs: a reboot clears the kernel objects and the ledger
alike. How each kind of object is removed is in leftovers.py; which run may be cleaned, and in what
order, is decided here (cleanup_run, reap_stale).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from mpvlab.core import leftovers, naming, netns, proc, rundir
from mpvlab.core.errors import MpvlabError

RUNTIME_DIR = Path(os.environ.get("MPVLAB_RUNTIME_DIR", "/run/mpvlab"))
# Whether a run's owner lives must not depend on a configurable directory: two checkouts, two users
# or a typo in MPVLAB_RUNTIME_DIR would each see the others' runs as orphans and delete their
# namespaces mid-run. So every runner holds an exclusive flock on a file named by its run id in this
# fixed directory for as long as it lives; the kernel drops the lock when the process dies (SIGKILL
# included) and the descriptor is not inherited by children. Held = alive, free = dead, absent =
# not a run of this platform's (never reaped).
OWNER_LOCK_DIR = Path("/run/lock/mpvlab")
LEDGER_DIR = RUNTIME_DIR / "runs"
WWW_DIR = RUNTIME_DIR / "www"


def docroot(run_id: str) -> Path:
    """The run's web root: world-traversable (Apache serves as www-data), removed with the run."""
    for d in (RUNTIME_DIR, WWW_DIR):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
    path = WWW_DIR / naming.check_run_id(run_id)
    path.mkdir()
    os.chmod(path, 0o755)
    return path


@dataclass
class Ledger:
    run_id: str
    owner_pid: int
    owner_start: int
    result_dir: str
    netns: list[str] = field(default_factory=list)
    procs: list[dict[str, object]] = field(default_factory=list)
    bpf_ccs: list[str] = field(default_factory=list)
    # Physical runs (mpvlab/physical/): processes on other hosts and the commands that undo each
    # change made on a host, both with a host record (core.hosts.host_record) to reach it.
    remote_procs: list[dict[str, object]] = field(default_factory=list)
    undo: list[dict[str, object]] = field(default_factory=list)
    # Files to delete when the run ends, however it ends (a TLS key: written before the file exists).
    secrets: list[str] = field(default_factory=list)
    # Folders of scratch state a component of the run makes (a browser's profile and its temporary
    # directory, mpvlab-<run id>-<tag>): listed before they exist, removed however the run ends, even
    # when the component that made them was SIGKILLed (see leftovers.scratch_removable for which paths qualify).
    scratch: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return LEDGER_DIR / f"{self.run_id}.json"

    @classmethod
    def create(cls, run_id: str, result_dir: Path) -> Ledger:
        me = os.getpid()
        ledger = cls(run_id, me, proc.start_time_ticks(me) or 0, str(result_dir))
        try:
            ledger._lock_fd = hold_owner_lock(run_id)
            ledger.save()
        except OSError as e:
            ledger.remove()
            raise LedgerError(f"cannot write the run ledger in {LEDGER_DIR} ({e.strerror}): check MPVLAB_RUNTIME_DIR "
                              "(a directory root can write; default /run/mpvlab)") from None
        return ledger

    def save(self) -> None:
        LEDGER_DIR.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=LEDGER_DIR, prefix=f".{self.run_id}.")
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self), f, indent=1)
        os.replace(tmp, self.path)

    def add_netns(self, name: str) -> None:
        self.netns.append(name)
        self.save()

    def add_proc(self, ref: proc.ProcRef) -> None:
        self.procs.append({"pid": ref.pid, "start": ref.start, "label": ref.label})
        self.save()

    def add_secret(self, path: Path) -> None:
        self.secrets.append(str(path))
        self.save()

    def add_scratch(self, path: Path) -> None:
        """Written BEFORE the folder is made: a crash right after still gets it removed. Only a path
        scratch_removable accepts is ever removed (a wrong one is refused here, at once)."""
        if not leftovers.scratch_removable(self, Path(path)):
            raise ValueError(f"{path} is not a scratch folder of run {self.run_id}: neither "
                             f"{naming.SCRATCH_PREFIX}{self.run_id}-<tag> nor inside its results folder")
        self.scratch.append(str(path))
        self.save()

    def add_bpf_cc(self, name: str) -> None:
        self.bpf_ccs.append(name)
        self.save()

    def add_remote_proc(self, host: dict[str, object], pid: int, start: int, label: str) -> None:
        self.remote_procs.append({"host": host, "pid": pid, "start": start, "label": label})
        self.save()

    def add_undo(self, host: dict[str, object], argv: list[str], what: str) -> None:
        """Written BEFORE the change is made: a crash right after the change still gets it undone
        (every undo command is harmless when the change was never made)."""
        self.undo.append({"host": host, "argv": list(argv), "what": what})
        self.save()

    def clear_undo(self) -> None:
        self.undo = []
        self.save()

    def owner_alive(self) -> bool:
        """Alive unless both the owner's lock is free and its pid (with start time) is gone."""
        if owner_state(self.run_id) == "alive":
            return True
        return proc.ProcRef(self.owner_pid, self.owner_start, "owner").alive()

    def remove(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except NotADirectoryError:
            pass    # the runtime directory was never usable: there is no ledger file to remove
        # The owner's lock goes last: until here the run's objects still counted as a live run's.
        (OWNER_LOCK_DIR / f"{self.run_id}.lock").unlink(missing_ok=True)
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            os.close(fd)
            # not a dataclass field (it must not reach the ledger file): declared here for mypy
            self._lock_fd: int | None = None


def hold_owner_lock(run_id: str) -> int:
    """Take the run's owner lock (see OWNER_LOCK_DIR); returns the descriptor that holds it."""
    OWNER_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(OWNER_LOCK_DIR / f"{naming.check_run_id(run_id)}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"run id {run_id} is already held by a live run") from None
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def owner_state(run_id: str) -> str:
    """'alive' (its runner holds the lock), 'dead' (the lock file is there, nobody holds it), or
    'unknown' (no lock file: not a run this platform made, or one whose cleanup already finished)."""
    try:
        fd = os.open(OWNER_LOCK_DIR / f"{naming.check_run_id(run_id)}.lock", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return "unknown"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return "alive"
    finally:
        os.close(fd)    # closing drops the probe's own lock at once
    return "dead"


def load(path: Path) -> Ledger | None:
    try:
        return read(path)
    except LedgerUnreadable:
        return None


# A ledger holds a few dozen records; anything this large was not written by a run.
MAX_LEDGER_BYTES = 1 << 20


def read(path: Path) -> Ledger:
    """The ledger at `path`, or LedgerUnreadable saying why (half-written, not JSON, wrong fields)."""
    # O_NONBLOCK and a type check on the opened file: a FIFO named like a ledger would block the open
    # (and every start-up and `mpvlab cleanup` with it), a device would never end (issue 45)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise LedgerUnreadable(e.strerror or str(e)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LedgerUnreadable("not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(MAX_LEDGER_BYTES + 1)
    except OSError as e:
        raise LedgerUnreadable(e.strerror or str(e)) from None
    finally:
        os.close(fd)
    if len(raw) > MAX_LEDGER_BYTES:
        raise LedgerUnreadable(f"larger than {MAX_LEDGER_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise LedgerUnreadable(f"not JSON ({str(e)[:120]})") from None
    if not isinstance(data, dict):
        raise LedgerUnreadable("not a JSON object")
    try:
        led = Ledger(**data)
    except TypeError as e:
        raise LedgerUnreadable(f"wrong fields ({e})") from None
    if not isinstance(led.run_id, str) or not naming.RUN_ID_RE.fullmatch(led.run_id) or f"{led.run_id}.json" != path.name:
        raise LedgerUnreadable(f"run_id {str(led.run_id)[:40]!r} does not match the file name")
    for name in ("owner_pid", "owner_start"):
        if not isinstance(getattr(led, name), int):
            raise LedgerUnreadable(f"{name} is not an integer")
    for name in ("netns", "procs", "bpf_ccs", "remote_procs", "undo", "secrets", "scratch"):
        if not isinstance(getattr(led, name), list):
            raise LedgerUnreadable(f"{name} is not a list")
    if not all(isinstance(p, dict) and isinstance(p.get("pid"), int) and isinstance(p.get("start"), int)
               for p in led.procs):
        raise LedgerUnreadable("procs holds a record without an integer pid and start")
    if not isinstance(led.result_dir, str):
        raise LedgerUnreadable("result_dir is not a string")
    return led


class LedgerUnreadable(Exception):
    """A ledger file that cannot be read as a run's ledger; the message says why."""


def cleanup_run(ledger: Ledger, log: Callable[[str], None] = lambda _m: None, *, mark: bool = True,
                log_removed: bool = True, by: str = "a later run") -> list[str]:
    """Remove everything a run's ledger lists and every namespace carrying its run id.
    Returns what it removed (for the log).

    Each object is removed on its own: one that cannot be (a full disk under the results folder, a
    process that will not die, a field of the wrong type in a ledger a crash or a person left) is
    reported in one line naming the run and the rest still goes (issue 33). The ledger entry is
    removed unless a kernel object or process it lists is still there, so a later run retries only
    what really stayed. `mark`: whether a status.json still saying `running` is marked failed (the
    run's own teardown writes its real outcome itself). `log_removed`: whether what was removed is
    logged too (a run's own teardown logs only what went wrong)."""
    removed: list[str] = []
    stayed = False      # a process or kernel object of the run is still there: keep its ledger

    def attempt(what: str, step: Callable[[], None], *, object_left: bool = True) -> None:
        nonlocal stayed
        try:
            step()
        except Exception as e:  # noqa: BLE001 — any failure is one line, never the end of the cleanup
            reason = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
            log(f"could not clean {what} of run {ledger.run_id}: {reason}")
            stayed = stayed or object_left

    def remote() -> None:
        removed.extend(leftovers.cleanup_remote(ledger))

    def web_root() -> None:
        www = WWW_DIR / ledger.run_id
        if www.exists():
            shutil.rmtree(www)
            removed.append(f"web root {www}")

    # Each step appends to `removed` as it goes: what one removed before it failed is still reported.
    attempt("its processes", lambda: leftovers.stop_procs(ledger, removed, log))
    attempt("its processes or changes on other hosts", remote)
    attempt("its BPF congestion controls", lambda: leftovers.unregister_bpf_ccs(ledger, removed))
    attempt("its network namespaces", lambda: leftovers.delete_namespaces(ledger, removed))
    attempt("its web root", web_root)
    # Scratch after the namespaces: whatever wrote into these folders (Chromium, which outlives a
    # SIGKILLed driver by a moment) has been killed with them.
    attempt("its scratch folders", lambda: leftovers.remove_scratch(ledger, removed))
    attempt("its secret files", lambda: leftovers.remove_secrets(ledger, removed))
    if mark:
        # Not an object of the kernel: a results folder that cannot be written keeps its ledger no longer.
        attempt(f"the status of its results folder {ledger.result_dir}",
                lambda: mark_interrupted(Path(str(ledger.result_dir)), by), object_left=False)
        attempt(f"its shell folder {ledger.result_dir}", lambda: leftovers.remove_shell_folder(ledger),
                object_left=False)
    for r in removed if log_removed else []:
        log(f"cleaned {ledger.run_id}: {r}")
    if stayed:
        log(f"kept the ledger of run {ledger.run_id} ({ledger.path}): what could not be removed is retried by "
            "the next run or `mpvlab cleanup`")
    else:
        attempt(f"its ledger {ledger.path}", ledger.remove, object_left=False)
    return removed


def mark_interrupted(result_dir: Path, by: str = "a later run") -> None:
    """A run directory still saying `running` whose runner is dead is marked failed, never left
    looking alive or complete; the reason says who cleaned it (`by`)."""
    status = rundir.read_status(result_dir)
    if status is not None and status.get("state") == "running":
        rundir.write_status(result_dir, "failed", reason=f"runner died (killed or crashed); cleaned by {by}")


class LedgerError(MpvlabError):
    """The ledger directory cannot be read or written: nothing is cleaned, nothing is started."""


def _ledger_paths() -> list[Path]:
    if not LEDGER_DIR.exists() and not LEDGER_DIR.is_symlink():
        return []
    try:
        with os.scandir(LEDGER_DIR) as it:
            return sorted(Path(e.path) for e in it if e.name.endswith(".json") and not e.name.startswith("."))
    except OSError as e:
        raise LedgerError(f"cannot read the run ledger directory {LEDGER_DIR} ({e.strerror}): refusing to clean "
                          "up or start anything (set MPVLAB_RUNTIME_DIR to a directory root can write)") from None


def _reap_unreadable(path: Path, why: str, log: Callable[[str], None]) -> list[str]:
    """A ledger that cannot be read (half-written by hand, corrupted, wrong types): what it lists is
    unknown, but its run id (the file name) still finds the run's namespaces and web root. Only a run
    whose owner lock is not held is touched (a live runner holds it from before its ledger exists)."""
    rid = path.name.removesuffix(".json")
    if not naming.RUN_ID_RE.fullmatch(rid):
        log(f"ignored {path}: not a run ledger's name ({why})")
        return []
    if owner_state(rid) == "alive":
        log(f"ledger of run {rid} unreadable ({why}) but its runner is alive: left alone")
        return []
    log(f"ledger of run {rid} unreadable ({why}): removing what carries its run id")
    stub = Ledger(rid, 0, 0, "")
    removed: list[str] = []
    removed += cleanup_run(stub, log, mark=False)
    return removed


# One reaper at a time on the machine. Two cleanups of one dead run (`mpvlab cleanup` and a run starting
# up, stop 61's CI) removed the same folders at once: the one that met a file the other had just removed
# kept the ledger and returned while the other was still cleaning. The lock sits in the fixed directory
# for the reason OWNER_LOCK_DIR does (two runtime directories still share the namespaces); it is not named
# *.lock, so the owner-lock sweep never takes it for a run's.
REAPER_LOCK = OWNER_LOCK_DIR / "reaper.flock"
# A reaper waits this long for another; past it, it says so and reaps beside it (a hung cleanup must not
# stop every later run from starting). The slowest reap measured here, a dash.js run's, takes ~3 s.
REAPER_WAIT_S = 120.0


@contextlib.contextmanager
def _one_reaper(log: Callable[[str], None]) -> Iterator[None]:
    OWNER_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(REAPER_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + REAPER_WAIT_S
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said:
                    log("waiting for another cleanup of dead runs to finish")
                    said = True
                if time.monotonic() > deadline:
                    log(f"another cleanup of dead runs has run for over {REAPER_WAIT_S:.0f} s: cleaning beside it")
                    break
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)    # drops the lock


def reap_stale(log: Callable[[str], None] = lambda _m: None, by: str = "a later run") -> list[str]:
    """Clean up after every run whose runner is dead: the ledgers in this runtime directory whose
    owner died, and every `mpv-` namespace whose run's owner lock is free (OWNER_LOCK_DIR). A
    namespace whose run holds its lock — whatever runtime directory that run uses — is never
    touched, nor one without a lock file (not a run this platform made). One reaper at a time
    (REAPER_LOCK): a second waits, then finds only what the first left."""
    with _one_reaper(log):
        return _reap_stale(log, by)


def _reap_stale(log: Callable[[str], None], by: str) -> list[str]:
    removed: list[str] = []
    for path in _ledger_paths():
        try:
            ledger = read(path)
        except LedgerUnreadable as e:
            removed += _reap_unreadable(path, str(e), log)
            continue
        try:
            alive = ledger.owner_alive()
        except Exception as e:  # noqa: BLE001 — one run's problem is one line, never the end of reaping
            log(f"could not tell whether run {ledger.run_id} is alive ({e}): left alone")
            continue
        if not alive:
            removed += cleanup_run(ledger, log, by=by)
    orphans = []
    for name in netns.list_netns():
        rid = naming.run_id_of_netns(name)
        try:
            if rid is not None and owner_state(rid) == "dead":
                orphans.append(name)
        except Exception as e:  # noqa: BLE001 — one line, the rest still cleaned
            log(f"could not tell whether run {rid} of netns {name} is alive ({e}): left alone")
    try:   # one pass over /proc and one `ip` for them all (a crashed run leaves five)
        netns.delete_netns_all(orphans)
    except Exception as e:  # noqa: BLE001 — one line; what is left is named below
        log(f"could not clean orphan namespaces ({e})")
    for name in orphans:
        if (netns.NETNS_DIR / name).exists():
            log(f"could not clean orphan netns {name}")
        else:
            removed.append(f"orphan netns {name}")
            log(f"cleaned orphan netns {name}")
    # Lock files of dead runs with nothing left to find them by (no ledger here, no namespace).
    ns_ids = {naming.run_id_of_netns(n) for n in netns.list_netns()}
    for lock in sorted(OWNER_LOCK_DIR.glob("*.lock")) if OWNER_LOCK_DIR.is_dir() else []:
        rid = lock.stem
        if (naming.RUN_ID_RE.fullmatch(rid) and rid not in ns_ids and not (LEDGER_DIR / f"{rid}.json").exists()
                and owner_state(rid) == "dead"):
            try:
                lock.unlink(missing_ok=True)
            except OSError as e:
                log(f"could not remove the owner lock {lock} of run {rid}: {e.strerror}")
    return removed
