"""summary.json's `fidelity_checks`: the named whole-run plausibility checks of mpvlab/runner/runchecks.py,
one record each (their rows in docs/reference/cross-checks.md). A closed record: its keys are the checks
the registry (mpvlab/results/checks.py) stores in fidelity_checks, so a new one is named here too."""

from __future__ import annotations

from pydantic import Field

from mpvlab.results.summary_parts.base import Record


class ProbeDelayCheck(Record):
    """probe_delay_within_queue_bound (runchecks.py check_probe_delay)."""

    ok: bool = Field(description="whether the probe's largest one-way delay stayed within bound_ms")
    probe_owd_max_ms: float | None = Field(
        description="the VoIP probe's largest one-way delay (kernel receive stamp − send stamp; ms); null without "
                    "packets")
    bound_ms: float = Field(description="queue_bytes × 8 / rate_bps + propagation_max_ms + margin_ms (ms)")
    queue_bytes: int = Field(description="the path's down buffer, packets counted as 1514 B frames (B)")
    rate_bps: int = Field(description="the path's configured down rate (bit/s)")
    propagation_max_ms: float = Field(description="the largest one-way delay of the path's down delay schedule (ms)")
    margin_ms: float = Field(description="runchecks.PROBE_DELAY_MARGIN_S (ms)")
    packets: int = Field(description="probe packets in its record (count)")


class PlaybackPlayerCheck(Record):
    ok: bool = Field(description="whether playback_s ≤ bound_s")
    playback_s: float = Field(description="the player's playback time, first frame to end of stream (s)")
    bound_s: float = Field(description="media_s + stalls_s + the check's margin_s (s)")
    media_s: float = Field(description="the scenario's media length (s)")
    stalls_s: float = Field(description="the stalls the player recorded, summed (underflow_total_s; s)")


class PlaybackCheck(Record):
    """playback_within_media_and_stalls (runchecks.py check_playback)."""

    ok: bool = Field(description="whether every player's check held")
    margin_s: float = Field(description="runchecks.PLAYBACK_MARGIN_S (s)")
    players: dict[str, PlaybackPlayerCheck] = Field(
        description="per player role (`player` in a single-client run): its playback against its bound")


class SilenceCheck(Record):
    """no_simultaneous_silence (runchecks.py check_silence)."""

    ok: bool = Field(description="whether no silence was found")
    silence_threshold_s: float = Field(
        description="the shortest silence counted: max(SILENCE_FLOOR_S, the probe's delay bound + one links.csv "
                    "sample period) (s)")
    silences: int = Field(description="intervals of at least the threshold with nothing received (count)")
    longest_silence_s: float = Field(description="the longest of them (s); 0 without any")
    intervals_s: list[list[float]] = Field(
        description="[start, end] on the run's clock of the first 10 of them (s)")
    probe_packets: int = Field(description="probe packets received (count)")


class FidelityChecks(Record):
    """The whole-run checks that applied to the run; a check that did not apply is absent."""

    probe_delay_within_queue_bound: ProbeDelayCheck | None = Field(
        None, description="the VoIP probe's largest one-way delay against what the configured path can hold")
    playback_within_media_and_stalls: PlaybackCheck | None = Field(
        None, description="each player's playback time against the media's length plus its recorded stalls")
    no_simultaneous_silence: SilenceCheck | None = Field(
        None, description="no interval in which neither the probe nor any client interface received anything")
