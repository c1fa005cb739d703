"""The suite's skip policy and scheduler (tests/policy.py), each on a small suite of its own run by
pytest in a subprocess, so what is checked is what a whole pytest session does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
HOOKS = ("_record_steal, pytest_collection_modifyitems, pytest_configure, pytest_configure_node, "
         "pytest_make_collect_report, pytest_runtest_makereport, pytest_runtest_protocol, pytest_runtest_setup, "
         "pytest_sessionfinish, pytest_terminal_summary, pytest_unconfigure")


def _suite(root: Path, files: dict[str, str]) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
                                      f"from policy import {HOOKS}  # noqa\n")
    for name, text in files.items():
        (root / name).write_text(text)


def _pytest(root: Path, *args: str, **env: str) -> tuple[int, str, dict[str, int]]:
    environ = {k: v for k, v in os.environ.items() if k not in ("MPVLAB_EXPECT_ALL", "MPVLAB_LONG_TESTS", "MPVLAB_SLOW_TESTS")}
    cp = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                         "--rootdir", str(root), "-c", str(root / "pytest.ini"), *args, str(root)],
                        capture_output=True, text=True, timeout=120, cwd=root, env={**environ, **env})
    last = cp.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?)", last)}
    return cp.returncode, cp.stdout + cp.stderr, counts


NEEDS = """\
import pytest

@pytest.mark.tools("hph-no-such-command")
def test_needs_a_missing_command(): pass

def test_skips_itself(): pytest.skip("said by the test")

@pytest.mark.long
def test_long(): pass

def test_plain(): pass
"""


def test_a_missing_need_is_a_skip_with_its_reason_and_a_failure_under_the_switch(tmp_path: Path) -> None:
    _suite(tmp_path, {"test_needs.py": NEEDS})
    rc, out, counts = _pytest(tmp_path)
    assert rc == 0 and counts == {"passed": 1, "skipped": 2, "deselected": 1}, out
    assert "needs hph-no-such-command (./setup.sh installs or builds it)" in out and "said by the test" in out
    assert "1 test(s): long: opt in with MPVLAB_LONG_TESTS=1 or -m long" in out, out
    rc, out, counts = _pytest(tmp_path, MPVLAB_EXPECT_ALL="1")
    # the unmet marker fails in setup (an error), the test's own skip fails in its call
    assert rc == 1 and counts == {"passed": 1, "error": 1, "failed": 1, "deselected": 1}, out
    assert "needs hph-no-such-command (./setup.sh installs or builds it): with MPVLAB_EXPECT_ALL=1 a missing " \
           "requirement fails" in out, out
    assert "skipped (said by the test): with MPVLAB_EXPECT_ALL=1 every skip is a failure" in out, out
    rc, out, counts = _pytest(tmp_path, MPVLAB_LONG_TESTS="1")
    assert rc == 0 and counts == {"passed": 2, "skipped": 2}, out
    rc, out, counts = _pytest(tmp_path, "-m", "long")
    assert rc == 0 and counts == {"passed": 1, "deselected": 3} and "PASSED test_needs.py::test_long" in out, out


SLOW = """\
import pytest

def test_short(): pass

@pytest.mark.slow(short="test_short")
def test_long_variant(): pass
"""


def test_a_slow_variant_is_deselected_in_favour_of_its_named_short_variant(tmp_path: Path) -> None:
    """CI (no switch) runs the short variant and lists the long one as deselected with the reason; the
    long one runs with MPVLAB_SLOW_TESTS=1 or `-m slow`; a `slow` test that names no existing short
    variant of its module stops the session before any test runs."""
    _suite(tmp_path, {"test_variants.py": SLOW})
    rc, out, counts = _pytest(tmp_path, MPVLAB_EXPECT_ALL="1")
    assert rc == 0 and counts == {"passed": 1, "deselected": 1}, out
    assert "PASSED test_variants.py::test_short" in out, out
    assert "1 test(s): slow: its short variant (the marker's `short`) runs instead; opt in with " \
           "MPVLAB_SLOW_TESTS=1 or -m slow" in out, out
    rc, out, counts = _pytest(tmp_path, MPVLAB_SLOW_TESTS="1")
    assert rc == 0 and counts == {"passed": 2}, out
    for expr in ("slow", "slow and not e2e"):        # pytest's own reading of -m: the name, not the letters
        rc, out, counts = _pytest(tmp_path, "-m", expr)
        assert rc == 0 and counts == {"passed": 1, "deselected": 1} and "PASSED test_variants.py::test_long_variant" in out, out
    rc, out, counts = _pytest(tmp_path, "-m", "not slow")
    assert rc == 0 and counts == {"passed": 1, "deselected": 1} and "PASSED test_variants.py::test_short" in out, out
    for bad, why in (('@pytest.mark.slow\n', "(got None)"), ('@pytest.mark.slow(short="test_gone")\n', "(got 'test_gone')"),
                     ('@pytest.mark.slow(short="test_long_variant")\n', "its short variant test_long_variant is itself `slow`")):
        (tmp_path / "test_variants.py").write_text(SLOW.replace('@pytest.mark.slow(short="test_short")\n', bad))
        rc, out, counts = _pytest(tmp_path)
        assert rc == 4 and counts == {} and why in out, out
        assert "test_variants.py::test_long_variant: " in out, out


def test_a_module_level_skip_fails_under_the_switch(tmp_path: Path) -> None:
    _suite(tmp_path, {"test_gone.py": "import pytest\npytest.skip('whole module', allow_module_level=True)\n"
                                      "def test_x(): pass\n", "test_here.py": "def test_y(): pass\n"})
    rc, out, counts = _pytest(tmp_path)
    assert rc == 0 and counts == {"passed": 1, "skipped": 1}, out
    rc, out, counts = _pytest(tmp_path, MPVLAB_EXPECT_ALL="1")
    assert rc == 2 and counts == {"error": 1} and "module skipped (whole module): with MPVLAB_EXPECT_ALL=1 every skip is a failure" in out, out


GROUPED = """\
import json, os, time
import pytest

def _note(name):
    start = time.monotonic()
    time.sleep(0.8)
    with open(os.environ["HPH_TIMES"], "a") as f:
        f.write(json.dumps([name, {cpu}, start, time.monotonic()]) + "\\n")

@pytest.mark.cpu
def test_cpu_1(): _note("{f}-cpu-1")

@pytest.mark.cpu
def test_cpu_2(): _note("{f}-cpu-2")

@pytest.mark.alone
def test_alone(): _note("{f}-alone")

def test_plain_1(): _note("{f}-plain-1")

def test_plain_2(): _note("{f}-plain-2")
"""


def test_cpu_tests_never_overlap_while_the_others_run_side_by_side(tmp_path: Path) -> None:
    """Two files on two workers, each starting with two `cpu` tests: the lock makes one worker wait,
    so no two `cpu` tests overlap, an `alone` test overlaps nothing, while plain tests do run at
    the same time as others."""
    suite, times = tmp_path / "suite", tmp_path / "times.jsonl"
    suite.mkdir()
    _suite(suite, {f"test_{f}.py": GROUPED.replace("{f}", f).replace("{cpu}", "name.split('-')[1] == 'cpu'")
                   for f in ("a", "b")})
    rc, out, counts = _pytest(suite, "-n", "2", "--dist", "loadfile", HPH_TIMES=str(times))
    assert rc == 0 and counts == {"passed": 10}, out
    rows = [json.loads(line) for line in times.read_text().splitlines()]
    assert len(rows) == 10
    alone = [r for r in rows if r[0].endswith("alone")]
    assert len(alone) == 2 and not [(a[0], b[0]) for a in alone for b in rows
                                     if a is not b and a[2] < b[3] and b[2] < a[3]], rows
    cpu = [r for r in rows if r[1]]
    assert len(cpu) == 4 and all(b[2] >= a[3] or a[2] >= b[3] for a, b in combinations(cpu, 2)), rows
    overlapping = [(a[0], b[0]) for a, b in combinations(rows, 2) if a[2] < b[3] and b[2] < a[3]]
    assert overlapping, rows                        # the two workers did run tests at the same time
    assert all(not (x.endswith(("cpu-1", "cpu-2")) and y.endswith(("cpu-1", "cpu-2"))) for x, y in overlapping)
    assert re.search(r"cpu group: 6 tests \(2 alone, 0 light\), \d+ s, \d+ s waited for the lock, 0 overlapping pairs", out), out
    assert "10 tests on 2 workers" in out, out


def test_never_more_tests_at_once_than_cpus_while_a_worker_waits_for_the_cpu_lock(tmp_path: Path) -> None:
    """One worker more than the CPUs (what MPVLAB_TEST_PARALLEL=1 starts): every test holds one of the
    CPUs' slots, so no more than os.cpu_count() tests ever run at once; a worker waiting for the `cpu`
    lock holds none, so the spare worker's plain tests run meanwhile."""
    cpus = os.cpu_count() or 1
    suite, times = tmp_path / "suite", tmp_path / "times.jsonl"
    suite.mkdir()
    files = [f"f{n}" for n in range(cpus + 1)]
    _suite(suite, {f"test_{f}.py": GROUPED.replace("{f}", f).replace("{cpu}", "name.split('-')[1] == 'cpu'")
                   for f in files})
    rc, out, counts = _pytest(suite, "-n", str(cpus + 1), "--dist", "loadfile", HPH_TIMES=str(times))
    assert rc == 0 and counts == {"passed": 5 * len(files)}, out
    rows = [json.loads(line) for line in times.read_text().splitlines()]
    starts_ends = sorted([(r[2], 1) for r in rows] + [(r[3], -1) for r in rows])
    running = [sum(step for _, step in starts_ends[:i + 1]) for i in range(len(starts_ends))]
    assert max(running) <= cpus, rows
    cpu = [r for r in rows if r[1]]
    assert all(b[2] >= a[3] or a[2] >= b[3] for a, b in combinations(cpu, 2)), rows
    assert f"{5 * len(files)} tests on {len(files)} workers" in out, out
    assert re.search(rf"at most [1-{cpus}] tests at once, at most [1-{cpus}] CPUs' worth \({cpus} CPUs: at most {cpus};", out), out
    if cpus > 1:
        _a_plain_test_runs_while_cpu_tests_wait(tmp_path / "waiting", cpus)


# Made certain rather than left to timing (under load the schedule above may happen never to show
# it): as many files with one `cpu` test as there are CPUs, and one file with a plain test, on one
# worker more than the CPUs. The `cpu` test holding the lock waits until the plain test has run, and
# the plain test waits until a `cpu` test holds the lock; the other `cpu` tests wait for the lock
# meanwhile. If a worker waiting for the lock held a CPU's slot, no slot would be left for the plain
# test, and the `cpu` test would give up after 60 s.
WAITING = """\
import os, time
from pathlib import Path
import pytest

SYNC = Path(os.environ["HPH_SYNC"])

def _until(name):
    end = time.monotonic() + 60
    while not (SYNC / name).exists():
        assert time.monotonic() < end, f"no {name} within 60 s"
        time.sleep(0.05)
"""
HOLDS_THE_CPU_LOCK = WAITING + """
@pytest.mark.cpu
def test_holds_the_cpu_lock():
    (SYNC / "cpu-running").touch()
    _until("plain-done")
"""
PLAIN = WAITING + """
def test_plain():
    _until("cpu-running")
    (SYNC / "plain-done").touch()
"""


def _a_plain_test_runs_while_cpu_tests_wait(root: Path, cpus: int) -> None:
    suite, sync = root / "suite", root / "sync"
    suite.mkdir(parents=True)
    sync.mkdir()
    _suite(suite, {**{f"test_c{n}.py": HOLDS_THE_CPU_LOCK for n in range(cpus)}, "test_plain.py": PLAIN})
    rc, out, counts = _pytest(suite, "-n", str(cpus + 1), "--dist", "loadfile", HPH_SYNC=str(sync))
    assert rc == 0 and counts == {"passed": cpus + 1}, out


# Two `cpu_light` tests and a plain one, each waiting until the other two have started: they pass only by
# running at the same time, which the schedule must allow on two CPUs (a light test counts half a CPU).
# A `cpu` test is in the suite too: if it asks for the CPU lock while the first light test runs, it holds
# the CPU gate, and the second light test must join the first without passing the gate (else the first
# would wait for it in vain: S3's failure of this test, before light tests joined).
TRIO = WAITING + """
{decorator}
def test_waits_for_the_others():
    (SYNC / "{f}-running").touch()
    for other in {others}:
        _until(other + "-running")
"""
# Light and `cpu` tests that only record their times: no `cpu` test may overlap any of them.
TIMED = """\
import json, os, time
import pytest

@pytest.mark.{marker}
def test_timed():
    start = time.monotonic()
    time.sleep(0.4)
    with open(os.environ["HPH_TIMES"], "a") as f:
        f.write(json.dumps(["{f}", start, time.monotonic()]) + "\\n")
"""


def _trio(f: str, marker: str | None, trio: tuple[str, ...]) -> str:
    return (TRIO.replace("{f}", f).replace("{decorator}", f"@pytest.mark.{marker}" if marker else "")
            .replace("{others}", repr([o for o in trio if o != f])))


def test_two_cpu_light_tests_and_a_plain_one_run_together_and_never_beside_a_cpu_test(tmp_path: Path) -> None:
    """`cpu_light` (tests/policy.py, Slot): light tests share the CPU lock and count half a CPU, so two of
    them and a plain test run at once on two CPUs (each waits until the other two have started: 60 s and
    a failure otherwise), with a `cpu` test in the same suite; in a second suite, two `cpu` and three
    light tests on five workers: a `cpu` test overlaps no other test of the group, never more light
    tests run at once than CPUs, and the schedule counts the light tests and finds no forbidden pair.
    (On a one-CPU host only one light test runs at a time: the trio is left out there, as
    `_a_plain_test_runs_while_cpu_tests_wait` is.)"""
    cpus = os.cpu_count() or 1
    if cpus > 1:
        trio, sync = tmp_path / "trio", tmp_path / "sync"
        trio.mkdir()
        sync.mkdir()
        names = ("l1", "l2", "p")
        files = {f"test_{f}.py": _trio(f, m, names) for f, m in (("l1", "cpu_light"), ("l2", "cpu_light"), ("p", None))}
        files["test_h.py"] = TIMED.replace("{f}", "h").replace("{marker}", "cpu")
        _suite(trio, files)
        rc, out, counts = _pytest(trio, "-n", "4", "--dist", "loadfile", HPH_SYNC=str(sync),
                                  HPH_TIMES=str(tmp_path / "trio-times.jsonl"))
        assert rc == 0 and counts == {"passed": 4}, out
        assert re.search(r"cpu group: 3 tests \(0 alone, 2 light\), \d+ s, \d+ s waited for the lock, 0 overlapping pairs",
                         out), out
        assert re.search(rf"at most 3 tests at once, at most 2 CPUs' worth \({cpus} CPUs", out), out
    mixed, times = tmp_path / "mixed", tmp_path / "times.jsonl"
    mixed.mkdir()
    marks = (("h1", "cpu"), ("h2", "cpu"), ("l1", "cpu_light"), ("l2", "cpu_light"), ("l3", "cpu_light"))
    _suite(mixed, {f"test_{f}.py": TIMED.replace("{f}", f).replace("{marker}", m) for f, m in marks})
    rc, out, counts = _pytest(mixed, "-n", "5", "--dist", "loadfile", HPH_TIMES=str(times))
    assert rc == 0 and counts == {"passed": 5}, out
    rows = {r[0]: r for r in map(json.loads, times.read_text().splitlines())}
    assert set(rows) == {"l1", "l2", "l3", "h1", "h2"}, rows
    assert all(rows[h][2] <= rows[o][1] or rows[o][2] <= rows[h][1]
               for h in ("h1", "h2") for o in rows if o != h), rows
    lights = [rows[f] for f in ("l1", "l2", "l3")]
    assert max(sum(1 for o in lights if o[1] <= r[1] < o[2]) for r in lights) <= cpus, rows
    assert re.search(r"cpu group: 5 tests \(0 alone, 3 light\), \d+ s, \d+ s waited for the lock, 0 overlapping pairs",
                     out), out


# A test of the CPU group waiting for its share goes before plain tests (tests/policy.py, GROUP_FIRST_LOCK).
# Plain tests hold every CPU (one holder per CPU); the `cpu` test and two more plain tests have asked for
# a share long before the first holder ends (2 s); then neither the next plain test of that holder's file
# nor the two waiting plain tests may take the freed CPU from the `cpu` test. (Without the rule the `cpu`
# test won that race in 1 of 4 tries.)
PRIORITY = WAITING + """
import json

def _record(name, start):
    with open(os.environ["HPH_TIMES"], "a") as f:
        f.write(json.dumps([name, start, time.monotonic()]) + "\\n")
"""
HOLDER = PRIORITY + """
def test_a():
    start = time.monotonic()
    (SYNC / "{f}").touch()
    for other in {others}:
        _until(other)
    time.sleep({hold})
    _record("{f}-a", start)

def test_b():
    _record("{f}-b", time.monotonic())
"""
ASKER = PRIORITY + """
{decorator}
def test_asks():
    _record("{f}", time.monotonic())
"""

# The askers ask for their share only once every holder runs: a plugin whose hook wraps the scheduler's
# (tryfirst), so it waits before the test asks for anything.
ASKERS_WAIT = """\
import os, time
from pathlib import Path
import pytest

@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if item.name == "test_asks":
        sync, end = Path(os.environ["HPH_SYNC"]), time.monotonic() + 60
        while not all((sync / h).exists() for h in {holders}):
            assert time.monotonic() < end, "the holders did not start within 60 s"
            time.sleep(0.05)
    yield
"""


def test_a_cpu_test_waiting_for_its_share_goes_before_plain_tests(tmp_path: Path) -> None:
    """The CPU group's tests are the session's critical path (docs/testing.md): when a CPU is freed, a
    `cpu` test waiting for it takes it, not the next plain test of the worker that freed it nor another
    waiting plain test."""
    cpus = os.cpu_count() or 1
    suite, sync, times = tmp_path / "suite", tmp_path / "sync", tmp_path / "times.jsonl"
    suite.mkdir()
    sync.mkdir()
    holders = [f"h{n}" for n in range(cpus)]
    files = {f"test_{h}.py": HOLDER.replace("{f}", h).replace("{others}", repr([o for o in holders if o != h]))
             .replace("{hold}", "2.0" if h == "h0" else "4.0") for h in holders}
    files |= {f"test_{f}.py": ASKER.replace("{f}", f).replace("{decorator}", "@pytest.mark.cpu" if f == "c" else "")
              for f in ("c", "q1", "q2")}
    _suite(suite, files)
    (suite / "hph_askers_wait.py").write_text(ASKERS_WAIT.replace("{holders}", repr(holders)))
    rc, out, counts = _pytest(suite, "-p", "hph_askers_wait", "-n", str(len(files)), "--dist", "loadfile",
                              HPH_SYNC=str(sync), HPH_TIMES=str(times))
    assert rc == 0 and counts == {"passed": 2 * cpus + 3}, out
    rows = {r[0]: r for r in map(json.loads, times.read_text().splitlines())}
    assert all(rows["c"][1] < rows[other][1] for other in ("h0-b", "q1", "q2")), rows


SHARED = """\
import json, os, time
import pytest

def _note(name, cpu):
    start = time.monotonic()
    time.sleep(0.8)
    with open(os.environ["HPH_TIMES"], "a") as f:
        f.write(json.dumps([name, cpu, start, time.monotonic()]) + "\\n")

@pytest.fixture(scope="module")
def shared_run():
    _note("{f}-shared-run", True)      # made once; a `cpu` test asserts a bound on what it measured
    return 1

def test_reads_the_run_first(shared_run): pass

@pytest.mark.cpu
def test_bound_on_the_run(shared_run): _note("{f}-cpu", True)

def test_plain(): _note("{f}-plain", False)
"""


def test_a_shared_fixture_read_by_a_cpu_test_is_made_in_the_cpu_slot(tmp_path: Path) -> None:
    """Issue 44: markers are per test, and a module's shared run is made in the setup of its first user,
    here an unmarked test. That test takes the slot of the fixture's strongest user (`cpu`), so the two
    files' runs, started at once on two workers, are made one after the other; plain tests stay plain."""
    suite, times, schedule = tmp_path / "suite", tmp_path / "times.jsonl", tmp_path / "schedule.jsonl"
    suite.mkdir()
    _suite(suite, {f"test_{f}.py": SHARED.replace("{f}", f) for f in ("a", "b")})
    rc, out, counts = _pytest(suite, "-n", "2", "--dist", "loadfile", HPH_TIMES=str(times),
                              MPVLAB_TEST_SCHEDULE=str(schedule))
    assert rc == 0 and counts == {"passed": 6}, out
    rows = [json.loads(line) for line in times.read_text().splitlines()]
    cpu = [r for r in rows if r[1]]
    assert len(cpu) == 4 and all(b[2] >= a[3] or a[2] >= b[3] for a, b in combinations(cpu, 2)), rows
    slots = {r["test"].split("::")[1]: (r["cpu"], r["alone"]) for r in map(json.loads, schedule.read_text().splitlines())}
    assert slots == {"test_reads_the_run_first": (True, False), "test_bound_on_the_run": (True, False),
                     "test_plain": (False, False)}, slots
    assert re.search(r"cpu group: 4 tests \(0 alone, 0 light\), \d+ s, \d+ s waited for the lock, 0 overlapping pairs", out), out


SYSCTL_SUITE = """\
import os
from pathlib import Path

def test_leaves_the_host_alone(): pass

def test_raises_a_host_limit():
    # what Mininet's fixLimits() did on every CI run, here to a fake /proc/sys
    (Path(os.environ["MPVLAB_TEST_SYSCTL_DIR"]) / "net/core/rmem_max").write_text("16777216\\n")
"""


def test_a_session_that_changes_a_root_sysctl_fails_naming_it(tmp_path: Path) -> None:
    """The session guard: every test passes, yet the session fails because one of them left a
    root-namespace sysctl changed; the summary names the key with its value before and after. Without
    the changing test the same suite passes (so the guard is not failing everything)."""
    fake = tmp_path / "sys"
    for key in ("net/core/rmem_max", "net/ipv4/tcp_rmem"):
        (fake / key).parent.mkdir(parents=True, exist_ok=True)
    (fake / "net/core/rmem_max").write_text("212992\n")
    (fake / "net/ipv4/tcp_rmem").write_text("4096\t131072\t6291456\n")
    suite = tmp_path / "suite"
    suite.mkdir()
    _suite(suite, {"test_host.py": SYSCTL_SUITE})
    rc, out, counts = _pytest(suite, "-k", "alone", MPVLAB_TEST_SYSCTL_DIR=str(fake))
    assert rc == 0 and counts == {"passed": 1, "deselected": 1}, out
    rc, out, counts = _pytest(suite, MPVLAB_TEST_SYSCTL_DIR=str(fake))
    assert rc == 1 and counts == {"passed": 2}, out
    assert "this session changed root-namespace sysctls" in out, out
    assert "net.core.rmem_max: 212992 -> 16777216" in out, out
    assert "tcp_rmem" not in out.split("root-namespace sysctls")[1], out


CPU_CHILD = """\
import json, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from cpuuse import WorkerCpu
g = WorkerCpu.join()
before = g.used_s()
# a child that burns CPU, and reports how much by its own clock
child = subprocess.run([sys.executable, "-c",
                        "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass\\n"
                        "print(time.process_time())"], capture_output=True, text=True, check=True)
used = g.used_s() - before
name = g.path
print(json.dumps({"used": used, "child": float(child.stdout), "left": g.leave(), "exists": name.exists()}))
"""


@pytest.mark.root
def test_worker_cpu_counts_what_its_children_used_and_goes_away(tmp_path: Path) -> None:
    """tests/cpuuse.py: a process in its own cpuacct group; a child it starts burns ≥ 0.4 s of CPU by its
    own clock; the group counted at least that (and at most the child plus the interpreter's start-up:
    < 3 s); leaving removes the group."""
    script = tmp_path / "cpu_child.py"
    script.write_text(CPU_CHILD)
    cp = subprocess.run([sys.executable, str(script), str(Path(__file__).parent)], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, cp.stderr
    got = json.loads(cp.stdout)
    assert got["child"] >= 0.4 and got["child"] <= got["used"] < 3.0, got
    assert got["left"] is True and got["exists"] is False, got
