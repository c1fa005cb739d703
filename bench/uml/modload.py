#!/usr/bin/env python3
"""Load kernel modules with their dependencies (modules.dep) by finit_module(2): for a UML guest whose
root (the host's, read-only) has no kmod. Used by guest.sh with Debian's user-mode-linux kernel.

    modload.py MODULES_DIR NAME...
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys

SYS_FINIT_MODULE = 313  # x86_64


def load(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syscall(SYS_FINIT_MODULE, fd, b"", 0) != 0:
            err = ctypes.get_errno()
            if err != errno.EEXIST:
                raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    deps: dict[str, list[str]] = {}
    with open(os.path.join(root, "modules.dep")) as f:
        for line in f:
            mod, _, rest = line.partition(":")
            deps[os.path.basename(mod).split(".ko")[0].replace("-", "_")] = [mod, *rest.split()]
    done: set[str] = set()
    for name in argv[2:]:
        entry = deps.get(name.replace("-", "_"))
        if entry is None:
            print(f"modload: {name}: not in modules.dep", file=sys.stderr)
            return 1
        # modules.dep lists a module's dependencies so that the last one is loaded first
        for rel in [*reversed(entry[1:]), entry[0]]:
            if rel not in done:
                load(os.path.join(root, rel))
                done.add(rel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
