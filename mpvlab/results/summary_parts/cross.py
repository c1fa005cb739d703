"""summary.json's cross-traffic part: what the cross sources recorded, the VoIP probe's delay
percentiles and its named windows (mpvlab/results/delaywindows.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from mpvlab.results.metricdef import INF, STUDY_SABRE, MetricDef
from mpvlab.results.summary_parts.base import OpenRecord, Record


def _voip_delay(q: str, rank: float) -> MetricDef:
    return MetricDef(
        f"VoIP probe queuing delay, {q}", "ms", 0, INF, "lower",
        f"the {q} of the probe's one-way queuing delay (receiver's kernel rx stamp − sender's stamp, less the "
        "run's smallest difference: mpvlab/topologies/voip_probe.py)", STUDY_SABRE, qoe=True, rank=rank)


_VoipP50 = Annotated[float | None, _voip_delay("median", 20.1)]
_VoipP95 = Annotated[float | None, _voip_delay("95th percentile", 20.2)]
_VoipP99 = Annotated[float | None, _voip_delay("99th percentile", 20.3)]


class VoipQueuingDelay(OpenRecord):
    p50: _VoipP50 = None
    p95: _VoipP95 = None
    p99: _VoipP99 = None


class VoipWindow(Record):
    """The probe's queuing delay over one named window (mpvlab/results/delaywindows.py), in ms."""
    start_s: float | None = Field(None, description="window start, seconds since t0 (by packet send time)")
    end_s: float | None = Field(None, description="window end, seconds since t0 (by packet send time)")
    definition: str = Field(description="which probe packets the window holds, in words")
    packets: int = Field(description="probe packets in the window (count)")
    p50: float | None = Field(
        None, description="median of the window's queuing delays (ms, nearest rank); null without packets")
    p95: float | None = Field(
        None, description="95th percentile of the window's queuing delays (ms, nearest rank); null without packets")
    p99: float | None = Field(
        None, description="99th percentile of the window's queuing delays (ms, nearest rank); null without packets")
    max: float | None = Field(None, description="largest queuing delay in the window (ms); null without packets")
    share_above_ms: dict[Literal["50", "100", "200", "400", "500"], float | None] = Field(
        description="share of the window's packets whose delay is strictly above each threshold (ms)")


def _voip_steady(q: str, rank: float) -> MetricDef:
    return MetricDef(
        f"VoIP probe queuing delay, steady state, {q}", "ms", 0, INF, "lower",
        f"the {q} of the probe's queuing delay over the steady state: from when every player's playout buffer "
        "first held the buffer less one segment until the last media download completed (mpvlab/results/delaywindows.py)",
        STUDY_SABRE, qoe=True, rank=rank)


_SteadyP50 = Annotated[float | None, _voip_steady("median", 20.4)]
_SteadyP95 = Annotated[float | None, _voip_steady("95th percentile", 20.5)]
_SteadyP99 = Annotated[float | None, _voip_steady("99th percentile", 20.6)]
_SteadyMax = Annotated[float | None, _voip_steady("maximum", 20.7)]


class VoipSteadyWindow(VoipWindow):
    p50: _SteadyP50 = None
    p95: _SteadyP95 = None
    p99: _SteadyP99 = None
    max: _SteadyMax = None


class VoipWindows(Record):
    """The probe's delays over named windows: the whole run, the steady state, and SABRE's modes within it."""
    t0_ns: int = Field(description="run time zero (CLOCK_MONOTONIC ns): the windows' seconds count from it, and "
                                   "the probe CSV's t_send_ns is on the same clock")
    whole_run: VoipWindow = Field(description="every probe packet received")
    steady_state: VoipSteadyWindow | None = Field(
        None, description="from when every player's playout buffer first held the buffer less one segment until the "
                          "last media download completed")
    steady_state_missing: str | None = Field(None, description="why there is no steady-state window")
    sabre_initial: VoipWindow | None = Field(
        None, description="steady-state packets sent while every SABRE player was in mode initial; null without SABRE "
                          "players or such packets")
    sabre_refill: VoipWindow | None = Field(
        None, description="steady-state packets sent while every SABRE player was in mode refill; null without SABRE "
                          "players or such packets")
    sabre_backoff: VoipWindow | None = Field(
        None, description="steady-state packets sent while every SABRE player was in mode backoff; null without SABRE "
                          "players or such packets")
    sabre_mixed: VoipWindow | None = Field(
        None, description="steady-state packets sent while SABRE players were in different modes; null without SABRE "
                          "players or such packets")


class VoipRecord(OpenRecord):
    queuing_delay_ms: VoipQueuingDelay | None = Field(
        None, description="the probe's one-way queuing delay over the whole run: percentiles (ms; "
                          "mpvlab/topologies/voip_probe.py)")
    windows: VoipWindows | None = Field(
        None, description="the probe's delays over named windows (mpvlab/results/delaywindows.py)")


class CrossTraffic(OpenRecord):
    """What the cross-traffic sources recorded (bulk, voip; topologies/); the probe's delay percentiles typed."""

    voip: VoipRecord | None = Field(
        None, description="the VoIP probe's record (mpvlab/topologies/voip_probe.py); null without a voip cross source")
