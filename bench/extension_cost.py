#!/usr/bin/env python3
"""What adding a topology kind, a workload or a scheduler policy costs, measured on worked examples.

Each docs/examples/*.patch is applied (`git apply`) to a scratch copy of the committed tree
(`git archive HEAD`, in a temporary folder removed afterwards), and the copy's `git diff --numstat`
is printed: files touched and lines added/removed, split into hand-written product code, tests,
hand-written docs and generated docs (what `python -m mpvlab.schemas` and `python -m
mpvlab.results.summary` rewrite). Worked examples that are commits of the project's history
(COMMITS) are measured the same way from `git diff REV^ REV`. docs/extending.md quotes these numbers
as the table rows `table_row` prints, and tests/test_docs.py checks them. It only counts: nothing
here depends on the host's load.

    .venv/bin/python bench/extension_cost.py [PATCH ...]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
GENERATED = ("docs/reference/", "docs/schemas/", "docs/summary.schema.json")


# Worked examples that are commits: name -> revision (the scheduler guide's ECF, schedulers/README.md).
COMMITS = {"ecf": "e3979bd"}
KINDS = ("product", "tests", "scenarios", "docs", "generated docs")


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


def measure_commit(rev: str) -> list[tuple[str, int, int]] | None:
    """(file, added, removed) of commit `rev`, or None where the history does not hold it."""
    if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True).returncode:
        return None
    out = git(REPO, "diff", "--numstat", f"{rev}^", rev)
    return [(n, int(a), int(r)) for a, r, n in (line.split("\t") for line in out.splitlines())]


def by_kind(rows: list[tuple[str, int, int]]) -> dict[str, tuple[int, int, int]]:
    """kind -> (files, lines added, lines removed)."""
    out: dict[str, tuple[int, int, int]] = {}
    for what in KINDS:
        mine = [r for r in rows if kind_of(r[0]) == what]
        if mine:
            out[what] = (len(mine), sum(r[1] for r in mine), sum(r[2] for r in mine))
    return out


def table_row(rows: list[tuple[str, int, int]]) -> str:
    """The measured cells of docs/extending.md's table: product files | product lines | tests |
    scenarios | generated docs."""
    k = by_kind(rows)

    def cell(what: str) -> str:
        if what not in k:
            return "—"
        files, added, removed = k[what]
        return f"{files} file{'s' if files != 1 else ''}, +{added}/−{removed}"
    product = k.get("product", (0, 0, 0))
    return " | ".join([str(product[0]), f"+{product[1]}/−{product[2]}", cell("tests"), cell("scenarios"),
                       cell("generated docs")])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("patches", nargs="*", type=Path)
    args = ap.parse_args()
    patches = args.patches or sorted((REPO / "docs" / "examples").glob("*.patch"))
    if not patches:
        print("no patches in docs/examples/", file=sys.stderr)
        return 2
    examples: list[tuple[str, list[tuple[str, int, int]] | None]] = [(p.name, measure(p)) for p in patches]
    if not args.patches:
        examples += [(f"{name} (commit {rev})", measure_commit(rev)) for name, rev in COMMITS.items()]
    for name, rows in examples:
        if rows is None:
            print(f"{name}: not in this clone's history")
            continue
        print(f"{name}: {len(rows)} files, +{sum(r[1] for r in rows)}/-{sum(r[2] for r in rows)} lines")
        print(f"  table row: | {table_row(rows)} |")
        for what in KINDS:
            mine = [r for r in rows if kind_of(r[0]) == what]
            if mine:
                print(f"  {what}: {len(mine)} files, +{sum(r[1] for r in mine)}/-{sum(r[2] for r in mine)}")
                for file, added, removed in mine:
                    print(f"    {file}: +{added}/-{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
