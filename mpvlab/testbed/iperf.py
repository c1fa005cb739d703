"""One iperf3 bulk TCP flow between two namespaces of a test bed, for the benches and tests that need a
plain CUBIC/BBR transfer beside what they measure (tests/test_buffer_counting.py, the dumbbell's CC
tests and benches)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from mpvlab.core.netns import Netns
from mpvlab.testbed.bed import Bed

LISTEN_WAIT_S = 5.0    # iperf3 -s binds in milliseconds; the client must not connect before it listens


def bulk(bed: Bed, server: Netns, client: Netns, receiver: str, port: int, seconds: float, *,
         client_args: Sequence[str] = (), server_args: Sequence[str] = (), extra_timeout: float = 30.0) -> dict[str, Any]:
    """`seconds` of bulk TCP client → server (the server bound to `receiver`:`port`, one test, then it
    exits); iperf3's JSON report. The server runs under the bed's ledger, so a dying test leaves no
    iperf3 behind; it is waited for (5 s) and stopped if it outlives the client."""
    srv = bed.popen(server, ["iperf3", "-s", "-1", "-B", receiver, "-p", str(port), *server_args], "iperf3 -s",
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + LISTEN_WAIT_S
        while time.monotonic() < deadline and f":{port}" not in server.run(["ss", "-ltnH"]).stdout:
            time.sleep(0.05)
        out = client.run(["iperf3", "-c", receiver, "-p", str(port), "-J", *client_args, "-t", str(seconds)],
                         timeout=seconds + extra_timeout)
        report: dict[str, Any] = json.loads(out.stdout)
        return report
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.terminate()
            srv.wait(timeout=5)
