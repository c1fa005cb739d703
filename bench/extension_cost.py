#!/usr/bin/env python3
"""What adding a topology kind or a workload costs, measured on the worked examples.

Each docs/examples/*.patch is applied (`git apply`) to a scratch copy of the committed tree
(`git archive HEAD`, in a temporary folder removed afterwards), and the copy's `git diff --numstat`
is printed: files touched and lines added/removed, split into hand-written product code, tests,
hand-written docs and generated docs (what `python -m mpvlab.schemas` and `python -m
mpvlab.results.summary` rewrite). docs/extending.md quotes these numbers. Not a test: nothing here
depends on the host's load, it only counts.

    .venv/bin/python bench/extension_cost.py [PATCH ...]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GENERATED = ("docs/reference/", "docs/schemas/", "docs/summary.schema.json")


def kind_of(path: str) -> str:
    if path.startswith(GENERATED):
        return "generated docs"
    if path.startswith("tests/"):
        return "tests"
    if path.endswith(".md") or path.startswith("docs/"):
        return "docs"
    if path.startswith("scenarios/"):
        return "scenarios"
    return "product"


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True, capture_output=True).stdout.decode()


def measure(patch: Path) -> list[tuple[str, int, int]]:
    """(file, added, removed) once `patch` is applied to a scratch copy of HEAD."""
    scratch = Path(tempfile.mkdtemp(prefix="mpvlab-extcost-"))
    try:
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
        git(scratch, "init", "-q")
        # -f: the archive holds only tracked files, and .gitignore's `results/` would hide mpvlab/results/
        git(scratch, "add", "-A", "-f")
        git(scratch, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "base")
        git(scratch, "apply", "--whitespace=nowarn", str(patch.resolve()))
        git(scratch, "add", "-A", "-f")
        rows = []
        for line in git(scratch, "diff", "--cached", "--numstat").splitlines():
            added, removed, name = line.split("\t")
            rows.append((name, int(added), int(removed)))
        return rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("patches", nargs="*", type=Path)
    args = ap.parse_args()
    patches = args.patches or sorted((REPO / "docs" / "examples").glob("*.patch"))
    if not patches:
        print("no patches in docs/examples/", file=sys.stderr)
        return 2
    for patch in patches:
        rows = measure(patch)
        print(f"{patch.name}: {len(rows)} files, +{sum(r[1] for r in rows)}/-{sum(r[2] for r in rows)} lines")
        for what in ("product", "tests", "scenarios", "docs", "generated docs"):
            mine = [r for r in rows if kind_of(r[0]) == what]
            if mine:
                print(f"  {what}: {len(mine)} files, +{sum(r[1] for r in mine)}/-{sum(r[2] for r in mine)}")
                for name, added, removed in mine:
                    print(f"    {name}: +{added}/-{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
