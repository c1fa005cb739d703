"""summary.json's player parts: a player's QoE (`PlayerQoE`, flat in single-client runs, per
player in shared-bottleneck runs), its DASH record, its CPU use, and the players of a shared run
together (`SharedAggregate`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mpvlab.player.contract import AbrRecord
from mpvlab.results.metricdef import INF, MPVLAB, STUDY_BBRS, STUDY_SABRE, STUDY_WIFI_LTE, MetricDef, View
from mpvlab.results.summary_parts.base import SKEWED, OpenRecord, Record, UnderflowEpisode


class CpuUse(Record):
    user_s: float = Field(description="user-mode CPU time of the process, all threads (getrusage RUSAGE_SELF, s)")
    system_s: float = Field(description="kernel-mode CPU time of the process, all threads (getrusage RUSAGE_SELF, s)")
    wall_s: float = Field(
        description="wall-clock time from the process's start to the measurement (CLOCK_MONOTONIC, s)")
    share_of_core: float | None = Field(
        None, description="(user_s + system_s) / wall_s: the process's CPU use as a share of one core (fraction; >1 = "
                          "more than one core)")


class DashRepresentation(Record):
    """One video representation of the MPD, as the player recorded it: the GStreamer players from the MPD
    (mpvlab/player/gstreamer/dash.py parse_mpd: all five fields), dash.js from its bitrate list
    (mpvlab/player/dashjs/qoe.py: level and bitrate_bps only)."""

    level: int = Field(description="the quality level: index in bitrate order (0 = lowest)")
    bitrate_bps: int = Field(description="the representation's declared bitrate (@bandwidth; bit/s)")
    id: str | None = Field(None, description="the MPD's Representation@id (\"\" when the MPD gives none); absent "
                                             "for dash.js")
    width: int | None = Field(None, description="the MPD's Representation@width (pixels; 0 when the MPD gives none); "
                                                "absent for dash.js")
    height: int | None = Field(None, description="the MPD's Representation@height (pixels; 0 when the MPD gives none); "
                                                 "absent for dash.js")


class DashView(Record):
    abr: AbrRecord | None = Field(None, description="the ABR as the player ran it: name, parameters, seed (own "
                                                    "client), version of the third-party code it ran in (dash.js) "
                                                    "(mpvlab/player/contract.py)")
    representations: list[DashRepresentation] | None = Field(
        None, description="the MPD's representations the player could choose: level, bitrate_bps (and id, width, "
                          "height where the player records them) (mpvlab/player/gstreamer/dash_client.py, mpvlab/player/dashjs/qoe.py)")
    segment_s: float | None = Field(None, description="the media segment duration the MPD declares (s)")
    quality_avg: Annotated[float | None, MetricDef(
        "DASH average quality level", "level (0 = lowest)", 0, INF, "higher",
        "quality level (0 = lowest representation) averaged over downloaded segments", STUDY_BBRS,
        **SKEWED, qoe=True, rank=16,
        views={"summary": View(7, "DASH quality level", only_if_present=True)})] = None
    bitrate_avg_bps: Annotated[float | None, MetricDef(
        "DASH average bitrate", "bit/s", 0, INF, "higher",
        "nominal bitrate of the downloaded segments, averaged", STUDY_BBRS, qoe=True, rank=18)] = None
    bitrate_switches: Annotated[int | None, MetricDef(
        "DASH bitrate switches", "switches", 0, INF, "lower",
        "changes of quality level between consecutive segments", STUDY_BBRS, **SKEWED, qoe=True, rank=19,
        views={"summary": View(9, "DASH switches", only_if_present=True)})] = None
    stall_rate: Annotated[float | None, MetricDef(
        "DASH stall rate", "(playback − video) / video", 0, INF, "lower",
        "the stall ratio under the BBR-S study's name, clamped at 0", STUDY_BBRS,
        **SKEWED, qoe=True, clamp=True, rank=17,
        views={"summary": View(8, "DASH stall rate", only_if_present=True)})] = None
    rebuffer_events: Annotated[int | None, MetricDef(
        "DASH rebuffer events", "events", 0, INF, "lower",
        "playout-buffer underflow episodes (= underflows), under the DASH studies' name", STUDY_BBRS,
        **SKEWED, qoe=True, rank=19.5)] = None
    rebuffer_ratio: Annotated[float | None, MetricDef(
        "DASH rebuffer ratio", "stalled / playback", 0, 1, "lower",
        "time in underflow / total playback time (the share of the session spent stalled; the stall rate "
        "divides the same excess by the video length instead)", STUDY_BBRS, **SKEWED, qoe=True, rank=19.6)] = None
    abr_policy_mismatches: int | None = Field(
        None, description="segments whose requested level differs from the ABR rule's decision (count; 0 by "
                          "construction where the client builds the URL from the decision; mpvlab/player/gstreamer/dash.py "
                          "compares them)")
    segments: int = Field(description="media segments downloaded by the DASH client (count)")


class PlayerQoE(Record):
    """The player's quality of experience (player/README.md defines each counter)."""

    underflows: Annotated[int | None, MetricDef(
        "buffer underflows", "events", 0, INF, "lower",
        "playout-buffer underflow episodes at the client: the decoder's input queue ran empty while playing "
        "(episodes closer than the player's merge window count once)", STUDY_WIFI_LTE, **SKEWED, qoe=True, rank=1,
        views={"configs": View(1, "underflows"), "summary": View(1, "underflows"), "runs": View(1, "underflows"),
               "bars": View(1, "Buffer underflows", "underflow events per run")})] = Field(
        None, description="playout-buffer underflow episodes")
    underflow_total_s: Annotated[float | None, MetricDef(
        "time in underflow", "s", 0, INF, "lower", "sum of the underflow episodes' durations", MPVLAB,
        **SKEWED, qoe=True, rank=2,
        views={"configs": View(2, "underflow time"), "summary": View(5, "underflow time (s)")})] = Field(
        None, description="total time the buffer was empty after startup (s)")
    picture_discards: Annotated[int | None, MetricDef(
        "picture discards", "frames", 0, INF, "lower",
        "frames the sink discarded as too late (QoS), i.e. not shown", STUDY_WIFI_LTE, **SKEWED, qoe=True, rank=3,
        views={"configs": View(3, "picture discards"), "summary": View(2, "picture discards"),
               "runs": View(2, "discards")})] = Field(
        None, description="frames the decoder/sink discarded")
    # The bar figures draw the two causes apart: a discard with data buffered is the client's CPU being
    # late and is never plotted as the network's outcome.
    picture_discards_network: Annotated[int | None, MetricDef(
        "picture discards during underflow (network)", "frames", 0, INF, "lower",
        "discards while an underflow episode was open: picture_discards − picture_discards_no_underflow "
        "(the discards the network's late data explains)", STUDY_WIFI_LTE, **SKEWED, qoe=True, rank=3.5,
        views={"bars": View(2, "Picture discards during underflow (network)", "discarded frames per run")})] = Field(
        None, description="picture_discards − picture_discards_no_underflow: discards while an underflow episode was "
                          "open (frames); null when the player cannot tell them apart")
    picture_discards_no_underflow: Annotated[int | None, MetricDef(
        "picture discards with data buffered (CPU-late)", "frames", 0, INF, "lower",
        "discards while no underflow episode was open: late for the CPU, not the network "
        "(read beside host CPU steal)", MPVLAB, **SKEWED, rank=4,
        views={"runs": View(3, "of which CPU-late"),
               "bars": View(3, "Picture discards with data buffered (CPU-late, not the network)",
                            "CPU-late discarded frames per run")})] = Field(
        None, description="discards while the playout buffer had data: the CPU, not the network, was late")
    frames_rendered_late: int | None = Field(
        None, description="frames the sink rendered although late (GStreamer basesink's emergency renders; count; null"
                          " for players that cannot see it, e.g. dash.js) (mpvlab/player/gstreamer/player.py)")
    frames_accounted: bool | None = Field(None, description="rendered + discarded = expected")
    underflow_episodes: list[UnderflowEpisode] | None = Field(
        None, description="each playout-buffer underflow as [start, end] on the run's clock (s) (player)")
    frames_expected: Annotated[int | None, MetricDef(
        "frames expected", "frames", 0, INF, "none", "frames in the video (from the container)", MPVLAB,
        **SKEWED, rank=7)] = None
    frames_rendered: Annotated[int | None, MetricDef(
        "frames rendered", "frames", 0, INF, "higher", "frames the sink showed", MPVLAB, **SKEWED, rank=6,
        views={"configs": View(7, "frames rendered")})] = None
    startup_delay_s: Annotated[float | None, MetricDef(
        "startup delay", "s", 0, INF, "lower", "time from the player's start to its first rendered frame", MPVLAB,
        qoe=True, rank=8,
        views={"configs": View(5, "startup delay"), "summary": View(4, "startup delay (s)"),
               "runs": View(5, "startup (s)")})] = Field(
        None, description="from the first request to the first frame shown (s)")
    stall_ratio: Annotated[float | None, MetricDef(
        "stall ratio", "(playback − video) / video", 0, INF, "lower",
        "(total playback time − video length) / video length, clamped at 0 (a playback a few ms shorter "
        "than the video is timing noise, not negative stalling)", STUDY_BBRS, **SKEWED, qoe=True, clamp=True, rank=9,
        views={"configs": View(6, "stall ratio"), "summary": View(6, "stall ratio")})] = Field(
        None, description="underflow time / video length")
    dash: DashView | None = Field(
        None, description="the DASH client's record (ABR, representations, per-segment QoE); null when the player did "
                          "not run DASH")


class PlayerStart(Record):
    configured_s: float = Field(
        description="run time at which the player was told to start: its client index × topology.client_stagger (s)")
    actual_s: float | None = Field(
        description="run time of the player's own `start` event, just before its first request (s; null when it "
                    "recorded none)")
    qoe_window_s: list[float] | None = Field(
        description="[actual_s, end of stream]: the run-time window over which this player's QoE (startup delay, "
                    "stalls, playback) is measured (s; null without both ends)")


class SharedPlayer(PlayerQoE):
    start: PlayerStart | None = Field(
        None, description="when the player started on the run's clock (topology.client_stagger) and the window its "
                          "QoE covers")
    playback_s: float | None = Field(
        None, description="from the player's first rendered frame to its end of stream (s; mpvlab/player/gstreamer/player.py)")
    bytes_received: int | None = Field(None, description="bytes the player downloaded (B, the player's own count)")
    download_complete: bool | None = Field(
        None, description="whether the player's source reached end of stream (the whole video arrived)")
    cpu: CpuUse | None = Field(None, description="the player process's CPU use (getrusage)")
    interface_rx_bytes: int = Field(
        description="bytes received on the player's leaf interface over the run (interface counters, B)")
    mean_throughput_bps: int | None = Field(description="bytes_received × 8 / playback_s (bit/s); null without either")


def _mean_over_players(what: str, unit: str, hi: float, better: str, rank: float,
                       skewed: bool = True) -> MetricDef:
    return MetricDef(
        f"{what} (mean over players)", unit, 0, hi, better,  # type: ignore[arg-type]
        f"each player's {what} (its `dash` record), averaged over the run's players", STUDY_SABRE,
        **(SKEWED if skewed else {}), qoe=True, rank=rank)


# The field types below, named (a call inside a class annotation reads as a forward reference to
# linters and to anyone skimming).
_QualityMean = Annotated[float | None,
                         _mean_over_players("DASH average quality level", "level (0 = lowest)", INF, "higher", 16.1)]
_BitrateMean = Annotated[float | None,
                         _mean_over_players("DASH average bitrate", "bit/s", INF, "higher", 18.1, skewed=False)]
_SwitchesMean = Annotated[float | None, _mean_over_players("DASH bitrate switches", "switches", INF, "lower", 19.1)]
_StallRateMean = Annotated[float | None,
                           _mean_over_players("DASH stall rate", "(playback − video) / video", INF, "lower", 17.1)]
_RebufferMean = Annotated[float | None,
                          _mean_over_players("DASH rebuffer ratio", "stalled / playback", 1, "lower", 19.7)]


def _across_players(label: str, unit: str, hi: float, better: str, definition: str, rank: float,
                    skewed: bool = True) -> MetricDef:
    """A metric of how the players of one run differ (null with fewer than two DASH players: one
    player's fairness is trivially 1 and its min = max = mean)."""
    return MetricDef(
        label, unit, 0, hi, better, definition, STUDY_SABRE,  # type: ignore[arg-type]
        **(SKEWED if skewed else {}), qoe=True, rank=rank)


_BitrateJain = Annotated[float | None, _across_players(
    "DASH bitrate fairness between players (Jain)", "index (1 = equal)", 1, "higher",
    "Jain's fairness index of the players' DASH average bitrates, (Σx)² / (N·Σx²): 1 when every player got "
    "the same average bitrate, 1/N when one got everything (Jain, Chiu, Hawe, DEC-TR-301, 1984)", 18.2)]
_BitrateMin = Annotated[float | None, _across_players(
    "DASH average bitrate, lowest player", "bit/s", INF, "higher",
    "the smallest of the players' DASH average bitrates", 18.3, skewed=False)]
_BitrateMax = Annotated[float | None, _across_players(
    "DASH average bitrate, highest player", "bit/s", INF, "none",
    "the largest of the players' DASH average bitrates", 18.4, skewed=False)]
_StallRateMax = Annotated[float | None, _across_players(
    "DASH stall rate, worst player", "(playback − video) / video", INF, "lower",
    "the largest of the players' DASH stall rates", 17.2)]


class SharedAggregate(OpenRecord):
    """The players of a shared-bottleneck run together (mpvlab/runner/shared.py); the DASH means are the
    study's per-run QoE when every player runs DASH, null otherwise."""

    players: int = Field(description="the run's players (count)")
    quality_avg_mean: _QualityMean = None
    bitrate_avg_bps_mean: _BitrateMean = None
    bitrate_switches_mean: _SwitchesMean = None
    stall_rate_mean: _StallRateMean = None
    rebuffer_ratio_mean: _RebufferMean = None
    # between the players, when at least two ran DASH (mpvlab/runner/shared.py)
    bitrate_fairness_jain: _BitrateJain = None
    bitrate_avg_bps_min: _BitrateMin = None
    bitrate_avg_bps_max: _BitrateMax = None
    stall_rate_max: _StallRateMax = None
