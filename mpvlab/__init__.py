"""mpvlab: an evaluation platform for multipath (MPTCP) video streaming.

    import mpvlab
    print(mpvlab.__version__)
    r = mpvlab.run("scenarios/smoke.yaml")          # one run (root) -> RunResult
    s = mpvlab.sweep("sweeps/smoke-sweep.yaml")      # a sweep and its report -> SweepResult
    rep = mpvlab.report("results/smoke-sweep")       # a report from result directories -> Report
    res = mpvlab.results.load("results/smoke-sweep") # every table as pandas DataFrames

`import mpvlab` stays cheap (no pandas, pydantic or Mininet): the names above are resolved on first
use (PEP 562 module `__getattr__`). `mpvlab.run`, `mpvlab.sweep` and `mpvlab.report` are also the
names of subpackages; each of those modules is callable (mpvlab/callable.py), so the call works
whether or not a submodule was imported before. The functions themselves are in mpvlab/api.py.
"""

from __future__ import annotations

import importlib
from typing import Any

from mpvlab.version import __version__

# Names resolved on first access, to the submodule that holds them.
_LAZY_SUBMODULES = ("run", "sweep", "report", "results", "api", "scenario")

__all__ = ["__version__", "run", "sweep", "report", "results", "api", "scenario"]


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        # Importing a submodule also binds it as an attribute of this package, so this runs once.
        return importlib.import_module(f"mpvlab.{name}")
    raise AttributeError(f"module 'mpvlab' has no attribute {name!r}")
