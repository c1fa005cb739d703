"""What a scenario says about the collectors (`observe:`): the sampling rate of the time series,
the smallest share a path must carry, and packet capture."""

from __future__ import annotations

from pydantic import Field, field_validator

from mpvlab.core.quantities import Strict


MAX_POINTS = 10     # client, server and a router on each of at most 8 paths


class PcapSpec(Strict):
    """Packet capture (mpvlab/collectors/pcap.py): tcpdump on every interface of each named point, for the whole
    run (started before time zero, stopped after playback), into data/pcap/<point>-<if>.pcap. A
    capture at `server` also gives the wire-order path-switch count (mpvlab/collectors/wire_switches.py)."""

    points: list[str] = Field(min_length=1, json_schema_extra={"maxItems": MAX_POINTS}, description="client, server, router-<path> (one per path)")
    snaplen: int = Field(128, ge=64, le=65535, description="bytes kept per packet; 128 keeps every header "
                         "and the MPTCP DSS option")
    max_mb: int = Field(200, ge=1, le=4096, description="per file, MB (10^6 B): the capture stops there and the "
                        "summary marks it truncated")

    @field_validator("points")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        # A topology has at most MAX_POINTS capture points; checked first, so a list of 10,000 names is
        # one short message (not every name echoed back, issue 33).
        if len(v) > MAX_POINTS:
            raise ValueError(f"at most {MAX_POINTS} points (client, server and one router per path), got {len(v)}")
        dup = sorted({p for p in v if v.count(p) > 1})
        if dup:
            raise ValueError(f"observe.pcap.points names {', '.join(dup)} more than once")
        return v


class ObserveSpec(Strict):
    sample_hz: int = Field(100, ge=1, le=1000, description="time-series sampling rate of the collectors")
    min_path_share: float = Field(0.05, ge=0.0, lt=0.5, description="fail the run if a path carries less")
    pcap: PcapSpec | None = Field(None, description="packet capture; off unless given")
    bbr_modes_hz: int | None = Field(
        None, ge=1, le=1000,
        description="kernel BBR's state per server connection over INET_DIAG at this rate (mpvlab/cc/bbr_diag.py; "
                    "data/bbr_diag.csv, summary bbr_diag: each connection's mode sequence and shares, STARTUP "
                    "episodes); dumbbell and dual-path runs; off unless given (at 200 Hz the reader took ~0.12 of a "
                    "core here, cc/README.md). Kernel BBR only: a BPF congestion control (bbr-s, bbr3, bbr3-s) "
                    "gives INET_DIAG no BBR record, so its connections read NO_BBR_INFO here; its modes are in its "
                    "own per-ACK records (data/<cc>_state.csv, summary cc_state)")
