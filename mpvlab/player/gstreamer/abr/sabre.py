"""`sabre` and `on-off`: SABRE (Mansy, Ver Steeg, Ammar, "SABRE: A Client Based Technique for
Mitigating the Buffer Bloat Effect of Adaptive Video Flows", MMSys 2013) and the ordinary on/off
client that is its baseline, as specified in docs/studies.md §4.

SABRE keeps the TCP connection busy instead of on/off and lets TCP flow control, driven by how
fast the application reads the socket, set the server's rate:
  * Pipelining: 1 + ceil(rcvbuf x 8 / (r x s)) requests outstanding (rcvbuf bytes, r the
    current level's bit/s, s the segment duration): enough queued responses that the socket
    receive buffer never runs dry between segments.
  * Paced socket reads at a target rate, in one of two modes:
      refill  — target lambda x R_highest (lambda = 1.2): faster than any level, so the
                playout buffer fills at whatever the network gives;
      backoff — target delta x R (delta = 0.8, R the current level): slower than playback,
                so the playout buffer drains slowly and the server is held to delta x R by
                the receive window, leaving the bottleneck queue short.
  * Mode changes, evaluated every `check_period_s` (200 ms) from the socket receive buffer's
    occupancy O (bytes queued, SIOCINQ, over the buffer size: see "Socket occupancy" below) against
    `occupancy_threshold` (75 %), and the playout buffer B:
      refill -> backoff when O >= 75 % and B >= `backoff_above_s` (default: buffer − one
                segment, i.e. full): data piles up in the socket because the full playout
                buffer holds the reader back — back off. (O >= 75 % with the playout buffer
                not full only means the network is faster than lambda x R_highest: stay.)
      backoff -> refill when O < 75 %: the network no longer keeps the socket full even at
                delta x R, so the server is not being held by flow control and the playout
                buffer drains; or when B < `refill_below_s` (default: half the buffer), since
                backoff drains the playout buffer by (1 - delta) x R per second.
    This is our reading of the rule in docs/studies.md §4 (the paper's text is not in the search
    corpus); a first version without the B conditions flipped mode at every check on a link
    faster than lambda x R_highest (bench/bench_abr_client.py, 4 Mbit/s link, top level
    2 Mbit/s). The sequence of modes is a pure function of the (O, B) samples, see tests.
  * Bandwidth: EWMA of per-check read-rate samples, BW <- alpha x BW + (1 - alpha) x sample
    (alpha = 0.8, the weight of history), using only samples taken while the socket was NOT
    ≥ 75 % full: a full socket means the read pace, not the network, limited the sample.
  * Level: down when BW < k x R_i (to the highest level j with k x R_j <= BW), up by one when
    BW > k x R_{i+1} (k = 1.1).

`variant: general` (the default) is the paper's §4.2, the full scheme, on top of the above (docs/studies.md
§4 has the text; every constant is a parameter with the paper's value as default):
  * Initial buffering: reads unpaced until the playout buffer holds `initial_buffer_s` (60 s; capped at
    backoff_above_s, which a smaller playout buffer cannot reach); the steady state starts then.
  * Modes from the playout buffer B only: refill below `refill_below_s` (default 85 % of the buffer,
    the paper's example), backoff at or above `backoff_above_s` (full). Refill target lambda x R with R
    the CURRENT level (the paper: "D(i) ranges from the target, up to 1.2 R in refill"), backoff delta x R.
  * D(i) per segment, BW <- alpha x BW + (1 - alpha) x D(i). Congestion event: BW < gamma x target
    (gamma = 0.85) lowers the target to BW (never below theta x R); a mode or level change restores the
    mode's target.
    Which samples feed BW (our choice, the paper does not say; issue 43): while SABRE paces its reads,
    D(i) measures SABRE's own target, not the network (backoff: D(i) = delta x R by construction).
    So in the steady state BW holds only D(i) of segments read wholly under the read target now in
    force: every change of target (phase, mode, level, a congestion event) restarts BW, and a segment
    read partly under the old target is no sample. The congestion test thus compares BW with the
    target its samples were read at. (Before: backoff samples, ~delta x R, met the refill target
    lambda x R at each backoff -> refill switch, and delta / lambda = 0.67 < gamma fired a congestion
    event at constant bandwidth.) Throttled reads (theta x R) do count: throttling happens only when
    the network failed to keep the socket buffer at the threshold. In the initial phase reads are
    unpaced and every D(i) feeds BW.
  * Every check_period_s (200 ms): socket occupancy O = FIONREAD / the buffer size SABRE set
    (`occupancy_of`, below); O < 75 % throttles reads to theta x R (theta = 0.5) until O >= 75 % again.
  * Significant drop: D(i) < R of that segment, judged only for segments read wholly outside backoff
    (in backoff the reader itself holds D(i) at delta x R < R: our reading, the paper's text does not
    say). A run of significant drops spanning `significant_drop_window_s` (10 s) is a bandwidth drop:
    multiplicative decrease to level i // 2 and wait_to_probe doubled (<= max 32 s); a segment with
    D(i) >= R ends the run (a random drop, ignored).
  * Probing: `wait_to_probe_s` (16 s) after the last level change, with no drop run open, reads not
    throttled and the target not lowered, up one level; an up-shift that sees no bandwidth drop for one
    significant-drop window succeeded and halves wait_to_probe (>= min 4 s). In the steady state the
    level moves only by these two rules (k-switching on BW applies in the initial phase, where reads
    are unpaced and D(i) is what the network gave; in the steady state D(i) is capped by the pace).
  Each rule leaves an event in the player's event log: sabre_phase, sabre_mode (with target_bps),
  sabre_congestion, sabre_throttle (on/off with the occupancy), sabre_significant_drop,
  sabre_drop_ignored, sabre_bandwidth_drop, sabre_probe, sabre_probe_success.
Socket occupancy (both variants; issue 43): O = FIONREAD / the buffer size, with `occupancy_of` saying
which size. Default `rcvbuf`: the SO_RCVBUF value SABRE set (rcvbuf_bytes, or player.rcvbuf), the same
rcvbuf the pipelining formula counts in media bytes. `so_rcvbuf`: the value getsockopt(SO_RCVBUF)
returns, which Linux doubles for its bookkeeping overhead (socket(7)); the queued payload never reaches
it (measured: at most 464 714 of 524 288 bytes, 88.6 %, with 262 144 requested). Receive-window flow
control makes the bound tighter: the server may have in flight only the buffer's free space, so at a
read rate r with the network keeping up, the socket holds at most (payload ceiling − r x RTT). Against
the doubled value that put the 75 % threshold inside the noise of a constant-bandwidth run at
lambda x R = 5.4 Mbit/s over 100 ms (occupancy 73–84 % at successive checks): reads toggled between the
target and theta x R, D(i) fell to ~3.97 Mbit/s < gamma x 5.4, a congestion event lowered the target
below R, every segment became a significant drop and 10 s later a forced 5 -> 2 down-shift — twice in
150 s at constant bandwidth. With a 64 KiB request the ceiling (116 951 of 131 072 bytes) less
theta x R_5 x RTT lies below 75 % of the doubled value, so a throttle at the top level could not end
(20 s at theta x R until a forced down-shift; then stalls). The rule is
meaningful only while threshold x size <= payload ceiling − read rate x RTT; `occupancy_of` and the
threshold are the knobs, the player records the size used (`occupancy_base_bytes`) at every check.

`variant: unconstrained` is §4.1 exactly as before (the rules above this paragraph): its BW is fed by
the periodic checks only, never by D(i) (D(i) of a backoff segment is delta x R by construction and
made k-switching fall one level per backoff segment; issue 43).

`on-off` (OnOff): the ordinary client: one request at a time, sent whenever the buffer has room
for a segment, socket read as fast as it comes; its level rule is the same k-switching on an
EWMA (alpha) of per-segment throughputs, so the two differ only in how they use the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Sequence

from pydantic import Field

from .base import Abr, AbrParams, Choice, Download, Ladder


class KSwitchParams(AbrParams):
    alpha: float = Field(0.8, ge=0, lt=1)
    k: float = Field(1.1, ge=1.0, le=10)


def k_switch(ladder: Ladder, level: int, bw: float | None, k: float) -> int:
    """Down when bw < k R_i (to the highest j with k R_j <= bw), up one when bw > k R_{i+1}."""
    if bw is None:
        return level
    r = ladder.rates_bps
    if bw < k * r[level]:
        ok = [j for j in range(level) if k * r[j] <= bw]
        return ok[-1] if ok else 0
    if level < ladder.top and bw > k * r[level + 1]:
        return level + 1
    return level


def ewma(prev: float | None, sample: float, alpha: float) -> float:
    return sample if prev is None else alpha * prev + (1 - alpha) * sample


class OnOff(Abr):
    name: ClassVar[str] = "on-off"
    Params = KSwitchParams
    p: KSwitchParams

    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        if not history:
            return Choice(0, {"bw_bps": None})
        bw: float | None = None
        for d in history:
            bw = ewma(bw, d.throughput_bps, self.p.alpha)
        return Choice(k_switch(self.ladder, self.level, bw, self.p.k), {"bw_bps": round(bw or 0, 1)})


class SabreParams(KSwitchParams):
    """Every constant of the paper's scheme, with the paper's value as default (docs/studies.md §4)."""
    variant: Literal["general", "unconstrained"] = Field(
        "general", description="general: the paper's §4.2, the full scheme; unconstrained: §4.1 only "
                               "(constant bandwidth: pipelining, paced reads, refill/backoff)")
    # SABRE sets the socket's receive buffer itself (its pipelining depth is computed from it); 256 KiB
    # is our choice (the paper gives the window it produced, ~50 KB, not the buffer). A player.rcvbuf
    # (--rcvbuf-bytes) given in the scenario overrides it.
    rcvbuf_bytes: int = Field(262144, ge=4096, le=1 << 30)
    lambda_: float = Field(1.2, alias="lambda", gt=1.0, le=10)
    delta: float = Field(0.8, gt=0, lt=1.0)
    # at least 10 ms: the check is a syscall pair per period, and 1e-300 s made it a busy loop (issue 45)
    check_period_s: float = Field(0.2, ge=0.01, le=10)
    occupancy_threshold: float = Field(0.75, gt=0, lt=1.0)
    # What "the buffer size" in "FIONREAD against the buffer size" is (the paper's text does not say;
    # issue 43, see the module docstring "Socket occupancy"): rcvbuf, the size SABRE asked for with
    # setsockopt(SO_RCVBUF) (rcvbuf_bytes or player.rcvbuf; the same rcvbuf its pipelining formula counts
    # as media bytes), or so_rcvbuf, the value getsockopt returns (Linux doubles the request for its
    # bookkeeping overhead, so the payload the buffer can hold is a kernel-dependent part of it).
    occupancy_of: Literal["rcvbuf", "so_rcvbuf"] = Field(
        "rcvbuf", description="the buffer size the socket occupancy is measured against: rcvbuf (the "
                              "SO_RCVBUF value SABRE set) or so_rcvbuf (the doubled value the kernel reports)")
    refill_below_s: float | None = Field(None, ge=0)   # default: general 85 % of the buffer, §4.1 half
    backoff_above_s: float | None = Field(None, ge=0)  # default: buffer - one segment (full)
    gamma: float = Field(0.85, gt=0, le=1.0)           # congestion: BW < gamma x target
    theta: float = Field(0.5, gt=0, lt=1.0)            # throttled reads at theta x R
    initial_buffer_s: float = Field(60.0, ge=0, le=3600)  # capped at backoff_above_s
    significant_drop_window_s: float = Field(10.0, gt=0, le=600)
    wait_to_probe_s: float = Field(16.0, gt=0, le=3600)
    wait_to_probe_min_s: float = Field(4.0, gt=0, le=3600)
    wait_to_probe_max_s: float = Field(32.0, gt=0, le=3600)


Mode = Literal["refill", "backoff"]
Phase = Literal["initial", "steady"]


@dataclass(frozen=True)
class Tick:
    """One periodic check's outcome."""
    mode: Mode
    changed: bool
    occupancy: float             # O / rcvbuf
    sample_bps: float            # bytes read since the last check x 8 / dt
    app_limited: bool            # O >= threshold: the sample says "at least", not "at most"
    bw_bps: float | None


class Sabre(Abr):
    """Both variants; `variant` picks the rules. The caller (mpvlab/player/gstreamer/dash_client.py) calls `tick` every
    check_period_s with the socket's FIONREAD and SO_RCVBUF, `on_segment` after each media segment,
    `decide` per request, reads at `read_rate_bps()` (None: unpaced) and logs `drain_events()`."""
    name: ClassVar[str] = "sabre"
    Params = SabreParams
    p: SabreParams

    def __init__(self, ladder: Ladder, params: SabreParams | None = None, seed: int = 0) -> None:
        super().__init__(ladder, params, seed)
        self.general = self.p.variant == "general"
        self.mode: Mode = "refill"
        # §4.1 starts straight in its steady state; §4.2 downloads unpaced until the initial buffer is full.
        self.phase: Phase = "initial" if self.general else "steady"
        self.bw: float | None = None
        self.throttled = False
        self.target_bps = self._nominal_target()      # the mode's target, lowered by congestion events
        self.wait_to_probe_s = self.p.wait_to_probe_s
        self.t_level_change = 0.0
        self.drop_run_start: float | None = None       # first significant drop of the current run
        self.drop_run_count = 0
        self.significant_drops = 0
        self.forced_level: int | None = None            # a bandwidth drop's multiplicative decrease
        self.probe_at: float | None = None              # an up-shift awaiting its verdict
        self._backoff_in_segment = False
        # The read target in force (None: unpaced initial phase), and whether it changed while the
        # segment now being read was read.
        self._segment_pace: float | None = None
        self._pace_changed_in_segment = False
        self.events: list[dict[str, Any]] = []
        # The SO_RCVBUF value the caller set on the socket; player/dash_client.py sets it as it makes the
        # controller. occupancy_of rcvbuf needs it (tick refuses to guess: a first version fell back to
        # the kernel's value when it was not set, and a real run silently measured the old way).
        self.rcvbuf_requested: int | None = None

    def validate(self) -> None:
        lad = self.ladder
        self.backoff_above_s = self.p.backoff_above_s if self.p.backoff_above_s is not None \
            else lad.buffer_max_s - lad.segment_s
        if self.p.refill_below_s is not None:
            self.refill_below_s = self.p.refill_below_s
        elif self.p.variant == "general":
            # 85 % of the buffer (the paper's example), but at least half a segment below backoff_above
            # on a buffer too small for that (8 s of 2 s segments: 85 % = 6.8 s > 6 s), so modes can alternate.
            self.refill_below_s = max(0.0, min(0.85 * lad.buffer_max_s, self.backoff_above_s - lad.segment_s / 2))
        else:
            self.refill_below_s = lad.buffer_max_s / 2
        if self.refill_below_s > self.backoff_above_s:
            raise ValueError(f"sabre: refill_below_s ({self.refill_below_s:g}) must not exceed "
                             f"backoff_above_s ({self.backoff_above_s:g})")
        if not self.p.wait_to_probe_min_s <= self.p.wait_to_probe_s <= self.p.wait_to_probe_max_s:
            raise ValueError(f"sabre: wait_to_probe_s ({self.p.wait_to_probe_s:g}) must lie in "
                             f"[wait_to_probe_min_s, wait_to_probe_max_s] = [{self.p.wait_to_probe_min_s:g}, "
                             f"{self.p.wait_to_probe_max_s:g}]")
        # The initial buffer cannot exceed what the playout buffer lets the client hold.
        self.initial_buffer_s = min(self.p.initial_buffer_s, self.backoff_above_s)

    # ---- transport side -------------------------------------------------------------
    def pipeline_depth(self, rcvbuf_bytes: int, level: int | None = None) -> int:
        """1 + ceil(rcvbuf x 8 / (r x s)) requests outstanding."""
        r = self.ladder.rates_bps[self.level if level is None else level]
        return 1 + math.ceil(rcvbuf_bytes * 8 / (r * self.ladder.segment_s))

    def _nominal_target(self) -> float:
        """refill: lambda x R_highest (§4.1) or lambda x R (§4.2: "D(i) ranges from the target, up to
        1.2 R in refill"); backoff: delta x R."""
        r = self.ladder.rates_bps
        if self.mode == "refill":
            return self.p.lambda_ * (r[-1] if not self.general else r[self.level])
        return self.p.delta * r[self.level]

    def target_read_bps(self) -> float:
        """The mode's read target (§4.2: as lowered by congestion events)."""
        return self.target_bps if self.general else self._nominal_target()

    def read_rate_bps(self) -> float | None:
        """The pace the socket is read at now: None (as fast as data comes) in the initial phase,
        theta x R while throttled, else the target."""
        if self.phase == "initial":
            return None
        if self.throttled:
            return self.p.theta * self.ladder.rates_bps[self.level]
        return self.target_read_bps()

    def drain_events(self) -> list[dict[str, Any]]:
        out, self.events = self.events, []
        return out

    def _event(self, kind: str, now_s: float, **fields: Any) -> None:
        self.events.append({"type": kind, "t": now_s, **fields})

    def occupancy_base(self, rcvbuf_bytes: int) -> int:
        """The buffer size occupancy is measured against, given SO_RCVBUF as the kernel reports it."""
        if self.p.occupancy_of == "so_rcvbuf":
            return rcvbuf_bytes
        if self.rcvbuf_requested is None:
            raise ValueError("sabre: occupancy_of rcvbuf needs the SO_RCVBUF value set on the socket "
                             "(rcvbuf_requested); none was given")
        return self.rcvbuf_requested

    def tick(self, occupancy_bytes: int, rcvbuf_bytes: int, bytes_read: int, dt_s: float,
             buffer_s: float, now_s: float = 0.0) -> Tick:
        """The periodic check (every check_period_s). rcvbuf_bytes: SO_RCVBUF as getsockopt returns it;
        occupancy is over occupancy_base(rcvbuf_bytes)."""
        occ = occupancy_bytes / self.occupancy_base(rcvbuf_bytes)
        full = occ >= self.p.occupancy_threshold
        sample = bytes_read * 8 / dt_s if dt_s > 0 else 0.0
        old = self.mode
        if not self.general:
            if not full and bytes_read > 0:
                self.bw = ewma(self.bw, sample, self.p.alpha)
            if self.mode == "refill" and full and buffer_s >= self.backoff_above_s:
                self.mode = "backoff"
            elif self.mode == "backoff" and (not full or buffer_s < self.refill_below_s):
                self.mode = "refill"
            return Tick(self.mode, self.mode != old, occ, sample, full, self.bw)
        if self.phase == "initial":
            if buffer_s < self.initial_buffer_s:
                return Tick(self.mode, False, occ, sample, full, self.bw)
            self.phase = "steady"
            self.mode = "backoff" if buffer_s >= self.backoff_above_s else "refill"
            self.target_bps = self._nominal_target()
            self.t_level_change = now_s     # wait_to_probe counts from the start of the steady state
            self._event("sabre_phase", now_s, phase="steady", buffer_s=buffer_s, mode=self.mode,
                        target_bps=self.target_bps)
        else:
            if self.mode == "refill" and buffer_s >= self.backoff_above_s:
                self.mode = "backoff"
            elif self.mode == "backoff" and buffer_s < self.refill_below_s:
                self.mode = "refill"
            if self.mode != old:
                self.target_bps = self._nominal_target()
                self._event("sabre_mode", now_s, mode=self.mode, buffer_s=buffer_s, target_bps=self.target_bps)
        if self.mode == "backoff":
            self._backoff_in_segment = True
        # Occupancy below the threshold: the network no longer keeps the socket full, the advertised
        # window opens and the server would burst into it: read at theta x R until it is full again.
        if not self.throttled and not full:
            self.throttled = True
            self._event("sabre_throttle", now_s, on=True, occupancy=occ, occupancy_bytes=occupancy_bytes,
                        read_bps=self.read_rate_bps())
        elif self.throttled and full:
            self.throttled = False
            self._event("sabre_throttle", now_s, on=False, occupancy=occ, occupancy_bytes=occupancy_bytes,
                        read_bps=self.read_rate_bps())
        self._note_pace()
        return Tick(self.mode, self.mode != old, occ, sample, full, self.bw)

    def _note_pace(self, at_segment_end: bool = False) -> None:
        """Called after every rule that may change the read target. A change of target (phase, mode,
        congestion event, level) restarts BW: the samples taken at the old target measured that
        target, not the network (see the module docstring, "Which samples feed BW"). A change made as
        a segment ends (a congestion event) leaves the next segment read wholly at the new target.
        Throttling is not a change of target: it happens only when the network failed to keep the
        socket buffer at the threshold, so what is read then is what the network gave."""
        pace = None if self.phase == "initial" else self.target_read_bps()
        if pace != self._segment_pace:
            self._pace_changed_in_segment = self._pace_changed_in_segment or not at_segment_end
            self._segment_pace = pace
            if self.general and self.phase == "steady":
                self.bw = None

    def on_segment(self, d: Download, now_s: float) -> None:
        """A media segment finished: D(i), BW, congestion, significant drops (§4.2)."""
        d_bps = d.throughput_bps
        in_backoff, self._backoff_in_segment = self._backoff_in_segment, self.mode == "backoff"
        one_pace, self._pace_changed_in_segment = not self._pace_changed_in_segment, False
        if not self.general:
            return      # §4.1: BW comes from the periodic checks (tick), never from D(i)
        if self.phase != "steady":
            self.bw = ewma(self.bw, d_bps, self.p.alpha)    # unpaced: D(i) is what the network gave
            return
        # Steady state: only a segment read wholly under one target feeds BW, and BW holds only samples
        # taken under the target now in force (_note_pace restarts it), so the congestion test compares
        # BW with the target its samples were read at.
        if one_pace:
            self.bw = ewma(self.bw, d_bps, self.p.alpha)
        if self.bw is not None and self.bw < self.p.gamma * self.target_bps:
            new = max(self.bw, self.p.theta * self.ladder.rates_bps[self.level])
            if new < self.target_bps:
                self._event("sabre_congestion", now_s, bw_bps=self.bw, target_before_bps=self.target_bps,
                            target_bps=new, gamma=self.p.gamma)
                self.target_bps = new
                self._note_pace(at_segment_end=True)
        r = self.ladder.rates_bps[d.level]
        # In backoff the reader itself holds D(i) at delta x R < R, so D(i) < R there says nothing
        # about the network: only segments read wholly outside backoff are judged.
        if d_bps < r and not in_backoff:
            self.significant_drops += 1
            if self.drop_run_start is None:
                self.drop_run_start, self.drop_run_count = d.t_end_s, 0
            self.drop_run_count += 1
            self._event("sabre_significant_drop", now_s, level=d.level, d_bps=d_bps, r_bps=r,
                        run_count=self.drop_run_count, run_start=self.drop_run_start)
            if d.t_end_s - self.drop_run_start >= self.p.significant_drop_window_s:
                to = self.level // 2
                self.wait_to_probe_s = min(self.p.wait_to_probe_max_s, 2 * self.wait_to_probe_s)
                self._event("sabre_bandwidth_drop", now_s, level_before=self.level, level=to,
                            run_count=self.drop_run_count, wait_to_probe_s=self.wait_to_probe_s)
                self.forced_level, self.drop_run_start, self.drop_run_count, self.probe_at = to, None, 0, None
        elif d_bps >= r and self.drop_run_start is not None:
            self._event("sabre_drop_ignored", now_s, run_count=self.drop_run_count)
            self.drop_run_start, self.drop_run_count = None, 0

    # ---- level ------------------------------------------------------------------------
    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        if not self.general or self.phase == "initial":
            # Unpaced (initial phase) or §4.1: the samples are what the network gave; k-switching.
            lvl = k_switch(self.ladder, self.level, self.bw, self.p.k)
        else:
            lvl = self.level
            if self.probe_at is not None and now_s - self.probe_at >= self.p.significant_drop_window_s:
                self.wait_to_probe_s = max(self.p.wait_to_probe_min_s, self.wait_to_probe_s / 2)
                self._event("sabre_probe_success", now_s, level=self.level, wait_to_probe_s=self.wait_to_probe_s)
                self.probe_at = None
            if self.forced_level is not None:
                lvl, self.forced_level = self.forced_level, None
            elif (now_s - self.t_level_change >= self.wait_to_probe_s and self.level < self.ladder.top
                  and self.drop_run_start is None and not self.throttled
                  and self.target_bps >= self._nominal_target()):
                lvl = self.level + 1
                self.probe_at = now_s
                self._event("sabre_probe", now_s, level_before=self.level, level=lvl,
                            wait_to_probe_s=self.wait_to_probe_s)
        if lvl != self.level:
            self.t_level_change = now_s
        info: dict[str, Any] = {"bw_bps": None if self.bw is None else round(self.bw, 1), "mode": self.mode}
        if self.general:
            info.update(phase=self.phase, target_bps=round(self.target_read_bps(), 1),
                        throttled=self.throttled, wait_to_probe_s=self.wait_to_probe_s)
        return Choice(lvl, info)

    def decide(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        before = self.level
        c = super().decide(buffer_s, history, now_s)
        if self.general and c.level != before and self.phase == "steady":
            self.target_bps = self._nominal_target()   # the new level's target
            self._note_pace()
        return c
