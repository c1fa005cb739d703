"""Kernel BBR v1's state, as far as `ss` shows it: the sampler reads it per flow (mpvlab/runner/sampling.py)
and the report's synthetic runs write it (mpvlab/reporting/synthetic.py)."""

from __future__ import annotations


def bbr_v1_mode(pacing_gain: float | None, cwnd_gain: float | None) -> str | None:
    """Kernel BBR v1's mode from the gains `ss` shows (tcp_bbr.c does not export the mode): STARTUP
    paces at 2/ln2 ≈ 2.89, DRAIN at its inverse ≈ 0.35, PROBE_RTT at 1 with cwnd gain 1, PROBE_BW
    cycles 1.25 / 0.75 / 1 with cwnd gain 2. A socket that has not sent data yet shows its initial
    gains and reads as whatever they match."""
    if pacing_gain is None or cwnd_gain is None:
        return None
    if pacing_gain > 2.0:
        return "STARTUP"
    if pacing_gain < 0.5:
        return "DRAIN"
    if abs(cwnd_gain - 1.0) < 1e-3 and abs(pacing_gain - 1.0) < 1e-3:
        return "PROBE_RTT"
    return "PROBE_BW"
