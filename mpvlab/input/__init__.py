"""What a researcher hands in, checked before anything touches the kernel: the scenario
(scenario.py, its own sections in sections.py, a physical topology's rules in physical_rules.py),
the sweep spec (sweep.py), untrusted files read safely (files.py), the limits with their physical
reasons (limits.py), pydantic's errors in words (messages.py) and `mpvlab validate` (validation.py)."""
