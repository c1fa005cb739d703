"""Run ids and every kernel-visible name derived from them.

Each namespace, interface, BPF object and ledger entry of a run carries the run id, so a run (or a
later run cleaning up after a killed one) can find exactly its own objects and nothing else.
Interface names must fit IFNAMSIZ (15 chars): `mv` + 6-char run id + up to 4 role chars.
"""

from __future__ import annotations

import re
import secrets
import time

RUN_ID_RE = re.compile(r"^[a-z0-9]{6}$")
NETNS_PREFIX = "mpv-"
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def new_run_id(prefix: str = "") -> str:
    """6 base-36 chars: 2 from the clock (minutes, so ids sort roughly by time within a day) and
    4 random ones (1.7 M values), so two runs started in the same second still differ. A `prefix`
    (the test bed's `tb`) replaces the clock part, so such runs are recognisable in `ip netns`."""
    if prefix:
        assert re.fullmatch(r"[a-z]{1,2}", prefix), prefix
        return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(6 - len(prefix)))
    minute = int(time.time() // 60) % (36 * 36)
    head = _ALPHABET[minute // 36] + _ALPHABET[minute % 36]
    return head + "".join(secrets.choice(_ALPHABET) for _ in range(4))


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.fullmatch(run_id):
        raise ValueError(f"bad run id {run_id!r}: expected 6 chars [a-z0-9]")
    return run_id


def netns_name(run_id: str, role: str) -> str:
    """e.g. mpv-k3f9za-client. Roles are fixed identifiers chosen by the platform, never user text."""
    assert re.fullmatch(r"[a-z][a-z0-9]{0,11}", role), role
    return f"{NETNS_PREFIX}{check_run_id(run_id)}-{role}"


def ifname(run_id: str, tag: str) -> str:
    assert re.fullmatch(r"[a-z0-9]{1,4}", tag), tag
    return f"mv{check_run_id(run_id)}{tag}"


def cc_name(run_id: str, base: str) -> str:
    """A run-scoped name for a BPF congestion control (TCP_CA_NAME_MAX is 16 incl. NUL)."""
    name = f"{base}_{check_run_id(run_id)}"
    assert len(name) <= 15, name
    return name


def run_id_of_netns(name: str) -> str | None:
    m = re.fullmatch(rf"{NETNS_PREFIX}([a-z0-9]{{6}})-[a-z0-9]+", name)
    return m.group(1) if m else None


# A run's folders in the temporary directory: mpvlab-<run id>-<tag>, short (a browser's singleton
# socket lives in one: its path must fit a socket address's 108 bytes), found by the run id after a crash.
SCRATCH_PREFIX = "mpvlab-"
_SCRATCH_TAG = r"[a-z][a-z0-9-]{0,30}"


def scratch_name(run_id: str, tag: str) -> str:
    """e.g. mpvlab-k3f9za-dashjs. Tags are chosen by the platform (a player kind, a role), never user text."""
    assert re.fullmatch(_SCRATCH_TAG, tag), tag
    return f"{SCRATCH_PREFIX}{check_run_id(run_id)}-{tag}"


def run_id_of_scratch(name: str) -> str | None:
    m = re.fullmatch(rf"{SCRATCH_PREFIX}([a-z0-9]{{6}})-{_SCRATCH_TAG}", name)
    return m.group(1) if m else None
