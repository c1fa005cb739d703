"""Failure paths of the commands themselves (issue 15): one exit code for an interrupted run and an
interrupted sweep (130, docs/results.md "Exit codes"), commands that need root say so to anyone else, the
shell's scratch folder is always removed, and a --results that cannot hold results is refused in
words before anything is created."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.queues
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from mpvlab.core import ledger, netns, proc
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
# Another user (nobody), keeping only the right to read and search files: the checkout may lie under a
# folder only root may enter (a CI clone in a 0700 temporary folder, /root), and what is tested is the
# command's own check of its user id, not the file permissions of wherever the checkout was cloned.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
          "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
RUN_TIMEOUT_S = 180

pytestmark = pytest.mark.netns   # these tests start runs and drop to another user

BULK = """\
name: {name}
paths:
  wifi: {{down: {{rate: 10mbit, delay: 5ms}}, up: {{delay: 5ms}}}}
  lte: {{down: {{rate: 10mbit, delay: 5ms}}, up: {{delay: 5ms}}}}
workload: {{kind: bulk, duration: {seconds}s}}
fidelity: {{probe: false}}
"""


def mpvlab(*args: str, user: list[str] | None = None, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(user or []), sys.executable, "-m", "mpvlab", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, env={**os.environ, "HOME": "/tmp", **(env or {})})


def test_cleanup_as_non_root_says_it_needs_root() -> None:
    cp = mpvlab("cleanup", user=NOBODY)
    out = cp.stdout + cp.stderr
    assert cp.returncode != 0, out
    assert "needs root" in out and "Traceback" not in out, out


def test_run_as_non_root_says_it_needs_root_and_creates_nothing() -> None:
    # pytest's tmp_path lies under a folder only root may enter: the other user needs a readable one
    d = Path(tempfile.mkdtemp(prefix="mpvlab-test-nonroot-"))
    try:
        os.chmod(d, 0o777)
        f = d / "s.yaml"
        f.write_text(BULK.format(name="nonroot", seconds=1))
        os.chmod(f, 0o644)
        results = d / "results"
        cp = mpvlab("run", str(f), "--results", str(results), user=NOBODY)
        out = cp.stdout + cp.stderr
        assert cp.returncode == 2, out
        assert "needs root" in out and "Traceback" not in out, out
        assert not results.exists()
    finally:
        shutil.rmtree(d)


@pytest.mark.parametrize("where", ["regular-file", "under-a-file", "proc", "sys"])
@pytest.mark.parametrize("command", ["run", "sweep", "sweep-one-run"])
def test_unusable_results_root_is_refused_in_words(where: str, command: str, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    root = {"regular-file": afile, "under-a-file": afile / "sub", "proc": Path("/proc/h15b-results"),
            "sys": Path("/sys/kernel/h15b-results")}[where]
    f = tmp_path / "s.yaml"
    f.write_text(BULK.format(name="badroot", seconds=1))
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: badroot-sweep\nscenarios: [s.yaml]\n")
    before = set(ledger.LEDGER_DIR.glob("*.json")) if ledger.LEDGER_DIR.is_dir() else set()
    args = {"run": ["run", str(f)], "sweep": ["sweep", str(spec)],
            # one planned run by its key, as a Slurm array task or GNU parallel starts it
            "sweep-one-run": ["sweep", str(spec), "--run", "badroot|trial=0"]}[command]
    cp = mpvlab(*args, "--results", str(root))
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2, out
    assert f"--results {root}" in out and "Traceback" not in out, out
    assert "folder" in out, out
    # nothing was started: no ledger of ours (a concurrent engineer's ledgers may come and go), no
    # result directory anywhere that could say `running`
    after = set(ledger.LEDGER_DIR.glob("*.json")) if ledger.LEDGER_DIR.is_dir() else set()
    ours = [p for p in after - before if (ld := ledger.load(p)) is not None and "badroot" in ld.result_dir]
    assert not ours, ours
    assert not list(tmp_path.rglob("status.json"))


@pytest.mark.netns
def test_shell_removes_its_scratch_folder(tmp_path: Path) -> None:
    cmds = tmp_path / "cmds.mn"
    cmds.write_text("client ip -o link\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    cp = mpvlab("shell", "scenarios/smoke.yaml", "--commands", str(cmds), env={"TMPDIR": str(scratch)})
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out
    assert "mv" in out, out                      # the client's interfaces were listed: the shell did run
    assert not list(scratch.glob("mpvlab-shell-*")), list(scratch.iterdir())


def _wait_for(pred, what: str, p: subprocess.Popen[str]) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        if pred():
            return
        if p.poll() is not None:
            pytest.fail(f"ended before {what}: {p.communicate()[0]}")
        time.sleep(0.1)
    pytest.fail(f"never saw {what}")


def _ledger_of(results: Path, pattern: str) -> ledger.Ledger | None:
    dirs = [d for d in results.glob(pattern) if d.is_dir()] if results.is_dir() else []
    return ledger.load(ledger.LEDGER_DIR / f"{dirs[0].name}.json") if len(dirs) == 1 else None


def _interrupt(p: subprocess.Popen[str]) -> str:
    """Ctrl-C as a terminal sends it: SIGINT to the command's whole process group (its own)."""
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=RUN_TIMEOUT_S)
    return out


def _start(args: list[str]) -> subprocess.Popen[str]:
    # SIGINT back to its default in the child: a pytest started as a background job inherits it ignored
    return subprocess.Popen([sys.executable, "-m", "mpvlab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _nothing_left(run_id: str) -> None:
    assert not [n for n in netns.list_netns() if run_id in n], netns.list_netns()
    assert not (ledger.LEDGER_DIR / f"{run_id}.json").exists()


@pytest.mark.netns
@pytest.mark.e2e
def test_ctrl_c_of_a_run_exits_130_and_cleans_up(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(BULK.format(name="ctrlc-run", seconds=30))
    results = tmp_path / "results"
    p = _start(["run", str(f), "--results", str(results)])
    try:
        _wait_for(lambda: (ld := _ledger_of(results, "ctrlc-run/*")) is not None
                  and any(x["label"].startswith("bulk") for x in ld.procs), "the bulk transfer", p)
        led = _ledger_of(results, "ctrlc-run/*")
        assert led is not None
        out = _interrupt(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, out
    assert "Traceback" not in out, out
    (run_dir,) = [d for d in (results / "ctrlc-run").iterdir() if d.is_dir()]
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and status["reason"].startswith("interrupted"), status
    _nothing_left(led.run_id)


@pytest.mark.netns
@pytest.mark.e2e
def test_ctrl_c_of_a_sweep_exits_130_and_records_interrupted(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(BULK.format(name="ctrlc-sweep", seconds=30))
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: ctrlc\nscenarios: [s.yaml]\n")
    results = tmp_path / "results"
    p = _start(["sweep", str(spec), "--results", str(results), "--no-report"])
    try:
        _wait_for(lambda: (ld := _ledger_of(results, "ctrlc/**/ctrlc-sweep/*")) is not None
                  and any(x["label"].startswith("bulk") for x in ld.procs), "the sweep's run", p)
        led = _ledger_of(results, "ctrlc/**/ctrlc-sweep/*")
        assert led is not None
        out = _interrupt(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, out
    assert "Traceback" not in out, out
    manifest = json.loads((results / "ctrlc" / "sweep.json").read_text())
    assert [r["state"] for r in manifest["runs"]] == ["interrupted"], manifest["runs"]
    _nothing_left(led.run_id)


@pytest.mark.netns
@pytest.mark.e2e
def test_ctrl_c_of_one_planned_run_exits_130(tmp_path: Path) -> None:
    """`mpvlab sweep SPEC --run KEY` (what a Slurm array task starts) follows the same convention."""
    (tmp_path / "s.yaml").write_text(BULK.format(name="ctrlc-one", seconds=30))
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: ctrlc1\nscenarios: [s.yaml]\n")
    results = tmp_path / "results"
    p = _start(["sweep", str(spec), "--results", str(results), "--run", "ctrlc-one|trial=0"])
    try:
        _wait_for(lambda: (ld := _ledger_of(results, "ctrlc1/**/ctrlc-one/*")) is not None
                  and any(x["label"].startswith("bulk") for x in ld.procs), "the planned run", p)
        led = _ledger_of(results, "ctrlc1/**/ctrlc-one/*")
        assert led is not None
        out = _interrupt(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, out
    assert "Traceback" not in out, out
    _nothing_left(led.run_id)


# --- issue 33: a dead run, a full disk or a broken ledger never hurts the next run ----------------------

@contextlib.contextmanager
def _small_tmpfs(kib: int) -> Iterator[Path]:
    """A tmpfs of `kib` KiB on a fresh folder, always unmounted and removed (a full disk without
    filling the host's)."""
    mnt = Path(tempfile.mkdtemp(prefix="mpvlab-test-fulldisk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0755", "mpvlab-test-fulldisk", str(mnt)],
                   check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


def _fill(mnt: Path) -> None:
    """Write until the filesystem says it is full (ENOSPC), keeping what was written."""
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == 28, e
    finally:
        os.close(fd)
    assert os.statvfs(mnt).f_bavail == 0


@contextlib.contextmanager
def _private_runtime() -> Iterator[Path]:
    """A runtime directory of our own (ledgers, web roots): the dead runs these tests fake or leave are
    reaped by our commands only, never by a concurrent run on the machine. World-traversable like
    /run/mpvlab, since Apache serves the run's web root from it as www-data."""
    rt = Path(tempfile.mkdtemp(prefix="mpvlab-test-runtime-", dir="/run"))
    os.chmod(rt, 0o755)
    try:
        yield rt
    finally:
        shutil.rmtree(rt, ignore_errors=True)


def _dead_run_id() -> tuple[str, int]:
    """A run id whose owner is dead: its lock file exists and nobody holds it; a pid that exited."""
    from mpvlab.core import naming
    rid = naming.new_run_id()
    ledger.OWNER_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    (ledger.OWNER_LOCK_DIR / f"{rid}.lock").write_text("0\n")
    p = subprocess.Popen(["true"])
    p.wait()
    return rid, p.pid


def test_cleanup_survives_what_dead_runs_left(tmp_path: Path) -> None:
    """Issue 33: a dead run whose results folder sits on a full filesystem, a half-written ledger, one
    with wrong types and one whose results folder is gone: `mpvlab cleanup` removes each run's
    namespace, reports each problem in one line naming the run, and exits 0; status.json of the
    full-disk run no longer says `running`."""
    with _private_runtime() as rt, _small_tmpfs(64) as full:
        runs = rt / "runs"
        runs.mkdir()
        ids: dict[str, str] = {}
        for case in ("fulldisk", "halfwritten", "wrongtypes", "nofolder"):
            rid, pid = _dead_run_id()
            ids[case] = rid
            subprocess.run(["ip", "netns", "add", f"mpv-{rid}-client"], check=True)
            result_dir = {"fulldisk": full / "run", "nofolder": tmp_path / "gone"}.get(case, tmp_path / case)
            record = {"run_id": rid, "owner_pid": pid, "owner_start": 1, "result_dir": str(result_dir),
                      "netns": [f"mpv-{rid}-client"], "procs": [], "bpf_ccs": []}
            if case == "wrongtypes":
                record["procs"] = "not a list of processes"
            text = json.dumps(record)
            (runs / f"{rid}.json").write_text(text[: len(text) // 2] if case == "halfwritten" else text)
        (full / "run").mkdir()
        (full / "run" / "status.json").write_text('{"state": "running", "reason": ""}\n')
        _fill(full)
        try:
            cp = mpvlab("cleanup", env={"MPVLAB_RUNTIME_DIR": str(rt)})
            out = cp.stdout + cp.stderr
            assert cp.returncode == 0, out
            assert "Traceback" not in out, out
            for rid in ids.values():
                assert not [n for n in netns.list_netns() if rid in n], (rid, out)
                assert not (runs / f"{rid}.json").exists(), (rid, out)
            # each problem is one line naming its run
            for case in ("halfwritten", "wrongtypes"):
                assert [ln for ln in out.splitlines() if ids[case] in ln and "ledger" in ln], out
            status = json.loads((full / "run" / "status.json").read_text())
            assert status["state"] == "failed", status
            # a second cleanup finds nothing left and says so
            cp2 = mpvlab("cleanup", env={"MPVLAB_RUNTIME_DIR": str(rt)})
            assert cp2.returncode == 0 and "Traceback" not in cp2.stdout + cp2.stderr, cp2.stdout + cp2.stderr
            assert not any(i in cp2.stdout for i in ids.values()), cp2.stdout
        finally:
            for rid in ids.values():
                for n in netns.list_netns():
                    if rid in n:
                        netns.delete_netns(n)
                (ledger.OWNER_LOCK_DIR / f"{rid}.lock").unlink(missing_ok=True)


def test_one_malformed_ledger_record_does_not_stop_the_others(tmp_path: Path) -> None:
    """A ledger a crash or a person left may hold one bad record among good ones: the cleanup says
    it in one line and still stops the processes after it and runs every undo command (on a physical
    run those give real machines their settings back)."""
    from mpvlab.core import naming
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        undone = tmp_path / "undone"
        led = ledger.Ledger(naming.new_run_id(), os.getpid(), 0, str(tmp_path))
        led.procs = [{"pid": "not a pid", "start": 1, "label": "bad"},
                     {"pid": sleeper.pid, "start": proc.start_time_ticks(sleeper.pid), "label": "sleeper"}]
        led.remote_procs = [{"host": {"kind": "nope"}, "pid": 1, "start": 1, "label": "bad host"},
                            {"pid": 1}]
        led.undo = [{"host": {"kind": "local", "name": "here"}, "argv": ["touch", str(undone)], "what": "touch"},
                    {"host": {"kind": "local"}, "argv": "not a list", "what": "bad argv"}]
        lines: list[str] = []
        removed = ledger.cleanup_run(led, lines.append, mark=False)
        assert sleeper.wait(timeout=10) is not None          # the good process after the bad one: stopped
        assert undone.exists()                                  # the undo before the bad one (reversed): run
        assert removed.count("touch on here") == 1, removed
        assert f"process {sleeper.pid} (sleeper)" in removed, removed
        assert [r for r in removed if r.startswith("skipped a malformed remote process record")] and \
            len([r for r in removed if r.startswith("skipped a malformed")]) == 3, removed
        assert [ln for ln in lines if "malformed record (ValueError" in ln and led.run_id in ln], lines
        assert "Traceback" not in "\n".join(lines)
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def test_the_cleanup_removes_a_runs_secret_files(tmp_path: Path) -> None:
    """A run's TLS key is listed in the ledger before it is written; a run killed before its own
    teardown leaves it, and the cleanup deletes it (and only it: the certificate stays)."""
    from mpvlab.core import naming
    from mpvlab.runner import tls
    made = tls.make_self_signed(tmp_path / tls.RUN_TLS_DIR, ["10.9.8.7"])
    led = ledger.Ledger(naming.new_run_id(), os.getpid(), 0, str(tmp_path))
    led.secrets = [str(made.key), str(tmp_path / "never-written.key")]
    removed = ledger.cleanup_run(led, mark=False)
    assert not made.key.exists() and made.cert.exists()
    assert removed == [f"secret file {made.key.name}"], removed


def test_run_on_a_full_results_filesystem_exits_2_and_leaves_no_folder(tmp_path: Path) -> None:
    """Issue 33: nothing was started, so exit 2 (README "Exit codes"), a clear error, no empty run
    folder and no ledger left behind."""
    f = tmp_path / "s.yaml"
    f.write_text(BULK.format(name="fullroot", seconds=1))
    with _private_runtime() as rt, _small_tmpfs(64) as full:
        (full / "results").mkdir()
        _fill(full)
        cp = mpvlab("run", str(f), "--results", str(full / "results"), env={"MPVLAB_RUNTIME_DIR": str(rt)})
        out = cp.stdout + cp.stderr
        assert cp.returncode == 2, out
        assert "Traceback" not in out and "No space left on device" in out, out
        assert list((full / "results").iterdir()) == [], list((full / "results").rglob("*"))
        assert not list((rt / "runs").glob("*.json")) if (rt / "runs").is_dir() else True


@pytest.mark.netns
@pytest.mark.e2e
def test_disk_filling_during_a_run_then_sigkill_leaves_nothing_behind(tmp_path: Path) -> None:
    """Issue 33, both halves: (1) the disk fills during a run: the run ends failed (status.json not
    left at `running`), its ledger entry reaped; (2) a run killed with SIGKILL on a full disk: the
    next `mpvlab run` completes and `mpvlab cleanup` removes every object the dead run left."""
    f = tmp_path / "s.yaml"
    with _private_runtime() as rt, _small_tmpfs(4096) as full:
        env = {"MPVLAB_RUNTIME_DIR": str(rt)}
        runs = rt / "runs"
        results = full / "results"
        # (1) filled while running, the runner alive
        f.write_text(BULK.format(name="fills", seconds=4))
        p = _start_env(["run", str(f), "--results", str(results)], env)
        try:
            _wait_for(lambda: (ld := _ledger_in(runs)) is not None
                      and any(x["label"].startswith("bulk") for x in ld.procs), "the bulk transfer", p)
            rid = _ledger_in(runs).run_id  # type: ignore[union-attr]
            _fill(full)
            out, _ = p.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 1, out
        assert "Traceback" not in out, out
        status = json.loads((results / "fills" / rid / "status.json").read_text())
        assert status["state"] == "failed", status
        assert "No space left on device" in status["reason"], status
        _nothing_left_in(runs, rid)
        (full / "filler").unlink()

        # (2) SIGKILL on a full disk: its processes and namespaces stay behind, orphaned
        f.write_text(BULK.format(name="killed", seconds=30))
        p = _start_env(["run", str(f), "--results", str(results)], env)
        try:
            _wait_for(lambda: (ld := _ledger_in(runs)) is not None
                      and any(x["label"].startswith("bulk") for x in ld.procs), "the bulk transfer", p)
            dead = _ledger_in(runs)
            assert dead is not None
            _fill(full)
            p.kill()
            p.wait()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        left = [n for n in netns.list_netns() if dead.run_id in n]
        assert left, "the SIGKILLed run left no namespace: the test did not kill it mid-run"
        (full / "filler").unlink()
        # the next run reaps it and completes (the dead run's folder is on a full disk again)
        f.write_text(BULK.format(name="next", seconds=1))
        _fill(full)
        cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(tmp_path / "r")],
                            capture_output=True, text=True, cwd=REPO, timeout=RUN_TIMEOUT_S,
                            env={**os.environ, "HOME": "/tmp", **env})
        out = cp.stdout + cp.stderr
        assert cp.returncode == 0, out
        assert "Traceback" not in out and dead.run_id in out, out
        _nothing_left_in(runs, dead.run_id)
        for ref in dead.procs:
            assert not proc.ProcRef(int(ref["pid"]), int(ref["start"]), str(ref["label"])).alive(), ref
        cp = mpvlab("cleanup", env=env)
        assert cp.returncode == 0 and "Traceback" not in cp.stdout + cp.stderr, cp.stdout + cp.stderr


def _start_env(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mpvlab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, start_new_session=True,
                            env={**os.environ, "HOME": "/tmp", **env})


def _ledger_in(runs: Path) -> ledger.Ledger | None:
    found = sorted(runs.glob("*.json")) if runs.is_dir() else []
    return ledger.load(found[0]) if len(found) == 1 else None


def _nothing_left_in(runs: Path, run_id: str) -> None:
    assert not [n for n in netns.list_netns() if run_id in n], netns.list_netns()
    assert not (runs / f"{run_id}.json").exists()


# --- issue 45 (small items): a FIFO among the ledgers, who cleaned a run, a killed shell's folder --------


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def hang(_sig: int, _frame: object) -> None:
        raise TimeoutError(f"more than {seconds} s: a hang")
    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_fifo_named_like_a_ledger_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    """Issue 45: a FIFO in the runtime ledger folder blocked the open in every start-up's reaping and in
    `mpvlab cleanup`, for ever. It is now an unreadable ledger (not a regular file), in milliseconds."""
    from mpvlab.core import naming
    rid = naming.new_run_id()
    fifo = tmp_path / f"{rid}.json"
    os.mkfifo(fifo)
    with _alarm(10):
        with pytest.raises(ledger.LedgerUnreadable, match="not a regular file"):
            ledger.read(fifo)
        assert ledger.load(fifo) is None
    link = tmp_path / f"{naming.new_run_id()}.json"
    link.symlink_to("/dev/zero")
    with _alarm(10), pytest.raises(ledger.LedgerUnreadable):
        ledger.read(link)


def test_a_run_cleaned_by_mpvlab_cleanup_says_so(tmp_path: Path) -> None:
    """Issue 45: a run removed by `mpvlab cleanup` was recorded as "cleaned by a later run"."""
    from mpvlab.core import rundir
    rundir.write_status(tmp_path, "running")
    ledger.mark_interrupted(tmp_path, "`mpvlab cleanup`")
    status = rundir.read_status(tmp_path)
    assert status is not None and status["state"] == "failed"
    assert status["reason"] == "runner died (killed or crashed); cleaned by `mpvlab cleanup`", status
    src = (checkout_root() / "mpvlab" / "cli.py").read_text()
    assert 'reap_stale(lambda m: console.print(m), by="`mpvlab cleanup`")' in src


def test_a_killed_shells_folder_goes_with_its_ledger() -> None:
    """Issue 45: a killed `mpvlab shell` left /tmp/mpvlab-shell-<run id>-* (21 MB) that reaping never
    removed. Its ledger names the folder as result_dir; cleaning the run now removes exactly that folder
    (a folder of another name, or another run id, stays)."""
    from mpvlab.core import naming
    rid, other = naming.new_run_id(), naming.new_run_id()
    mine = Path(tempfile.mkdtemp(prefix=f"mpvlab-shell-{rid}-"))
    theirs = Path(tempfile.mkdtemp(prefix=f"mpvlab-shell-{other}-"))
    try:
        (mine / "logs").mkdir()
        (mine / "commands.mn").write_text("nodes\n")
        ledger.cleanup_run(ledger.Ledger(rid, 0, 0, str(mine)))
        assert not mine.exists()
        ledger.cleanup_run(ledger.Ledger(rid, 0, 0, str(theirs)))
        assert theirs.is_dir()
    finally:
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)


def test_checking_results_leaves_no_folder(tmp_path: Path) -> None:
    """Issue 45: a run that could not create its folder (full disk) left the empty --results folder the
    check before it had made. The check now removes what it made to find out; the run makes the folders
    itself (session._open_run_dir) and removes each one it made, outermost included, when it cannot start."""
    from mpvlab.core import rundir
    root = tmp_path / "a" / "b" / "results"
    assert rundir.results_root_problem(root) is None
    assert list(tmp_path.iterdir()) == []
    assert rundir.missing_folders(root / "sc") == [tmp_path / "a", tmp_path / "a" / "b", root, root / "sc"]
    (tmp_path / "file").write_text("x")
    assert "is not a folder" in (rundir.results_root_problem(tmp_path / "file") or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _check_results_root(root: str, n: int, out: multiprocessing.queues.Queue[list[str]]) -> None:
    from mpvlab.core import rundir
    out.put([p for p in (rundir.results_root_problem(Path(root)) for _ in range(n)) if p])


@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 0.98–1.21 cores in S6–S8 (several processes at once): beside two light tests it would ask more than two CPUs (S8)
def test_concurrent_checks_of_a_new_results_root_all_pass(tmp_path: Path) -> None:
    """Two runs started at once into a new --results (CI, stop 59: test_run_e2e's concurrent runs): one
    check removed the folder it had made between the other's mkdir and its write probe, and that run
    was refused with "cannot write in it (no such file or directory)". Four processes checking the same
    new folder 5,000 times each reproduced it 3 times in 20,000 on the old check; the check now makes
    the folder again when it vanishes, so every check passes, and no write probe is left."""
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.queues.Queue[list[str]] = ctx.Queue()
    root = tmp_path / "a" / "results"
    procs = [ctx.Process(target=_check_results_root, args=(str(root), 5000, out)) for _ in range(4)]
    for p in procs:
        p.start()
    problems = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert problems == [[], [], [], []], [x[:2] for x in problems]
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    # no write probe left (a parent one check made may stay: another's folder was in it when it tried)
    assert not list(tmp_path.rglob(".mpvlab-write-check-*"))


# A process that takes SIGTERM but does not die of it: the cleanup waits out its grace (2 s) before SIGKILL,
# which holds the first cleanup in the dead run's processes long enough for a second to start beside it.
_STUBBORN = """\
import signal, sys, time
def noted(*_):
    open(sys.argv[1], "w").close()
signal.signal(signal.SIGTERM, noted)
while True:
    time.sleep(0.05)
"""


def test_two_cleanups_of_one_dead_run_do_not_race(tmp_path: Path) -> None:
    """Stop 61's CI: a SIGKILLed run was reaped by `mpvlab cleanup` and, at the same moment, by another
    test's run starting up. Both removed the same scratch folder; one of them met files the other had
    removed, kept the ledger and returned while the other was still cleaning, so the ledger was still there
    after the cleanup that was asked. Reaping is one at a time on the machine: the second cleanup waits for
    the first, then finds nothing of the run left, and neither reports a failure."""
    rid, pid = _dead_run_id()
    termed = tmp_path / "termed"
    stubborn = subprocess.Popen([sys.executable, "-c", _STUBBORN, str(termed)])
    scratch = tmp_path / rid            # inside the run's results folder, named by its run id
    try:
        for d in range(20):
            sub = scratch / "data" / f"d{d}"
            sub.mkdir(parents=True)
            for i in range(400):
                (sub / f"f{i}").write_bytes(b"x")
        with _private_runtime() as rt:
            (rt / "runs").mkdir()
            record = {"run_id": rid, "owner_pid": pid, "owner_start": 1, "result_dir": str(scratch),
                      "netns": [], "bpf_ccs": [], "scratch": [str(scratch / "data")],
                      "procs": [{"pid": stubborn.pid, "start": proc.start_time_ticks(stubborn.pid),
                                 "label": "stubborn"}]}
            (rt / "runs" / f"{rid}.json").write_text(json.dumps(record))
            env = {**os.environ, "HOME": "/tmp", "MPVLAB_RUNTIME_DIR": str(rt)}
            first = subprocess.Popen([sys.executable, "-m", "mpvlab", "cleanup"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
            deadline = time.monotonic() + 60
            while not termed.exists() and time.monotonic() < deadline:   # the first is inside its grace
                time.sleep(0.02)
            assert termed.exists(), "the first cleanup never signalled the dead run's process"
            second = mpvlab("cleanup", env={"MPVLAB_RUNTIME_DIR": str(rt)})
            out2 = second.stdout + second.stderr
            # the moment the second returns, the run is gone: the ledger the CI test asserted on included
            assert not (rt / "runs" / f"{rid}.json").exists(), out2
            assert not (scratch / "data").exists(), out2
            out1 = first.communicate(timeout=60)[0]
            assert first.returncode == 0 and second.returncode == 0, out1 + out2
            for out in (out1, out2):
                assert "could not" not in out and "kept the ledger" not in out and "Traceback" not in out, out
            assert f"process {stubborn.pid} (stubborn)" in out1, out1     # the first did the work
            assert rid not in out2, out2                                    # the second found nothing left
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
        stubborn.wait()
        (ledger.OWNER_LOCK_DIR / f"{rid}.lock").unlink(missing_ok=True)
