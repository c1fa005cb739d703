"""mpvlab: an evaluation platform for multipath (MPTCP) video streaming.

    import mpvlab
    print(mpvlab.__version__)
    r = mpvlab.run("scenarios/smoke.yaml")          # one run (root) -> RunResult
    s = mpvlab.sweep("sweeps/wifi-lte-study.yaml", quick=True)  # a sweep and its report -> SweepResult
    rep = mpvlab.report("results/wifi-lte-study-quick")        # a report from result directories -> Report
    res = mpvlab.results.load("results/wifi-lte-study-quick")  # every table as pandas DataFrames

`import mpvlab` stays cheap (no pandas, pydantic or Mininet): the names above are resolved on first
use (PEP 562 module `__getattr__`). The functions are in mpvlab/api.py. The packages below follow
the data: `input` (scenario and sweep files, validation, limits), `runner` (one run's life cycle),
`results` (the summary model, metrics, the tidy loader), `reporting` (statistics, tables, figures),
`sweeps` (many runs, resumable); the components (`mpvlab.core`, `mpvlab.links`, `mpvlab.cc`, …) are
sub-packages here too, at their import paths; the repository's top-level folders of the same names
(links/, cc/, schedulers/, collectors/, player/) hold what is not Python: C and BPF sources, the delay
line, traces, the dash.js page.
"""

from __future__ import annotations

import importlib
from typing import Any

from mpvlab.version import __version__

_API_FUNCTIONS = ("run", "sweep", "report")     # defined in mpvlab/api.py
_LAZY_SUBMODULES = ("results", "api")

__all__ = ["__version__", *_API_FUNCTIONS, *_LAZY_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _API_FUNCTIONS:
        return getattr(importlib.import_module("mpvlab.api"), name)
    if name in _LAZY_SUBMODULES:
        # Importing a submodule also binds it as an attribute of this package, so this runs once.
        return importlib.import_module(f"mpvlab.{name}")
    raise AttributeError(f"module 'mpvlab' has no attribute {name!r}")
