"""Sweeps on a cluster: a REAL one-node Slurm (Debian's munged, slurmctld, slurmd in a temporary
directory, tests/slurmlab.py) runs a sweep of four real 3 s runs as one job array; one array task is
killed mid-run with scancel, --status marks that run failed (never complete), a resume without
--retry-failed submits nothing and one with it redoes only that run. The same sweep through the
local executor gives the same run keys, seeds and report configurations. Runs split across two
result roots (two nodes' folders) are counted once each by --status and by the report.

Plus the per-run records without a scheduler: a dead maker (record still `running`, lock free) is
failed; a live one (lock held) is running; a run key complete in two roots is counted once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mpvlab.core import rundir
from mpvlab.reporting import build_report
from mpvlab.sweeps import expand, load_spec
from mpvlab.sweeps.records import RUNS_DIR, Attempt, derive, key_id, lock_held, run_lock
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurmlab import SlurmLab  # noqa: E402


def _spec(tmp: Path, name: str = "hsl-sweep") -> Path:
    spec = {"name": name, "scenarios": [str(REPO / "scenarios" / "smoke.yaml")],
            "grid": {"transport.cc": ["cubic", "bbr"]}, "overrides": {"video.duration": "3s"},
            "trials": 2, "base_seed": 11}
    p = tmp / "spec.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


def _mpvlab(*args: str, env: dict[str, str] | None = None, timeout: float = 200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MPVLAB), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)


def _status(spec: Path, *roots: Path, env: dict[str, str] | None = None) -> dict[str, list[str]]:
    args = ["sweep", str(spec), "--status", "--results", str(roots[0])]
    for r in roots[1:]:
        args += ["--results-also", str(r)]
    cp = _mpvlab(*args, env=env)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    out: dict[str, list[str]] = {}
    for line in cp.stdout.splitlines():
        f = line.split()
        if f and f[0] in ("planned", "queued", "running", "complete", "failed") and len(f) > 1 and "|" in f[1]:
            out.setdefault(f[0], []).append(f[1])
    out["_text"] = [cp.stdout]
    return out


# ------------------------------------------------------------------ records, no scheduler (fast)


def test_dead_maker_is_failed_live_one_running_duplicate_counted_once(tmp_path: Path) -> None:
    p = _spec(tmp_path)
    plan = expand(load_spec(p), p)
    a, b = plan.runs[0], plan.runs[1]
    root = tmp_path / "res"
    sroot = root / plan.sweep
    # A maker that died hard (SIGKILL, node gone): its record still says running, no one holds the lock.
    rec = Attempt(sroot, a.key, a.seed, "deadbeef0001")
    rec.start()
    st = derive(plan, [root])
    assert st[a.key].state == "failed" and "died before the run finished" in st[a.key].reason
    # A live maker in another process holds the lock: running; once it exits, failed.
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys,time; from pathlib import Path; from mpvlab.sweeps.records import run_lock\n"
        f"with run_lock(Path({str(sroot)!r}), {b.key!r}):\n  print('held', flush=True); time.sleep(30)")],
        stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        Attempt(sroot, b.key, b.seed, "deadbeef0002").start()
        assert lock_held(sroot, b.key)
        assert derive(plan, [root])[b.key].state == "running"
        with pytest.raises(Exception, match="being made by another process"):
            with run_lock(sroot, b.key):
                pass
    finally:
        child.kill()
        child.wait()
    assert derive(plan, [root])[b.key].state == "failed"
    # A complete result dir in each of two roots for the same key: complete once, one duplicate listed.
    for r, tok in ((root, "cafe00000001"), (tmp_path / "res2", "cafe00000002")):
        s = r / plan.sweep
        d = rundir.make_run_dir(s, a.scenario_name, tok)
        rundir.write_text(d / "scenario.yaml", a.text(plan.sweep, tok))
        att = Attempt(s, a.key, a.seed, tok)
        att.start()
        rundir.write_status(d, "complete")
        att.end("complete", d)
    st = derive(plan, [root, tmp_path / "res2"])
    assert st[a.key].state == "complete" and len(st[a.key].duplicates) == 1
    assert sum(x.state == "planned" for x in st.values()) == len(plan.runs) - 2


def test_runs_made_by_run_key_are_adopted_by_the_local_executor(tmp_path: Path) -> None:
    """`--run KEY` (any scheduler) and the local executor share one sweep: what one made, the other
    skips; --list-runs --todo lists exactly the rest."""
    from test_sweep import _calls, fake_run

    from mpvlab.sweeps import Sweeper
    from mpvlab.sweeps.single import run_one

    p = _spec(tmp_path)
    plan = expand(load_spec(p), p)
    root = tmp_path / "res"
    outs = [run_one(plan, root, r.key, runner=fake_run) for r in plan.runs[:2]]
    assert [o.state for o in outs] == ["complete", "complete"]
    assert run_one(plan, root, plan.runs[0].key, runner=fake_run).state == "already-complete"
    cp = _mpvlab("sweep", str(p), "--list-runs", "--todo", "--results", str(root))
    assert cp.stdout.splitlines() == [r.key for r in plan.runs[2:]]
    counts = Sweeper(plan, root, runner=fake_run, isolate=False).run()
    assert counts["complete"] == 4
    assert sorted(_calls(root / plan.sweep)) == sorted(r.seed for r in plan.runs)   # each made once
    st = derive(plan, [root])
    assert all(s.state == "complete" for s in st.values())


# ------------------------------------------------------------------ a real Slurm


def _wait(what: str, ok, timeout: float) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if ok():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out ({timeout} s) waiting for {what}")


def _queue_empty(lab: SlurmLab) -> bool:
    cp = lab.cmd("squeue", "--noheader")
    return cp.returncode == 0 and not cp.stdout.strip()


@pytest.mark.netns
@pytest.mark.slurm
@pytest.mark.e2e
def test_slurm_sweep_kill_resume_local_equivalence_two_roots(tmp_path: Path) -> None:
    t0 = time.monotonic()
    spec = _spec(tmp_path)
    plan = expand(load_spec(spec), spec)
    keys = [r.key for r in plan.runs]
    cp = _mpvlab("sweep", str(spec), "--list-runs")
    assert cp.stdout.split("\n")[:-1] == keys and len(keys) == 4
    victim = plan.runs[1]
    lab = SlurmLab.start()
    try:
        env = lab.env
        res = tmp_path / "slurm-res"
        sroot = res / plan.sweep
        # Shared nodes, 1 CPU per task: two array tasks write into the sweep folder at once.
        cp = _mpvlab("sweep", str(spec), "--executor", "slurm", "--no-nodes-exclusive", "--results", str(res),
                     env=env)
        assert cp.returncode == 0 and "submitted Slurm job array" in cp.stdout, cp.stdout + cp.stderr
        assert "4 to run, 0 already complete" in cp.stdout
        sub = json.loads(next((sroot / ".slurm").glob("[0-9]*.json")).read_text())
        jid = sub["job_id"]
        assert sub["job_name"] == "mpvlab-hsl-sweep" and sub["tasks"] == [[k] for k in keys]
        sq = lab.cmd("squeue", "--noheader", "--array", "--format=%j %K")
        assert all(line.startswith("mpvlab-hsl-sweep ") for line in sq.stdout.splitlines()), sq.stdout
        # Kill the victim's task once its run is under way (its result dir exists, status running).
        vdir = sroot / RUNS_DIR / key_id(victim.key)

        def victim_running() -> bool:
            recs = list(vdir.glob("*.json"))
            if not recs:
                return False
            tok = json.loads(recs[0].read_text())["token"]
            return any(f'"token": "{tok}"' in (d / "scenario.yaml").read_text()[:4096]
                       for d in (sroot / "smoke").glob("*") if (d / "scenario.yaml").exists())
        _wait("the victim's run to start", victim_running, 120)
        time.sleep(2)
        st = _status(spec, res, env=env)
        assert victim.key in st.get("running", []), st["_text"][0]
        assert lab.cmd("scancel", f"{jid}_1").returncode == 0
        _wait("the job array to end", lambda: _queue_empty(lab), 150)
        st = _status(spec, res, env=env)
        print(st["_text"][0])
        assert st.get("failed") == [victim.key], st["_text"][0]
        assert sorted(st.get("complete", [])) == sorted(k for k in keys if k != victim.key), st["_text"][0]
        assert f"{jid}_1" in st["_text"][0]
        vrec = json.loads(next(vdir.glob("*.json")).read_text())
        assert vrec["state"] != "complete" and vrec["slurm"]["array_task_id"] == "1"
        killed_dir = sroot / vrec["run_dir"] if vrec.get("run_dir") else None
        assert killed_dir is None or (rundir.read_status(killed_dir) or {}).get("state") != "complete"
        # Resume: the failed run only with --retry-failed; then exactly that run, nothing else.
        cp = _mpvlab("sweep", str(spec), "--executor", "slurm", "--results", str(res), env=env)
        assert cp.returncode == 0 and "0 to run, 3 already complete, 1 failed earlier" in cp.stdout, cp.stdout
        cp = _mpvlab("sweep", str(spec), "--executor", "slurm", "--retry-failed", "--no-nodes-exclusive",
                     "--results", str(res), env=env)
        assert cp.returncode == 0 and "1 to run, 3 already complete" in cp.stdout, cp.stdout + cp.stderr
        _wait("the resumed job to end", lambda: _queue_empty(lab), 120)
        st = _status(spec, res, env=env)
        assert sorted(st.get("complete", [])) == sorted(keys) and "failed" not in st, st["_text"][0]
        attempts = {k: len(list((sroot / RUNS_DIR / key_id(k)).glob("*.json"))) for k in keys}
        assert attempts == {k: 2 if k == victim.key else 1 for k in keys}      # only the victim redone
        t_slurm = time.monotonic() - t0
    finally:
        lab.stop()
    assert not lab.base.exists()
    # The same sweep through the local executor: same keys and seeds, same configurations.
    local = tmp_path / "local-res"
    cp = _mpvlab("sweep", str(spec), "--parallel", "2", "--no-report", "--results", str(local), timeout=300)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    man = json.loads((local / plan.sweep / "sweep.json").read_text())
    assert [(r["key"], r["seed"]) for r in man["runs"]] == [(r.key, r.seed) for r in plan.runs]
    seeds = {}
    for d in (sroot / "smoke").iterdir():
        if (rundir.read_status(d) or {}).get("state") == "complete":
            h = json.loads((d / "scenario.yaml").read_text().splitlines()[1].split(": ", 1)[1])
            assert json.loads((d / "summary.json").read_text())["seed"] == h["seed"]
            seeds[h["key"]] = h["seed"]
    assert seeds == {r["key"]: r["seed"] for r in man["runs"]}
    rep_s = build_report(sroot, tmp_path / "rep-slurm", figures=False, include_warned=True)
    rep_l = build_report(local / plan.sweep, tmp_path / "rep-local", figures=False, include_warned=True)
    assert rep_s.n_complete == rep_l.n_complete == 4
    assert [c.key for c in rep_s.collection.configs] == [c.key for c in rep_l.collection.configs]
    assert len(rep_s.collection.configs) == 2
    # Two result roots under one shared folder, as two nodes would leave them: trial 0 from the
    # Slurm sweep in one, trial 1 from the local one in the other, and one run present in both.
    shared = tmp_path / "shared"
    node_a, node_b = shared / "node-a", shared / "node-b"
    for src, dst, trial in ((sroot, node_a / plan.sweep, 0), (local / plan.sweep, node_b / plan.sweep, 1)):
        for d in (src / "smoke").iterdir():
            h = json.loads((d / "scenario.yaml").read_text().splitlines()[1].split(": ", 1)[1])
            if h["trial"] == trial and (rundir.read_status(d) or {}).get("state") == "complete":
                shutil.copytree(d, dst / "smoke" / d.name)
        if (src / RUNS_DIR).is_dir():
            shutil.copytree(src / RUNS_DIR, dst / RUNS_DIR, dirs_exist_ok=True)
    dup = next(d for d in (node_b / plan.sweep / "smoke").iterdir())
    shutil.copytree(dup, node_a / plan.sweep / "smoke" / dup.name)
    st = _status(spec, node_a, node_b)
    assert sorted(st.get("complete", [])) == sorted(keys), st["_text"][0]
    assert "4 complete, 0 failed; duplicates 1" in st["_text"][0]
    rep = build_report(shared, tmp_path / "rep-shared", figures=False, include_warned=True)
    assert rep.n_complete == 4 and len(rep.collection.configs) == 2
    assert [b.state for b in rep.collection.not_aggregated].count("duplicate") == 1
    print(f"slurm part {t_slurm:.1f} s, whole test {time.monotonic() - t0:.1f} s")


def test_report_flags_a_configuration_whose_trials_come_from_two_kernels(tmp_path: Path) -> None:
    """Runs of one configuration from two nodes with different kernels: the report says which
    configuration, and lists the host kinds with their nodes."""
    from mpvlab.reporting.synthetic import make_set

    make_set(tmp_path / "src", ["sc"], ["cubic", "bbr"], ["default"], trials=3)
    bbr_runs = sorted(d for d in (tmp_path / "src" / "sc").iterdir()
                      if json.loads((d / "summary.json").read_text()).get("cc") == "bbr")
    prov_file = bbr_runs[0] / "provenance.json"
    prov = json.loads(prov_file.read_text())
    prov["host"].update(kernel="6.1.0-other", hostname="node-b", mem_total_kb=2**21, cpus=8)
    rundir.write_json(prov_file, prov)
    rep = build_report(tmp_path / "src", tmp_path / "rep", figures=False, include_warned=True)
    page = rep.html.read_text()
    assert page.count("its trials come from different kernels") == 1           # bbr only, not cubic
    assert "6.1.0-other" in page and "8 CPUs, 2 GiB" in page and "node-b" in page
