"""bench/uml (issue 50's User-Mode Linux probe): never run here (it builds a kernel), so only what can
be checked without it: the scripts parse, and the trace checker that judges the in-kernel schedulers'
decisions finds a decision that contradicts the scheduler's definition."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from types import ModuleType

import pytest
from mpvlab.core.paths import checkout_root

UML = checkout_root() / "bench" / "uml"


def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("uml_report", UML / "report.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
