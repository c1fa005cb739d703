"""Parameters of each MPTCP scheduler: defaults, ranges, units (pydantic, like mpvlab/input/scenario.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DefaultParams(_Strict):
    """The kernel's own `default` scheduler. `observe` runs the controller's BPF side in record-only
    mode (bytes per subflow, path switches; no flags touched, no path-manager change)."""

    observe: bool = False


class SteerParams(_Strict):
    """Common to the steering controller's policies."""

    period_us: int = Field(1000, ge=100, le=100_000, description="controller tick: state read, policy run")
    release_ms: float = Field(
        250.0, ge=0.0, le=5000.0,
        description="a window-/buffer-limited subflow keeps the next one open this long after it was last "
                    "limited (limited-ness flips per ACK; without a hold the flags would too)")
    backlog_ms: float = Field(
        20.0, ge=0.0, le=1000.0,
        description="a subflow holding more unsent data than it sends in this time counts as limited "
                    "(besides in-flight >= cwnd with unsent data, and wmem_queued >= sndbuf)")
    probe_interval_ms: float = Field(
        2000.0, ge=0.0, le=600_000.0,
        description="an excluded subflow that got no data this long is opened for probe_ms, so that its RTT "
                    "and rate estimates are refreshed (an idle subflow gets no samples); 0: never")
    probe_ms: float = Field(100.0, ge=0.0, le=10_000.0, description="length of such a probe")
    sndbuf_bytes: int | None = Field(
        None, ge=16_384, le=64 * 2**20,
        description="per-subflow send-buffer bound (the kernel's sk_sndbuf), set on the server's listener; "
                    "None: autotuned (flips then take 50-400 ms to show: queued data drains first). "
                    "Use sndbuf_for_paths() for 2 x the largest path BDP")
    exhaust_ms: float = Field(
        0.0, ge=0.0, le=10_000.0,
        description="the preferred subflow opens the next one only after it has been limited this long, "
                    "breaks under a quarter of it not counting (0: at once, minrtt's definition)")
    sample_hz: float = Field(20.0, ge=0.0, le=1000.0, description="controller_samples.csv rows per subflow per s")

    def controller_args(self) -> list[str]:
        """mpvlab-steer's options for these parameters; a policy with knobs of its own adds them."""
        args = ["--period-us", str(self.period_us), "--release-ms", repr(self.release_ms),
                "--backlog-ms", repr(self.backlog_ms), "--probe-interval-ms", repr(self.probe_interval_ms),
                "--probe-ms", repr(self.probe_ms), "--exhaust-ms", repr(self.exhaust_ms),
                "--sample-hz", repr(self.sample_hz)]
        if self.sndbuf_bytes:
            args.append("--sndbuf-bounded")   # the buffer test allows for a bound that cannot grow
        return args


class MinRttParams(SteerParams):
    pass


class BdpParams(SteerParams):
    hysteresis: float = Field(0.25, ge=0.0, le=10.0,
                              description="switch only when another path's BDP estimate exceeds the current "
                                          "one's by this fraction")
    probe_interval_ms: float = Field(
        5000.0, ge=0.0, le=600_000.0,
        description="as for minrtt, longer: probes refresh only the rate max filter (min RTT is windowed)")
    dwell_ms: float = Field(1000.0, ge=0.0, le=600_000.0,
                            description="no switch within this time of the previous choice (early estimates "
                                        "from slow start are noisy)")
    exhaust_ms: float = Field(
        200.0, ge=0.0, le=10_000.0,
        description="sticky until exhausted: the preferred path opens the next one only after it has been "
                    "limited this long (breaks under a quarter of it not counting); a burst it drains sooner "
                    "stays on it")
    bw_window_ms: float = Field(10_000.0, ge=10.0, le=600_000.0,
                                description="max filter window on delivery-rate samples (non-BBR CCs)")

    def controller_args(self) -> list[str]:
        return [*super().controller_args(), "--hysteresis", repr(self.hysteresis),
                "--bw-window-ms", repr(self.bw_window_ms), "--dwell-ms", repr(self.dwell_ms)]


class EcfParams(SteerParams):
    """ECF (Lim et al., CoNEXT 2017): minrtt's order, but a slower subflow gets data only when it
    would complete it earlier than waiting for the fastest one (policy.c: ecf_use_slower)."""

    beta: float = Field(0.25, ge=0.0, le=10.0,
                        description="ECF's beta: once it waits for the fastest subflow, it keeps waiting until "
                                    "waiting is slower by this fraction (the paper's 0.25), against flapping")

    def controller_args(self) -> list[str]:
        return [*super().controller_args(), "--hysteresis", repr(self.beta)]


AnyParams = DefaultParams | MinRttParams | BdpParams | EcfParams


# sk_wmem_queued (what sk_sndbuf bounds) counts skb truesize, not payload: without offloads a
# 1424-byte MPTCP segment costs ~2.1 KB here (measured: controller_samples.csv, wmem_queued against
# in-flight x 1424 + unsent), so a bound meant as N x BDP of payload is 1.5 x larger in sndbuf units.
TRUESIZE_RATIO = 1.5


def sndbuf_for_paths(paths: list[tuple[float, float]], factor: float = 2.0, floor: int = 65_536) -> int:
    """sk_sndbuf for `factor` x the largest bandwidth-delay product among (rate bit/s, RTT s) paths."""
    bdp = max(rate / 8 * rtt for rate, rtt in paths)
    return max(floor, int(bdp * factor * TRUESIZE_RATIO))
