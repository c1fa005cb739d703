"""Numbers as the report's tables print them (HTML and figures alike)."""

from __future__ import annotations

import math


def fmt(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if abs(v) >= 1000 or float(v).is_integer():
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.0f}"
    return f"{v:.{digits}g}"


def fmt_p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"
