"""The lint and type gates over the product code: `ruff check` and `mypy -p mpvlab`.

mypy cannot read pyproject's package-dir mapping (`mpvlab.core` lives in `core/`), and the editable
install's import hook is invisible to it. So this builds build/mypy-tree/mpvlab/ out of symlinks: one
per entry of mpvlab/ and one per component folder, named as the mapping names it. mypy then checks
every module under the name the code imports it by, and its messages are mapped back to repository
paths. mypy runs with that tree as its working directory because mypy searches the working
directory first, and the repository root has an `mpvlab/` without the components.

Run by hand: `.venv/bin/python tests/lintlab.py` (prints the errors of both, exits 1 if any).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TREE_UNDER_REPO = Path("build") / "mypy-tree"      # pyproject's [tool.mypy] mypy_path names the same


@dataclass(frozen=True)
class GateResult:
    """What one tool said: its exit code and its output, paths relative to the repository."""
    returncode: int
    output: str


def component_dirs(repo: Path = REPO) -> dict[str, Path]:
    """`mpvlab.<name>` → folder, read from pyproject's package-dir (only the top-level mappings)."""
    with open(repo / "pyproject.toml", "rb") as f:
        mapping: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {name.removeprefix("mpvlab."): repo / folder for name, folder in mapping.items()
            if name.count(".") == 1}


def product_paths(repo: Path = REPO) -> list[Path]:
    """Every folder of product Python: mpvlab/ and each mapped component folder."""
    return [repo / "mpvlab", *component_dirs(repo).values()]


def build_tree(repo: Path = REPO) -> Path:
    """(Re)build repo/build/mypy-tree/mpvlab as symlinks; rebuilt on every run so that a new module or
    component is seen and a removed one is gone."""
    tree = repo / TREE_UNDER_REPO
    package = tree / "mpvlab"
    package.mkdir(parents=True, exist_ok=True)
    want: dict[str, Path] = {entry.name: entry for entry in (repo / "mpvlab").iterdir()
                             if entry.name != "__pycache__"}
    want.update(component_dirs(repo))
    for link in package.iterdir():
        if link.name not in want or not link.is_symlink() or link.readlink() != want[link.name]:
            link.unlink()
    for name, target in want.items():
        if not (package / name).is_symlink():
            (package / name).symlink_to(target)
    return tree


def _to_repo_paths(output: str, repo: Path) -> str:
    """mypy names files as it found them in the tree (mpvlab/core/x.py): name the real file instead."""
    components = component_dirs(repo)
    lines = []
    for line in output.splitlines():
        first = line.split(":", 1)[0]
        parts = first.split("/")
        if len(parts) > 2 and parts[0] == "mpvlab" and parts[1] in components:
            real = components[parts[1]].relative_to(repo).joinpath(*parts[2:])
            line = str(real) + line[len(first):]
        lines.append(line)
    return "\n".join(lines)


def run_mypy(repo: Path = REPO, cache_dir: Path | None = None) -> GateResult:
    tree = build_tree(repo)
    venv_bin = Path(sys.executable).parent
    cmd = [str(venv_bin / "mypy"), "--config-file", str(repo / "pyproject.toml"),
           "--cache-dir", str(cache_dir or repo / ".mypy_cache"), "-p", "mpvlab"]
    # MYPYPATH would add to mypy_path; it must not point anywhere else
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    return GateResult(done.returncode, _to_repo_paths(done.stdout + done.stderr, repo))


# ruff reads the tests and benches too (mypy does not): an unused import or a late-bound loop variable
# in a test is a test that may not check what it says.
RUFF_ALSO = ("tests", "bench")


def run_ruff(repo: Path = REPO) -> GateResult:
    venv_bin = Path(sys.executable).parent
    cmd = [str(venv_bin / "ruff"), "check", "--no-cache", "--output-format", "concise",
           *(str(p.relative_to(repo)) for p in product_paths(repo)),
           *(d for d in RUFF_ALSO if (repo / d).is_dir())]
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)
    return GateResult(done.returncode, done.stdout + done.stderr)


def main() -> int:
    failed = 0
    for name, result in (("ruff", run_ruff()), ("mypy", run_mypy())):
        print(f"== {name} (exit {result.returncode})\n{result.output}")
        failed |= result.returncode != 0
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
