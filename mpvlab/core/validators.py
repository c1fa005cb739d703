"""Validation of host-facing values a scenario gives (host names, users, interface names, ports,
sysctl keys, key files): strict patterns, so nothing a scenario says can become an option or a path
outside the folder it may name. Used by the scenario schema and by the host implementations."""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from pathlib import Path
from mpvlab.core.errors import InputError

class HostConfigError(InputError, ValueError):
    """A host, user, interface, port or key path from a scenario is not acceptable."""


_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")
_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$")
_SYSCTL_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./:-]{0,250}$")
_ENVKEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def validate_host(value: object) -> str:
    """A DNS name / host name or an IPv4/IPv6 address (no brackets, no port)."""
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            pass
        if _HOSTNAME_RE.fullmatch(value):
            return value
    raise HostConfigError(
        f"host {value!r} is not allowed: give an IPv4/IPv6 address or a host name of 1-253 characters "
        "from A-Z a-z 0-9 . - starting with a letter or digit")


def validate_user(value: object) -> str:
    if isinstance(value, str) and _USER_RE.fullmatch(value):
        return value
    raise HostConfigError(
        f"user {value!r} is not allowed: 1-32 characters from A-Z a-z 0-9 _ . - starting with a letter or _")


def validate_ifname(value: object) -> str:
    """An interface name as the kernel takes it (IFNAMSIZ: at most 15 characters)."""
    if isinstance(value, str) and _IFNAME_RE.fullmatch(value):
        return value
    raise HostConfigError(
        f"interface name {value!r} is not allowed: 1-15 characters from A-Z a-z 0-9 _ . : - "
        "starting with a letter or digit")


def validate_port(value: object) -> int:
    if isinstance(value, bool):
        raise HostConfigError(f"port {value!r} is not allowed: give an integer 1-65535")
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int) and 1 <= value <= 65535:
        return value
    raise HostConfigError(f"port {value!r} is not allowed: give an integer 1-65535")


def validate_sysctl_key(key: object) -> str:
    if isinstance(key, str) and _SYSCTL_RE.fullmatch(key) and ".." not in key:
        return key
    raise HostConfigError(f"sysctl key {key!r} is not allowed: dotted name from A-Z a-z 0-9 _ . / : -")


def validate_key_path(path: str | os.PathLike[str], allowed_dir: str | os.PathLike[str], *,
                      private: bool = True) -> Path:
    """A key (or known_hosts) file that must live inside `allowed_dir` once symlinks are resolved.
    `private`: also refuse a file group/world can read (ssh refuses such identity files anyway)."""
    base = Path(allowed_dir).resolve(strict=False)
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        raise HostConfigError(f"key file {str(path)!r} does not exist (key files must be inside {base})") from None
    if real != base and base not in real.parents:
        raise HostConfigError(f"key file {str(path)!r} is not allowed: it resolves to {real}, outside {base} "
                              "(key files must be inside that directory)")
    st = real.stat()
    if not stat.S_ISREG(st.st_mode):
        raise HostConfigError(f"key file {real} is not a regular file")
    if private and st.st_mode & 0o077:
        raise HostConfigError(f"key file {real} is readable by group/others (mode {st.st_mode & 0o777:o}); "
                              "chmod 600 it")
    return real
