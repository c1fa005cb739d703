"""The summary's analysis libraries (pandas and numpy, through mpvlab/results/flows.py: 0.3–0.7 s of imports)
are imported on a background thread while the network comes up — the main thread then mostly waits
for `ip`, `tc` and the pre-run check — so a run does not pay for them after its video ends. The
summary imports them the ordinary way; Python's per-module import locks make it wait for the thread
if it is still busy, never import twice. A run whose congestion control has no state model needs
neither (its flows are named by mpvlab/results/flow_ids.py): it imports nothing here, as importing
them anyway costs ~0.5 CPU-s of every run (issue 36)."""

from __future__ import annotations

import importlib
import threading

MODULES = ("mpvlab.results.flows",)


def start(needed: bool = True) -> threading.Thread:
    """Import MODULES on a thread if `needed` (the run's CC has a state model to summarise)."""
    def load() -> None:
        for name in MODULES if needed else ():
            try:
                importlib.import_module(name)
            except Exception:       # noqa: BLE001 — the summary's own import then reports it
                return

    t = threading.Thread(target=load, name="mpvlab-warmup", daemon=True)
    t.start()
    return t
