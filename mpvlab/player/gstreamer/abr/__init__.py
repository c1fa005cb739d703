"""ABR algorithms as a registry: name -> class; each class carries its parameter model (pydantic,
unknown fields rejected) and cites its published definition in its module docstring.

    from mpvlab.player.gstreamer.abr import make
    algo = make("bola", Ladder(rates, segment_s, buffer_s), {"gamma_p": 5}, seed=1)

Pure decision logic: no I/O, no clock, deterministic for a given seed (FESTIVE's randomised
request scheduling draws from random.Random(seed)).
"""

from __future__ import annotations

from typing import Any, Mapping

from .base import Abr, AbrParams, Choice, Download, Ladder, harmonic_mean
from .bba import Bba, BbaPolicy
from .bola import Bola
from .dynamic import Dynamic
from .festive import Festive
from .sabre import OnOff, Sabre
from .throughput import Throughput

REGISTRY: dict[str, type[Abr]] = {c.name: c for c in (Throughput, Bba, Bola, Dynamic, Festive, Sabre, OnOff)}


def make(name: str, ladder: Ladder, params: Mapping[str, Any] | None = None, seed: int = 0) -> Abr:
    """The algorithm `name` with its parameters validated (ValueError naming what is wrong)."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown ABR {name!r}; known: {', '.join(sorted(REGISTRY))}")
    try:
        p = cls.Params.model_validate(dict(params or {}))
    except Exception as e:          # pydantic.ValidationError: keep its field-by-field message
        raise ValueError(f"ABR {name!r} parameters: {e}") from None
    return cls(ladder, p, seed)


__all__ = ["Abr", "AbrParams", "Choice", "Download", "Ladder", "REGISTRY", "make", "harmonic_mean",
           "Bba", "BbaPolicy", "Bola", "Dynamic", "Festive", "OnOff", "Sabre", "Throughput"]
