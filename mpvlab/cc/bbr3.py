"""BBRv3 and BBRv3-S: our BPF struct_ops port of Google's v3 tcp_bbr (cc/bbr3.bpf.c), loaded for
one run by cc/build/bpfcc-loader (mpvlab/cc/user_bpf.py).

    with load_bbr3("bbr3_k3f9za", variant="bbr3", state_csv=run / "data/bbr3_state.csv",
                   events_csv=run / "data/bbr3_events.csv", workdir=run / "logs") as load:
        ...  # route congctl load.name

``variant="bbr3-s"`` replaces v3's max filter with BBR-S's estimator: the p-th percentile of the
last N non-app-limited delivery-rate samples times a factor (0.85 by default, as the BBR-S study
did for BBR2-S). Parameters are validated here (ValueError) and by the loader.

State export (same clock as BBR-S: CLOCK_MONOTONIC ns): ``*_state.csv`` one row per flow per
sample (columns in STATE_COLUMNS, cc/README.md), ``*_events.csv`` one row per mode / PROBE_BW
sub-state change and per round trip with a loss or a CE mark (EVENT_COLUMNS).
"""
from __future__ import annotations

import csv
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Literal

from pydantic import Field

from mpvlab.core import naming
from mpvlab.core.quantities import Strict

from mpvlab.cc.ccrun import CCRun
from mpvlab.cc.user_bpf import CC_DIR, BpfCCLoad, load_bpf_cc

OBJECT = CC_DIR / "build" / "bbr3.bpf.o"
MAX_WINDOW = 1024  # PCT_MAX_N in percentile.h
Variant = Literal["bbr3", "bbr3-s"]

STATE_COLUMNS = (
    "t_ns", "flow_id", "saddr", "sport", "daddr", "dport", "mode", "phase", "bw_est_bps", "max_bw_bps",
    "bw_hi0_bps", "bw_hi1_bps", "bw_lo_bps", "inflight_lo", "inflight_hi", "min_rtt_us", "pacing_gain",
    "cwnd_gain", "cwnd", "inflight", "round_delivered", "round_lost", "round_ce", "loss_rate_round",
    "ecn_alpha", "ecn_eligible", "percentile_bw_bps", "raw_percentile_bw_bps", "n_samples",
    "pacing_rate_bps", "mss", "acks", "rounds", "rounds_lossy", "rounds_over_thresh", "inflight_too_high",
    "probes", "updated_ns", "closed")
EVENT_COLUMNS = (
    "t_ns", "flow_id", "saddr", "sport", "daddr", "dport", "kind", "from_mode", "from_phase", "to_mode",
    "to_phase", "bw_est_bps", "inflight_hi", "inflight_lo", "cwnd", "round_delivered", "round_lost",
    "round_ce")
# PROBE_BW sub-state changes v3 makes (tcp_bbr.c bbr_update_cycle_phase / adapt_upper_bounds /
# check_time_to_probe_bw / handle_inflight_too_high): the cycle order DOWN -> CRUISE -> REFILL ->
# UP -> DOWN, where DOWN may go straight to REFILL (probe time reached before the queue drained, or
# a "risky" probe re-armed) and UP ends early on loss/ECN.
PROBE_BW_ORDER = {("DOWN", "CRUISE"), ("DOWN", "REFILL"), ("CRUISE", "REFILL"), ("REFILL", "UP"),
                  ("UP", "DOWN")}


class Bbr3Params(Strict):
    """BBRv3: v3's constants; `ecn` turns on v3's ECN response (needs ECN negotiated and a
    CE-marking bottleneck; this kernel has no marking qdisc, see cc/README.md)."""

    ecn: bool = Field(False, description="use v3's ECN response when the connection negotiated ECN")


class Bbr3SParams(Strict):
    """BBRv3-S: BBRv3 with the p-th percentile of the last N delivery-rate samples, times a
    factor, as max_bw (docs/studies.md §2: BBR2-S used the factor 0.85)."""

    window: int = Field(100, ge=1, le=MAX_WINDOW, description="delivery-rate samples kept (N)")
    percentile: float = Field(85.0, gt=0.0, le=100.0, description="percentile used as max_bw (p), 0.01 resolution")
    factor: float = Field(0.85, gt=0.0, le=2.0, description="multiplier on the percentile, 1e-4 resolution")
    ecn: bool = Field(False, description="use v3's ECN response when the connection negotiated ECN")


def loader_params(variant: Variant, window: int = 100, percentile: float = 85.0, factor: float = 0.85,
                  ecn: bool = False) -> dict[str, int]:
    """The object's mpvlab_param_* values for a variant (fractions scaled to integers)."""
    if variant not in ("bbr3", "bbr3-s"):
        raise ValueError(f"variant {variant!r}: expected 'bbr3' or 'bbr3-s'")
    p: dict[str, int] = {"estimator": 0, "ecn": int(bool(ecn))}
    if variant == "bbr3-s":
        checked = Bbr3SParams(window=window, percentile=percentile, factor=factor, ecn=ecn)
        p.update(estimator=1, window=checked.window, percentile_bp=round(checked.percentile * 100),
                 factor_bp=round(checked.factor * 10000))
    return p


@contextmanager
def load_bbr3(name: str, variant: Variant = "bbr3", *, window: int = 100, percentile: float = 85.0,
              factor: float = 0.85, ecn: bool = False, workdir: Path, state_csv: Path | None = None,
              events_csv: Path | None = None, state_hz: float = 100.0) -> Iterator[BpfCCLoad]:
    """Register BBRv3 (or BBRv3-S) as CC `name` while the block runs."""
    if not OBJECT.exists():
        raise RuntimeError(f"{OBJECT} missing: run `make -C {CC_DIR}`")
    with load_bpf_cc(OBJECT, name, loader_params(variant, window, percentile, factor, ecn), workdir=workdir,
                     state_csv=state_csv, events_csv=events_csv, state_hz=state_hz) as load:
        yield load


def _setup(variant: Variant, base: str, prefix: str):
    def setup(run_id: str, params: Strict | None, data: Path, logs: Path, state_hz: float):
        """Registry-shaped setup (mpvlab/cc/registry.py `Setup`): yields a CCRun."""

        @contextmanager
        def _cm() -> Iterator[CCRun]:
            kw: dict = {}
            if isinstance(params, Bbr3SParams):
                kw = dict(window=params.window, percentile=params.percentile, factor=params.factor)
            ecn = bool(getattr(params, "ecn", False))
            name = naming.cc_name(run_id, base)
            csv_path = data / f"{prefix}_state.csv"
            with load_bbr3(name, variant, ecn=ecn, workdir=logs, state_csv=csv_path,
                           events_csv=data / f"{prefix}_events.csv", state_hz=state_hz, **kw) as load:
                yield CCRun(name, load.pid, csv_path)
        return _cm()
    return setup


setup_bbr3 = _setup("bbr3", "bbr3", "bbr3")
setup_bbr3s = _setup("bbr3-s", "bbr3s", "bbr3s")


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def probe_bw_transitions(events: list[dict[str, str]], flow_id: str) -> list[tuple[str, str]]:
    """(from, to) PROBE_BW sub-state changes of one flow, in time order."""
    out = []
    for e in events:
        if e["flow_id"] == flow_id and e["kind"] == "transition" and \
                e["from_mode"] == "PROBE_BW" and e["to_mode"] == "PROBE_BW":
            out.append((e["from_phase"], e["to_phase"]))
    return out


def state_label(mode: str, phase: str) -> str:
    """'PROBE_BW:UP' etc.; the mode alone outside PROBE_BW (for the report's mode shares)."""
    return f"{mode}:{phase}" if mode == "PROBE_BW" and phase else mode
