"""Light-weight time series taken by the runner during playback, on the run's clock (s since t0).

- links.csv: per client interface (one per path) cumulative rx/tx bytes and packets, read from
  /proc/<pid>/net/dev of a process inside the client namespace (no fork per sample).
- subflows.csv: per TCP subflow of the server (`ss -tin` in the server namespace): congestion control,
  cwnd, srtt, delivery rate, bytes acked, snd_wnd (the window the client advertised) — also the proof that each subflow runs the chosen CC. Each
  row names its flow (`local`, `peer`: the 4-tuple from the server's side) and, for an MPTCP subflow,
  its connection (`mptcp_token`: the server's local MPTCP token, the same for every subflow of one
  connection); its role (workload, probe, check, cross) is assigned after the run (mpvlab/results/flows.py).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpvlab.cc.bbr_modes import bbr_v1_mode
from mpvlab.core.netns import Netns


def read_net_dev(pid: int) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        out[name.strip()] = {"rx_bytes": int(f[0]), "rx_packets": int(f[1]), "tx_bytes": int(f[8]),
                             "tx_packets": int(f[9])}
    return out


def parse_counter_group(text: str, group: str) -> dict[str, int]:
    """One group of /proc/net/netstat or /proc/net/snmp (a `Group: names` line followed by a
    `Group: values` line), e.g. "MPTcpExt" or "Icmp"; {} if the kernel has no such group."""
    lines = [ln.split() for ln in text.splitlines()]
    for head, vals in zip(lines[::2], lines[1::2]):
        if head and head[0] == f"{group}:":
            return {k: int(v) for k, v in zip(head[1:], vals[1:])}
    return {}


def read_mptcp_mib(pid: int) -> dict[str, int]:
    """The MPTCP counters (`MPTcpExt*` of /proc/net/netstat, without the prefix) of the network
    namespace `pid` lives in. A namespace made for a run starts at zero, but the run takes
    differences anyway (fidelity probes run before the player)."""
    return parse_counter_group(Path(f"/proc/{pid}/net/netstat").read_text(), "MPTcpExt")


def mptcp_mib_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after}


_SS_FIELDS = {
    "cwnd": re.compile(r"\bcwnd:(\d+)"),
    "rtt": re.compile(r"\brtt:([\d.]+)/([\d.]+)"),
    "bytes_acked": re.compile(r"\bbytes_acked:(\d+)"),
    "delivery_rate": re.compile(r"\bdelivery_rate (\d+(?:\.\d+)?)([KMG]?)bps"),
    "pacing_rate": re.compile(r"\bpacing_rate (\d+(?:\.\d+)?)([KMG]?)bps"),
    "retrans": re.compile(r"\bretrans:\d+/(\d+)"),
    "bbr_bw": re.compile(r"bbr:\(bw:(\d+(?:\.\d+)?)([KMG]?)bps"),
    "bbr_min_rtt_ms": re.compile(r"bbr:\([^)]*\bmrtt:([\d.]+)"),
    "bbr_pacing_gain": re.compile(r"bbr:\([^)]*\bpacing_gain:([\d.]+)"),
    "bbr_cwnd_gain": re.compile(r"bbr:\([^)]*\bcwnd_gain:([\d.]+)"),
    # ss prints a subflow's MPTCP tokens as token:REMOTE(id:N)/LOCAL(id:M) (hex; the remote one is 0
    # on the server's first subflow): the local one is the connection's (`ss -M` shows it as token:)
    "mptcp_token": re.compile(r"\btoken:[0-9a-f]+\(id:\d+\)/([0-9a-f]+)\(id:\d+\)"),
    # tcpi_snd_wnd (kernel >= 6.2): on the server, the window the client last advertised — the SABRE
    # study's "advertised window" that grows under receive-buffer autotuning. ss prints it only when it
    # is non-zero, so an absent value is 0 (a closed window) on such a kernel.
    "snd_wnd": re.compile(r"\bsnd_wnd:(\d+)"),
}
_MULT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def parse_ss(text: str) -> list[dict[str, Any]]:
    """Parse `ss -tinH` output (a socket line followed by an indented info line)."""
    rows: list[dict[str, Any]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        head = lines[i].split()
        info = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith(("\t", " ")) else ""
        i += 2 if info else 1
        if len(head) < 4:
            continue
        local, peer = head[-2], head[-1]
        words = info.split()
        row: dict[str, Any] = {"local": local, "peer": peer, "cc": words[0] if words else "",
                               "mptcp": "tcp-ulp-mptcp" in info}
        for key, rx in _SS_FIELDS.items():
            m = rx.search(info)
            if not m:
                row[key] = None
            elif key == "rtt":
                row["srtt_ms"] = float(m.group(1))
                row["rttvar_ms"] = float(m.group(2))
            elif key in ("delivery_rate", "pacing_rate", "bbr_bw"):
                row[key] = float(m.group(1)) * _MULT[m.group(2)]
            elif key in ("bbr_min_rtt_ms", "bbr_pacing_gain", "bbr_cwnd_gain"):
                row[key] = float(m.group(1))
            elif key == "mptcp_token":
                # ss prints the token without leading zeros; the scheduler trace (and the kernel's
                # u32) has 8 hex digits: one spelling, so a token below 0x10000000 matches
                row[key] = f"{int(m.group(1), 16):08x}"
            else:
                row[key] = int(m.group(1))
        row.pop("rtt", None)
        row["bbr_mode"] = bbr_v1_mode(row["bbr_pacing_gain"], row["bbr_cwnd_gain"])
        rows.append(row)
    return rows


@dataclass
class Sampler:
    t0_ns: int
    client_pid: int
    client_ifs: dict[str, str]          # path name -> interface
    server: Netns
    server_port: int
    out_dir: Path
    hz: int
    ss_hz: float = 5.0
    # Which series to take: a run with several clients takes links per client and subflows once.
    links: bool = True
    subflows: bool = True
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    subflows_seen: dict[tuple[str, str], str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def start(self) -> None:
        for target in [f for f, on in ((self._links_loop, self.links), (self._ss_loop, self.subflows)) if on]:
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def _t(self) -> float:
        return (time.monotonic_ns() - self.t0_ns) / 1e9

    def _links_loop(self) -> None:
        period = 1.0 / self.hz
        with (self.out_dir / "links.csv").open("w") as f:
            f.write("t_s,path,interface,rx_bytes,rx_packets,tx_bytes,tx_packets\n")
            next_t = time.monotonic()
            while not self._stop.is_set():
                try:
                    dev = read_net_dev(self.client_pid)
                except OSError as e:
                    self.errors.append(f"links sampler: {e}")
                    return
                t = self._t()
                for path, ifname in self.client_ifs.items():
                    c = dev.get(ifname)
                    if c:
                        f.write(f"{t:.4f},{path},{ifname},{c['rx_bytes']},{c['rx_packets']},"
                                f"{c['tx_bytes']},{c['tx_packets']}\n")
                next_t += period
                self._stop.wait(max(0.0, next_t - time.monotonic()))

    def _ss_loop(self) -> None:
        period = 1.0 / min(self.ss_hz, self.hz)
        with (self.out_dir / "subflows.csv").open("w") as f:
            f.write("t_s,local,peer,cc,mptcp,cwnd,srtt_ms,rttvar_ms,delivery_rate_bps,pacing_rate_bps,"
                    "bytes_acked,retrans,bbr_bw_bps,bbr_min_rtt_ms,mptcp_token,bbr_pacing_gain,bbr_cwnd_gain,bbr_mode,"
                    "snd_wnd\n")
            while not self._stop.is_set():
                cp = self.server.run(["ss", "-tinH", "state", "established", f"sport = :{self.server_port}"],
                                     check=False, timeout=5)
                t = self._t()
                for r in parse_ss(cp.stdout):
                    self.subflows_seen[(r["local"], r["peer"])] = r["cc"]
                    f.write(f"{t:.4f},{r['local']},{r['peer']},{r['cc']},{int(r['mptcp'])},{_n(r['cwnd'])},"
                            f"{_n(r.get('srtt_ms'))},{_n(r.get('rttvar_ms'))},{_n(r['delivery_rate'])},"
                            f"{_n(r['pacing_rate'])},{_n(r['bytes_acked'])},{_n(r['retrans'])},{_n(r['bbr_bw'])},"
                            f"{_n(r['bbr_min_rtt_ms'])},{_n(r['mptcp_token'])},{_n(r['bbr_pacing_gain'])},"
                            f"{_n(r['bbr_cwnd_gain'])},{_n(r['bbr_mode'])},{_n(r['snd_wnd'])}\n")
                f.flush()
                self._stop.wait(period)


def _n(v: Any) -> str:
    return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))
