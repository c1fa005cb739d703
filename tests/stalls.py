"""Emulate a contended host for a developer: take CPU time away from everything else in bursts.

CI machines are VMs whose hypervisor deschedules a vCPU for tens of milliseconds at a time
(tests/hostnoise.py). To find which assertions such stalls break, run a test while this takes
each CPU for `--stall-ms` (uniform between half and all of it) at random moments, `--share` of
the time in all:

    .venv/bin/python -m tests.stalls --share 0.1 --stall-ms 80 -- .venv/bin/pytest -q tests/test_x.py

Each CPU gets a pinned SCHED_FIFO busy loop, which preempts every ordinary task (the player,
Apache, the delay lines when not real-time) but not interrupts and softirqs, so it emulates the
userspace side of a host stall only, and the guest does not count it as steal.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time


def _stall_loop(cpu: int, share: float, stall_ms: float, seed: int) -> None:
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(80))
    rng = random.Random(seed)
    mean_stall = 0.75 * stall_ms / 1e3
    mean_gap = mean_stall * (1 - share) / share
    while True:
        time.sleep(rng.expovariate(1 / mean_gap))
        end = time.monotonic() + rng.uniform(stall_ms / 2e3, stall_ms / 1e3)
        while time.monotonic() < end:
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--share", type=float, default=0.1, help="fraction of each CPU taken (0..0.5)")
    ap.add_argument("--stall-ms", type=float, default=80.0, help="longest single stall")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if not 0 < a.share <= 0.5 or a.stall_ms <= 0:
        ap.error("--share must be in (0, 0.5] and --stall-ms > 0")
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the command to run after --")
    children = []
    for cpu in sorted(os.sched_getaffinity(0)):
        pid = os.fork()
        if pid == 0:
            try:
                _stall_loop(cpu, a.share, a.stall_ms, a.seed * 1000 + cpu)
            finally:
                os._exit(0)
        children.append(pid)
    try:
        return subprocess.call(cmd)
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(main())
