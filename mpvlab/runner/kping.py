"""Kernel-stamped ICMP echo: the RTT of a path as the kernel sees it, with no userspace on the path.

`collectors/build/mpvlab-kping` (collectors/kping.c; a Python module here until issue 36, whose
interpreter's start was ~50 ms of CPU per run), run inside the client's namespace:

    mpvlab-kping --pair SRC,DST,OUT [--pair ...] --count N --interval-ms I [--tail-s S] [--wait-for-go]

The far end is the server's kernel answering echo requests (no echo program), and both stamps are
the kernel's own (SO_TIMESTAMPING, software): the send stamp is taken when the request leaves
through the device (veth calls skb_tx_timestamp), the receive stamp when the reply enters the stack.
Scheduling delays of the program therefore do not enter the RTT, only the moment a request is sent
(which is recorded, kernel-stamped, and used to look up the schedule). 84-byte IP packets (ping's
default 56-byte payload, the first 8 bytes the sequence number), one ICMP id per pair.

CSV per pair: seq,t_send_ns,rtt_ns,user_rtt_ns — t_send_ns on CLOCK_MONOTONIC (the kernel's
CLOCK_REALTIME stamps converted with an offset read once, bracketed to a few µs); rtt_ns = −1 for a
lost probe; user_rtt_ns is what a userspace stamp (monotonic before send, after recv) would have
read — kept so a reader sees the measurement noise the kernel stamps remove. With --wait-for-go it
sets up, then starts on a line from stdin; end of input first: exit 0, nothing sent or written.
"""

from __future__ import annotations

from pathlib import Path

from mpvlab.collectors import COLLECTORS_DIR

KPING_BIN = COLLECTORS_DIR / "build" / "mpvlab-kping"
CSV_HEADER = "seq,t_send_ns,rtt_ns,user_rtt_ns"


def command(pairs: list[tuple[str, str, Path]], count: int, interval_ms: float, tail_s: float,
            wait_for_go: bool = False) -> list[str]:
    """kping's argv for (src, dst, out_csv) pairs."""
    if not KPING_BIN.is_file():
        raise RuntimeError(f"{KPING_BIN} is missing: run ./setup.sh (it builds collectors/ with make)")
    argv = [str(KPING_BIN), "--count", str(count), "--interval-ms", repr(float(interval_ms)),
            "--tail-s", f"{tail_s:.3f}"]
    for src, dst, out in pairs:
        argv += ["--pair", f"{src},{dst},{out}"]
    return argv + (["--wait-for-go"] if wait_for_go else [])
