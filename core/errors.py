"""One family of errors for the whole platform, so a caller can tell 'the platform refused or
failed, with a message for a person' (MpvlabError) from a bug (anything else)."""

from __future__ import annotations


class MpvlabError(Exception):
    """Base of every error whose message is meant for the user."""


class InputError(MpvlabError):
    """A scenario, sweep spec, trace or command-line value was refused before anything ran."""


class RunFailed(MpvlabError):
    """The run could not produce trustworthy results; the message says why."""


class Interrupted(MpvlabError):
    """Ctrl-C, SIGTERM or SIGHUP ended the run; its cleanup ran."""
