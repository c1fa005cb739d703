"""One run: the session shell (session.py: result directory, ledger, signals, status, provenance),
what every step shares (context.py), the steps written once (steps.py), and per topology kind the
code that brings the network up and plays (kinds.py → emulated.py, shared.py, physical/)."""
