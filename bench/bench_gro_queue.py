"""How many bytes a "256-packet" bottleneck queue holds when the router's ingress merges packets (GRO).

The SABRE study (docs/studies.md §4) reports queuing delays above what 256 full-size packets hold at
6 Mbit/s (256 × 1514 B × 8 / 6 Mbit/s = 517 ms). A Linux qdisc that counts packets counts skbs, and
with GRO on the router's ingress one skb carries many wire packets: the same limit then holds more
bytes. This bench measures it on the three-namespace dumbbell (mpvlab/testbed/dumbbell.py):

    a (sender: TSO/GSO/GRO off, so every packet it sends is one wire frame)
      → r0 [router ingress: GRO on or off] r → r1 [egress: the 6 Mbit/s bottleneck, 256 packets] → b

One CUBIC bulk flow (iperf3, no added delay) keeps the queue full; `tc -s -j qdisc show` on r1 is
read every 20 ms and the bench prints, per queue and GRO setting, the largest backlog seen (bytes and
skbs), its drain time at the rate and the bytes per skb, beside the configured 256 packets:

- `tbf64k+pfifo`: tbf 6 Mbit/s with a `pfifo limit 256` child (a queue counting skbs) and a burst of
  64 KiB + 1514 B, so a merged skb fits tbf's max_size and is queued whole (counted once);
- `tbf3k+pfifo`: the same with a burst of 2 × 1514 B: tbf splits a merged skb larger than its max_size
  back into wire-sized segments before queueing it (tbf_segment), so each counts;
- `mpvlab`: what a scenario's `buffer: 256pkt` makes (tbf `limit` 256 × 1514 B in bytes, the platform's
  default burst): the byte count holds whatever the ingress does.

A run whose queue never dropped a packet never reached its limit: its backlog is what the flow's window
put there, a lower bound of what the limit holds (the bench says so per row).

    sudo .venv/bin/python bench/bench_gro_queue.py [--seconds 40]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from mpvlab.core.netns import Netns
from mpvlab.testbed.dumbbell import Dumbbell

RATE = 6_000_000
PACKETS = 256
FRAME = 1514
SAMPLE_S = 0.02


def _queues(dev: str) -> dict[str, list[list[str]]]:
    """tc commands (after `tc qdisc ... dev DEV`) per queue variant."""
    return {
        "tbf64k+pfifo": [["replace", "dev", dev, "root", "handle", "1:", "tbf", "rate", f"{RATE}bit",
                          "burst", str(65536 + FRAME), "limit", str(PACKETS * FRAME)],
                         ["add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo", "limit", str(PACKETS)]],
        "tbf3k+pfifo": [["replace", "dev", dev, "root", "handle", "1:", "tbf", "rate", f"{RATE}bit",
                         "burst", str(2 * FRAME), "limit", str(PACKETS * FRAME)],
                        ["add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo", "limit", str(PACKETS)]],
        "mpvlab": [["replace", "dev", dev, "root", "tbf", "rate", f"{RATE}bit", "burst", str(FRAME * 2),
                    "limit", str(PACKETS * FRAME)]],
    }


def _root_stats(ns: Netns, dev: str) -> tuple[int, int, int]:
    """(backlog bytes, backlog skbs, drops) of the root qdisc (its counters include its child's)."""
    q = [x for x in json.loads(ns.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev]).stdout)
         if x.get("root")][0]
    return int(q.get("backlog", 0)), int(q.get("qlen", 0)), int(q.get("drops", 0))


def measure(db: Dumbbell, variant: str, gro: bool, seconds: float) -> dict[str, Any]:
    r = Netns(db.ns_r)
    dev_in, dev_out = f"{db.prefix}r0", f"{db.prefix}r1"
    r.run(["ethtool", "-K", dev_in, "gro", "on" if gro else "off"])
    r.run(["tc", "qdisc", "del", "dev", dev_out, "root"], check=False)
    for cmd in _queues(dev_out)[variant]:
        r.run(["tc", "qdisc", *cmd])
    feats = r.run(["ethtool", "-k", dev_in]).stdout
    gro_state = next((ln.split(":", 1)[1].strip() for ln in feats.splitlines()
                      if ln.strip().startswith("generic-receive-offload:")), "?")
    samples: list[tuple[int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            b, n, _ = _root_stats(r, dev_out)
            samples.append((b, n))
            time.sleep(SAMPLE_S)

    t = threading.Thread(target=sample)
    t.start()
    try:
        rep = db.iperf(seconds, omit=0)
    finally:
        stop.set()
        t.join()
    _, _, drops = _root_stats(r, dev_out)
    top_b = max(samples, key=lambda x: x[0])
    top_n = max(n for _, n in samples)
    return {"variant": variant, "gro": gro, "gro_state": gro_state, "samples": len(samples),
            "max_backlog_bytes": top_b[0], "skbs_then": top_b[1], "max_backlog_skbs": top_n,
            "drain_ms": round(top_b[0] * 8 / RATE * 1e3, 1),
            "bytes_per_skb": round(top_b[0] / top_b[1]) if top_b[1] else None, "drops": drops,
            "goodput_bps": round(rep["end"]["sum_received"]["bits_per_second"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # 40 s: with GRO the flow needs ~30 s of window growth before the skb limit overflows (measured)
    ap.add_argument("--seconds", type=float, default=40.0)
    a = ap.parse_args()
    print(f"configured: {PACKETS} packets = {PACKETS * FRAME} B of full frames = "
          f"{PACKETS * FRAME * 8 / RATE * 1e3:.1f} ms at {RATE / 1e6:g} Mbit/s")
    with Dumbbell(prefix="gq", rate_bit=RATE, offloads=False) as db:
        for variant in ("tbf64k+pfifo", "tbf3k+pfifo", "mpvlab"):
            for gro in (False, True):
                m = measure(db, variant, gro, a.seconds)
                print(f"{variant:10} GRO {'on ' if gro else 'off'} (ethtool: {m['gro_state']}): max backlog "
                      f"{m['max_backlog_bytes']:>9,} B in {m['skbs_then']:>3} skbs "
                      f"({m['bytes_per_skb']} B/skb; max skbs {m['max_backlog_skbs']}), drain {m['drain_ms']} ms, "
                      f"drops {m['drops']}{'' if m['drops'] else ' (limit never reached: a lower bound)'}, goodput {m['goodput_bps'] / 1e6:.2f} Mbit/s, {m['samples']} samples")


if __name__ == "__main__":
    main()
