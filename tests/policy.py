"""The suite's one skip policy and its scheduler, as pytest hooks (imported by tests/conftest.py).

What a test needs is said by a marker, and only here is it decided whether this host has it:

    root        root (loading BPF, dropping to another user)
    netns       root, network namespaces, tc and the kernel's MPTCP (every real run)
    chromium    Debian's chromium (setup.sh installs it)
    dashjs      chromium and the pinned dash.js bundle (setup.sh fetches it)
    slurm       slurm-wlm and munge (setup.sh installs them)
    tools(...)  these executables on PATH, or these files of the repository (built by setup.sh)

A test whose need is missing is skipped with the reason, except under MPVLAB_EXPECT_ALL=1 (what
.ci/run sets): there every skip, from a marker or from anywhere else, is a failure, so a missing
install step can never hide as a skip. Three markers are not needs but selections, reported as
deselected with their reason (never a skip): `long` (opt in with MPVLAB_LONG_TESTS=1 or `-m long`), `slow(short=…)`
(a longer variant of a test that runs instead, named by `short`: opt in with MPVLAB_SLOW_TESTS=1 or
`-m slow`) and `kernel("af_xdp")` (a kernel feature this machine's kernel may not have).

Scheduling (pytest-xdist, tests/conftest.py turns it on for a whole-suite run): tests are
distributed by file, so a module's shared bring-up happens once. Tests marked `cpu` (CPU-bound, or
asserting a timing or fidelity bound that a CPU-hungry neighbour could move) hold one flock of the
session while they run, setup and teardown included: two of them never run at the same time. Every
test's start and end (and CPU steal) are written to the session's folder; the controller checks
that no two `cpu` tests overlapped and prints the schedule's figures at the end. Tests marked `alone`
(a timing bound tight enough that any neighbour could move it) run with no other test at all. Tests
marked `cpu_light` are `cpu` tests whose processes were measured to use under 0.35 of a core
(tests/cpuuse.py, the schedule's `cpu_s`): they count half a CPU, so as many as there are CPUs may run
at once, beside each other and a plain test (two light tests and a plain one on two CPUs: at most
1.7 cores asked), never beside a `cpu` or `alone` test.
The markers sit on the tests that need them (docs/testing.md says which do). A shared fixture
(module scope or wider, e.g. one run whose results several tests read) is made in the setup of
whichever test uses it first: that test runs in the strongest slot of all the fixture's users, so a
run read by a `cpu` test is never made beside another `cpu` test, whichever test happens to make it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from enum import IntEnum
from typing import Any

import pytest

from cpuuse import WorkerCpu
from hostnoise import STEAL_LIMIT
from rootsysctls import changed, root_sysctls
from mpvlab.core.hoststeal import StealMeter, StealWindow
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
EXPECT_ALL = "MPVLAB_EXPECT_ALL"
LONG_TESTS = "MPVLAB_LONG_TESTS"
SLOW_TESTS = "MPVLAB_SLOW_TESTS"
SESSION_DIR_KEY = "mpvlab_session_dir"
SCHEDULE_COPY = "MPVLAB_TEST_SCHEDULE"   # a file to write every test's worker, start and end to
# Selections, not needs: marker -> (the switch that opts in, the reason a deselected test is listed
# with). `-m` naming the marker opts in too.
OPT_IN = {
    "long": (LONG_TESTS, f"long: opt in with {LONG_TESTS}=1 or -m long"),
    "slow": (SLOW_TESTS, f"slow: its short variant (the marker's `short`) runs instead; opt in with {SLOW_TESTS}=1 "
                         "or -m slow"),
}
CPU_LOCK = "cpu-group.lock"          # `cpu` tests hold it exclusive, `cpu_light` tests shared
CPU_GATE_LOCK = "cpu-gate.lock"      # passed before CPU_LOCK: a `cpu` test waiting for it stops new light ones
GATE_LOCK = "gate.lock"
RUNNING_LOCK = "running.lock"
HALF_LOCK = "half-{}.lock"            # two per CPU: a test holds two (a `cpu_light` test one), so the tests running
                                      # at once are at most the CPUs' worth (a light test counting half a CPU)
LIGHT_LOCK = "light-{}.lock"          # one per CPU: at most as many `cpu_light` tests at once as CPUs
GROUP_FIRST_LOCK = "group-first.lock"  # held shared by a `cpu`/`cpu_light`/`alone` test waiting for its share:
                                       # plain tests wait meanwhile (the group is the session's critical path)
CORES_KEY = "mpvlab_cores"
CORE_POLL_S = 0.02                    # flock has no "any of these": a test waiting for its share retries this often
LIGHT_WEIGHT = 0.5                    # a `cpu_light` test's share of a CPU in the schedule (measured: < 0.35)
AF_XDP = 44  # socket.AF_XDP is not exported by Python's socket module

_STEAL_BY_TEST = pytest.StashKey[dict[str, StealWindow]]()
_SESSION = pytest.StashKey[StealMeter]()
_MISSING = pytest.StashKey[str]()
_DESELECTED = pytest.StashKey[dict[str, int]]()
_SCHEDULE = pytest.StashKey[list[str]]()
_OWN_DIR = pytest.StashKey[Path]()
_SHARED_SLOT = pytest.StashKey[dict[Any, "Slot"]]()
_ROOT_SYSCTLS = pytest.StashKey[dict[str, str]]()
_SYSCTL_DIFF = pytest.StashKey[list[str]]()
_WORKER_CPU = pytest.StashKey["WorkerCpu | None"]()

# ------------------------------------------------------------------------------------- needs

def _root() -> str | None:
    return None if os.geteuid() == 0 else "needs root"


def _netns() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, kernel MPTCP)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2's ip and tc (./setup.sh installs them)"
    if not Path("/proc/sys/net/mptcp/enabled").exists():
        return "needs a kernel with MPTCP (/proc/sys/net/mptcp/enabled is missing)"
    return None


def _chromium() -> str | None:
    from mpvlab.reporting import browser
    return None if browser.available() else "needs chromium (./setup.sh installs it)"


def _dashjs() -> str | None:
    from mpvlab.player.dashjs import parts as dashjs_setup
    missing = dashjs_setup.missing()
    return None if missing is None else f"needs {missing} (./setup.sh installs it)"


def _slurm() -> str | None:
    absent = [t for t in ("munged", "slurmctld", "slurmd", "sbatch") if shutil.which(t) is None]
    return f"needs {', '.join(absent)} (./setup.sh installs slurm-wlm and munge)" if absent else None


def _tools(*names: str) -> str | None:
    # a name with a slash is a file (absolute, or relative to the repository); else a command on PATH
    absent = [n for n in names if not ((REPO / n).exists() if "/" in n else shutil.which(n))]
    return f"needs {', '.join(absent)} (./setup.sh installs or builds it)" if absent else None


NEEDS: dict[str, Callable[..., str | None]] = {
    "root": _root, "netns": _netns, "chromium": _chromium, "dashjs": _dashjs, "slurm": _slurm, "tools": _tools,
}


def _af_xdp() -> str | None:
    try:
        socket.socket(AF_XDP, socket.SOCK_RAW, 0).close()
    except OSError as e:
        return f"kernel without AF_XDP sockets (CONFIG_XDP_SOCKETS): socket(AF_XDP): {e.strerror}"
    return None


KERNEL_FEATURES: dict[str, Callable[[], str | None]] = {"af_xdp": _af_xdp}


def missing(item: pytest.Item) -> str | None:
    """Why this host cannot run the item (its need markers, each checked once per marker), or None."""
    reasons = []
    for name, check in NEEDS.items():
        for mark in item.iter_markers(name):
            reason = check(*mark.args)
            if reason:
                reasons.append(reason)
    return "; ".join(dict.fromkeys(reasons)) or None


def deselection(item: pytest.Item, markexpr: str = "") -> str | None:
    """Why the item is not part of this session (not a skip: it is reported as deselected), or None."""
    for marker, (switch, reason) in OPT_IN.items():
        if item.get_closest_marker(marker) and os.environ.get(switch) != "1" and not _asks_for(markexpr, marker, item):
            return reason
    for mark in item.iter_markers("kernel"):
        reason = KERNEL_FEATURES[mark.args[0]]() if os.geteuid() == 0 else None
        if reason:
            return reason
    return None


def _asks_for(markexpr: str, marker: str, item: pytest.Item) -> bool:
    """Whether `-m markexpr` names `marker` (a whole name, as pytest reads the expression) and selects
    this item by pytest's own evaluation: `-m slow` and `-m "slow and e2e"` opt in, `-m "not slow"`
    and `-m slowest` do not."""
    if not markexpr or marker not in re.findall(r"[^\s()]+", markexpr):
        return False
    from _pytest.mark.expression import Expression      # pytest's -m evaluator (what `-m` itself uses)
    names = {m.name for m in item.iter_markers()}
    return Expression.compile(markexpr).evaluate(lambda name: name in names)


def expect_all() -> bool:
    return os.environ.get(EXPECT_ALL) == "1"


# ------------------------------------------------------------------------------------ hooks

def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STEAL_BY_TEST] = {}
    config.stash[_SESSION] = StealMeter().__enter__()
    config.stash[_DESELECTED] = {}
    if not hasattr(config, "workerinput"):          # the session's one guard (xdist: the controller)
        config.stash[_ROOT_SYSCTLS] = root_sysctls()
    if _is_controller(config):
        own = Path(tempfile.mkdtemp(prefix="mpvlab-pytest-"))
        config.stash[_OWN_DIR] = own
    if session_dir(config) is not None:             # an xdist worker: every test's CPU (tests/cpuuse.py)
        config.stash[_WORKER_CPU] = WorkerCpu.join()


def pytest_unconfigure(config: pytest.Config) -> None:
    worker_cpu = config.stash.get(_WORKER_CPU, None)
    if worker_cpu is not None and not worker_cpu.leave():
        print(f"tests/cpuuse.py: {worker_cpu.path} kept: a process a test started is still in it")
    own = config.stash.get(_OWN_DIR, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: hand every worker the session's folder (its lock and schedule records) and the number of
    tests that may run at once (one per CPU, whatever the number of workers)."""
    node.workerinput[SESSION_DIR_KEY] = str(node.config.stash[_OWN_DIR])
    node.workerinput[CORES_KEY] = os.cpu_count() or 1


def _is_controller(config: pytest.Config) -> bool:
    """The xdist controller of a distributed session (it runs no test itself)."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None)) \
        and getattr(config.option, "dist", "no") != "no"


def session_dir(config: pytest.Config) -> Path | None:
    """The folder shared by every worker of this session; None when tests run in one process."""
    workerinput = getattr(config, "workerinput", None)
    return Path(workerinput[SESSION_DIR_KEY]) if workerinput and SESSION_DIR_KEY in workerinput else None


def short_variant_error(item: pytest.Item) -> str | None:
    """A `slow` test must name its short variant, a test of its own module that is not `slow` itself:
    what CI runs in its place (deselecting a long run is only honest when its short twin stays)."""
    mark = item.get_closest_marker("slow")
    if mark is None:
        return None
    short = mark.kwargs.get("short")
    target = getattr(getattr(item, "module", None), short, None) if isinstance(short, str) else None
    if not (isinstance(short, str) and short.startswith("test_") and callable(target)):
        return (f"{item.nodeid}: a `slow` test names its short variant, the test of its module that CI runs "
                f"instead: @pytest.mark.slow(short=\"test_…\") (got {short!r})")
    if any(m.name == "slow" for m in getattr(target, "pytestmark", [])):
        return f"{item.nodeid}: its short variant {short} is itself `slow`"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, dropped = [], []
    reasons = config.stash[_DESELECTED]
    errors = [e for e in dict.fromkeys(short_variant_error(item) for item in items) if e]
    if errors:
        raise pytest.UsageError("\n".join(errors))
    markexpr = config.getoption("markexpr", "") or ""
    # The files that hold the suite's longest tests (a `first` test, or a `slow` one: its short variant
    # is long too), whether or not the slow one is deselected: handed out first (below).
    first_files = {it.path for it in items if it.get_closest_marker("first") or it.get_closest_marker("slow")}
    for item in items:
        why = deselection(item, markexpr)
        if why:
            dropped.append(item)
            reasons[why] = reasons.get(why, 0) + 1
            continue
        need = missing(item)
        if need:
            if expect_all():
                item.stash[_MISSING] = need
            else:
                item.add_marker(pytest.mark.skip(reason=need))
        keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    # The longest files first: with distribution by file, a long file started last is the tail of
    # the whole session. Such a file goes first, whole (a module's tests stay together, so its
    # shared bring-up happens once); otherwise the collection order stays.
    keep.sort(key=lambda it: it.path not in first_files)
    items[:] = keep
    config.stash[_SHARED_SLOT] = _shared_slots(keep)


class Slot(IntEnum):
    """A test's place in the schedule; of several (a test's own markers, a shared fixture's users) the
    strongest wins, so a marker can only make a test's slot stricter."""
    PLAIN = 0       # one CPU's slot, beside anything but an `alone` test
    CPU_LIGHT = 1   # beside one other `cpu_light` test or a plain one, never a `cpu` or `alone` test
    CPU = 2         # beside a plain test only
    ALONE = 3       # beside nothing


def _own_slot(item: pytest.Item) -> Slot:
    if item.get_closest_marker("alone") is not None:
        return Slot.ALONE
    if item.get_closest_marker("cpu") is not None:
        return Slot.CPU
    return Slot.CPU_LIGHT if item.get_closest_marker("cpu_light") is not None else Slot.PLAIN


def _shared_fixtures(item: pytest.Item) -> list[Any]:
    """The item's own fixtures made once for several tests (any scope but function's). pytest's and the
    plugins' (tmp_path_factory, xdist's worker_id) have no base id: made once per worker, they measure nothing."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    defs = (info.name2fixturedefs.get(name) for name in getattr(item, "fixturenames", ()))
    return [d[-1] for d in defs if d and d[-1].scope != "function" and d[-1].baseid]


def _shared_slots(items: list[pytest.Item]) -> dict[Any, Slot]:
    """Per shared fixture: the strongest slot of the tests that use it."""
    slots: dict[Any, Slot] = {}
    for item in items:
        own = _own_slot(item)
        for fixturedef in _shared_fixtures(item):
            slots[fixturedef] = max(slots.get(fixturedef, Slot.PLAIN), own)
    return slots


def _to_be_made(item: pytest.Item, fixturedef: Any) -> bool:
    """Whether the item's setup makes the fixture: not made yet (or torn down), or made for another
    of its parameters (pytest's cache key is the parameter, None for an unparametrized fixture)."""
    if fixturedef.cached_result is None:
        return True
    callspec = getattr(item, "callspec", None)
    want = callspec.params.get(fixturedef.argname) if callspec is not None else None
    try:
        return bool(fixturedef.cached_result[1] != want)
    except Exception:                 # a parameter that does not compare: assume it is made again
        return True


def slot_of(item: pytest.Item) -> Slot:
    """The slot of this item's run: its own markers', and the strongest of every user of a shared fixture
    that its setup is about to make (not made yet, or torn down), since the fixture is made in this slot."""
    slot = _own_slot(item)
    slots = item.config.stash.get(_SHARED_SLOT, {})
    for fixturedef in _shared_fixtures(item):
        if _to_be_made(item, fixturedef):
            slot = max(slot, slots.get(fixturedef, Slot.PLAIN))
    return slot


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    need = item.stash.get(_MISSING, None)
    if need:
        pytest.fail(f"{need}: with {EXPECT_ALL}=1 a missing requirement fails (a skip here would hide a "
                    "missing install step)", pytrace=False)


def _reason(rep: pytest.TestReport | pytest.CollectReport) -> str:
    text = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if expect_all() and rep.skipped and not hasattr(rep, "wasxfail"):
        reason = _reason(rep)
        rep.outcome = "failed"
        rep.longrepr = f"skipped ({reason}): with {EXPECT_ALL}=1 every skip is a failure"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if expect_all() and rep.skipped:
        reason = _reason(rep)
        rep.outcome = "failed"
        rep.longrepr = f"module skipped ({reason}): with {EXPECT_ALL}=1 every skip is a failure"


@pytest.fixture(autouse=True)
def _record_steal(request: pytest.FixtureRequest) -> Iterator[None]:
    with StealMeter() as meter:
        yield
    request.config.stash[_STEAL_BY_TEST][request.node.nodeid] = meter.window


@contextmanager
def _slot(shared: Path, slot: Slot, cores: int) -> Iterator[None]:
    """The test's place in the schedule, held over its setup, call and teardown (a module's shared
    bring-up happens in its first test's setup).

    `cpu`: one at a time among `cpu` and `cpu_light` tests — the CPU lock held exclusive.
    `cpu_light`: the CPU lock held shared, so light tests run beside each other. A light test first
    tries to join light tests already running (the lock taken shared without waiting: it succeeds only
    while no `cpu` test holds it); otherwise it passes the CPU gate, as a `cpu` test does, held while
    waiting for the CPU lock, so a `cpu` test waiting for the light ones to end stops new light ones
    from starting from nothing (flock alone would let two workers' light tests starve it). Joining
    does not stop the `cpu` test from getting the lock once the light tests run out; it keeps the
    light tests paired (S5: a light test ran beside no other light test for 676 of its 837 s because
    a waiting `cpu` test held the gate).
    `alone`: nothing else of the session runs meanwhile — a reader-writer lock: every test holds
    RUNNING shared, an `alone` test exclusive; it first takes the GATE, which every test passes
    through before RUNNING, so that while it waits for the running tests to end no new one starts.
    Last, a share of the CPUs: two of the 2 × `cores` half-CPU locks (a `cpu_light` test: one, and
    one of `cores` light locks), so the tests running at once are never more than the CPUs' worth,
    a light test counting half a CPU (measured under 0.35: two light tests and a plain one fit two
    CPUs), however many workers there are (a worker waiting for the CPU lock holds no share: another
    worker's plain test runs meanwhile). A test of the CPU group waiting for its share goes before
    plain tests: they wait while it does (S7: for 155 s of 1,380 two plain tests held both CPUs while
    a test holding the CPU lock waited for a share, and the group's chain of tests, the session's
    critical path, stood still). The order is fixed (cpu gate, cpu, gate, running, share) and a share
    is taken last, all of it at once or none, and waits on nothing but running tests, which wait on
    nothing, so no two tests wait for each other."""
    fds: list[int] = []

    def open_lock(name: str) -> int:
        return os.open(shared / name, os.O_RDWR | os.O_CREAT, 0o600)   # not inherited by a test's children (PEP 446)

    def flock_now(fd: int, how: int) -> bool:
        """The lock taken without waiting, or False if another holds it."""
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def take(name: str, how: int) -> int:
        fd = open_lock(name)
        fds.append(fd)
        fcntl.flock(fd, how)
        return fd

    def try_take(names: list[str], count: int) -> list[int]:
        """`count` of these locks, free now, or none (nothing held while waiting)."""
        got: list[int] = []
        for name in names:
            if len(got) == count:
                break
            fd = open_lock(name)
            if flock_now(fd, fcntl.LOCK_EX):
                got.append(fd)
            else:
                os.close(fd)
        if len(got) < count:
            for fd in got:
                os.close(fd)
            return []
        return got

    def group_waiting() -> bool:
        """Whether a test of the CPU group waits for its share (holds GROUP_FIRST shared)."""
        fd = open_lock(GROUP_FIRST_LOCK)
        try:
            return not flock_now(fd, fcntl.LOCK_EX)
        finally:
            os.close(fd)

    def take_a_share() -> None:
        halves = [HALF_LOCK.format(n) for n in range(2 * cores)]
        count = 2
        if slot == Slot.CPU_LIGHT:          # first one of the light locks (no priority while waiting for it)
            while not (light := try_take([LIGHT_LOCK.format(n) for n in range(cores)], 1)):
                time.sleep(CORE_POLL_S)
            fds.extend(light)
            count = 1
        if slot == Slot.PLAIN:
            while group_waiting() or not (half := try_take(halves, count)):
                time.sleep(CORE_POLL_S)
            fds.extend(half)
            return
        first = open_lock(GROUP_FIRST_LOCK)
        try:
            fcntl.flock(first, fcntl.LOCK_SH)
            while not (half := try_take(halves, count)):
                time.sleep(CORE_POLL_S)
            fds.extend(half)
        finally:
            os.close(first)

    def join_light_tests() -> bool:
        fd = open_lock(CPU_LOCK)
        if not flock_now(fd, fcntl.LOCK_SH):
            os.close(fd)
            return False
        fds.append(fd)
        return True

    try:
        if slot == Slot.CPU or (slot == Slot.CPU_LIGHT and not join_light_tests()):
            cpu_gate = take(CPU_GATE_LOCK, fcntl.LOCK_EX)
            take(CPU_LOCK, fcntl.LOCK_EX if slot == Slot.CPU else fcntl.LOCK_SH)
            fcntl.flock(cpu_gate, fcntl.LOCK_UN)
        gate = take(GATE_LOCK, fcntl.LOCK_EX)
        if slot == Slot.ALONE:
            take(RUNNING_LOCK, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            take(RUNNING_LOCK, fcntl.LOCK_SH)
        take_a_share()
        yield
    finally:
        for fd in reversed(fds):
            os.close(fd)                 # closing the descriptor releases its flock


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under xdist: the test runs in its slot (_slot); every test's times are recorded."""
    shared = session_dir(item.config)
    if shared is None:
        yield
        return
    slot = slot_of(item)
    worker_cpu = item.config.stash.get(_WORKER_CPU, None)
    asked = time.monotonic()
    with _slot(shared, slot, int(item.config.workerinput.get(CORES_KEY, 1))):
        start = time.monotonic()
        used_before = worker_cpu.used_s() if worker_cpu else None
        yield
        used = None if worker_cpu is None or used_before is None else worker_cpu.used_s() - used_before
        end = time.monotonic()
    steal = item.config.stash[_STEAL_BY_TEST].get(item.nodeid)
    record = {"test": item.nodeid, "worker": item.config.workerinput["workerid"],
              "cpu": slot in (Slot.CPU, Slot.CPU_LIGHT), "light": slot == Slot.CPU_LIGHT, "alone": slot == Slot.ALONE,
              "asked": asked, "start": start, "end": end, "cpu_s": None if used is None else round(used, 3),
              "steal": [steal.wall_s, list(steal.steal_s)] if steal else None}
    with open(shared / f"schedule-{item.config.workerinput['workerid']}.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


def read_schedule(folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(folder.glob("schedule-*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def overlaps(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs that must not have run at once and did: two `cpu` tests (unless both are `cpu_light`), or an
    `alone` test and any."""
    rows = sorted(rows, key=lambda r: r["start"])
    return [(a["test"], b["test"]) for i, a in enumerate(rows) for b in rows[i + 1:]
            if b["start"] < a["end"] and ((a["cpu"] and b["cpu"] and not (a.get("light") and b.get("light")))
                                          or a.get("alone") or b.get("alone"))]


def weight(row: dict[str, Any]) -> float:
    """A test's share of the CPUs in the schedule: a `cpu_light` test half a CPU, any other a whole one."""
    return LIGHT_WEIGHT if row.get("light") else 1.0


def most_at_once(rows: list[dict[str, Any]], of: Callable[[dict[str, Any]], float] = lambda r: 1.0) -> float:
    """The largest sum of `of` over the tests running at the same moment (a test ending as another
    starts: not both); by default the number of tests."""
    edges = sorted([(r["start"], of(r)) for r in rows] + [(r["end"], -of(r)) for r in rows])
    running = peak = 0.0
    for _, step in edges:               # at equal times the negative step sorts first: an end frees its share first
        running += step
        peak = max(peak, running)
    return peak


def schedule_lines(rows: list[dict[str, Any]], cores: int) -> list[str]:
    if not rows:
        return []
    wall = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    busy = sum(r["end"] - r["start"] for r in rows)
    grouped = [r for r in rows if r["cpu"] or r.get("alone")]
    waited = sum(r["start"] - r["asked"] for r in grouped)
    pairs = overlaps(rows)
    lines = [f"{len(rows)} tests on {len({r['worker'] for r in rows})} workers: {busy:.0f} s of tests in "
             f"{wall:.0f} s of wall (x{busy / wall if wall else 0:.2f})",
             f"cpu group: {len(grouped)} tests ({sum(1 for r in rows if r.get('alone'))} alone, "
             f"{sum(1 for r in rows if r.get('light'))} light), "
             f"{sum(r['end'] - r['start'] for r in grouped):.0f} s, "
             f"{waited:.0f} s waited for the lock, {len(pairs)} overlapping pairs",
             f"at most {most_at_once(rows):.0f} tests at once, at most {most_at_once(rows, weight):g} CPUs' worth "
             f"({cores} CPUs: at most {cores}; a light test counts {LIGHT_WEIGHT:g}), at most "
             f"{most_at_once([r for r in rows if r.get('light')]):.0f} light tests at once (at most {cores})"]
    lines += [f"  OVERLAP: {a} and {b}" for a, b in pairs[:10]]
    measured = [r for r in rows if r.get("cpu_s") is not None]
    for label, part in (("cpu group", [r for r in measured if r in grouped]),
                        ("the others", [r for r in measured if r not in grouped])):
        if part:
            cpu_s, wall_s = sum(r["cpu_s"] for r in part), sum(r["end"] - r["start"] for r in part)
            lines.append(f"CPU used by {label}: {cpu_s:.0f} s over {wall_s:.0f} s of their wall "
                         f"({cpu_s / wall_s if wall_s else 0:.2f} cores on average; tests/cpuuse.py)")
    return lines


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _guard_root_sysctls(session)
    own = session.config.stash.get(_OWN_DIR, None)
    if own is None:
        return
    rows = read_schedule(own)
    cores = os.cpu_count() or 1
    session.config.stash[_SCHEDULE] = schedule_lines(rows, cores)
    keep = os.environ.get(SCHEDULE_COPY)
    if keep:                         # the schedule kept for study (docs/testing.md): one JSON row per test
        Path(keep).write_text("".join(json.dumps(r) + "\n" for r in rows))
    steal = session.config.stash[_STEAL_BY_TEST]
    for r in rows:
        if r["steal"]:
            steal[r["test"]] = StealWindow(r["steal"][0], tuple(r["steal"][1]))
    too_many = most_at_once(rows, weight) > cores or most_at_once([r for r in rows if r.get("light")]) > cores
    if (overlaps(rows) or too_many) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _guard_root_sysctls(session: pytest.Session) -> None:
    """The whole session must leave the host's root-namespace sysctls as it found them (the brief:
    never change host-wide settings). A test that changed one (Mininet() ran fixLimits() and raised
    ten of them on every CI run, unseen for weeks) fails the session here, naming each key."""
    before = session.config.stash.get(_ROOT_SYSCTLS, None)
    if before is None:
        return
    diff = changed(before, root_sysctls())
    session.config.stash[_SYSCTL_DIFF] = diff
    if diff and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    diff = config.stash.get(_SYSCTL_DIFF, [])
    if diff:
        terminalreporter.section("FAILED: this session changed root-namespace sysctls (restore them by hand)")
        for line in diff:
            terminalreporter.write_line(f"  {line}")
    reasons = config.stash.get(_DESELECTED, {})
    if reasons:
        terminalreporter.section("deselected (not skipped), with the reason")
        for why, n in reasons.items():
            terminalreporter.write_line(f"  {n} test(s): {why}")
    schedule = config.stash.get(_SCHEDULE, [])
    if schedule:
        terminalreporter.section("schedule (pytest-xdist, by file; tests at most the CPUs' worth at a time, `cpu` "
                                 "tests one at a time, `cpu_light` tests half a CPU each, at most one per CPU)")
        for line in schedule:
            terminalreporter.write_line(line)
    _steal_summary(terminalreporter, config)


def _steal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Record the CPU steal during every test (and the whole session) and summarise it, so a timing
    bound can be read next to what the hypervisor took at that moment. Steal during a module's
    shared fixture (e.g. one end-to-end run) counts in the session total."""
    by_test = config.stash.get(_STEAL_BY_TEST, {})
    session = config.stash.get(_SESSION, None)
    if not by_test or session is None:
        return
    session.__exit__()
    # Windows under a second are below the counter's resolution (one 10 ms tick is 1 % of 1 s).
    contended = sorted(((w.lost, node, w) for node, w in by_test.items()
                        if w.lost > STEAL_LIMIT and w.wall_s >= 1.0), reverse=True)
    terminalreporter.section("host CPU steal (hypervisor contention)")
    terminalreporter.write_line(f"session: {session.window.describe()}; {len(contended)} of {len(by_test)} "
                                f"tests (of 1 s or more) above {STEAL_LIMIT:.0%}"
                                + (", the most contended:" if contended else ""))
    for _, node, w in contended[:15]:
        terminalreporter.write_line(f"  {node}: {w.describe()}")
