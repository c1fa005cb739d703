"""`dynamic`: dash.js's DYNAMIC strategy — the throughput rule while the buffer is low, BOLA when
it is high, with dash.js's hand-over hysteresis (AbrController._updateDynamicAbrStrategy, read in
Dash-Industry-Forum/dash.js):

    switchOn = stableBufferTime, switchOff = 0.5 x stableBufferTime
    useBola = bufferLevel > (useBola ? switchOff : switchOn)      (strict >)

evaluated at each decision before the rule runs; the strategy starts with the throughput rule.
stableBufferTime defaults to 12 s (dash.js's default). The throughput rule and BOLA are the
`throughput` and `bola` entries of this registry with their own parameters.
"""

from __future__ import annotations

from typing import ClassVar, Sequence

from pydantic import Field

from .base import Abr, AbrParams, Choice, Download, Ladder
from .bola import Bola, BolaParams
from .throughput import Throughput, ThroughputParams


class DynamicParams(AbrParams):
    stable_buffer_s: float = Field(12.0, gt=0)
    throughput: ThroughputParams = ThroughputParams()
    bola: BolaParams = BolaParams()


class Dynamic(Abr):
    name: ClassVar[str] = "dynamic"
    Params = DynamicParams
    p: DynamicParams

    def __init__(self, ladder: Ladder, params: DynamicParams | None = None, seed: int = 0) -> None:
        super().__init__(ladder, params, seed)
        self.tput = Throughput(ladder, self.p.throughput, seed)
        self.bola = Bola(ladder, self.p.bola, seed)
        self.using_bola = False

    def request_threshold_s(self) -> float:
        return self.bola.request_threshold_s()

    def choose(self, buffer_s: float, history: Sequence[Download], now_s: float) -> Choice:
        on, off = self.p.stable_buffer_s, 0.5 * self.p.stable_buffer_s
        self.using_bola = buffer_s > (off if self.using_bola else on)
        rule = self.bola if self.using_bola else self.tput
        rule.level = self.level
        c = rule.choose(buffer_s, history, now_s)
        c.info["rule"] = rule.name
        return c
