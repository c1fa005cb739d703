"""Every metric a run's summary.json reports and the report aggregates, defined once: its key in
summary.json, label, unit, possible range, which direction is better, how it is computed, where the
convention comes from, and which interval and test the report uses for it.

The report's metric list, its tables' units, the range every confidence interval is kept inside and
the pairwise tests all come from `METRICS` (and `PATH_METRICS`, instantiated per path). The player
computes the QoE values (player/mpvlab_player.py); `stall_ratio()` here is the one formula both use.

Why two interval methods: a count (underflows, discards, switches) or a ratio bounded by 0 is skewed
and piles up at its bound over few trials, so mean ± t·s/√n (which assumes a symmetric, roughly normal
mean) can leave the possible range — on the project's synthetic set 13 of 324 rows did. For those the
report gives a bootstrap interval (BCa), which by construction lies within the observed values and so
within the range; the Student-t interval is still computed beside it. Durations that are far from
their bound (startup delay, playback time) keep the t interval, intersected with the range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Direction = Literal["lower", "higher", "none"]
Interval = Literal["t", "bootstrap"]
Test = Literal["welch", "mannwhitney"]

STUDY_WIFI_LTE = "Kondo et al., INTERNET 2023 (docs/studies.md §1)"
STUDY_BBRS = "Vargas et al., WWW 2021 (docs/studies.md §2)"
MPVLAB = "mpvlab (player/README.md)"


@dataclass(frozen=True)
class MetricDef:
    key: str                      # dotted path in summary.json (per-path metrics: under paths.<name>.)
    label: str
    unit: str
    lo: float                     # possible range (math.inf when unbounded)
    hi: float
    direction: Direction          # which way is better for a viewer / the study ("none": descriptive)
    definition: str
    source: str                   # where the convention comes from
    interval: Interval = "t"      # the confidence interval the report gives first
    test: Test = "welch"          # the pairwise test between configurations
    qoe: bool = False             # listed among the QoE metrics and compared pairwise
    clamp: bool = False           # values outside [lo, hi] are measurement noise: clamp when read

    def check(self, v: float) -> float:
        """The value clamped to the range when the definition says so (else returned as is)."""
        if self.clamp:
            return min(max(v, self.lo), self.hi)
        return v

    @property
    def range_text(self) -> str:
        def f(x: float) -> str:
            return "∞" if math.isinf(x) else f"{x:g}"
        return f"[{f(self.lo)}, {f(self.hi)}]"


INF = math.inf

METRICS: list[MetricDef] = [
    MetricDef("underflows", "buffer underflows", "events", 0, INF, "lower",
              "playout-buffer underflow episodes at the client: the decoder's input queue ran empty while playing "
              "(episodes closer than the player's merge window count once)", STUDY_WIFI_LTE,
              interval="bootstrap", test="mannwhitney", qoe=True),
    MetricDef("underflow_total_s", "time in underflow", "s", 0, INF, "lower",
              "sum of the underflow episodes' durations", MPVLAB, interval="bootstrap", test="mannwhitney", qoe=True),
    MetricDef("picture_discards", "picture discards", "frames", 0, INF, "lower",
              "frames the sink discarded as too late (QoS), i.e. not shown", STUDY_WIFI_LTE,
              interval="bootstrap", test="mannwhitney", qoe=True),
    MetricDef("picture_discards_no_underflow", "picture discards with data buffered (CPU-late)", "frames", 0, INF,
              "lower", "discards while no underflow episode was open: late for the CPU, not the network "
              "(read beside host CPU steal)", MPVLAB, interval="bootstrap", test="mannwhitney"),
    MetricDef("host_steal_during_playback.fraction", "host CPU steal during playback", "fraction of all CPUs' time",
              0, 1, "lower", "CPU time the hypervisor took from this VM during playback / (CPUs × playback)",
              MPVLAB, interval="bootstrap", test="mannwhitney"),
    MetricDef("frames_rendered", "frames rendered", "frames", 0, INF, "higher",
              "frames the sink showed", MPVLAB, interval="bootstrap", test="mannwhitney"),
    MetricDef("frames_expected", "frames expected", "frames", 0, INF, "none",
              "frames in the video (from the container)", MPVLAB, interval="bootstrap", test="mannwhitney"),
    MetricDef("startup_delay_s", "startup delay", "s", 0, INF, "lower",
              "time from the player's start to its first rendered frame", MPVLAB, qoe=True),
    MetricDef("stall_ratio", "stall ratio", "(playback − video) / video", 0, INF, "lower",
              "(total playback time − video length) / video length, clamped at 0 (a playback a few ms shorter "
              "than the video is timing noise, not negative stalling)", STUDY_BBRS,
              interval="bootstrap", test="mannwhitney", qoe=True, clamp=True),
    MetricDef("path_switches", "path switches", "switches", 0, INF, "none",
              "data-carrying MPTCP scheduling decisions that picked another subflow than the previous one "
              "(BPF trace of the kernel scheduler, collectors/README.md)", STUDY_WIFI_LTE,
              interval="bootstrap", test="mannwhitney", qoe=True),
    MetricDef("path_switches_wire", "path switches on the wire", "switches", 0, INF, "none",
              "consecutive new-data segments of one connection, in the order they left the server, on different "
              "subflows (capture at the server, collectors/wire_switches.py); only runs with observe.pcap at server",
              MPVLAB, interval="bootstrap", test="mannwhitney"),
    MetricDef("scheduler_decisions", "scheduler decisions", "decisions", 0, INF, "none",
              "MPTCP scheduling decisions seen by the trace", MPVLAB, interval="bootstrap", test="mannwhitney"),
    MetricDef("duration_s", "playback duration", "s", 0, INF, "lower",
              "time from the first frame to the end of the stream", MPVLAB),
    MetricDef("bytes_total", "bytes received (all paths)", "B", 0, INF, "none",
              "bytes received at the client's interfaces during playback", MPVLAB),
    MetricDef("fidelity_ok", "fidelity check passed", "fraction of runs", 0, 1, "higher",
              "1 when the emulator's probe of delay and rate was within tolerance", MPVLAB,
              interval="bootstrap", test="mannwhitney"),
    MetricDef("run_wall_s", "run wall time", "s", 0, INF, "none", "wall-clock time of the whole run", MPVLAB),
    MetricDef("dash.quality_avg", "DASH average quality level", "level (0 = lowest)", 0, INF, "higher",
              "quality level (0 = lowest representation) averaged over downloaded segments", STUDY_BBRS,
              interval="bootstrap", test="mannwhitney", qoe=True),
    MetricDef("dash.stall_rate", "DASH stall rate", "(playback − video) / video", 0, INF, "lower",
              "the stall ratio under the BBR-S study's name, clamped at 0", STUDY_BBRS,
              interval="bootstrap", test="mannwhitney", qoe=True, clamp=True),
    MetricDef("dash.bitrate_avg_bps", "DASH average bitrate", "bit/s", 0, INF, "higher",
              "nominal bitrate of the downloaded segments, averaged", STUDY_BBRS, qoe=True),
    MetricDef("dash.bitrate_switches", "DASH bitrate switches", "switches", 0, INF, "lower",
              "changes of quality level between consecutive segments", STUDY_BBRS,
              interval="bootstrap", test="mannwhitney", qoe=True),
]

# Per path (summary.json paths.<name>.<key>); instantiated per path name by `path_metric`.
PATH_METRICS: list[MetricDef] = [
    MetricDef("rx_bytes", "bytes received", "B", 0, INF, "none",
              "bytes received on the path's client interface during playback", MPVLAB),
    MetricDef("share", "share of bytes", "fraction", 0, 1, "none",
              "the path's bytes / all paths' bytes", STUDY_WIFI_LTE, interval="bootstrap", test="mannwhitney"),
    MetricDef("mean_throughput_bps", "mean throughput", "bit/s", 0, INF, "none",
              "the path's bytes × 8 / playback time", STUDY_WIFI_LTE),
    MetricDef("payload_bytes_handed", "payload handed by the scheduler", "B", 0, INF, "none",
              "bytes the MPTCP scheduler assigned to the path's subflow (BPF trace)", MPVLAB),
]

BY_KEY: dict[str, MetricDef] = {m.key: m for m in METRICS}


def path_metric(path: str, base: MetricDef) -> MetricDef:
    return MetricDef(f"paths.{path}.{base.key}", f"{path}: {base.label}", base.unit, base.lo, base.hi,
                     base.direction, base.definition, base.source, base.interval, base.test, base.qoe, base.clamp)


def lookup(key: str) -> MetricDef | None:
    """The definition of a summary key, including per-path keys (paths.<name>.<metric>)."""
    if key in BY_KEY:
        return BY_KEY[key]
    if key.startswith("paths."):
        parts = key.split(".")
        if len(parts) == 3:
            base = next((m for m in PATH_METRICS if m.key == parts[2]), None)
            if base is not None:
                return path_metric(parts[1], base)
    return None


def stall_ratio(playback_s: float, video_s: float) -> float:
    """(playback − video) / video, clamped at 0: the player's playback can end a few ms before the
    nominal video length (timestamps of the last frame vs the container's duration), which is not a
    negative stall (a report once showed −5.9e-05)."""
    if video_s <= 0:
        raise ValueError(f"stall_ratio: video length must be > 0 (got {video_s})")
    return max(0.0, (playback_s - video_s) / video_s)
