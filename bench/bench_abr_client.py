#!/usr/bin/env python3
"""SABRE's paced socket reads (mpvlab/player/gstreamer/dash_client.py, --fetcher own --abr sabre): the read rate per
1 s window against the target of the mode it was in (refill lambda x R_highest, backoff delta x R),
over a tbf link, with the mode changes and the pipelining depth printed beside.

A window is 1 s of consecutive SABRE checks (every 200 ms) with the same mode and target. Only a
window in which the socket held data at every check (occupancy > 0: the reader never waited for
the network) measures the pacer; the others are marked "network-limited" (refill on a link slower
than lambda x R_highest) or "buffer-full" (the appsrc held the reader back). Namespaces ``hab<pid>``.
Not a test: prints the figures beside the configured values.

    .venv/bin/python bench/bench_abr_client.py [--link-mbps 4] [--duration 40] [--rcvbuf 131072]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
from mpvlab.content import ensure_dash  # noqa: E402
from mpvlab.testbed.player import Apache, Net, finish_player, start_player  # noqa: E402


def windows(checks: list[dict], span_s: float = 1.0) -> list[dict]:
    """1 s windows of read periods under one target. A check's bytes_read/dt_s cover the period
    BEFORE it, read under the target set at the previous check (its own mode/target apply to the
    period after it), so each period is paired with the previous check's target."""
    out, cur = [], []
    for prev, c in zip(checks, checks[1:]):
        period = {"t": prev["t"], "mode": prev["mode"], "target_bps": prev["target_bps"],
                  "bytes": c["bytes_read"], "dt": c["dt_s"], "occ": c["occupancy"]}
        if cur and (period["mode"] != cur[0]["mode"] or period["target_bps"] != cur[0]["target_bps"]):
            cur = []
        cur.append(period)
        dur = sum(x["dt"] for x in cur)
        if dur >= span_s:
            out.append({"t": cur[0]["t"], "mode": cur[0]["mode"], "target_bps": cur[0]["target_bps"],
                        "rate_bps": sum(x["bytes"] for x in cur) * 8 / dur, "dur": dur,
                        "min_occ": min(x["occ"] for x in cur)})
            cur = []
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--link-mbps", type=float, default=4.0)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--rcvbuf", type=int, default=131072)
    ap.add_argument("--buffer-ms", type=int, default=10000)
    a = ap.parse_args()
    cache = Path("/tmp/hab-content-cache")
    cache.mkdir(parents=True, exist_ok=True)
    os.chmod(cache, 0o755)
    info = ensure_dash(cache, a.duration, [500_000, 1_000_000, 2_000_000], 2.0, 640, 360, 30)
    n = os.getpid() % 100000
    net = Net(srv=f"hab{n}s", cli=f"hab{n}c", srv_if=f"hab{n}s", cli_if=f"hab{n}c", srv_ip="10.76.0.1",
              cli_ip="10.76.0.2", rmem=(4096, 131072, 4 * 1024 * 1024), wmem=(4096, 16384, 65536))
    tmp = Path(f"/tmp/hab-bench-{n}")
    tmp.mkdir(parents=True, exist_ok=True)
    net.up()
    apache = None
    try:
        apache = Apache(net, cache, tmp / "apache")
        net.set_rate(int(a.link_mbps * 1e6))
        url = apache.url(f"{info.dir.name}/{info.mpd.name}")
        proc = start_player(net, url, tmp / "sabre", time.monotonic_ns(), "--fetcher", "own", "--abr", "sabre",
                            "--rcvbuf-bytes", str(a.rcvbuf), "--buffer-ms", str(a.buffer_ms))
        r = finish_player(proc, tmp / "sabre", timeout=a.duration * 3 + 30)
    finally:
        if apache is not None:
            apache.stop()
        net.down()
    s = r.summary
    if r.code != 0:
        print(json.dumps({k: s.get(k) for k in ("status", "reason", "dash_error")}))
        return 1
    p = s["abr"]["params"]
    rates = [x["bitrate_bps"] for x in s["representations"]]
    print(f"link tbf {a.link_mbps:g} Mbit/s, levels {[r_ / 1e6 for r_ in rates]} Mbit/s, rcvbuf {a.rcvbuf} B "
          f"(kernel {s['transport']['rcvbuf_effective']}), MPTCP socket: {s['transport']['so_protocol'] == 262}; "
          f"lambda {p['lambda']}, delta {p['delta']}, check {p['check_period_s']} s, "
          f"threshold {p['occupancy_threshold']}")
    print(f"played: {s['status']}, startup {s['startup_delay_s']:.3f} s, underflows {s['underflows']}, "
          f"discards {s['picture_discards']}, quality_avg {s['quality_avg']:.2f}, switches {s['bitrate_switches']}")
    print("mode changes: " + ", ".join(f"{c['t']:.1f}s->{c['mode']} (occ {c['occupancy']:.2f}, buf "
                                       f"{c['buffer_s']:.1f}s)" for c in s["sabre_checks"] if c["changed"]))
    print("depth per request: " + " ".join(str(d["outstanding"]) for d in s["abr_decisions"]))
    # SABRE's pipelining: 1 + ceil(rcvbuf x 8 / (r x s)) for the level current at each request
    seg_s = s["segment_s"]
    formula = [1 + math.ceil(a.rcvbuf * 8 / (r_ * seg_s)) for r_ in rates]
    at_formula = sum(d["outstanding"] == formula[d["level_before"]] for d in s["abr_decisions"])
    above = sum(d["outstanding"] > formula[d["level_before"]] for d in s["abr_decisions"])
    print(f"depth formula per level (rcvbuf {a.rcvbuf} B, {seg_s:g} s segments): {formula}; requests that "
          f"filled the pipeline to it: {at_formula} of {len(s['abr_decisions'])}, above it: {above}")
    # Each mode change against the rule (mpvlab/player/gstreamer/abr/sabre.py): to backoff needs O >= threshold and
    # B >= backoff_above_s; to refill needs O < threshold or B < refill_below_s.
    changes = [c for c in s["sabre_checks"] if c["changed"]]
    thr, buf_s = p["occupancy_threshold"], a.buffer_ms / 1000
    refill_below = p["refill_below_s"] if p.get("refill_below_s") is not None else buf_s / 2
    backoff_above = p["backoff_above_s"] if p.get("backoff_above_s") is not None else buf_s - seg_s
    ok = sum((c["occupancy"] >= thr and c["buffer_s"] >= backoff_above) if c["mode"] == "backoff"
             else (c["occupancy"] < thr or c["buffer_s"] < refill_below) for c in changes)
    print(f"mode changes: {len(changes)}, by the 75 % rule (threshold {thr}, backoff at B >= {backoff_above:g} s, "
          f"refill below {refill_below:g} s or O < threshold): {ok} of {len(changes)}")
    print(f"{'t (s)':>7} {'mode':>8} {'target':>9} {'read':>9} {'error':>8}  note")
    errs = {"refill": [], "backoff": []}
    for w in windows(s["sabre_checks"]):
        err = (w["rate_bps"] - w["target_bps"]) / w["target_bps"]
        note = ""
        if w["min_occ"] <= 0:
            note = "network-limited (socket ran dry)"
        elif w["min_occ"] >= 0.999:
            note = "socket full"
        if not note or note == "socket full":
            errs[w["mode"]].append(err)
        print(f"{w['t']:7.1f} {w['mode']:>8} {w['target_bps'] / 1e6:8.3f}M {w['rate_bps'] / 1e6:8.3f}M "
              f"{err * 100:+7.2f}%  {note}")
    for m, e in errs.items():
        if e:
            print(f"{m}: {len(e)} paced windows, |error| max {max(abs(x) for x in e) * 100:.2f} %, "
                  f"mean {sum(e) / len(e) * 100:+.2f} % (spec: within 5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
