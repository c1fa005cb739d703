"""The pre-check's UDP sender (mpvlab/runner/precheck.py, `rate_check`), run inside a server namespace:

    python -m mpvlab.runner.blast --to DST,RATE_BPS,SECONDS [--to ...]

Its own module so the interpreter started for it imports only the standard library's socket, time
and argparse (the whole pre-check module and its imports were ~15 ms of CPU more per run, issue 36).
"""

from __future__ import annotations

import argparse
import socket
import time

FILL_EXCESS = 2.0
FILL_S = 0.04
HOLD_EXCESS = 1.1
FRAME_BITS = 1514 * 8
DISCARD_PORT = 9               # nothing listens: the client's kernel drops the datagrams


def blast(targets: list[tuple[str, int, float]]) -> None:
    """Paced UDP to a port nothing listens on (1472-byte payloads: 1514-byte frames), to each
    (dst, rate_bps, seconds) at once: FILL_EXCESS × rate_bps for FILL_S, then HOLD_EXCESS × for
    `seconds`. Each paced by the total due so far, so a stall is caught up at once (the tbf drops what
    its buffer cannot hold; the intervals the queue ran empty are left out of the measurement)."""
    socks = []
    for _dst, _rate, _secs in targets:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        socks.append(s)
    payload = b"\0" * 1472
    sent = [0] * len(targets)
    start = time.monotonic()
    while True:
        el = time.monotonic() - start
        active = False
        for i, (dst, rate_bps, seconds) in enumerate(targets):
            if el >= FILL_S + seconds:
                continue
            active = True
            filled = min(el, FILL_S) * FILL_EXCESS
            due = int((filled + max(0.0, el - FILL_S) * HOLD_EXCESS) * rate_bps / FRAME_BITS) + 1
            while sent[i] < due:
                try:
                    socks[i].sendto(payload, (dst, DISCARD_PORT))
                except OSError:      # a full socket buffer or an ICMP error returned: keep pacing
                    pass
                sent[i] += 1
        if not active:
            return
        time.sleep(0.0005)


def _target(text: str) -> tuple[str, int, float]:
    dst, rate, seconds = text.split(",")
    return dst, int(rate), float(seconds)


def main() -> None:
    ap = argparse.ArgumentParser(prog="mpvlab.runner.blast")
    ap.add_argument("--to", type=_target, action="append", required=True, metavar="DST,RATE_BPS,SECONDS")
    blast(ap.parse_args().to)


if __name__ == "__main__":
    main()
