"""What a run leaves and how it is read: the typed summary (summary.py, its parts in summary_parts/,
metricdef.py), the metrics
declared on it (metrics.py), which flow is which (flows.py), named delay windows (delaywindows.py),
runs gathered into configurations with their statistics (aggregate.py, stats.py) and result
directories as tidy pandas DataFrames (tidy.py: `mpvlab.results.load`).

Importing this package stays cheap (the runner imports the summary model from it): `load` and
`Results` (pandas) are resolved on first use."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["load", "Results", "KEYS", "TABLES", "TIME_SERIES"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("mpvlab.results.tidy"), name)
    raise AttributeError(f"module 'mpvlab.results' has no attribute {name!r}")
