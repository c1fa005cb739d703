"""Cross traffic on a shared bottleneck: processes started in the topology's namespaces and stopped
cleanly, each reported to `on_process` (the run ledger) as it starts.

(a) Bulk TCP (`start_bulk`): iperf3 (Debian 3.12) — a one-off server in the receiver namespace,
    a client in the sender namespace sending to it with `-C CC` (TCP_CONGESTION on the data socket;
    inside a namespace that works for cubic even though the namespace default may not be set to it).
    `bulk_bytes_received` reads the receiving kernel's `bytes_received` (ss), which gives goodput
    over any window on the shared CLOCK_MONOTONIC without trusting iperf3's own interval clock.
(b) VoIP-like UDP probe (`start_probe`): mpvlab/topologies/voip_probe.py, 80 kbit/s of 150-byte IP packets
    (66.7 packets/s) with sequence numbers and send times; the receiver writes a per-packet CSV
    (seq, t_send_ns, t_recv_ns, owd_ns, queuing_delay_ns, d_study_ns) and `stop_probe` accounts loss.

Stopping: SIGTERM, then SIGKILL after a grace period (proc.stop_child). The probe receiver is
stopped only after the sender has ended and `drain_s` has passed, so packets still in the
bottleneck queue and delay line (up to buffer drain time + delay) are counted as received, not lost.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mpvlab.core import proc
from mpvlab.core.netns import Netns
from mpvlab.core.errors import MpvlabError

PROBE = "mpvlab.topologies.voip_probe"   # run as a module (`python -m`)
# The cross host's ports on the server: the run starts them (mpvlab/runner/cross.py) and the flow rules
# name them (mpvlab/results/flows.py). Not the fidelity probe's 5201 nor bulk's 5401.
VOIP_PORT = 4000
BULK_PORT = 5301
IPERF3 = "iperf3"


class CrossTrafficError(MpvlabError, RuntimeError):
    pass


def _wait_listening(ns: Netns, port: int, proto: str, p: subprocess.Popen[bytes], what: str,
                    timeout: float = 5.0) -> None:
    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    deadline = time.monotonic() + timeout
    while True:
        if p.poll() is not None:
            raise CrossTrafficError(f"{what} exited with code {p.returncode} before listening")
        if ns.run(["ss", flag, "sport", "=", f":{port}"]).stdout.strip():
            return
        if time.monotonic() > deadline:
            raise CrossTrafficError(f"{what} is not listening on {proto} port {port} after {timeout:g} s")
        time.sleep(0.02)


# ------------------------------------------------------------------------------------ bulk TCP


@dataclass
class BulkFlow:
    label: str
    sender: Netns
    receiver: Netns
    dst: str
    port: int
    cc: str
    server_log: Path
    client_log: Path
    server: subprocess.Popen[bytes] | None = None
    client: subprocess.Popen[bytes] | None = None
    refs: list[proc.ProcRef] = field(default_factory=list)


def start_bulk(sender: Netns, receiver: Netns, dst: str, port: int, cc: str, duration_s: float,
               workdir: Path, label: str, on_process: Callable[[proc.ProcRef], None]) -> BulkFlow:
    """A bulk TCP flow sender → receiver (dst = an address of the receiver) for `duration_s` seconds
    with congestion control `cc`. Call stop_bulk() in a finally."""
    flow = BulkFlow(label, sender, receiver, dst, port, cc, workdir / f"bulk-{label}.server.json",
                    workdir / f"bulk-{label}.client.json")
    with flow.server_log.open("wb") as out:
        flow.server = receiver.popen([IPERF3, "-s", "-1", "-J", "-B", dst, "-p", str(port)],
                                     stdout=out, stderr=subprocess.STDOUT)
    flow.refs.append(proc.ProcRef.of(flow.server.pid, f"iperf3 server {label}"))
    on_process(flow.refs[-1])
    _wait_listening(receiver, port, "tcp", flow.server, f"iperf3 server {label}")
    with flow.client_log.open("wb") as out:
        flow.client = sender.popen([IPERF3, "-c", dst, "-p", str(port), "-C", cc, "-t", f"{duration_s:g}", "-J"],
                                   stdout=out, stderr=subprocess.STDOUT)
    flow.refs.append(proc.ProcRef.of(flow.client.pid, f"iperf3 client {label}"))
    on_process(flow.refs[-1])
    return flow


def stop_bulk(flow: BulkFlow, grace: float = 3.0) -> dict[str, Any]:
    """Stop the client (iperf3 ends the test and tells the server), then the server; returns
    iperf3's end-of-test figures when it wrote them."""
    for p in (flow.client, flow.server):
        if p is not None:
            proc.stop_child(p, grace=grace)
    out: dict[str, Any] = {"label": flow.label, "cc_requested": flow.cc,
                           "client_exit": flow.client.returncode if flow.client else None}
    try:
        doc = json.loads(flow.client_log.read_text())
        end = doc.get("end", {})
        out["cc_used"] = end.get("sender_tcp_congestion")
        out["received_bps"] = end.get("sum_received", {}).get("bits_per_second")
        out["retransmits"] = end.get("sum_sent", {}).get("retransmits")
        if "error" in doc:
            out["error"] = doc["error"]
    except (OSError, ValueError):
        out["error"] = "iperf3 wrote no JSON"
    return out


def bulk_bytes_received(ns: Netns) -> tuple[int, int]:
    """(CLOCK_MONOTONIC ns at the read, sum of `bytes_received` over the namespace's established TCP
    connections) — the receiving kernel's own count of in-order payload bytes, i.e. goodput."""
    t = time.monotonic_ns()
    text = ns.run(["ss", "-Htin", "state", "established"]).stdout
    return t, sum(int(m) for m in re.findall(r"bytes_received:(\d+)", text))


def delivered_bytes(sender: Netns, include_sacked: bool = True) -> tuple[int, dict[str, int]]:
    """(CLOCK_MONOTONIC ns, {destination address: bytes the receiver holds}) from ONE `ss` call in
    the sender's namespace, so every flow is read at the same instant. Bytes the receiver holds =
    bytes_acked + sacked × mss: unlike the receiver's in-order `bytes_received`, this does not lag
    by up to a window while a loss is being repaired, which on a 256-packet queue is ±3 % of a
    6 s window. (ACKs are one one-way delay old — the same lag at both ends of a window.)"""
    t = time.monotonic_ns()
    text = sender.run(["ss", "-Htin", "state", "established"]).stdout
    out: dict[str, int] = {}
    lines = text.splitlines()
    for head, info in zip(lines[0::2], lines[1::2]):
        dst = head.split()[3].rsplit(":", 1)[0]
        acked = re.search(r"bytes_acked:(\d+)", info)
        sacked = re.search(r"\bsacked:(\d+)", info)
        mss = re.search(r"\bmss:(\d+)", info)
        n = int(acked.group(1)) if acked else 0
        if include_sacked and sacked and mss:
            n += int(sacked.group(1)) * int(mss.group(1))
        out[dst] = out.get(dst, 0) + n
    return t, out


# iperf3's control connection carries only its JSON messages until the test ends (the client's cookie
# and parameters: under 1 KB); its data connection passes 64 KiB within its first few round trips. A
# connection below this has not shown which of the two it is: the control connection alone (before
# the data connection is up, as under load 1 s after the start) keeps the namespace's default CC.
DATA_CONNECTION_MIN_ACKED = 64 * 1024


def busiest_cc(ss_info: str, min_acked: int = DATA_CONNECTION_MIN_ACKED) -> str | None:
    """Congestion control of the connection with the most bytes_acked in `ss -Htin` output, among
    those with at least `min_acked`; None when no connection has that many yet."""
    best: tuple[int, str] | None = None
    for m in re.finditer(r"(\S+)\s+wscale:.*?bytes_acked:(\d+)", ss_info):
        cand = (int(m.group(2)), m.group(1))
        if cand[0] >= min_acked and (best is None or cand > best):
            best = cand
    return best[1] if best else None


def bulk_cc(ns: Netns, dst: str) -> str | None:
    """Congestion control of the namespace's busiest established connection to `dst` (by
    bytes_acked): iperf3's data connection, never its control connection (which keeps the default);
    None until the data connection has carried DATA_CONNECTION_MIN_ACKED (the caller reads again)."""
    return busiest_cc(ns.run(["ss", "-Htin", "state", "established", "dst", dst]).stdout)


# ------------------------------------------------------------------------------------ VoIP probe


@dataclass
class Probe:
    label: str
    files: dict[str, Path]
    sender: subprocess.Popen[bytes] | None = None
    receiver: subprocess.Popen[bytes] | None = None
    refs: list[proc.ProcRef] = field(default_factory=list)


@dataclass
class ProbeResult:
    sent: int
    received: int          # unique sequence numbers received
    lost: int              # sent - received (tail drops at the bottleneck, in the delay line, or send errors)
    duplicates: int
    lost_seqs: list[int]
    csv: Path
    rows: list[dict[str, int]]
    rx_timestamp: str      # where t_recv_ns comes from (the kernel's rx stamp)
    user_stamped: int      # packets that came without one and were stamped in user space (none expected)

    @property
    def loss_rate(self) -> float:
        return self.lost / self.sent if self.sent else 0.0


def start_probe(sender: Netns, receiver: Netns, dst: str, port: int, workdir: Path, label: str,
                on_process: Callable[[proc.ProcRef], None], rate_bps: float = 80_000.0,
                ip_size: int = 150, duration_s: float = 0.0) -> Probe:
    """Receiver in `receiver` (bound to dst), sender in `sender`; duration 0 = until stop_probe."""
    files = {k: workdir / f"voip-{label}.{k}" for k in ("csv", "recv.json", "send.json", "ready", "log")}
    files["ready"].unlink(missing_ok=True)
    pr = Probe(label, files)
    py = sys.executable
    with files["log"].open("wb") as log:
        pr.receiver = receiver.popen([py, "-m", PROBE, "recv", "--bind", dst, "--port", str(port),
                                      "--csv", str(files["csv"]), "--summary", str(files["recv.json"]),
                                      "--ready", str(files["ready"])], stdout=log, stderr=subprocess.STDOUT)
        pr.refs.append(proc.ProcRef.of(pr.receiver.pid, f"voip receiver {label}"))
        on_process(pr.refs[-1])
        deadline = time.monotonic() + 5.0
        while not files["ready"].exists():
            if pr.receiver.poll() is not None or time.monotonic() > deadline:
                raise CrossTrafficError(f"voip receiver {label} did not start (see {files['log']})")
            time.sleep(0.01)
        pr.sender = sender.popen([py, "-m", PROBE, "send", "--dst", dst, "--port", str(port),
                                  "--rate-bps", repr(rate_bps), "--ip-size", str(ip_size),
                                  "--duration", repr(duration_s), "--summary", str(files["send.json"])],
                                 stdout=log, stderr=subprocess.STDOUT)
    pr.refs.append(proc.ProcRef.of(pr.sender.pid, f"voip sender {label}"))
    on_process(pr.refs[-1])
    return pr


def stop_probe(pr: Probe, drain_s: float = 1.0) -> ProbeResult:
    """Stop the sender, wait `drain_s` (≥ bottleneck drain time + one-way delay) for packets still
    queued, stop the receiver, and account every sent sequence number as received or lost."""
    if pr.sender is not None:
        proc.stop_child(pr.sender)
        time.sleep(drain_s)
    if pr.receiver is not None:
        proc.stop_child(pr.receiver)
    try:
        sent = int(json.loads(pr.files["send.json"].read_text())["sent"])
        recv = json.loads(pr.files["recv.json"].read_text())
        rx_timestamp, user_stamped = str(recv["rx_timestamp"]), int(recv["user_stamped"])
    except (OSError, ValueError, KeyError) as e:
        raise CrossTrafficError(f"voip probe {pr.label} wrote no summary ({e}; see {pr.files['log']})") from None
    with pr.files["csv"].open() as f:
        rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(f)]
    got: set[int] = set()
    dups = 0
    for r in rows:
        if r["seq"] in got:
            dups += 1
        got.add(r["seq"])
    if any(s >= sent for s in got):
        raise CrossTrafficError(f"voip probe {pr.label}: received a sequence number ≥ sent count {sent}")
    lost_seqs = [s for s in range(sent) if s not in got]
    return ProbeResult(sent, len(got), len(lost_seqs), dups, lost_seqs, pr.files["csv"], rows, rx_timestamp,
                       user_stamped)
