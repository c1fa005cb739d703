"""The emulator's own fidelity check: is the emulated network the one the scenario configured?

Two parts, both measured by the kernel or the emulator itself, never by a userspace stamp:
  before the run — a short check (mpvlab/runner/precheck.py): each downlink tbf's dequeue rate while it is
    kept backlogged (qdisc counters), and kernel-stamped ICMP RTTs compared per sample with the
    schedules at that sample's send time;
  the whole run  — judge_run, after the delay lines have stopped: each delay line's release lateness
    (actual − scheduled, every packet of the run) against a bound, its kernel/local drop counters,
    the delays it applied (step log) against the schedule, and each tbf's dequeue rate during the
    playback window whenever it had a backlog (collectors/qdiscstat data).
Every comparison is with what the configuration allows: a backlogged token bucket sends at exactly its
rate whatever TCP, the receive window or the BDP would let a probe reach, so a warning means the
emulator is off (or, named beside it, that the hypervisor stole the CPU time to keep it on).
The configured-vs-achieved table goes into provenance.json (`fidelity`) and the summary.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpvlab.core.hoststeal import StealMeter, StealWindow
from mpvlab.links.schedule import Schedule
from mpvlab.runner import blast, precheck
from mpvlab.input.scenario import Scenario
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.network import FidelityRow

GOODPUT_FACTOR = 1448 / 1514   # TCP payload per full frame (physical runs' probes use it)
# Above this share of CPU time taken by the hypervisor during a check, a fidelity warning names it:
# such a stall alone can explain a shortfall of that size (mpvlab/core/hoststeal.py).
HOST_STEAL_NOTE = 0.02
# Whole-run bounds on the delay lines' release lateness (actual − scheduled release, per packet).
# p99 at half the RTT tolerance keeps both directions of a path within it together; a single packet
# may be later (a softirq or hypervisor stall) but not by more than LATENESS_MAX_US.
LATENESS_MAX_US = 20_000
# A tbf judged on less backlogged time than this gives no rate verdict (too few intervals).
MIN_BACKLOGGED_S = 0.2


@dataclass
class PathSchedules:
    down: Schedule
    up: Schedule


def expected_rtt_ns(t_send_rel: int, sched: PathSchedules) -> int:
    """Expected RTT of a lone packet sent at t_send_rel (physical runs' probes)."""
    up_ns = sched.up.delay_at(t_send_rel)
    return up_ns + sched.down.delay_at(t_send_rel + up_ns)


def run_probes(topo: Any, scenario: Scenario, schedules: dict[str, PathSchedules], t0_ns: int,
               workdir: Path, handles: list[Any] | None = None) -> dict[str, Any]:
    """The pre-run check. `t0_ns` is the t0 the delay lines follow while it runs (it may be moved
    later: links.emulator.set_t0). `handles` (links.emulator.DirectionHandle) name each downlink's
    tbf for the rate check; without them only the RTT is checked."""
    f = scenario.fidelity
    result: dict[str, Any] = {"paths": {}, "warnings": [], "host_steal": {}}
    steal: dict[str, StealWindow] = {}
    shapers = []
    buckets: dict[str, int] = {}
    for h in handles or []:
        if h.plan.direction == "down" and h.plan.shaper_dev is not None and not h.plan.spec.has_impairments:
            # A shared-bottleneck run labels its one path "shared" and probes it as the user's path.
            p = next((p for p in topo.paths if p.name == h.plan.path), topo.paths[0] if len(topo.paths) == 1 else None)
            if p is None:
                continue
            shapers.append((p.name, h.plan.router, topo.server.ns, h.plan.shaper_dev, p.client_addr,
                            int(h.plan.spec.rate)))
            buckets[p.name] = h.plan.spec.effective_burst()
    tail_s = max(max(s.up.max_delay_ns + s.down.max_delay_ns for s in schedules.values()) / 1e9 + 0.3, 0.5)
    # Every shaped direction the echoes cross sets the interval (the handles also cover a shared
    # bottleneck, whose one path is not among the scenario's paths).
    rates = [h.plan.spec.rate for h in handles or []]
    rates += [d.rate for p in topo.paths if p.name in scenario.paths
              for d in (scenario.paths[p.name].down, scenario.paths[p.name].up)]
    interval_ms, count = precheck.rtt_plan(rates)
    # The echoes' program starts up during the rate check and begins when the queues are empty again.
    echoes = precheck.RttCheck(topo.client.ns, [(p.client_addr, p.server_addr, workdir / f"precheck-rtt-{p.name}.csv")
                                                for p in topo.paths], tail_s, interval_ms, count)
    rate: dict[str, dict[str, Any]] = {}
    try:
        if shapers:
            with StealMeter() as m:
                rate = precheck.rate_check(shapers, workdir, f.rate_tolerance)
            steal["rate_check"] = m.window
        with StealMeter() as m:
            echoes.run()
    finally:
        echoes.cancel()
    steal["rtt_check"] = m.window
    result["host_steal"] = {k: w.as_dict() for k, w in steal.items()}
    for p in topo.paths:
        spec = scenario.paths[p.name]
        rtt = precheck.judge_rtt(workdir / f"precheck-rtt-{p.name}.csv", schedules[p.name].up,
                                 schedules[p.name].down, t0_ns, f.rtt_tolerance / 1e6)
        rtt["interval_ms"] = interval_ms
        impaired = spec.down.has_impairments or spec.up.has_impairments
        if impaired:
            # A capacity trace serves packets only at its delivery opportunities (gaps of 100+ ms in
            # recorded LTE traces), and outages and loss models drop probes by design: the RTT is then
            # the schedule plus the trace's service time, which this check does not model
            # (tests/test_capacity.py checks the line against Mahimahi's own model).
            rtt["check"] = "not applicable: capacity, loss model or outages on this path"
        elif not rtt["ok"]:
            result["warnings"].append(
                f"path {p.name}: pre-run RTT error beyond ±{f.rtt_tolerance / 1e6:g} ms (kernel-stamped, "
                f"p1 {rtt.get('error_ms_p1')} ms, p99 {rtt.get('error_ms_p99')} ms, {rtt['samples']} samples)"
                + _host_note(steal.get("rtt_check")))
        expected_loss = 1 - (1 - spec.down.loss) * (1 - spec.up.loss)
        if rtt["lost"] and expected_loss == 0 and not impaired:
            result["warnings"].append(f"path {p.name}: {rtt['lost']} RTT probes lost on a loss-free path")
        r = rate.get(p.name)
        if r is not None and "ratio" in r:
            r["tolerance"] = f.rate_tolerance
        if r is not None and rate_judged(r):
            if abs(r["ratio"] - 1) > f.rate_tolerance:
                result["warnings"].append(
                    f"path {p.name}: pre-run tbf rate {r['achieved_bps'] / 1e6:.3f} Mbit/s while backlogged vs "
                    f"configured {r['configured_bps'] / 1e6:.3f} (ratio {r['ratio']:.3f}, tolerance "
                    f"±{f.rate_tolerance:.0%})" + _host_note(steal.get("rate_check")))
        elif r is not None and "check" not in r:
            r["check"] = unjudged_rate_reason(r, buckets.get(p.name))
        result["paths"][p.name] = {"rtt": rtt, "rate_down": r or {"configured_bps": spec.down.rate,
                                                                   "check": "not measured"}}
    result["ok"] = not result["warnings"]
    return result


def rate_judged(r: dict[str, Any]) -> bool:
    """Whether a backlogged_rate record had enough paced time for a verdict (pre-run and whole-run alike)."""
    return "ratio" in r and r["backlogged_s"] >= MIN_BACKLOGGED_S


def unjudged_rate_reason(r: dict[str, Any], bucket_b: int | None) -> str:
    """Why a pre-run rate check gave no verdict, in the record (it is no warning: the whole-run check
    measures the shaper whenever the run keeps it backlogged). A token bucket deeper than all the check
    sends beyond the rate never queues anything (the BBR-S study's 1 MB bucket at 25 Mbit/s: the check
    sends 219 KB beyond it)."""
    why = f"not judged: {r.get('backlogged_s', 0.0)} s of paced dequeues, {MIN_BACKLOGGED_S} s needed"
    beyond_b = blast.bytes_beyond_rate(int(r["configured_bps"]), float(r.get("held_s", 0.0)))
    if bucket_b is not None and bucket_b >= beyond_b:
        why += (f"; the token bucket ({bucket_b} B) holds all the check sends beyond the rate ({beyond_b} B), so "
                "no queue builds; the whole-run check (fidelity_table) measures the rate while the run keeps it "
                "backlogged")
    return why


def _host_note(w: StealWindow | None) -> str:
    if w is None or w.lost <= HOST_STEAL_NOTE:
        return ""
    return (f"; the host stole {w.lost:.1%} of the CPU time meanwhile, which alone can cost a tbf path that "
            f"share of its rate and delay packets by the length of a stall")


def _step_mismatches(steps_csv: Path, stats: dict[str, Any], sched: Schedule) -> list[str]:
    """The delays the line applied (its step log: the first packet after each change) against the
    schedule at that packet's time. Rows before a t0 move are on the initial t0's clock."""
    try:
        rows = list(csv.DictReader(steps_csv.open()))
    except OSError:
        return []
    n_old = int(stats.get("step_log_rows_before_t0_move", 0))
    t0, t0_init = int(stats.get("t0_ns", 0)), int(stats.get("t0_initial_ns", stats.get("t0_ns", 0)))
    bad = []
    for i, r in enumerate(rows):
        on_old = i < n_old
        # The schedule is a function of time since t0: a row on the initial clock is re-expressed on
        # the run's t0 only for the message; the check uses the clock the line used.
        rel = int(r["t_ns_rel"])
        want_us = sched.delay_at(rel) // 1000
        if int(r["delay_us"]) != want_us:
            t_run = (rel + t0_init - t0) if on_old else rel
            bad.append(f"{int(r['delay_us']) / 1e3:g} ms at t={t_run / 1e9:.3f} s (schedule: {want_us / 1e3:g} ms"
                       f"{', before t0 was set' if on_old else ''})")
    return bad


def _arrival_lateness(label: str, st: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """Lateness from the kernel's arrival stamp (the line's stats `lateness_from_arrival_us`: release −
    target + (read − kernel arrival)) into `entry`, and its warning above LATENESS_MAX_US. The line's
    own lateness starts when it read the packet, so a line that was stopped or starved while packets
    waited in its socket (a host stall) looks on time there and late here. A line whose packets
    carried no stamp (an older build, the kernel not stamping) records null. The warning is returned
    for the caller to add when the read-time lateness is within its bound (otherwise that warning
    names both figures)."""
    arr = st.get("lateness_from_arrival_us")
    stamped, unstamped = st.get("arrival_stamped"), st.get("arrival_unstamped")
    entry["arrival_stamped_packets"] = stamped
    entry["arrival_unstamped_packets"] = unstamped
    if not isinstance(arr, dict) or not arr.get("n"):
        entry["lateness_from_arrival_ms_p99"] = entry["lateness_from_arrival_ms_max"] = None
        return []
    entry["lateness_from_arrival_ms_p99"] = round(arr["p99"] / 1e3, 4)
    entry["lateness_from_arrival_ms_max"] = round(arr["max"] / 1e3, 4)
    entry["read_wait_ms_max"] = round(float(st.get("read_wait_us_max", 0.0)) / 1e3, 4)
    if arr["max"] > LATENESS_MAX_US:
        return [f"{label}: delay line released a packet {arr['max'] / 1e3:.1f} ms late counted from its kernel "
                f"arrival stamp (bound {LATENESS_MAX_US / 1e3:g} ms; it waited up to "
                f"{entry['read_wait_ms_max']:.1f} ms to be read): the line was stopped or starved (a host stall?)"]
    return []


def judge_run(scenario: Scenario, extra_prov: dict[str, Any], data_dir: Path, logs: Path,
              schedules: dict[str, PathSchedules] | None, fid: dict[str, Any],
              t0_ns: int | None = None, steal: StealWindow | None = None,
              queue_rows: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """The whole-run verdict, merged into `fid` (returned): call once the delay lines have stopped
    (their stats are in extra_prov["delay_lines"]) and the queue samplers have written
    data_dir/queues/<path> (`queue_rows`: those already read, by str(folder)). Adds fid["run"] — per direction: lateness, drops, applied delays,
    configured vs achieved tbf rate while backlogged — its warnings, and fid["table"]."""
    f = scenario.fidelity
    lat_p99_bound_us = f.rtt_tolerance / 1e3 / 2
    delay_lines: dict[str, Any] = extra_prov.get("delay_lines", {})
    links: dict[str, Any] = extra_prov.get("links", {})
    run: dict[str, Any] = {}
    warnings: list[str] = []
    qrows: dict[str, list[dict[str, Any]]] = {}
    for label, link in links.items():
        qdir, direction = label.rsplit("-", 1)       # the label names the queue samplers' folder
        path = str(link.get("path", qdir))            # the scenario's path (shared runs label it otherwise)
        spec = scenario.paths[path] if path in scenario.paths else None
        d_spec = getattr(spec, direction) if spec is not None else None
        entry: dict[str, Any] = {}
        st = delay_lines.get(label, {})
        lat = st.get("lateness_us") if isinstance(st, dict) else None
        if lat:
            _judge_delay_line(label, st, lat, entry, warnings, lat_p99_bound_us,
                              schedules, path, d_spec, direction, logs)
        dev = link.get("shaper_dev")
        if dev and d_spec is not None and d_spec.rate is not None:
            _judge_rate(label, qdir, dev, int(d_spec.rate), data_dir, queue_rows, qrows, f.rate_tolerance,
                        entry, warnings)
            if d_spec.buffer_counting != "bytes":
                _judge_queue(label, dev, d_spec, qrows.get(qdir, []), entry, warnings)
        entry["path"] = path
        run[label] = entry
    fid["run"] = run
    note = _host_note(steal)   # the CPU time the hypervisor took during playback, named beside
    warnings = [w + note for w in warnings]
    fid.setdefault("warnings", [])
    fid["warnings"] = [*fid["warnings"], *warnings]
    fid["table"] = table(fid, scenario)
    # The verdict: no warning from the pre-run check (when it ran) nor from the whole run. A skipped
    # pre-run check (NO_FIDELITY_PROBE, reason recorded) leaves the whole run's checks to decide, so
    # every workload's clean run is True, not null.
    if fid.get("ok") is not None or fid.get("skipped") or warnings:
        fid["ok"] = not fid["warnings"]
    return fid


def _judge_delay_line(label: str, st: dict[str, Any], lat: dict[str, Any], entry: dict[str, Any],
                      warnings: list[str], lat_p99_bound_us: float, schedules: dict[str, PathSchedules] | None,
                      path: str, d_spec: Any, direction: str, logs: Path) -> None:
    """One direction's delay line: its lateness against the bounds, the packets it lost that no
    setting drops, and (when the path has a schedule and no impairments) the delays it applied
    against the schedule. Fills `entry` and appends to `warnings`."""
    entry["lateness_ms_p99"] = round(lat["p99"] / 1e3, 4)
    entry["lateness_ms_max"] = round(lat["max"] / 1e3, 4)
    entry["lateness_packets"] = lat["n"]
    entry["lateness_ms_p99_bound"] = lat_p99_bound_us / 1e3
    entry["lateness_ms_max_bound"] = LATENESS_MAX_US / 1e3
    if lat["n"] and lat["p99"] > lat_p99_bound_us:
        warnings.append(f"{label}: delay line released packets late, p99 {lat['p99'] / 1e3:.3f} ms "
                        f"(bound {lat_p99_bound_us / 1e3:g} ms) over {lat['n']} packets")
    arrival_warning = _arrival_lateness(label, st, entry)
    if lat["n"] and lat["max"] > LATENESS_MAX_US:
        # one warning per direction: the arrival-stamp figure beside the read-time one
        arr = entry.get("lateness_from_arrival_ms_max")
        warnings.append(f"{label}: delay line released a packet {lat['max'] / 1e3:.1f} ms late "
                        f"(bound {LATENESS_MAX_US / 1e3:g} ms"
                        + (f"; {arr:.1f} ms counted from its kernel arrival stamp)" if arr is not None else ")"))
    else:
        warnings += arrival_warning
    lost = {k: st.get(k, 0) for k in ("drops_overflow", "drops_netlink", "drops_local", "enobufs")}
    entry["drops_not_by_design"] = lost
    if any(v > 0 for v in lost.values()):
        warnings.append(f"{label}: delay line lost packets it should not have: {lost}")
    if schedules is not None and path in schedules and not (d_spec is not None and d_spec.has_impairments):
        bad = _step_mismatches(logs / f"delay-{label}.steps.csv", st, getattr(schedules[path], direction))
        entry["delay_mismatches"] = len(bad)
        if bad:
            warnings.append(f"{label}: delay line applied delays the schedule does not give: "
                            + "; ".join(bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""))


def _judge_rate(label: str, qdir: str, dev: str, rate_bps: int, data_dir: Path,
                queue_rows: dict[str, list[dict[str, Any]]] | None, qrows: dict[str, list[dict[str, Any]]],
                rate_tolerance: float, entry: dict[str, Any], warnings: list[str]) -> None:
    """One direction's shaper: the rate the tbf dequeued while backlogged (from the queue sampler's
    rows, read once per folder into `qrows`) against the configured one. Fills `entry` and appends
    to `warnings`."""
    if qdir not in qrows and str(data_dir / "queues" / qdir) in (queue_rows or {}):
        qrows[qdir] = (queue_rows or {})[str(data_dir / "queues" / qdir)]
    if qdir not in qrows:
        try:
            from mpvlab.collectors import qdiscstat
            qrows[qdir] = qdiscstat.load_samples(data_dir / "queues" / qdir, links=False)[0]
        except Exception:  # noqa: BLE001 — a missing sampler file is a note, not a verdict
            qrows[qdir] = []
    r = precheck.backlogged_rate(qrows[qdir], dev, rate_bps)
    r["tolerance"] = rate_tolerance
    entry["rate"] = r
    if rate_judged(r) and abs(r["ratio"] - 1) > rate_tolerance:
        warnings.append(f"{label}: tbf dequeued {r['achieved_bps'] / 1e6:.3f} Mbit/s while backlogged "
                        f"({r['backlogged_s']:.1f} s of the run) vs configured "
                        f"{r['configured_bps'] / 1e6:.3f} (ratio {r['ratio']:.3f}, tolerance "
                        f"±{rate_tolerance:.0%})")
    elif not rate_judged(r):
        r["check"] = "not judged: the queue was backlogged too briefly"


def _judge_queue(label: str, dev: str, d_spec: Any, rows: list[dict[str, Any]], entry: dict[str, Any],
                 warnings: list[str]) -> None:
    """A packet-counted queue (buffer_counting) against what its counting allows, from the queue
    sampler's tbf rows (the tbf's backlog includes its pfifo child's): never more skbs than the limit,
    and for wire_packets never more than N × 1514 B; merged_packets has no byte bound, which the
    record says instead of checking a wrong one."""
    n = d_spec.buffer.packets
    bound = d_spec.queue_byte_bound()
    rs = [r for r in rows if r["dev"] == dev and r["kind"] == "tbf"]
    rec: dict[str, Any] = {"buffer_counting": d_spec.buffer_counting, "limit_packets": n, "byte_bound": bound,
                           "samples": len(rs)}
    if bound is None:
        rec["byte_bound_note"] = ("none: a merged skb carries up to 45 frames, so N packets have no byte bound; "
                                  "only the skb count is checked")
    if rs:
        rec["backlog_bytes_max"] = max(int(r["backlog_bytes"]) for r in rs)
        rec["backlog_packets_max"] = max(int(r["backlog_pkts"]) for r in rs)
        over = []
        if rec["backlog_packets_max"] > n:
            over.append(f"{rec['backlog_packets_max']} skbs > limit {n}")
        if bound is not None and rec["backlog_bytes_max"] > bound:
            over.append(f"{rec['backlog_bytes_max']} B > {n} × 1514 B = {bound} B")
        rec["ok"] = not over
        if over:
            warnings.append(f"{label}: the {d_spec.buffer_counting} queue held more than its counting allows "
                            f"({'; '.join(over)})")
    entry["queue"] = rec


def table(fid: dict[str, Any], scenario: Scenario) -> list[dict[str, Any]]:
    """Configured vs achieved, one row per path direction (provenance and summary)."""
    rows: list[dict[str, Any]] = []
    for label, e in fid.get("run", {}).items():
        direction = label.rsplit("-", 1)[1]
        pre = fid.get("paths", {}).get(e.get("path", ""), {})
        r = e.get("rate", {})
        row: dict[str, Any] = {
            "link": label,
            "configured_rate_bps": r.get("configured_bps"),
            "achieved_rate_bps": r.get("achieved_bps"), "rate_ratio": r.get("ratio"),
            "backlogged_s": r.get("backlogged_s"),
            "precheck_rate_ratio": pre.get("rate_down", {}).get("ratio") if direction == "down" else None,
            "precheck_rtt_error_ms_p99": pre.get("rtt", {}).get("error_ms_p99") if direction == "down" else None,
            "lateness_ms_p99": e.get("lateness_ms_p99"), "lateness_ms_max": e.get("lateness_ms_max"),
            "lateness_from_arrival_ms_max": e.get("lateness_from_arrival_ms_max"),
        }
        rows.append(build(FidelityRow, f"fidelity_table[{len(rows)}]", row))
    return rows


def finish_summary(scenario: Scenario, ctx: Any, schedules: dict[str, PathSchedules] | None,
                   fid: dict[str, Any], summary: dict[str, Any]) -> None:
    """After an emulated run's network is gone: the whole-run verdict into `fid` (which is the
    provenance's `fidelity`) and the summary's fidelity fields; new warnings are logged."""
    from mpvlab.links.emulator import test_hooks
    before = len(fid.get("warnings", []))
    hooks = test_hooks()
    if hooks:
        fid["test_hooks"] = hooks
    st = summary.get("host_steal_during_playback")
    judge_run(scenario, ctx.extra_prov, ctx.data, ctx.logs, schedules, fid,
              steal=StealWindow.from_dict(st) if st else None, queue_rows=ctx.queue_rows)
    for w in fid["warnings"][before:]:
        ctx.opts.log(f"fidelity warning: {w}")
    summary["fidelity_ok"] = fid.get("ok")
    summary["fidelity_warnings"] = list(fid["warnings"])
    summary["fidelity_table"] = fid["table"]
    # the named whole-run checks (runchecks.py) are run with every other check by crosschecks.py
    summary["fidelity_checks"] = None
