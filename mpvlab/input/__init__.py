"""What a researcher hands in, checked before anything touches the kernel: the scenario
(scenario.py), the sweep spec (sweep.py), untrusted files read safely (files.py), the limits with
their physical reasons (limits.py), pydantic's errors in words (messages.py) and `mpvlab validate` (validation.py)."""
