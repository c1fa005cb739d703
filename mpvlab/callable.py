"""Makes the subpackages `mpvlab.run`, `mpvlab.sweep` and `mpvlab.report` callable as the Python API.

Why not plain functions in mpvlab/__init__.py: importing a submodule (`import mpvlab.report`, which
any module of the report does) rebinds the package attribute `mpvlab.report` to the submodule, so a
function of that name would silently disappear depending on import order. A module whose class has
`__call__` keeps working either way: `mpvlab.report(...)` and `from mpvlab.report import build_report`.
"""

from __future__ import annotations

import sys
import types
from typing import Any


def make_callable(module_name: str, api_function: str) -> None:
    """Calling module `module_name` calls mpvlab.api.<api_function> (imported only at the call)."""

    class _ApiModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            from mpvlab import api
            return getattr(api, api_function)(*args, **kwargs)

    _ApiModule.__name__ = f"ApiModule[{api_function}]"
    sys.modules[module_name].__class__ = _ApiModule
