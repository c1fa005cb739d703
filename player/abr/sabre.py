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
    occupancy O (bytes queued, SIOCINQ, over the kernel's receive buffer) against
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

`on-off` (OnOff): the ordinary client: one request at a time, sent whenever the buffer has room
for a segment, socket read as fast as it comes; its level rule is the same k-switching on an
EWMA (alpha) of per-segment throughputs, so the two differ only in how they use the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Sequence

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
    lambda_: float = Field(1.2, alias="lambda", gt=1.0, le=10)
    delta: float = Field(0.8, gt=0, lt=1.0)
    check_period_s: float = Field(0.2, gt=0, le=10)
    occupancy_threshold: float = Field(0.75, gt=0, lt=1.0)
    refill_below_s: float | None = Field(None, ge=0)   # default: half the buffer
    backoff_above_s: float | None = Field(None, ge=0)  # default: buffer - one segment (full)


Mode = Literal["refill", "backoff"]


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
    name: ClassVar[str] = "sabre"
    Params = SabreParams
    p: SabreParams

    def __init__(self, ladder: Ladder, params: SabreParams | None = None, seed: int = 0) -> None:
        super().__init__(ladder, params, seed)
        self.mode: Mode = "refill"
        self.bw: float | None = None

    def validate(self) -> None:
        lad = self.ladder
        self.refill_below_s = self.p.refill_below_s if self.p.refill_below_s is not None \
            else lad.buffer_max_s / 2
        self.backoff_above_s = self.p.backoff_above_s if self.p.backoff_above_s is not None \
            else lad.buffer_max_s - lad.segment_s
        if self.refill_below_s > self.backoff_above_s:
            raise ValueError(f"sabre: refill_below_s ({self.refill_below_s:g}) must not exceed "
                             f"backoff_above_s ({self.backoff_above_s:g})")

    # ---- transport side -------------------------------------------------------------
    def pipeline_depth(self, rcvbuf_bytes: int, level: int | None = None) -> int:
        """1 + ceil(rcvbuf x 8 / (r x s)) requests outstanding."""
        r = self.ladder.rates_bps[self.level if level is None else level]
        return 1 + math.ceil(rcvbuf_bytes * 8 / (r * self.ladder.segment_s))

    def target_read_bps(self) -> float:
        if self.mode == "refill":
            return self.p.lambda_ * self.ladder.rates_bps[-1]
        return self.p.delta * self.ladder.rates_bps[self.level]

    def tick(self, occupancy_bytes: int, rcvbuf_bytes: int, bytes_read: int, dt_s: float,
             buffer_s: float) -> Tick:
        """The periodic check (every check_period_s): bandwidth sample and mode change."""
        occ = occupancy_bytes / rcvbuf_bytes
        full = occ >= self.p.occupancy_threshold
        sample = bytes_read * 8 / dt_s if dt_s > 0 else 0.0
        if not full and bytes_read > 0:
            self.bw = ewma(self.bw, sample, self.p.alpha)
        old = self.mode
        if self.mode == "refill" and full and buffer_s >= self.backoff_above_s:
            self.mode = "backoff"
        elif self.mode == "backoff" and (not full or buffer_s < self.refill_below_s):
            self.mode = "refill"
        return Tick(self.mode, self.mode != old, occ, sample, full, self.bw)

    # ---- level ------------------------------------------------------------------------
    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        return Choice(k_switch(self.ladder, self.level, self.bw, self.p.k),
                      {"bw_bps": None if self.bw is None else round(self.bw, 1), "mode": self.mode})
