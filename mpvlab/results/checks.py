"""Cross-checks: the one place a derived figure of `summary.json` meets independent raw evidence.

A cross-check compares one figure the run derived (a byte count, a mode share, a connection count)
with evidence a different collector recorded (the client interface's counters, the scheduler's BPF
trace, a packet capture, Apache's access log, the workload's own socket counts), within a stated
tolerance. Every check has the same shape:

- a function the run calls, returning the check's record: its figures, its `tolerance` in words
  where the numbers alone do not say it, and `ok`;
- `record(checks, warnings, name, result)` stores it under its name in the summary's
  `cross_checks` and, when `ok` is false, adds the named warning `cross-check <name> failed: …`
  to the summary's `warnings` (`warning(name, result)` spells it; nothing else does);
- a row in `CHECKS` below naming the figure, the evidence, the tolerance, the workloads it runs
  for, the function and the test that plants the disagreement and sees the warning. The docs'
  table (docs/reference/cross-checks.md) is generated from `CHECKS` (`python -m mpvlab.schemas`),
  so the table and the code cannot drift; tests/test_checks.py checks every named function and test
  exists.

A check whose failure means the run measured something else (a subflow on a wrong address pair)
raises RunFailed instead of warning; its row says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WARNING_PREFIX = "cross-check "


@dataclass(frozen=True)
class CheckDef:
    """One cross-check, as the docs' table lists it."""

    name: str              # the key in summary.json `cross_checks` (`{path}`: one check per path)
    figure: str            # the summary field the check guards
    evidence: str          # the independent raw evidence it is compared with
    tolerance: str         # what counts as agreement, in words
    workloads: str         # the workloads (and topologies) whose runs carry it
    function: str          # module:function that computes it
    test: str              # tests/<file>::<test> that plants the disagreement and sees the warning
    on_failure: str = "warning"     # "warning" or "run fails"


def warning(name: str, result: dict[str, Any]) -> str:
    """The named warning of a failed check (one line: the figures, no newline)."""
    return f"{WARNING_PREFIX}{name} failed: {result}".replace("\n", " ")


def record(checks: dict[str, Any], warnings: list[str], name: str, result: dict[str, Any]) -> None:
    """Store a check's result (it must hold `ok`) and add its named warning when it failed."""
    if "ok" not in result:
        raise ValueError(f"cross-check {name}: the result has no `ok`")
    checks[name] = result
    if not result["ok"]:
        warnings.append(warning(name, result))


def failed(warnings: list[str]) -> list[str]:
    """The names of the failed cross-checks among a summary's warnings."""
    return [w[len(WARNING_PREFIX):].split(" failed:", 1)[0] for w in warnings
            if w.startswith(WARNING_PREFIX) and " failed:" in w]


def all_warnings(summary: dict[str, Any]) -> list[str]:
    """Every warning a run's summary holds, one line each: fidelity findings first, then the run's
    warnings (failed cross-checks among them), then the samplers' errors. What `mpvlab run` prints at
    its end, what a sweep counts and what the report lists per run."""
    def lines(key: str, prefix: str = "") -> list[str]:
        v = summary.get(key)
        return [f"{prefix}{str(w)}".replace("\n", " ") for w in v] if isinstance(v, list) else []
    return [*lines("fidelity_warnings", "fidelity: "), *lines("warnings"), *lines("sampler_errors", "sampler: ")]


_TCP_VIDEO = "video (progressive/GStreamer, own DASH, dash.js), bulk; dual-path and dumbbell"

CHECKS: tuple[CheckDef, ...] = (
    CheckDef("bytes_{path}_interface_vs_collector", "paths.PATH.rx_bytes, payload_bytes_handed, share",
             "the scheduler's BPF trace: payload bytes the MPTCP scheduler handed to the path's subflow",
             "0.99 ≤ (interface bytes − 90 B per packet) / handed ≤ 1.01 + the path's retransmitted segments × "
             "1424 B / handed", _TCP_VIDEO, "mpvlab.runner.views:summarise",
             "tests/test_checks.py::test_interface_vs_collector_warns"),
    CheckDef("collector_saw_every_connection", "scheduler_decisions, path_switches (the trace's completeness)",
             "Apache's access log: client connections that made media requests (the bulk sender's connection "
             "count for bulk)", "traced connections ≥ connections that made requests", _TCP_VIDEO,
             "mpvlab.runner.views:summarise", "tests/test_checks.py::test_collector_connections_warns"),
    CheckDef("collector_lost_events", "scheduler_decisions, path_switches",
             "the BPF ring buffer's own count of events it could not deliver", "0 lost events", _TCP_VIDEO,
             "mpvlab.runner.views:summarise", "tests/test_checks.py::test_collector_connections_warns"),
    CheckDef("subflow_addresses", "subflows, paths.PATH.* (which path a subflow is)",
             "ss on the server: each subflow's (client, server) address pair", "no pair outside the "
             "topology's paths", _TCP_VIDEO, "mpvlab.runner.views:subflow_address_check",
             "tests/test_checks.py::test_subflow_addresses_fail", on_failure="run fails"),
    CheckDef("bytes_{path}_interface_vs_udp_socket", "paths.PATH.rx_bytes / clients.ROLE.rx_bytes (RTP)",
             "the RTP receiver's own socket counts: datagrams and UDP payload bytes it read",
             "0 ≤ other packets ≤ 20 + 2 per 15 s of the window; 0 ≤ other bytes ≤ 1 % of datagrams × (payload + "
             "42 B)", "rtp (gcc, webrtc-bbr); dual-path, dumbbell, shared bottleneck",
             "mpvlab.runner.views:udp_wire_check", "tests/test_checks.py::test_udp_wire_warns"),
    CheckDef("pcap_bytes_{point}_{interface}", "capture (the pcap every wire-order figure is read from)",
             "the captured interface's kernel counters over the capture's window",
             "|capture bytes − counter bytes| within mpvlab/collectors/pcap.py's allowance (headers of packets in "
             "flight at the window's edges)", "any TCP workload with observe.pcap",
             "mpvlab.runner.capture:view", "tests/test_checks.py::test_pcap_bytes_warns"),
    CheckDef("mode_shares_over_workload_flows", "cc_state.mode_share_time_weighted, cc_state.mode_share_per_sample",
             "Apache's access log: requests and bytes per client connection (media / page / none); for a "
             "workload without HTTP, the flow's acknowledged bytes (ss bytes_acked)",
             "every flow in the shares carried workload bytes, and every flow that carried them is in the "
             "shares (exact)", "any CC with a state model (BBR, BBR-S, BBRv3, BBRv3-S) and a TCP workload",
             "mpvlab.results.flows:mode_share_check", "tests/test_measurement_integrity.py::test_mode_share_check_warns_when_an_idle_flow_is_in_the_shares"),
)


def table_page() -> str:
    """docs/reference/cross-checks.md, generated from CHECKS (`python -m mpvlab.schemas`)."""
    def cell(s: str) -> str:
        return s.replace("|", "\\|")
    rows = [f"| `{c.name}` | {cell(c.figure)} | {cell(c.evidence)} | {cell(c.tolerance)} | {cell(c.workloads)} | "
            f"{c.on_failure} | `{c.function}` | `{c.test}` |" for c in CHECKS]
    return "\n".join([
        "# Cross-checks", "",
        "<!-- generated by `python -m mpvlab.schemas` from mpvlab/results/checks.py; do not edit -->", "",
        f"{len(CHECKS)} cross-checks. Each compares a figure of `summary.json` with independent raw evidence "
        "within a stated tolerance; the run calls it, stores its record under its name in `cross_checks` and, "
        "when it fails, adds the named warning `cross-check NAME failed: {its figures}` to `warnings`, which "
        "`mpvlab run` prints at its end and `mpvlab report` lists under the runs flagged. Each has a test that "
        "plants the disagreement and sees the warning. A check is defined in one place: a function, a call "
        "`checks.record(...)` and a row of `CHECKS` in mpvlab/results/checks.py, from which this table is made.",
        "",
        "Workloads without a check of their own here are covered by the checks of the run kind they run on "
        "(SABRE and own DASH: the TCP video checks; the fidelity checks of delay and rate are listed in "
        "`fidelity_warnings`, mpvlab/runner/fidelity.py).", "",
        "| check (`cross_checks` key) | figure it guards | evidence | tolerance | workloads | on failure | "
        "function | test |",
        "|---|---|---|---|---|---|---|---|",
        *rows, ""])
