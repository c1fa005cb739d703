"""The bulk workload: one MPTCP connection carries a given number of bytes (or sends for a given
time) from the server to the client, as fast as the paths allow — for scheduler and congestion-
control work, and for the Linux MPTCP selftests' two-path bound (simult_flows.sh: a transfer of
`size` bytes over paths of r1 and r2 bit/s takes at most size·8·10/((r1+r2)·9) s plus slack).

Its part of the summary: bytes sent and received, the transfer time (connect to last byte at the
receiver, on the run's clock), the goodput, and the congestion control the sender's socket ran.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from typing import Any

from mpvlab.core import proc
from mpvlab.core.errors import RunFailed
from mpvlab.runner import steps
from mpvlab.runner.context import RunContext
from mpvlab.runner.workloads.base import Ends, Outcome, still_running, workload_spec
from mpvlab.workloads.bulk import BulkWorkloadSpec
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.workload import BulkRecord
from mpvlab.runner.workloads.two_ends import TwoEnds
from mpvlab.workloads.bulk import BULK, PORT as BULK_PORT   # not the fidelity probe's 5201 nor the cross traffic's 5301

ENDPOINT = "mpvlab.runner.workloads.bulk_endpoint"   # run as a module (`python -m`)


class BulkWorkload(TwoEnds):
    name = BULK.name
    port = BULK_PORT

    def prepare(self, ctx: RunContext) -> None:
        pass     # nothing to generate: the payload is zeros, made as it is sent

    def serve(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        spec = workload_spec(ctx, BulkWorkloadSpec)
        ctx.opts.progress("bulk sender")
        out = ctx.logs / "bulk"
        out.mkdir(parents=True, exist_ok=True)
        ready = out / "sender.ready.json"
        argv = [sys.executable, "-m", ENDPOINT, "send", "--port", str(BULK_PORT), "--cc", ends.cc_kernel_name,
                "--ready", str(ready), "--out", str(out / "sender.json")]
        if spec.size is not None:
            argv += ["--bytes", str(spec.size)]
        elif spec.duration is not None:
            argv += ["--seconds", f"{spec.duration / 1e9:g}"]
        else:       # the spec's own validator requires one of the two
            raise RunFailed("workload.size or workload.duration is required for kind bulk")
        if "MPVLAB_SNDBUF" in ends.server_env:          # a steering scheduler's send-buffer bound
            argv += ["--sndbuf", ends.server_env["MPVLAB_SNDBUF"]]
        with (out / "sender.log").open("wb") as log:
            self.sender = ends.server.popen(argv, stdout=log, stderr=subprocess.STDOUT)
        ctx.ledger.add_proc(proc.ProcRef.of(self.sender.pid, "bulk sender"))
        stack.callback(proc.stop_child, self.sender, 2.0)
        proc.wait_ready(self.sender, ready, "bulk sender", 10.0, log=out / "sender.log", error=RunFailed)

    def start(self, ctx: RunContext, stack: contextlib.ExitStack, ends: Ends) -> None:
        out = ctx.logs / "bulk"
        argv = [sys.executable, "-m", ENDPOINT, "recv", "--addr", ends.server_addr, "--port", str(BULK_PORT),
                "--t0-ns", str(ctx.t0_ns), "--out", str(out / "receiver.json")]
        with (out / "receiver.log").open("wb") as log:
            self.receiver = ends.client.popen(argv, stdout=log, stderr=subprocess.STDOUT)
        ctx.ledger.add_proc(proc.ProcRef.of(self.receiver.pid, "bulk receiver"))
        stack.callback(proc.stop_child, self.receiver, 2.0)
        self.arm_deadline(ctx)

    def max_run_s(self, ctx: RunContext) -> float:
        """Time to give up: the scenario's limit. For a size, the default allows 10× the transfer at
        the slowest path's rate alone (a stalled run, not a slow one, is what this catches)."""
        spec, sc = workload_spec(ctx, BulkWorkloadSpec), ctx.scenario
        if spec.timeout is not None:
            return spec.timeout / 1e9
        if spec.duration is not None:
            return spec.duration / 1e9 + 30
        rates = [d.rate for p in sc.paths.values() for d in (p.down,) if d.rate]
        slowest = min(rates) if rates else 10_000_000
        assert spec.size is not None
        return spec.size * 8 / slowest * 10 + 30

    def running(self, wait_s: float = 0.0) -> bool:
        assert self.receiver is not None
        return still_running([self.receiver], wait_s)

    def check(self, ctx: RunContext) -> None:
        assert self.sender is not None and self.receiver is not None
        if self.sender.poll() not in (None, 0):
            raise RunFailed(f"bulk sender exited with code {self.sender.returncode} (logs/bulk/sender.log)")
        if self.overdue():
            self.receiver.kill()
            raise RunFailed(f"bulk transfer did not finish within {self.timeout_s:.0f} s")

    def progress(self, ctx: RunContext) -> str:
        return f"transferring ({(time.monotonic_ns() - ctx.t0_ns) / 1e9:5.1f} s)"

    def finish(self, ctx: RunContext) -> Outcome:
        assert self.sender is not None and self.receiver is not None
        out = ctx.logs / "bulk"
        if self.receiver.returncode != 0:
            raise RunFailed(f"bulk receiver exited with code {self.receiver.returncode} (logs/bulk/receiver.log)")
        try:
            self.sender.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise RunFailed("bulk sender did not end after the receiver closed (logs/bulk/sender.log)") from None
        rx, tx = steps.read_json(out / "receiver.json"), steps.read_json(out / "sender.json")
        if not rx or not tx:
            raise RunFailed("bulk transfer left no record (logs/bulk/)")
        spec = workload_spec(ctx, BulkWorkloadSpec)
        if rx["bytes_received"] != tx["bytes_sent"]:
            raise RunFailed(f"bulk: the receiver got {rx['bytes_received']} bytes, the sender sent {tx['bytes_sent']}")
        if spec.size is not None and rx["bytes_received"] != spec.size:
            raise RunFailed(f"bulk: {rx['bytes_received']} bytes arrived of the {spec.size} configured")
        if tx["cc"] != ctx.extra_prov["cc"]["kernel_name"]:
            raise RunFailed(f"bulk sender's socket ran {tx['cc']}, not {ctx.extra_prov['cc']['kernel_name']}")
        t_end = rx["t_last_byte_ns"] or rx["t_connect_ns"]
        transfer_s = (t_end - rx["t_connect_ns"]) / 1e9
        fields: dict[str, Any] = {
            BULK.name: build(BulkRecord, BULK.name, {
                "size_bytes": spec.size, "duration_configured_s": None if spec.duration is None else spec.duration / 1e9,
                "bytes_sent": tx["bytes_sent"], "bytes_received": rx["bytes_received"],
                "connect_s": round((rx["t_connect_ns"] - ctx.t0_ns) / 1e9, 6),
                "first_byte_s": None if rx["t_first_byte_ns"] is None else round((rx["t_first_byte_ns"] - ctx.t0_ns) / 1e9, 6),
                "last_byte_s": round((t_end - ctx.t0_ns) / 1e9, 6),
                # connect() to the last byte at the receiver: what simult_flows.sh times
                "transfer_s": round(transfer_s, 6),
                "goodput_bps": round(rx["bytes_received"] * 8 / transfer_s) if transfer_s > 0 else None,
                "cc_seen": tx["cc"],
                "definition": "transfer_s: from the receiver's connect() to its last byte, CLOCK_MONOTONIC",
            }),
            "duration_s": round(transfer_s, 6),
        }
        return Outcome(fields, transfer_s, "bulk_connections", 1)
