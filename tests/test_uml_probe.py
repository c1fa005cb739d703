"""bench/uml (issue 50's User-Mode Linux probe): never run here (it builds a kernel), so only what can
be checked without it: the scripts parse, the prototype maps scenarios to case lines (and refuses what the
guest cannot reproduce), and the trace checker that judges the in-kernel schedulers'
decisions finds a decision that contradicts the scheduler's definition."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from mpvlab.core.paths import checkout_root

UML = checkout_root() / "bench" / "uml"


def _load(script: str) -> ModuleType:
    """A bench/uml script as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"uml_{script}", UML / f"{script}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def report() -> ModuleType:
    return _load("report")


@pytest.mark.parametrize(("shell", "script"), [("bash", "build.sh"), ("bash", "run.sh"), ("sh", "guest.sh")])
def test_scripts_parse(shell: str, script: str) -> None:
    exe = shutil.which(shell)
    assert exe
    cp = subprocess.run([exe, "-n", str(UML / script)], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr


# sfID=srtt,min_rtt,cwnd,mss,in_flight,unsent,bdp,eligible,backup (sched_mpvlab.c's trace line)
SF1 = "sf1=20000,20000,10,1448,3,0,2500,1,0"        # fast, small BDP, room
SF2 = "sf2=80000,80000,40,1448,5,0,50000,1,0"       # slow, large BDP, room


def dec(name: str, choice: int, *subs: str) -> str:
    return f"[ 1.0] mpvlab: dec {name} t=1 tok=abcd0001 choice={choice} {' '.join(subs)}"


def test_trace_check_agrees_with_each_definition() -> None:
    got = report().check_trace([dec("mpv_minrtt", 1, SF1, SF2), dec("mpv_bdp", 2, SF1, SF2)])
    assert got["decisions_logged"] == 2 and got["agree"] == 2
    assert got["contested_choices_by_subflow"] == {1: 1, 2: 1}


def test_trace_check_counts_a_wrong_choice() -> None:
    # minrtt must take the lower srtt, bdp the larger BDP: the swapped choices disagree
    got = report().check_trace([dec("mpv_minrtt", 2, SF1, SF2), dec("mpv_bdp", 1, SF1, SF2)])
    assert got["agree"] == 0


def test_trace_check_skips_ineligible_and_backup() -> None:
    sf1_full = "sf1=20000,20000,10,1448,10,0,2500,0,0"   # cwnd full: not eligible
    sf1_backup = "sf1=20000,20000,10,1448,3,0,2500,1,1"
    got = report().check_trace([dec("mpv_minrtt", 2, sf1_full, SF2), dec("mpv_minrtt", 2, sf1_backup, SF2),
                                dec("mpv_minrtt", -1, sf1_full)])
    assert got["agree"] == 3 and got["no_eligible"] == 1


def test_trace_check_flags_eligible_with_a_full_window() -> None:
    # logged eligible although in-flight x mss + unsent >= cwnd x mss: the kernel's test was wrong
    bad = "sf1=20000,20000,10,1448,9,1448,2500,1,0"
    got = report().check_trace([dec("mpv_minrtt", 1, bad, SF2)])
    assert got["eligible_but_cwnd_full"] == 1


# The prototype of a `kernel: uml` run (bench/uml/scenario.py, docs/kernel-uml.md): the mapping from a
# scenario to the guest's case line, and the refusal of what the guest cannot reproduce.

def scenario_mod() -> ModuleType:
    return _load("scenario")


def test_the_shipped_prototype_scenario_maps_to_its_case_line() -> None:
    line, resolved = scenario_mod().case_line(checkout_root() / "scenarios" / "minrtt-bulk-3x3.yaml",
                                              "delayline", True)
    # name, scheduler, Mbit/s per path, one-way delays, backend, seconds, trace, queue limit B, burst B
    assert line == "scenario mpv_minrtt 3,3 10 40 delayline 10 1 100000 3028"
    assert resolved["transport"]["scheduler"] == "minrtt"


BASE = """name: uml-case
seed: 1
paths:
  a:
    down: {rate: 3mbit, buffer: 50KB, delay: 10ms}
    up: {delay: 10ms}
  b:
    down: {rate: 5mbit, buffer: 50KB, burst: 3028B, delay: 40ms}
    up: {delay: 40ms}
transport: {cc: cubic, scheduler: bdp}
workload: {kind: bulk, duration: 6s}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_a_scenario_maps_rates_delays_queue_and_scheduler(tmp_path: Path) -> None:
    line, _ = scenario_mod().case_line(write(tmp_path, BASE), "netem", False)
    assert line == "scenario mpv_bdp 3,5 10 40 netem 6 0 50000 3028"


@pytest.mark.parametrize(("change", "field"), [
    (("scheduler: bdp", "scheduler: ecf"), "transport.scheduler"),
    (("cc: cubic", "cc: bbr"), "transport.cc"),
    (("duration: 6s", "size: 1MB"), "workload"),
    (("up: {delay: 40ms}", "up: {delay: 20ms}"), "paths.b.up.delay"),
    (("delay: 40ms}\n    up", "delay: 40ms, loss: 1%}\n    up"), "paths.b.down.loss"),
    (("buffer: 50KB, burst", "buffer: 60KB, burst"), "paths.*.down.buffer"),
    (("rate: 3mbit", "rate: 2.5mbit"), "paths.a.down.rate"),
    (("up: {delay: 10ms}", "up: {delay: 10ms, rate: 1mbit}"), "paths.a.up.rate"),
])
def test_what_the_guest_cannot_reproduce_is_refused_naming_the_field(tmp_path: Path, change: tuple[str, str],
                                                                   field: str) -> None:
    mod = scenario_mod()
    old, new = change
    assert old in BASE
    with pytest.raises(mod.NotInGuest, match=re.escape(field)):
        mod.case_line(write(tmp_path, BASE.replace(old, new, 1)), "netem", False)


def test_the_report_reads_ten_column_cases_and_the_joins(tmp_path: Path) -> None:
    # a case whose server accepted no join is visible as joins_accepted 0 (the probe's first fault)
    (tmp_path / "c.client1.json").write_text('{"bytes": 3750000, "seconds": 10.0, "first_byte_s": 0.1}')
    (tmp_path / "c.dmesg.txt").write_text(
        "[ 1.0] MPTCP: mpvlab: conn tok=abcd0001 sched=mpv_minrtt calls=400 data_decisions=300 switches=0 "
        "bytes=0,3750000,0,0\n")
    for i in (1, 2):
        (tmp_path / f"c.rtt{i}.txt").write_text("20.1\n20.2\n")
    (tmp_path / "c.cpu.txt").write_text("0 0 100 900")
    (tmp_path / "c.nstat_s.txt").write_text("TcpOutSegs 2600 0.0\nTcpRetransSegs 3 0.0\n")
    (tmp_path / "c.mptcp_s.txt").write_text("MPTcpExtMPJoinAckRx 0 0.0\n")
    got = report().case_summary(tmp_path, "c mpv_minrtt 3 10 10 netem 10 0 50000 3028".split())
    assert got["joins_accepted"] == 0
    assert got["path_mbit"] == [3.0, 0.0] and got["data_decisions"] == 300
