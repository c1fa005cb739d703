"""One family of errors for the whole platform, so a caller can tell 'the platform refused or
failed, with a message for a person' (MpvlabError) from a bug (anything else)."""

from __future__ import annotations


class MpvlabError(Exception):
    """Base of every error whose message is meant for the user."""


class InputError(MpvlabError):
    """A scenario, sweep spec, trace or command-line value was refused before anything ran."""


class RunFailed(MpvlabError):
    """The run could not produce trustworthy results; the message says why."""


class RunNotStarted(RunFailed):
    """The run could not begin (its results folder cannot be written, say) and nothing was started:
    no namespace, no process, no folder left. `mpvlab run` exits 2 for it, as for a refused input."""


class Interrupted(MpvlabError):
    """Ctrl-C, SIGTERM or SIGHUP ended the run; its cleanup ran."""


class RunInterrupted(RunFailed):
    """A run that Ctrl-C, SIGTERM or SIGHUP ended (its cleanup ran; its status.json says failed with a
    reason starting `interrupted`). `mpvlab run` and `mpvlab sweep` both exit 130 for it (docs/results.md)."""


# The exit code of an interrupted `mpvlab run` or `mpvlab sweep` (128 + SIGINT, as shells report a Ctrl-C).
EXIT_INTERRUPTED = 130
