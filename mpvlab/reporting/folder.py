"""The report's output folder: a report removes only what it wrote itself (issue 45).

`mpvlab report --out DIR` replaces DIR whole, so DIR must be a folder this code wrote: every report
ends with a manifest, `.mpvlab-report.json`, naming each file it wrote with its size and SHA-256. A
DIR that holds anything else — a file the manifest does not name, a file changed since, a link, a
FIFO, or no manifest at all (someone's folder that merely holds a `report.html`) — is refused with an
error naming what is in the way; nothing is written or removed. An empty folder or no folder is fine.

The report is built in a staging folder beside DIR (`.DIR.new.*`) and renamed into place; the earlier
report is moved aside (`.DIR.old.*`) and then removed file by file, by its manifest, never by rmtree.
Each staging and old folder holds a lock file its report keeps locked (flock) while it lives: a report
killed by a timeout or SIGKILL leaves its folder unlocked, and the next report at the same DIR removes
it (those folders hold nothing but what a report wrote, and their lock file says so).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterator

from mpvlab.core.errors import InputError

MANIFEST = ".mpvlab-report.json"
MANIFEST_FORMAT = "mpvlab-report/1"
LOCK = ".mpvlab-report.lock"       # in a staging / old folder: locked while the report making it lives
_SHOWN = 3                          # what is in the way: at most this many names in the message


class ReportFolderError(InputError):
    """The report's output folder cannot be (re)placed safely; nothing was written or removed."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def write_manifest(folder: Path) -> None:
    """The manifest of every regular file below `folder` (the finished staging folder), written last."""
    files: dict[str, dict[str, object]] = {}
    for dirpath, _dirs, names in os.walk(folder):
        for n in sorted(names):
            p = Path(dirpath) / n
            if n == LOCK and Path(dirpath) == folder:
                continue
            files[p.relative_to(folder).as_posix()] = {"size": p.lstat().st_size, "sha256": _sha256(p)}
    text = json.dumps({"format": MANIFEST_FORMAT, "files": files}, indent=1, sort_keys=True)
    (folder / MANIFEST).write_text(text + "\n")


def _read_manifest(out: Path) -> dict[str, dict[str, object]]:
    from mpvlab.input.files import InputFileError, read_bytes
    try:
        data = json.loads(read_bytes(out / MANIFEST, "report manifest"))
    except InputFileError as e:
        if not (out / MANIFEST).exists() and not (out / MANIFEST).is_symlink():
            raise _not_ours(out, "it holds no report manifest (" + MANIFEST + "): a folder no report of "
                            "this version wrote") from None
        raise ReportFolderError(f"{e}; the report replaces its output folder only when that holds exactly "
                                "what an earlier report wrote (--out)") from None
    except (ValueError, RecursionError):
        raise _not_ours(out, f"its {MANIFEST} is not a report manifest") from None
    files = data.get("files") if isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise _not_ours(out, f"its {MANIFEST} is not a report manifest")
    return files


def _not_ours(out: Path, why: str) -> ReportFolderError:
    return ReportFolderError(f"{out}: not replaced: {why}. A report removes only what it wrote itself; "
                             "choose another --out or move those files away")


def _strangers(out: Path, files: dict[str, dict[str, object]]) -> list[str]:
    """What below `out` the manifest does not account for: names (relative), a reason each."""
    dirs = {Path(rel).parent.as_posix() for rel in files} | {"."}
    dirs |= {p.as_posix() for rel in files for p in Path(rel).parents}
    odd: list[str] = []
    for dirpath, subdirs, names in os.walk(out):
        base = Path(dirpath)
        for n in sorted(subdirs + names):
            p = base / n
            rel = p.relative_to(out).as_posix()
            st = p.lstat()
            if stat.S_ISDIR(st.st_mode):
                if rel not in dirs:
                    odd.append(f"{rel}/ (a folder no report wrote)")
                continue
            if rel == MANIFEST:
                continue
            if not stat.S_ISREG(st.st_mode):
                odd.append(f"{rel} ({'a symbolic link' if stat.S_ISLNK(st.st_mode) else 'not a regular file'})")
            elif rel not in files:
                odd.append(f"{rel} (not written by the report)")
            elif files[rel].get("size") != st.st_size or files[rel].get("sha256") != _sha256(p):
                odd.append(f"{rel} (changed since the report wrote it)")
        subdirs[:] = [d for d in subdirs if (base / d).relative_to(out).as_posix() in dirs]
    return odd


def check_replaceable(out: Path) -> None:
    """`out` may be absent, an empty folder, or exactly an earlier report (its manifest); anything else
    is refused, naming what is in the way."""
    try:
        st = out.lstat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise ReportFolderError(f"{out}: cannot use as the report's folder: {(e.strerror or 'error').lower()}") from None
    if stat.S_ISLNK(st.st_mode):
        raise _not_ours(out, "it is a symbolic link (the report never writes through one, nor removes it)")
    if not stat.S_ISDIR(st.st_mode):
        raise ReportFolderError(f"{out}: exists and is not a folder; the report needs a folder of its own there")
    try:
        with os.scandir(out) as it:
            if not any(True for _ in it):
                return
        odd = _strangers(out, _read_manifest(out))
    except OSError as e:
        raise ReportFolderError(f"{out}: cannot read it: {(e.strerror or 'error').lower()}") from None
    if odd:
        more = f" and {len(odd) - _SHOWN} more" if len(odd) > _SHOWN else ""
        raise _not_ours(out, f"it holds {', '.join(odd[:_SHOWN])}{more}")


@contextlib.contextmanager
def _locked_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A fresh folder (mkdtemp in `parent`) with our lock file in it, locked while the block runs."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    f: IO[bytes] | None = None
    try:
        f = open(d / LOCK, "wb")     # noqa: SIM115 — held open (locked) for the block
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield d
    finally:
        if f is not None:
            f.close()


def reap_stale(out: Path) -> list[Path]:
    """Remove the staging and old folders of reports at `out` that died (their lock file unlocked);
    returns those removed. A folder without our lock file, or one still locked, is left alone."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return removed
    for e in entries:
        if not (e.name.startswith(f".{out.name}.new.") or e.name.startswith(f".{out.name}.old.")):
            continue
        d = Path(e.path)
        if not e.is_dir(follow_symlinks=False) or not _unlocked(d / LOCK):
            continue
        shutil.rmtree(d, ignore_errors=True)     # rmtree removes links inside, never their targets
        removed.append(d)
    return removed


def _unlocked(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    finally:
        os.close(fd)


def check_writable(out: Path) -> None:
    """Before any work: a folder can be made beside `out` (not on /proc, a full or read-only disk)."""
    with staging_for(out):
        pass


@contextlib.contextmanager
def staging_for(out: Path) -> Iterator[Path]:
    """The staging folder beside `out`, locked while the report is built; removed if the block fails."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        cm = _locked_dir(out.parent, f".{out.name}.new.")
        staging = cm.__enter__()
    except OSError as e:
        raise ReportFolderError(f"{out}: cannot write the report in {out.parent}: "
                                f"{(e.strerror or 'error').lower()}") from None
    done = False
    try:
        os.chmod(staging, 0o755)      # mkdtemp makes 0700; a report is for every user to read
        yield staging
        done = not staging.exists()   # renamed into place
    finally:
        if not done:
            shutil.rmtree(staging, ignore_errors=True)
        cm.__exit__(None, None, None)


def replace(out: Path, staging: Path) -> None:
    """Put the finished `staging` folder at `out`. An earlier report is moved aside first and then
    removed by its manifest (file by file), so `out` is never half old, half new and nothing the
    manifest does not list is removed (a folder that gained a file in the meantime stays, aside)."""
    check_replaceable(out)       # again: the folder may have changed while the report was built
    write_manifest(staging)
    (staging / LOCK).unlink()
    if not out.exists():
        os.rename(staging, out)
        return
    with _locked_dir(out.parent, f".{out.name}.old.") as old:
        files = _read_manifest(out) if any(True for _ in os.scandir(out)) else {}
        os.rename(out, old / out.name)
        os.rename(staging, out)
        _remove_listed(old / out.name, files)
    with contextlib.suppress(OSError):
        (old / LOCK).unlink()
        old.rmdir()


def _remove_listed(folder: Path, files: dict[str, dict[str, object]]) -> None:
    for rel in files:
        with contextlib.suppress(OSError):
            p = folder / rel
            st = p.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_size == files[rel].get("size") \
                    and _sha256(p) == files[rel].get("sha256"):
                p.unlink()
    with contextlib.suppress(OSError):
        (folder / MANIFEST).unlink()
    for dirpath, _subdirs, _names in sorted(os.walk(folder, topdown=False), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)


def write_failed(out: Path, e: OSError) -> ReportFolderError:
    """An OSError while writing the report (a full disk, a read-only or special filesystem) in words."""
    return ReportFolderError(f"{out}: cannot write the report in {out.parent}: {(e.strerror or 'error').lower()}"
                             f"{' (' + e.filename + ')' if isinstance(e.filename, str) else ''}")
