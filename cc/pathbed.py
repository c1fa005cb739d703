"""The cc/ dumbbell (cc/testbed.py) with a propagation delay: BBR's model needs an RTT.

    <prefix>-a (sender) --- <prefix>-r (router: tbf towards b; delay line on the ACK path) --- <prefix>-b

The bottleneck is the tbf on the router's egress towards the receiver, as in Dumbbell. The RTT is
added on the reverse path (receiver → sender) by the platform's C delay line (links/delayline)
behind an NFQUEUE rule in the router's FORWARD chain: delaying ACKs instead of data keeps the
delay line out of the bottleneck queue (so the qdisc's backlog is the standing queue, nothing
else) and needs one NFQUEUE slot per ACK only. The queue number is per network namespace, so
runs in other namespaces cannot collide. Everything is removed by close(), also on failure.
"""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cc.testbed import Dumbbell
from core import proc as proc_mod
from links.schedule import Schedule

REPO = Path(__file__).resolve().parent.parent
DELAYLINE = REPO / "links" / "delayline" / "build" / "mpvlab-delayline"
QUEUE_NUM = 7


@dataclass
class DelayDumbbell(Dumbbell):
    rtt_ms: float = 20.0
    workdir: Path = Path("/tmp")
    _delay_proc: subprocess.Popen | None = None

    def open(self) -> "DelayDumbbell":
        super().open()
        try:
            if self.rtt_ms > 0:
                self._start_delay()
        except BaseException:
            self.close()
            raise
        return self

    def _start_delay(self) -> None:
        if not DELAYLINE.exists():
            raise RuntimeError(f"{DELAYLINE} missing: run ./setup.sh")
        self.workdir.mkdir(parents=True, exist_ok=True)
        sched = Schedule.constant(int(self.rtt_ms * 1e6)).to_file(self.workdir / f"{self.prefix}.schedule")
        ready = self.workdir / f"{self.prefix}.delay.ready"
        ready.unlink(missing_ok=True)
        log = self.workdir / f"{self.prefix}.delay.log"
        # ACKs are at most one per data packet: 100 Mbit/s is ~8.3 kpkt/s; x RTT x 4 headroom.
        maxlen = max(4096, int(8300 * self.rtt_ms / 1000 * 4))
        argv = ["ip", "netns", "exec", self.ns_r, str(DELAYLINE), "--queue", str(QUEUE_NUM),
                "--schedule", str(sched), "--t0-ns", str(time.monotonic_ns()), "--maxlen", str(maxlen),
                "--ready-file", str(ready), "--stats", str(self.workdir / f"{self.prefix}.delay.json")]
        with log.open("wb") as f:
            self._delay_proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        proc_mod.wait_ready(self._delay_proc, ready, "delay line", 5.0, log=log, error=RuntimeError)
        p = self.prefix
        self.ns(self.ns_r, "iptables", "-w", "-A", "FORWARD", "-i", f"{p}r1", "-o", f"{p}r0",
                "-j", "NFQUEUE", "--queue-num", str(QUEUE_NUM))

    def delay_alive(self) -> bool:
        return self._delay_proc is None or self._delay_proc.poll() is None

    def close(self) -> None:
        if self._delay_proc is not None:
            proc_mod.stop_child(self._delay_proc, grace=5)
            self._delay_proc = None
        super().close()  # deleting the namespaces removes the iptables rule with them

    def __enter__(self) -> "DelayDumbbell":
        return self.open()

    @property
    def bdp_bytes(self) -> float:
        """Bottleneck rate x RTT in wire bytes (what the tbf queue limit is measured in)."""
        return self.rate_bit / 8 * self.rtt_ms / 1000
