"""How many bytes a "256-packet" bottleneck queue holds when the router's ingress merges packets (GRO),
for each way the product can count the queue (`buffer_counting` of a link direction).

The SABRE study (docs/studies.md §4) reports queuing delays above what 256 full-size packets hold at
6 Mbit/s (256 × 1514 B × 8 / 6 Mbit/s = 517 ms). A Linux qdisc that counts packets counts skbs, and
with GRO on the router's ingress one skb carries many wire packets: the same limit then holds more
bytes. This bench builds the queue through the product's own field and link step
(mpvlab/testbed/gro_queue.py: LinkDirection → links.emulator.apply_direction, on four namespaces with
the dual-path topology's edge hop, so TCP Small Queues does not hold the sender back):

    a (sender: TSO/GSO/GRO off, so every packet it sends is one wire frame) → e (edge)
      → r0 [router ingress: GRO as the counting sets it] r [IFB: the 6 Mbit/s tbf, 256 packets] → r1 → b

- `bytes`: tbf `limit` 256 × 1514 B (the default; ingress GRO as hosts.offloads false leaves it: off);
- `bytes` with the ingress GRO forced on (not a scenario setting: what a byte limit does on a merging
  ingress);
- `wire_packets`: tbf + `pfifo limit 256`, ingress GRO off;
- `merged_packets`: tbf (burst 68 130 B) + `pfifo limit 256`, ingress GRO on.

One CUBIC bulk flow (iperf3, no added delay) keeps the queue full; `tc -s -j qdisc show` of the
shaper is read every 20 ms. Per choice the bench prints the configured limit and byte bound beside the
largest backlog seen (bytes and skbs), the bytes per skb, its drain time at the rate and the drops. A
run whose queue never dropped a packet never reached its limit: its backlog is what the flow's window
put there, a lower bound of what the limit holds (the line says so).

    sudo .venv/bin/python bench/bench_gro_queue.py [--seconds 40] [--packets 256]
"""

from __future__ import annotations

import argparse

from mpvlab.links.spec import LinkDirection
from mpvlab.testbed import gro_queue

RATE = 6_000_000
FRAME = 1514


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    # 40 s: with GRO the flow needs ~30 s of window growth before the skb limit overflows (measured)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--packets", type=int, default=256)
    a = ap.parse_args()
    n = a.packets
    print(f"configured: {n} packets = {n * FRAME} B of full frames = {n * FRAME * 8 / RATE * 1e3:.1f} ms at "
          f"{RATE / 1e6:g} Mbit/s; {a.seconds:g} s of one CUBIC flow per row")
    rows = [("bytes", None), ("bytes", True), ("wire_packets", None), ("merged_packets", None)]
    with gro_queue.GroBed() as gb:
        for counting, force_gro in rows:
            spec = LinkDirection.model_validate({"rate": f"{RATE}bit", "buffer": f"{n}pkt",
                                                 "buffer_counting": counting})
            run = gro_queue.measure(gb, spec, a.seconds, force_gro=force_gro)
            print(("(GRO forced on) " if force_gro else "") + run.text(RATE), flush=True)


if __name__ == "__main__":
    main()
