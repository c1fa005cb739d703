"""Failure paths of the commands themselves (issue 15): one exit code for an interrupted run and an
interrupted sweep (130, docs/results.md "Exit codes"), commands that need root say so to anyone else, the
shell's scratch folder is always removed, and a --results that cannot hold results is refused in
words before anything is created."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from core import ledger, netns

REPO = Path(__file__).resolve().parent.parent
# Another user (nobody), keeping only the right to read and search files: the checkout may lie under a
# folder only root may enter (a CI clone in a 0700 temporary folder, /root), and what is tested is the
# command's own check of its user id, not the file permissions of wherever the checkout was cloned.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
          "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
RUN_TIMEOUT_S = 180

if os.geteuid() != 0:
    pytest.skip("these tests start runs and drop to another user: root", allow_module_level=True)

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
