#!/usr/bin/env python3
"""What bounds the delay lines' worst release lateness (issue 16): a SCHED_FIFO thread at priority 90
— above every delay line (50), so no run can hold it up — sleeps to absolute 1 ms deadlines for
`--seconds`, alone or beside a load you give (e.g. a sweep in another terminal). It prints the
wake-up lateness distribution beside the 2 ms goal for a delay line's maximum, the hypervisor's steal
meanwhile, and the kernel's preemption model (this kernel boots with "Dynamic Preempt: none": a
woken real-time task waits until the task on its CPU leaves the kernel).

    .venv/bin/python bench/bench_rt_wakeup.py [--seconds 20] [--prio 90]   (root)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def steal_ticks() -> int:
    return int(Path("/proc/stat").read_text().split("\n", 1)[0].split()[8])


def preempt_model() -> str:
    cp = subprocess.run(["dmesg"], capture_output=True, text=True)
    m = re.search(r"Dynamic Preempt: (\w+)", cp.stdout)
    cmd = re.search(r"\bpreempt=(\w+)", Path("/proc/cmdline").read_text())
    return (m.group(1) if m else "unknown (dmesg)") + (f", cmdline preempt={cmd.group(1)}" if cmd else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--prio", type=int, default=90)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mpvlab-rtwake-") as tmp:
        exe = Path(tmp) / "rt_wakeup"
        subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "rt" / "rt_wakeup.c")], check=True)
        s0 = steal_ticks()
        cp = subprocess.run([str(exe), str(a.prio), str(a.seconds * 1000)], capture_output=True, text=True)
        s1 = steal_ticks()
    if cp.returncode != 0:
        print(cp.stderr.strip(), file=sys.stderr)
        return 1
    print(f"kernel preemption: {preempt_model()}")
    print(cp.stdout.strip() + "   (goal for a delay line's max: 2 ms)")
    print(f"steal: {s1 - s0} ticks of {a.seconds * 100} per CPU in {a.seconds} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
