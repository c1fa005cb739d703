"""mpvlab's version, and the git commit a checkout is at (for `mpvlab --version`).

Cheap to import: no third-party module, and git is asked only when `describe()` is called."""

from __future__ import annotations

from pathlib import Path

from mpvlab.core.paths import checkout_root

# The released version (CHANGELOG.md, CITATION.cff and pyproject.toml carry the same string; a test
# checks they agree, so a release bumps all four together).
__version__ = "0.4.0"

REPO = checkout_root()


def git_commit(repo: Path = REPO) -> tuple[str | None, bool]:
    """(commit, dirty) of the checkout mpvlab runs from; (None, False) outside a git checkout (an
    unpacked tarball, a copy without .git) or without git installed — never an error, since a
    version string must print everywhere."""
    import subprocess     # here, not at the top: `import mpvlab` must stay cheap

    if not (repo / ".git").exists():      # a worktree has a .git *file*: exists() covers both
        return None, False
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None, False
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None, False
    return head.stdout.strip(), bool(status.stdout.strip())


def describe(repo: Path = REPO) -> str:
    """`mpvlab 0.4.0 (git 1a2b3c4d5e6f, modified)` — the line `mpvlab --version` prints."""
    commit, dirty = git_commit(repo)
    if commit is None:
        where = "not a git checkout: commit unknown"
    else:
        where = f"git {commit[:12]}{', with uncommitted changes' if dirty else ''}"
    return f"mpvlab {__version__} ({where})"
