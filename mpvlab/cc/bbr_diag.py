"""Kernel BBR's state per connection at fine grain, over INET_DIAG (sock_diag netlink), issue 47.

`ss` samples ~0.21 s apart (mpvlab/runner/sampling.py) miss DRAIN (about one RTT) and short STARTUP
episodes. This reader asks the kernel itself over sock_diag netlink (a socket of its own: `Reader`
says how and why not pyroute2), for the TCP connections of the namespace it runs in: each one's
4-tuple, tcp_info (INET_DIAG_INFO: bytes acked and sent, cwnd, srtt) and kernel BBR's
`tcp_bbr_info` (INET_DIAG_BBRINFO: bandwidth estimate, min RTT, pacing gain, cwnd gain).

**The mode is inferred from the gains, exactly.** `struct tcp_bbr_info` carries no mode (uapi
linux/inet_diag.h: bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain). Kernel BBR v1 (net/ipv4/tcp_bbr.c,
`bbr_update_gains`) sets the two gains per mode from fixed constants, in units of BBR_UNIT = 256:

| mode | pacing_gain | cwnd_gain |
|---|---|---|
| STARTUP | bbr_high_gain = 256·2885/1000 + 1 = 739 | 739 |
| DRAIN | bbr_drain_gain = 256·1000/2885 = 88 | 739 |
| PROBE_BW | the cycle 320, 192, 256 (×6) (256 also while using the long-term bw) | bbr_cwnd_gain = 512 |
| PROBE_RTT | 256 | 256 |

so each pair names one mode; any other pair is reported as mode None (`unknown`) with its gains,
never guessed. A new connection before its first delivery-rate sample (bandwidth estimate 0)
reports gains the table does not give STARTUP although bbr_init has put it there (the gains are set
per ACK, by bbr_update_gains); measured here: 256/256 (PROBE_RTT's pair) on the active side, 0/0 on
the passive (server) side. PROBE_RTT needs an expired min-RTT of a connection that has sent data,
so either pair with a bandwidth estimate of 0 is reported as `INIT`, and a STARTUP episode that
follows INIT starts at INIT's first sample. A row without tcp_bbr_info (another CC, or kernel BBR in
a closing state, e.g. LAST_ACK, where it exported none here) has mode `NO_BBR_INFO`. A connection whose CC exports no BBRINFO (not kernel BBR: e.g. a BPF struct_ops CC,
which cannot implement get_info) has no mode either; its rows say so (`cong`).

Run inside a namespace (`ip netns exec NS python -m mpvlab.cc.bbr_diag --out FILE …`); it writes one
CSV row per connection per sample until SIGTERM/SIGINT or --duration-s. `summarize()` turns the rows
into per-connection mode sequences, time-weighted mode shares and STARTUP episodes (count, duration,
bytes acked during each); bench/bench_bbr_diag.py prints the sampling rate reached.
"""

from __future__ import annotations

import argparse
import csv
import errno
import ipaddress
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from socket import AF_INET, AF_INET6
from typing import Any

BBR_UNIT = 256
HIGH_GAIN = BBR_UNIT * 2885 // 1000 + 1      # 739, tcp_bbr.c bbr_high_gain
DRAIN_GAIN = BBR_UNIT * 1000 // 2885         # 88, tcp_bbr.c bbr_drain_gain
CWND_GAIN = BBR_UNIT * 2                     # 512, tcp_bbr.c bbr_cwnd_gain
PROBE_BW_PACING = (BBR_UNIT * 5 // 4, BBR_UNIT * 3 // 4, BBR_UNIT)   # tcp_bbr.c bbr_pacing_gain[]
MODES = ("INIT", "STARTUP", "DRAIN", "PROBE_BW", "PROBE_RTT")

# idiag_ext is a u8: INET_DIAG_BBRINFO (16) has no bit of its own; kernel BBR's get_info answers the
# INET_DIAG_VEGASINFO bit (as `ss` asks for it). INFO = tcp_info, CONG = the CC's name.
_EXT = (1 << (2 - 1)) | (1 << (3 - 1)) | (1 << (4 - 1))   # INET_DIAG_INFO | VEGASINFO | CONG
# Connections that can carry data: every TCP state but LISTEN, SYN_SENT/RECV, TIME_WAIT, CLOSE.
_STATES = sum(1 << s for s in (1, 4, 5, 8, 9, 11))   # ESTABLISHED FIN_WAIT1/2 CLOSE_WAIT LAST_ACK CLOSING

COLUMNS = ("t_ns", "src", "sport", "dst", "dport", "state", "cong", "mode", "pacing_gain", "cwnd_gain",
           "bw_bps", "min_rtt_us", "bytes_acked", "bytes_sent", "cwnd", "srtt_us")


def mode_from_gains(pacing_gain: int | None, cwnd_gain: int | None, bw_bps: int | None = None) -> str | None:
    """Kernel BBR v1's mode from tcp_bbr_info's raw gains (units of 1/256), by the table above;
    INIT for a connection with no bandwidth sample yet (see the module's docstring)."""
    if pacing_gain is None or cwnd_gain is None:
        return None
    if bw_bps == 0 and (pacing_gain, cwnd_gain) in ((BBR_UNIT, BBR_UNIT), (0, 0)):
        return "INIT"
    if cwnd_gain == HIGH_GAIN:
        return {HIGH_GAIN: "STARTUP", DRAIN_GAIN: "DRAIN"}.get(pacing_gain)
    if cwnd_gain == CWND_GAIN and pacing_gain in PROBE_BW_PACING:
        return "PROBE_BW"
    if cwnd_gain == BBR_UNIT and pacing_gain == BBR_UNIT:
        return "PROBE_RTT"
    return None


# --- sock_diag over a plain netlink socket (linux/sock_diag.h, linux/inet_diag.h) -----------------
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO, INET_DIAG_CONG, INET_DIAG_BBRINFO = 2, 4, 16
_NLH = struct.Struct("=IHHII")                  # nlmsghdr
_REQ = struct.Struct("=BBBxI48s")              # inet_diag_req_v2 + inet_diag_sockid (raw)
_MSG = struct.Struct("=BBBB48sIIIII")           # inet_diag_msg (sockid raw: ports, addrs, if, cookie)
_ATTR = struct.Struct("=HH")                    # rtattr
# struct tcp_info offsets (linux/tcp.h): u32 tcpi_rtt @68, tcpi_snd_cwnd @80, u64 tcpi_bytes_acked
# @120, tcpi_bytes_sent @200
_TI_RTT, _TI_CWND, _TI_ACKED, _TI_SENT = 68, 80, 120, 200


def _addr(family: int, raw: bytes) -> str:
    if family == AF_INET:
        return str(ipaddress.IPv4Address(raw[:4]))
    a = ipaddress.IPv6Address(raw)
    return str(a.ipv4_mapped or a)


def _attrs(buf: bytes, off: int, end: int) -> dict[int, bytes]:
    out = {}
    while off + _ATTR.size <= end:
        ln, typ = _ATTR.unpack_from(buf, off)
        if ln < _ATTR.size:
            break
        out[typ & 0x3FFF] = buf[off + _ATTR.size:off + ln]
        off += (ln + 3) & ~3
    return out


def _row(t_ns: int, state: int, sport: int, dport: int, src: str, dst: str,
         attrs: dict[int, bytes]) -> dict[str, Any]:
    info, bbr = attrs.get(INET_DIAG_INFO), attrs.get(INET_DIAG_BBRINFO)
    cong = attrs.get(INET_DIAG_CONG)
    pg = cg = bw = mrtt = None
    if bbr is not None and len(bbr) >= 20:
        bw_lo, bw_hi, mrtt, pg, cg = struct.unpack_from("=5I", bbr)
        bw = ((bw_hi << 32) | bw_lo) * 8          # tcp_bbr_info's bandwidth is bytes/s
    full = info is not None and len(info) >= _TI_SENT + 8

    def u32(o: int) -> int | None:
        return struct.unpack_from("=I", info, o)[0] if info is not None and len(info) >= o + 4 else None

    return {"t_ns": t_ns, "src": src, "sport": sport, "dst": dst, "dport": dport, "state": state,
            "cong": cong.split(b"\0", 1)[0].decode() if cong else None,
            "mode": mode_from_gains(pg, cg, bw) if bbr is not None else "NO_BBR_INFO", "pacing_gain": pg, "cwnd_gain": cg, "bw_bps": bw, "min_rtt_us": mrtt,
            "bytes_acked": struct.unpack_from("=Q", info, _TI_ACKED)[0] if full and info is not None else None,
            "bytes_sent": struct.unpack_from("=Q", info, _TI_SENT)[0] if full and info is not None else None,
            "cwnd": u32(_TI_CWND), "srtt_us": u32(_TI_RTT)}


class Reader:
    """One sock_diag socket in the current namespace. `sample()` asks for each known connection
    exactly (a request naming its socket id and cookie: a hash lookup in the kernel), and every
    `discover_s` dumps all TCP sockets of both families to find new ones; only connections with one
    of `ports` as source or destination port are kept (all when empty).

    Why both: a dump walks the kernel's whole established-connection hash table (262,144 buckets on
    this host, shared by every namespace), ~11 ms per family with the host's load at 10; dumping
    every sample reached ~45 Hz. The exact request costs a syscall. A new connection is first seen by
    the next dump (≤ `discover_s` + one dump after it opened; `summarize` says how the first sample's
    bytes are counted). Why not pyroute2 (its DiagSocket fits the purpose): 0.9.7 took 14 ms per
    request with nothing to report here (an asyncio loop per request), ~35 Hz for both families."""

    def __init__(self, ports: Sequence[int] = (), discover_s: float = 0.05) -> None:
        self.ports = set(ports)
        self.discover_s = discover_s
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
        self.sock.bind((0, 0))
        self.seq = 0
        self.known: dict[tuple[int, bytes], None] = {}     # (family, raw socket id) in discovery order
        self.last_dump = -1e9

    def _request(self, family: int, sockid: bytes, dump: bool) -> Iterator[tuple[int, bytes, int]]:
        """(message offset, buffer, message end) of each reply; nothing when the socket is gone."""
        self.seq += 1
        req = _REQ.pack(family, socket.IPPROTO_TCP, _EXT, _STATES, sockid)
        self.sock.send(_NLH.pack(_NLH.size + len(req), SOCK_DIAG_BY_FAMILY,
                                 NLM_F_REQUEST | (NLM_F_DUMP if dump else 0), self.seq, 0) + req)
        while True:
            buf = self.sock.recv(1 << 16)
            off = 0
            while off + _NLH.size <= len(buf):
                ln, typ, _flags, seq, _pid = _NLH.unpack_from(buf, off)
                if ln < _NLH.size:
                    return
                if seq == self.seq:
                    if typ == NLMSG_DONE:
                        return
                    if typ == NLMSG_ERROR:
                        err = -struct.unpack_from("=i", buf, off + _NLH.size)[0]
                        if err in (0, errno.ENOENT):      # an exact request for a closed socket
                            return
                        raise OSError(err, f"sock_diag: {os.strerror(err)}")
                    if typ == SOCK_DIAG_BY_FAMILY:
                        yield off + _NLH.size, buf, off + ln
                        if not dump:
                            return
                off += (ln + 3) & ~3

    def _parse(self, family: int, t_ns: int, body: int, buf: bytes, end: int) -> dict[str, Any] | None:
        (_f, state, _timer, _retrans, sockid, _exp, _rq, _wq, _uid, _inode) = _MSG.unpack_from(buf, body)
        sport, dport = int.from_bytes(sockid[0:2], "big"), int.from_bytes(sockid[2:4], "big")
        if self.ports and sport not in self.ports and dport not in self.ports:
            return None
        attrs = _attrs(buf, body + _MSG.size, end)
        if INET_DIAG_INFO not in attrs:
            return None                  # a time-wait or request mini-socket: no TCP state to report
        self.known.setdefault((family, sockid), None)
        return _row(t_ns, state, sport, dport, _addr(family, sockid[4:20]), _addr(family, sockid[20:36]),
                    attrs)

    def sample(self) -> list[dict[str, Any]]:
        rows: dict[tuple[int, bytes], dict[str, Any]] = {}
        for key in list(self.known):
            t_ns = time.monotonic_ns()
            got = [self._parse(key[0], t_ns, *m) for m in self._request(key[0], key[1], dump=False)]
            if got and got[0] is not None:
                rows[key] = got[0]
            else:
                del self.known[key]          # closed (or now in a state not asked for)
        if time.monotonic() - self.last_dump >= self.discover_s:
            self.last_dump = time.monotonic()
            for family in (AF_INET, AF_INET6):   # a dual-stack listener's connections are AF_INET6
                t_ns = time.monotonic_ns()
                for body, buf, end in self._request(family, bytes(48), dump=True):
                    sockid = buf[body + 4:body + 52]
                    if (family, sockid) not in rows:
                        row = self._parse(family, t_ns, body, buf, end)
                        if row is not None:
                            rows[(family, sockid)] = row
        return list(rows.values())

    def close(self) -> None:
        self.sock.close()


def record(out: Path, ports: Sequence[int], period_s: float, duration_s: float | None,
           discover_s: float = 0.05) -> int:
    """Sample every `period_s` (a dump takes what it takes; the next starts `period_s` after the
    previous one started, or at once when late) into `out` until stopped; returns the sample count.
    The last line records the reader's own CPU time (`# end cpu_s … wall_s …`): it shares the host."""
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda s, _f: stop.append(s))
    signal.signal(signal.SIGINT, lambda s, _f: stop.append(s))
    reader = Reader(ports, discover_s)
    n = 0
    cpu0, wall0 = os.times(), time.monotonic()
    end = None if duration_s is None else time.monotonic() + duration_s
    try:
        with out.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS)
            w.writeheader()
            fh.write(f"# start {time.monotonic_ns()}\n")
            nxt = time.monotonic()
            while not stop and (end is None or time.monotonic() < end):
                w.writerows(reader.sample())
                # a sample with no matching connection is still a sample: its time bounds the
                # previous rows' intervals and counts toward the rate
                fh.write(f"# sample {time.monotonic_ns()}\n")
                n += 1
                nxt += period_s
                time.sleep(max(0.0, nxt - time.monotonic()))
            cpu1 = os.times()
            fh.write(f"# end cpu_s {cpu1.user + cpu1.system - cpu0.user - cpu0.system:.3f} "
                     f"wall_s {time.monotonic() - wall0:.3f}\n")
    finally:
        reader.close()
    return n


# --- analysis ------------------------------------------------------------------------------------

Conn = tuple[str, int, str, int]


@dataclass
class Episode:
    mode: str | None
    start_ns: int
    end_ns: int                 # the first sample that saw another mode (or the connection's last)
    bytes_acked: int | None     # acked during the episode (tcpi_bytes_acked at end − at start)


@dataclass
class Connection:
    conn: Conn
    cong: str | None
    episodes: list[Episode] = field(default_factory=list)
    samples: int = 0
    bytes_acked: int = 0
    bytes_sent: int = 0

    def sequence(self) -> list[str | None]:
        return [e.mode for e in self.episodes]

    def shares(self) -> dict[str, float]:
        """Time-weighted: each sample's mode holds until the connection's next sample."""
        total = sum(e.end_ns - e.start_ns for e in self.episodes)
        out = {m: 0.0 for m in (*MODES, "NO_BBR_INFO", "unknown")}
        for e in self.episodes:
            out[e.mode or "unknown"] += (e.end_ns - e.start_ns) / total if total else 0.0
        return out

    def startup(self) -> list[Episode]:
        """STARTUP episodes; one right after INIT (the connection's start) begins at INIT's start,
        with INIT's bytes (the module's docstring)."""
        out = []
        for prev, e in zip([None, *self.episodes], self.episodes):
            if e.mode != "STARTUP":
                continue
            if prev is not None and prev.mode == "INIT":
                both = None if e.bytes_acked is None or prev.bytes_acked is None else prev.bytes_acked + e.bytes_acked
                e = Episode("STARTUP", prev.start_ns, e.end_ns, both)
            out.append(e)
        return out


def read_rows(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """The CSV's rows (typed) and the times of every sample (the `# sample` lines)."""
    rows, stamps = [], []
    lines = path.read_text().splitlines()
    body = [ln for ln in lines if not ln.startswith("#")]
    stamps = [int(ln.split()[2]) for ln in lines if ln.startswith("# sample ")]
    for r in csv.DictReader(body):
        typed: dict[str, Any] = dict(r)
        for k in ("t_ns", "sport", "dport", "state", "pacing_gain", "cwnd_gain", "bw_bps", "min_rtt_us",
                  "bytes_acked", "bytes_sent", "cwnd", "srtt_us"):
            typed[k] = int(r[k]) if r[k] not in ("", None) else None
        typed["mode"] = r["mode"] or None
        typed["cong"] = r["cong"] or None
        rows.append(typed)
    return rows, stamps


def connections(rows: Iterable[dict[str, Any]]) -> dict[Conn, Connection]:
    """Rows grouped per 4-tuple, in time order, into episodes of one mode each."""
    by: dict[Conn, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["src"], r["sport"], r["dst"], r["dport"]), []).append(r)
    out = {}
    for conn, rs in by.items():
        rs.sort(key=lambda r: r["t_ns"])
        c = Connection(conn, rs[-1]["cong"], samples=len(rs),
                       bytes_acked=max(r["bytes_acked"] or 0 for r in rs), bytes_sent=max(r["bytes_sent"] or 0 for r in rs))
        first_acked: int | None = None      # bytes acked at the current episode's first sample
        nexts: list[dict[str, Any] | None] = [*rs[1:], None]
        for prev, following in zip(rs, nexts):
            end = following["t_ns"] if following is not None else prev["t_ns"]
            if c.episodes and c.episodes[-1].mode == prev["mode"]:
                c.episodes[-1].end_ns = end
            else:
                c.episodes.append(Episode(prev["mode"], prev["t_ns"], end, None))
                first_acked = prev["bytes_acked"]
            last = following if following is not None else prev
            if first_acked is not None and last["bytes_acked"] is not None:
                c.episodes[-1].bytes_acked = last["bytes_acked"] - first_acked
        out[conn] = c
    return out


def summarize(path: Path, t0_ns: int = 0,
              requests: Mapping[tuple[str, str], int] | None = None) -> dict[str, Any]:
    """Per connection: mode sequence, time-weighted shares, STARTUP episodes (`start_s` on the clock
    that starts at `t0_ns`: a run's clock); the sampling rate reached, the longest gap between
    samples, the reader's CPU and how many connections carried data (bytes acked > 0).
    `requests`: (client address, client port) → the HTTP requests the server logged on that
    connection; each connection then says how many it carried, and the record how many carried one
    (a connection the browser opened and never used still has bytes acked: its TLS handshake)."""
    rows, stamps = read_rows(path)
    conns = connections(rows)
    end = [ln.split() for ln in path.read_text().splitlines() if ln.startswith("# end ")]
    cpu = {"cpu_s": float(end[-1][3]), "wall_s": float(end[-1][5])} if end else None
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    span = (stamps[-1] - stamps[0]) / 1e9 if len(stamps) > 1 else 0.0
    return {
        "samples": len(stamps),
        "rate_hz": round((len(stamps) - 1) / span, 1) if span else None,
        "gap_ms_max": round(max(gaps) / 1e6, 3) if gaps else None,
        "reader_cpu_share_of_core": round(cpu["cpu_s"] / cpu["wall_s"], 4) if cpu and cpu["wall_s"] else None,
        "connections_with_data": sum(1 for c in conns.values() if c.bytes_acked > 0),
        "connections_with_requests": None if requests is None else
        sum(1 for c in conns.values() if requests.get((str(c.conn[2]), str(c.conn[3])), 0) > 0),
        "connections": [{
            "conn": f"{c.conn[0]}:{c.conn[1]}-{c.conn[2]}:{c.conn[3]}", "cong": c.cong, "samples": c.samples,
            "bytes_acked": c.bytes_acked,
            "http_requests": None if requests is None else requests.get((str(c.conn[2]), str(c.conn[3])), 0),
            "modes": c.sequence(),
            "shares": {k: round(v, 6) for k, v in c.shares().items()},
            "startup_episodes": [{"start_s": round((e.start_ns - t0_ns) / 1e9, 6), "duration_s": round((e.end_ns - e.start_ns) / 1e9, 6),
                                  "bytes_acked": e.bytes_acked} for e in c.startup()],
        } for c in conns.values()],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="kernel BBR's state per TCP connection over INET_DIAG")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--port", type=int, action="append", default=[], help="keep connections with this port")
    ap.add_argument("--period-ms", type=float, default=5.0, help="time between dumps (default 5 ms)")
    ap.add_argument("--duration-s", type=float, default=None)
    ap.add_argument("--discover-ms", type=float, default=50.0,
                    help="time between full dumps that find new connections (default 50 ms)")
    a = ap.parse_args(argv)
    if not 0.5 <= a.period_ms <= 1000:
        ap.error("--period-ms must be 0.5 … 1000")
    if not 1 <= a.discover_ms <= 10_000:
        ap.error("--discover-ms must be 1 … 10000")
    n = record(a.out, a.port, a.period_ms / 1000, a.duration_s, a.discover_ms / 1000)
    print(f"{n} samples", file=sys.stderr)
    return 0


def iter_modes(seq: Iterable[str | None]) -> Iterator[str]:
    """The distinct modes of a sequence in order of first appearance."""
    seen: list[str] = []
    for m in seq:
        if m is not None and m not in seen:
            seen.append(m)
            yield m


if __name__ == "__main__":
    sys.exit(main())
