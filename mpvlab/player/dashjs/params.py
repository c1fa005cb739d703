"""The parameters of player kind dashjs's custom ABR rules (player/dashjs/mpvlab-dashjs.js); dash.js's
own strategies (dynamic, bola, throughput) take none here (mpvlab/player/kinds.py DASHJS_ABRS)."""

from __future__ import annotations

from pydantic import Field

from mpvlab.core.quantities import Strict


class DashjsBbaParams(Strict):
    """BBA-0's rate map (Huang et al. 2014): lowest rate up to `reservoir_s` of buffer, highest from
    reservoir + cushion on, linear between."""

    reservoir_s: float = Field(5.0, ge=0)
    cushion_s: float = Field(15.0, gt=0)


class DashjsFestiveParams(Strict):
    """FESTIVE's selection (Jiang et al. 2012, §5.2-5.3), the same parameters as mpvlab/player/gstreamer/abr/festive.py."""

    window: int = Field(20, ge=1, le=1000)
    safety: float = Field(0.85, gt=0, le=1.0)
    alpha: float = Field(12.0, ge=0)
    switch_window_s: float = Field(20.0, gt=0)


PARAMS: dict[str, type[Strict]] = {"bba": DashjsBbaParams, "festive": DashjsFestiveParams}
