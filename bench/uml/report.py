#!/usr/bin/env python3
"""Summarise a run of bench/uml/run.sh (issue 50 probe): one line per case, beside the
configured values, and the per-decision check of the mpvlab schedulers' trace.

    python3 bench/uml/report.py OUT_DIR

Per case: total and per-path goodput (client bytes / client seconds; per path: bytes the kernel
handed to each subflow / the same seconds), RTT per path p50/p99 against the configured 2 x delay
(ICMP, idle links), guest CPU per data segment (busy time / server TcpOutSegs), the kernel's
data-carrying decisions and path switches (consecutive data-carrying decisions on different
subflows). With TRACE 1, every logged decision is recomputed from the inputs it logged:
minrtt = lowest srtt, bdp = largest bdp, among subflows logged eligible and non-backup (first wins
a tie, as in the kernel loop); and every subflow logged eligible must have
in-flight x mss + unsent < cwnd x mss.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

USER_HZ = 100
CONN_RE = re.compile(r"mpvlab: conn tok=(\w+) sched=(\S+) calls=(\d+) data_decisions=(\d+) "
                     r"switches=(\d+) bytes=(\d+),(\d+),(\d+),(\d+)")
DEC_RE = re.compile(r"mpvlab: dec (\S+) t=(\d+) tok=(\w+) choice=(-?\d+)((?: sf\S+)*)")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[k]


def nstat(path: Path, name: str) -> int:
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == name:
            return int(parts[1])
    return 0


def check_trace(lines: list[str]) -> dict[str, object]:
    """Recompute every traced decision from its logged inputs."""
    n = agree = none = cwnd_violations = 0
    choices: list[int] = []
    contested: list[int] = []  # the choice when more than one subflow was eligible
    for line in lines:
        m = DEC_RE.search(line)
        if not m:
            continue
        name, choice = m.group(1), int(m.group(4))
        subs = []
        for field in m.group(5).split():
            sid, vals = field[2:].split("=")
            srtt, minrtt, cwnd, mss, infl, unsent, bdp, elig, bkp = (int(v) for v in vals.split(","))
            subs.append((int(sid), srtt, bdp, bool(elig), bool(bkp), cwnd, mss, infl, unsent))
        for s in subs:
            if s[3] and not s[7] * s[6] + s[8] < s[5] * s[6]:
                cwnd_violations += 1
        cand = [s for s in subs if s[3] and not s[4]]
        want = -1
        for s in cand:
            if want == -1:
                want, best = s[0], s
            elif (name == "mpv_minrtt" and s[1] < best[1]) or (name == "mpv_bdp" and s[2] > best[2]):
                want, best = s[0], s
        n += 1
        agree += want == choice
        none += choice == -1
        if choice >= 0:
            choices.append(choice)
        if len(cand) > 1:
            contested.append(choice)
    share = {sid: choices.count(sid) for sid in sorted(set(choices))}
    return {"decisions_logged": n, "agree": agree, "no_eligible": none,
            "eligible_but_cwnd_full": cwnd_violations, "choices_by_subflow": share,
            "contested_choices_by_subflow": {sid: contested.count(sid)
                                             for sid in sorted(set(contested))}}


def xfer_window(out: Path, name: str) -> tuple[float, float] | None:
    """Wall-clock start and end of the case's transfer, as the guest wrote them."""
    marks: dict[str, float] = {}
    path = out / "progress.txt"
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split()
        if len(parts) == 3 and parts[0] == name:
            marks[parts[1]] = float(parts[2])
    if "xfer_start" in marks and "xfer_end" in marks:
        return marks["xfer_start"], marks["xfer_end"]
    return None


def host_cpu_s(out: Path, start: float, end: float) -> float | None:
    """The UML processes' host CPU seconds between start and end (run.sh's 0.5 s samples)."""
    path = out / "hostcpu.txt"
    if not path.exists():
        return None
    rows = [(float(a), int(b)) for a, b in (line.split() for line in path.read_text().splitlines()
                                           if len(line.split()) == 2)]
    before = [r for r in rows if r[0] <= start]
    after = [r for r in rows if r[0] >= end]
    if not before or not after:
        return None
    return (after[0][1] - before[-1][1]) / USER_HZ


def case_summary(out: Path, parts: list[str]) -> dict[str, object]:
    name, sched, rate, d1, d2, backend, secs, trace = parts[:8]
    res: dict[str, object] = {"case": name, "sched": sched, "rate_mbit": rate,
                              "delay_ms": [float(d1), float(d2)], "backend": backend}
    clients = []
    for i in (1, 2):
        try:
            clients.append(json.loads((out / f"{name}.client{i}.json").read_text()))
        except (OSError, ValueError):
            pass
    if not clients:
        res["error"] = "no client result"
        return res
    secs_c = clients[0]["seconds"]
    rates = [c["bytes"] * 8 / c["seconds"] / 1e6 for c in clients]
    res["total_mbit"] = round(sum(rates), 3)
    if len(clients) == 2:  # plain TCP, one connection per path
        res["path_mbit"] = [round(r, 3) for r in rates]
    dmesg = (out / f"{name}.dmesg.txt").read_text().splitlines()
    conns = [CONN_RE.search(x) for x in dmesg]
    conns = [c for c in conns if c and c.group(2) == sched and int(c.group(4)) > 100]
    if conns:
        c = max(conns, key=lambda m: int(m.group(4)))
        res["path_mbit"] = [round(int(c.group(7 + i)) * 8 / secs_c / 1e6, 3) for i in range(2)]
        res["data_decisions"] = int(c.group(4))
        res["switches"] = int(c.group(5))
        res["sched_calls"] = int(c.group(3))
    for i in (1, 2):
        rtts = [float(x) for x in (out / f"{name}.rtt{i}.txt").read_text().split()]
        conf = 2 * float(parts[2 + i])
        res[f"rtt{i}_ms"] = {"configured": conf, "p50": pct(rtts, 0.5), "p99": pct(rtts, 0.99),
                             "n": len(rtts)}
    b = (out / f"{name}.cpu.txt").read_text().split()
    busy = (float(b[2]) - float(b[0])) / USER_HZ
    idle = (float(b[3]) - float(b[1])) / USER_HZ
    segs = nstat(out / f"{name}.nstat_s.txt", "TcpOutSegs")
    res["guest_cpu_busy_s"] = round(busy, 2)
    res["guest_cpu_idle_s"] = round(idle, 2)
    res["server_segs"] = segs
    res["retrans"] = nstat(out / f"{name}.nstat_s.txt", "TcpRetransSegs")
    res["cpu_us_per_data_seg"] = round(busy / segs * 1e6, 1) if segs else None
    window = xfer_window(out, name)
    host_cpu = host_cpu_s(out, *window) if window else None
    if host_cpu is not None:
        res["host_cpu_s"] = round(host_cpu, 2)
        res["host_cpu_share"] = round(host_cpu / (window[1] - window[0]), 2) if window else None
        res["host_cpu_us_per_data_seg"] = round(host_cpu / segs * 1e6, 1) if segs else None
    # MPTCP joins the server accepted: 0 means one subflow carried everything (guest.sh writes the
    # counters; a kernel without MPTCP has none)
    joins = out / f"{name}.mptcp_s.txt"
    if joins.exists():
        res["joins_accepted"] = nstat(joins, "MPTcpExtMPJoinAckRx")
    if trace == "1":
        res["trace_check"] = check_trace(dmesg)
    return res


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1])
    for line in (out / "cases.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) in (8, 10) and not line.startswith("#"):
            print(json.dumps(case_summary(out, parts)))
    host = out / "host.txt"
    if host.exists():
        print(host.read_text().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
