"""`mpvlab sweep`: spec validation, expansion and seeds, the manifest's resume / retry / interrupt
bookkeeping, process isolation — and one real sweep of real runs, resumed, then reported.

The bookkeeping tests replace the runner (the thing that makes one run) with a small function that
writes a result directory the way the runner does; everything about the sweep itself is real."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Callable

import pytest
import yaml

from mpvlab.core import rundir
from mpvlab.input.scenario import Scenario
from mpvlab.sweeps import SweepError, Sweeper, expand, load_spec, read_header
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
MPVLAB = REPO / ".venv" / "bin" / "mpvlab"


def _spec(tmp: Path, **over: object) -> Path:
    spec = {"name": "t-sweep", "scenarios": [str(REPO / "scenarios" / "smoke.yaml")],
            "grid": {"transport.cc": ["cubic", "bbr"], "transport.scheduler": ["default", "minrtt"]},
            "trials": 2, "base_seed": 7, "quick": {"trials": 1, "overrides": {"video.duration": "8s"}}}
    spec.update(over)
    p = tmp / "spec.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


# ------------------------------------------------------------------ spec and expansion


@pytest.mark.parametrize("over,needle", [
    ({"trails": 3}, "trails: unknown key; allowed here: base_seed, description, grid, name, overrides, "
                    "quick, scenarios, trials"),
    ({"grid": {"seed": [1, 2]}}, "grid: Value error, grid key 'seed': 'seed' cannot be varied"),
    ({"grid": {"transport.cc": ["bbr", "bbr"]}}, "duplicate values"),
    ({"trials": 0}, "trials: must be at least 1; got 0"),
    ({"name": "../escape"}, "name: use 1–40 characters: lowercase letters, digits and '-', starting with a letter"),
])
def test_bad_spec_is_named(tmp_path: Path, over: dict[str, object], needle: str) -> None:
    with pytest.raises(SweepError) as e:
        load_spec(_spec(tmp_path, **over))
    assert str(tmp_path / "spec.yaml") in str(e.value)
    assert needle.replace("Value error, ", "") in str(e.value)


def test_bad_grid_value_fails_before_any_run(tmp_path: Path) -> None:
    p = _spec(tmp_path, grid={"transport.cc": ["cubic", "vegas"]})
    with pytest.raises(SweepError) as e:
        expand(load_spec(p), p)
    msg = str(e.value)
    assert "grid transport.cc=vegas" in msg and "available: cubic, reno, bbr, bbr-s" in msg


def test_expansion_and_seeds(tmp_path: Path) -> None:
    p = _spec(tmp_path)
    plan = expand(load_spec(p), p)
    assert len(plan.runs) == 2 * 2 * 2 and len(plan.configs) == 4
    assert len({r.seed for r in plan.runs}) == 8                       # every run its own seed
    assert [r.seed for r in plan.runs] == [r.seed for r in expand(load_spec(p), p).runs]   # reproducible
    by_key = {r.key: r for r in plan.runs}
    r = by_key["smoke|transport.cc=bbr|transport.scheduler=minrtt|trial=1"]
    assert (r.scenario.transport.cc, r.scenario.transport.scheduler, r.scenario.seed) == ("bbr", "minrtt", r.seed)
    assert r.scenario.transport.scheduler_params["period_us"] > 0       # minrtt's own defaults, not default's
    quick = expand(load_spec(p), p, quick=True)
    assert quick.sweep == "t-sweep-quick" and len(quick.runs) == 4
    assert all(r.scenario.video.duration == 8 * 10**9 for r in quick.runs)
    # Adding a grid value adds runs and leaves every other run's seed alone.
    p2 = _spec(tmp_path, grid={"transport.cc": ["cubic", "bbr", "bbr-s"], "transport.scheduler": ["default", "minrtt"]})
    plan2 = expand(load_spec(p2), p2)
    assert len(plan2.runs) == 12
    assert all(by_key[r.key].seed == r.seed for r in plan2.runs if r.key in by_key)


# ------------------------------------------------------------------ bookkeeping with a stand-in runner


def fake_run(scenario: Scenario, scenario_file: Path, text: str, root: Path, progress: Callable[[str], None],
             log: Callable[[str], None]) -> Path:
    """Writes a result directory like the runner: scenario.yaml as given, then status and summary.
    Fails when the scenario's seed is listed in $MPVLAB_TEST_FAIL_SEEDS (failed status kept, like a real
    failed run). Module level so a spawned process can import it."""
    run_dir = rundir.make_run_dir(root, scenario.name, secrets.token_hex(3))
    rundir.write_text(run_dir / "scenario.yaml", text)
    progress("playing")
    with open(root / "calls.log", "a") as f:
        f.write(f"{scenario.seed} {os.getpid()}\n")
    if str(scenario.seed) in os.environ.get("MPVLAB_TEST_FAIL_SEEDS", "").split():
        rundir.write_status(run_dir, "failed", "player: timed out (test)")
        raise RuntimeError(f"run failed: player: timed out (test)\n  results kept in {run_dir}")
    rundir.write_json(run_dir / "summary.json", {"run_id": run_dir.name, "scenario": scenario.name,
                                                  "cc": scenario.transport.cc, "seed": scenario.seed,
                                                  "fidelity_ok": True})
    rundir.write_status(run_dir, "complete")
    return run_dir


def _calls(root: Path) -> list[int]:
    f = root / "calls.log"
    return [int(line.split()[0]) for line in f.read_text().splitlines()] if f.exists() else []


def test_failed_runs_are_recorded_skipped_and_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _spec(tmp_path)
    plan = expand(load_spec(p), p)
    bad = plan.runs[3]
    monkeypatch.setenv("MPVLAB_TEST_FAIL_SEEDS", str(bad.seed))
    counts = Sweeper(plan, tmp_path / "res", runner=fake_run, isolate=False).run()
    assert (counts["complete"], counts["failed"]) == (7, 1)
    root = tmp_path / "res" / "t-sweep"
    man = json.loads((root / "sweep.json").read_text())
    entry = next(r for r in man["runs"] if r["key"] == bad.key)
    assert entry["state"] == "failed" and "timed out" in entry["reason"]
    assert rundir.read_status(root / entry["run_dir"])["state"] == "failed"    # its directory is kept, marked
    header = read_header((root / entry["run_dir"] / "scenario.yaml").read_text())
    assert header and header["key"] == bad.key and header["seed"] == bad.seed
    # Again: nothing to do (the failed one only on request).
    assert Sweeper(plan, tmp_path / "res", runner=fake_run, isolate=False).run()["failed"] == 1
    assert len(_calls(root)) == 8
    monkeypatch.setenv("MPVLAB_TEST_FAIL_SEEDS", "")
    counts = Sweeper(plan, tmp_path / "res", runner=fake_run, isolate=False, retry_failed=True).run()
    assert (counts["complete"], counts["failed"]) == (8, 0)
    assert _calls(root) .count(bad.seed) == 2 and len(_calls(root)) == 9
    assert len(json.loads((root / "sweep.json").read_text())["runs"][3]["attempts"]) == 2


def test_interrupted_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    p = _spec(tmp_path)
    plan = expand(load_spec(p), p)
    made: list[int] = []

    def stop_at_third(*a: object) -> Path:
        if len(made) == 2:
            raise KeyboardInterrupt
        d = fake_run(*a)  # type: ignore[arg-type]
        made.append(1)
        return d

    with pytest.raises(KeyboardInterrupt):
        Sweeper(plan, tmp_path / "res", runner=stop_at_third, isolate=False).run()
    root = tmp_path / "res" / "t-sweep"
    man = json.loads((root / "sweep.json").read_text())
    assert [r["state"] for r in man["runs"]][:3] == ["complete", "complete", "interrupted"]
    counts = Sweeper(plan, tmp_path / "res", runner=fake_run, isolate=False).run()
    assert counts["complete"] == 8
    assert sorted(_calls(root)) == sorted(r.seed for r in plan.runs)     # each run made exactly once


def test_a_changed_scenario_is_not_mixed_into_completed_runs(tmp_path: Path) -> None:
    p = _spec(tmp_path, trials=1)
    Sweeper(expand(load_spec(p), p), tmp_path / "res", runner=fake_run, isolate=False).run()
    p = _spec(tmp_path, trials=1, overrides={"player.buffer": "3s"})
    with pytest.raises(SweepError, match="made with a different scenario"):
        Sweeper(expand(load_spec(p), p), tmp_path / "res", runner=fake_run, isolate=False).run()


def test_runs_in_their_own_processes_two_at_once(tmp_path: Path) -> None:
    p = _spec(tmp_path)
    plan = expand(load_spec(p), p)
    counts = Sweeper(plan, tmp_path / "res", runner=fake_run, parallel=2).run()
    assert counts["complete"] == 8
    lines = (tmp_path / "res" / "t-sweep" / "calls.log").read_text().split()
    pids = set(lines[1::2])
    assert len(pids) == 8 and str(os.getpid()) not in pids               # one spawned process per run


# ------------------------------------------------------------------ real runs


@pytest.mark.netns
@pytest.mark.e2e
@pytest.mark.first
def test_real_sweep_resume_and_report(tmp_path: Path) -> None:
    """Two real 8 s runs (CUBIC, BBR) through `mpvlab sweep --quick`, a second invocation that does
    nothing, then `mpvlab report` on the results."""
    p = _spec(tmp_path, grid={"transport.cc": ["cubic", "bbr"]})
    res = tmp_path / "res"
    cp = subprocess.run([str(MPVLAB), "sweep", str(p), "--quick", "--no-report", "--results", str(res)],
                        capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "2 to run, 0 already complete" in cp.stdout
    root = res / "t-sweep-quick"
    man = json.loads((root / "sweep.json").read_text())
    assert [r["state"] for r in man["runs"]] == ["complete", "complete"]
    for r in man["runs"]:
        s = json.loads((root / r["run_dir"] / "summary.json").read_text())
        assert s["seed"] == r["seed"] and s["cc"] == r["params"]["transport.cc"]
        assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == 8 * 30
        assert all(v["share"] >= 0.05 for v in s["paths"].values())
    again = subprocess.run([str(MPVLAB), "sweep", str(p), "--quick", "--no-report", "--results", str(res)],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert again.returncode == 0 and "0 to run, 2 already complete" in again.stdout
    # both runs, also one whose fidelity_ok a busy host made false (left out by default)
    rep = subprocess.run([str(MPVLAB), "report", str(root), "--include-warned"], capture_output=True, text=True,
                         timeout=300, stdin=subprocess.DEVNULL)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "report of 2 complete run(s) in 2 configuration(s)" in rep.stdout
    page = (root / "report" / "report.html").read_text()
    # 4 bars (picture discards split: the network's and the late CPU's) + cwnd + throughput of one scenario + BBR's model, modes and estimate (a BBR-family CC ran)
    assert page.count('src="data:image/svg+xml;base64,') == 6 + 3


def test_default_parallelism_is_one_run_per_two_cpus() -> None:
    from mpvlab.cli import CPUS_PER_RUN, default_parallel
    assert CPUS_PER_RUN == 2
    assert [default_parallel(n) for n in (1, 2, 3, 4, 8, 64)] == [1, 1, 1, 2, 4, 8]
