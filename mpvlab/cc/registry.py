"""Every congestion control a scenario may name, listed once.

Each entry carries what the rest of the platform needs of it: its parameter model (validated by the
scenario schema), whether it is a kernel CC or a BPF one loaded for the run, whether it can run on
physical hosts, how to set it up for a run, how the report shows it (label, colour, marker, order)
and where its per-flow model state is written (`state`: file and columns, read by the summary's
`cc_state`, mpvlab.results and the report's BBR figures). The scenario schema, the run and the report read this list; nothing else names CCs.

Adding a CC: one entry here (and, for a BPF CC, its loader): see cc/README.md, "Adding a CC".
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from pydantic import BaseModel, Field

from mpvlab.cc.ccrun import CCRun
from mpvlab.core import naming
from mpvlab.core.quantities import Strict

import mpvlab.cc as bbrs_loader
from mpvlab.cc import bbr3, user_bpf


class BbrsParams(Strict):
    """BBR-S (docs/studies.md §2): the p-th percentile of the last N delivery-rate samples, times a
    factor, is the bandwidth estimate. Ranges are the loader's own (cc/percentile.h)."""

    window: int = Field(100, ge=1, le=bbrs_loader.MAX_WINDOW, description="delivery-rate samples kept (N)")
    percentile: float = Field(85.0, gt=0.0, le=100.0, description="percentile used as bandwidth estimate (p)")
    factor: float = Field(1.0, gt=0.0, le=2.0, description="multiplier on the estimate (BBR2-S: 0.85)")


@dataclass(frozen=True)
class StateSeries:
    """Where a CC's per-flow model state lies in a run directory and which columns hold what, so the
    report and the tidy loader read the registry instead of a list of file names.

    Every file named here has one row per flow per sample and the flow's 4-tuple as seen by the
    sending (server) socket: `saddr, sport, daddr, dport` (or `local`/`peer` endpoints for `ss`)."""

    file: str                               # below the run's data/ folder
    bw: str                                 # bandwidth estimate the CC used, bit/s (payload)
    min_rtt: str | None                     # the CC's min RTT
    min_rtt_to_ms: float = 1e-3             # factor: min_rtt column -> ms
    mode: str | None = None                 # STARTUP / DRAIN / PROBE_BW / PROBE_RTT
    # PROBE_BW sub-phase: a column naming it (BBRv3: UP/DOWN/CRUISE/REFILL), or, for v1 (whose gain
    # cycle index is not exported), a pacing-gain column (name ending "pacing_gain"): UP above 1, DOWN
    # below 1, CRUISE at 1.
    phase: str | None = None
    time: str = "t_ns"                      # "t_ns": CLOCK_MONOTONIC ns; "t_s": the run's clock
    tuple_cols: tuple[str, ...] = ("saddr", "sport", "daddr", "dport")
    per_ack: bool = True                    # values change per ACK (sampled at the loader's rate)


BBRS_STATE = StateSeries("bbrs_state.csv", "bw_est_bps", "min_rtt_us", mode="mode", phase="pacing_gain")
BBR3_STATE = StateSeries("bbr3_state.csv", "bw_est_bps", "min_rtt_us", mode="mode", phase="phase")
BBR3S_STATE = StateSeries("bbr3s_state.csv", "bw_est_bps", "min_rtt_us", mode="mode", phase="phase")
# Kernel BBR v1: `get_info` (ss's bbr:(bw:…,mrtt:…,pacing_gain:…,cwnd_gain:…)) at the ss sampler's
# rate; the mode is not exported, the sampler infers it from the gains (mpvlab/cc/bbr_modes.py).
KERNEL_BBR_STATE = StateSeries("subflows.csv", "bbr_bw_bps", "bbr_min_rtt_ms", min_rtt_to_ms=1.0, mode="bbr_mode",
                               phase="bbr_pacing_gain", time="t_s", tuple_cols=("local", "peer"), per_ack=False)


# setup(run_id, params, data_dir, logs_dir, state_hz) -> context manager yielding a CCRun
Setup = Callable[[str, BaseModel | None, Path, Path, float], ContextManager[CCRun]]


@dataclass(frozen=True)
class CongestionControl:
    name: str
    description: str
    label: str
    colour: str
    marker: str
    params: type[BaseModel] | None     # None: the CC takes no parameters
    setup: Setup
    bpf: bool                          # loaded for the run (needs this machine's kernel and root)
    bbr_family: bool                   # the report shows its BBR model (mode shares, estimates)
    # setup takes scenario_dir= as well (a user's object lies in the scenario's folder)
    needs_scenario_dir: bool = False
    state: StateSeries | None = None   # where its per-flow model state is written (None: not observable)

    def kernel_name(self, run_id: str) -> str:
        """What the kernel calls it in run `run_id`: a BPF CC is registered under a run-scoped name
        (mpvlab/core/naming.py), so concurrent runs never share or remove each other's."""
        return naming.cc_name(run_id, self.name.replace("-", "")[:8]) if self.bpf else self.name

    def parse_params(self, values: dict[str, Any] | None) -> BaseModel | None:
        """The CC's parameters with defaults filled in; ValueError names what is wrong."""
        if self.params is None:
            return None
        return self.params.model_validate(values or {})


def _kernel(name: str) -> Setup:
    @contextlib.contextmanager
    def setup(_run_id: str, _params: BaseModel | None, _data: Path, _logs: Path, _hz: float) -> Iterator[CCRun]:
        yield CCRun(name)
    return setup


@contextlib.contextmanager
def _bbrs(run_id: str, params: BaseModel | None, data: Path, logs: Path, state_hz: float) -> Iterator[CCRun]:
    assert isinstance(params, BbrsParams)
    name = REGISTRY["bbr-s"].kernel_name(run_id)
    csv = data / BBRS_STATE.file
    with bbrs_loader.load_bbrs(name, params.window, params.percentile, params.factor, csv, logs,
                               state_hz=state_hz) as load:
        yield CCRun(name, load.pid, csv)


def _user_object(run_id: str, params: BaseModel | None, data: Path, logs: Path, state_hz: float, *,
                 scenario_dir: Path) -> ContextManager[CCRun]:
    assert isinstance(params, user_bpf.UserBpfCC)
    return user_bpf.setup_user_bpf(run_id, params, scenario_dir, data, logs, state_hz)


# In the report's order; colours from a colour-blind-safe palette (Okabe–Ito).
ENTRIES: tuple[CongestionControl, ...] = (
    CongestionControl("cubic", "CUBIC (kernel)", "CUBIC", "#0072B2", "o", None, _kernel("cubic"), False, False),
    CongestionControl("reno", "Reno / NewReno (kernel)", "Reno", "#7F7F7F", "v", None, _kernel("reno"), False, False),
    CongestionControl("bbr", "BBR v1 (kernel tcp_bbr)", "BBR", "#D55E00", "s", None, _kernel("bbr"), False, True,
                      state=KERNEL_BBR_STATE),
    CongestionControl("bbr-s", "BBR v1 with the p-th percentile of the last N delivery-rate samples as its "
                      "bandwidth estimate (BPF struct_ops, docs/studies.md §2)", "BBR-S", "#009E73", "^",
                      BbrsParams, _bbrs, True, True, state=BBRS_STATE),
    CongestionControl("bbr3", "BBRv3 (our BPF struct_ops port of Google's v3 tcp_bbr, cc/bbr3.bpf.c)", "BBRv3",
                      "#000000", "D", bbr3.Bbr3Params, bbr3.setup_bbr3, True, True,
                      state=BBR3_STATE),
    CongestionControl("bbr3-s", "BBRv3 with the p-th percentile of the last N delivery-rate samples times a "
                      "factor as max_bw (BBR2-S's estimator on v3)", "BBRv3-S", "#F0E442", "P",
                      bbr3.Bbr3SParams, bbr3.setup_bbr3s, True, True,
                      state=BBR3S_STATE),
    CongestionControl("bpf", "your own BPF struct_ops object, `cc: {bpf: FILE.bpf.o, params: {NAME: INT}}` "
                      "(mpvlab/cc/user_bpf.py)", "own BPF CC", "#332288", "*", user_bpf.UserBpfCC, _user_object,  # type: ignore[arg-type]
                      True, False, needs_scenario_dir=True),
)
REGISTRY: dict[str, CongestionControl] = {e.name: e for e in ENTRIES}


AVAILABLE_FILE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
KERNEL_CC_RE = re.compile(r"^[a-z][a-z0-9]{0,15}$")   # run-scoped BPF names (<base>_<run id>) never match


def kernel_available() -> list[str]:
    """Kernel CCs this machine lists (modules loaded or built in), without other runs' BPF CCs.
    The list is the kernel's, the same in every network namespace; a namespace's `allowed` list only
    limits unprivileged sockets, and the run sets its CC as root (route congctl, TCP_CONGESTION)."""
    try:
        names = AVAILABLE_FILE.read_text().split()
    except OSError:
        return []
    return [n for n in names if KERNEL_CC_RE.fullmatch(n)]


def get(name: str) -> CongestionControl:
    """The registry's entry, or, for a CC the kernel lists that the registry does not (e.g. vegas
    where its module is loaded), a plain kernel entry shown under its own name."""
    if name in REGISTRY:
        return REGISTRY[name]
    if KERNEL_CC_RE.fullmatch(name) and name in kernel_available():
        return CongestionControl(name, f"{name} (kernel)", name, "#882255", "X", None, _kernel(name), False, False)
    listed = [n for n in kernel_available() if n not in REGISTRY]
    raise ValueError(f"{name!r} is not a congestion control here; available: {', '.join(REGISTRY)}"
                     + (f", and from the kernel's list: {', '.join(listed)}" if listed else "")
                     + f" ({AVAILABLE_FILE} lists what this kernel has)")


def order(name: str) -> tuple[int, str]:
    """Sort key: registry order, unknown names after."""
    names = list(REGISTRY)
    return (names.index(name) if name in names else len(names), name)
