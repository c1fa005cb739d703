"""`python -m mpvlab …`: the `mpvlab` command."""

from mpvlab.cli import entry

entry()
