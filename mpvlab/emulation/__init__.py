"""mpvlab's Mininet-facing code (`mpvlab.mininet`): the emulated nodes and links built with Mininet's
Python API (nodes.py) and the interactive CLI of `mpvlab shell` (cli.py).

The folder is named after what it faces; it is never the Mininet library itself. When the checkout's
root is on sys.path (`python -c`, a notebook or `python -m` started in the checkout), `import mininet`
finds this folder first; it then hands over to the Mininet library (found on the rest of sys.path),
so that library is what every `import mininet…` gets, wherever Python was started.
"""

if __name__ == "mininet":
    import importlib.machinery
    import importlib.util
    import os
    import sys

    _checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _checkout]
    _spec = importlib.machinery.PathFinder.find_spec("mininet", _rest)
    if _spec is None or _spec.loader is None:
        raise ImportError("the Mininet library is not installed (./setup.sh installs it); the checkout's "
                          "mininet/ folder is mpvlab's Mininet-facing code (mpvlab.mininet), not the library")
    _library = importlib.util.module_from_spec(_spec)
    sys.modules["mininet"] = _library          # what the import statement returns, and where mininet.* is found
    _spec.loader.exec_module(_library)
