"""Every command and repository path the docs name exists (issue 49 item 6): in README.md and docs/,
each `mpvlab SUBCOMMAND --option` in code is a real subcommand and option, each `.venv/bin/TOOL` is
installed by ./setup.sh, and each repository path in code (`scenarios/x.yaml`, `mpvlab/runner/...`,
`tests/test_x.py`) is a file or folder of this checkout. Python dotted names of mpvlab modules
(`mpvlab.core.errors`) must import."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
GENERATED = {REPO / "docs" / "reference" / n for n in ("scenario.md", "sweep.md", "summary.md")}
TOP = ("mpvlab", "core", "links", "cc", "collectors", "schedulers", "topologies", "mininet", "player",
       "testbed", "scenarios", "sweeps", "tests", "bench", "docs", "rtp")
PATH_RE = re.compile(r"(?<![\w./~-])((?:" + "|".join(TOP) + r")/[\w./-]*[\w/])")
CMD_RE = re.compile(r"(?:^|[\s`(])(?:\.venv/bin/)?mpvlab ([a-z]+)((?: [^`|;&\n]*)?)")
TOOL_RE = re.compile(r"\.venv/bin/([\w.-]+)")
MODULE_RE = re.compile(r"`(mpvlab(?:\.[a-z_][a-z0-9_]*)+)`")
# made by a build, a run or setup.sh, not committed (the docs name where things appear)
NOT_COMMITTED = ("build/", "vendor", "results/", "report/", "/plots", ".venv")
# named on purpose although absent, each with the reason
ABSENT_ON_PURPOSE = {
    ("docs/extending.md", "mpvlab/workloads/rr.py"): "created by docs/examples/add-workload.patch",
    ("docs/extending.md", "mpvlab/runner/workloads/rr.py"): "created by docs/examples/add-workload.patch",
}


def _code(text: str) -> list[str]:
    """Inline code spans and fenced blocks: where the docs name commands and paths."""
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
    rest = re.sub(r"```.*?```", "", text, flags=re.S)
    return blocks + re.findall(r"`([^`\n]+)`", rest)


@cache
def _options(sub: str) -> set[str] | None:
    cp = subprocess.run([sys.executable, "-m", "mpvlab", sub, "--help"], capture_output=True, text=True,
                        cwd=REPO, timeout=120)
    if cp.returncode != 0:
        return None
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", cp.stdout))


def _pages() -> list[tuple[Path, list[str]]]:
    return [(p, _code(p.read_text())) for p in PAGES if p not in GENERATED]


def test_named_paths_exist() -> None:
    missing = []
    for page, codes in _pages():
        for code in codes:
            for m in PATH_RE.finditer(code):
                rel = m.group(1).rstrip(".")
                after = re.match(r"[^\s`]*", code[m.end():]).group(0)  # type: ignore[union-attr]
                if any(c in rel + after for c in "*{}<>") or any(n in rel for n in NOT_COMMITTED):
                    continue     # a pattern (scenarios/wifi-lte-{a,b,c}.yaml), or made by a run or build
                if (str(page.relative_to(REPO)), rel) in ABSENT_ON_PURPOSE:
                    continue
                if not (REPO / rel).exists():
                    missing.append(f"{page.relative_to(REPO)}: {rel}")
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_named_commands_and_options_exist() -> None:
    bad = []
    for page, codes in _pages():
        for code in codes:
            for line in code.splitlines():
                for m in CMD_RE.finditer(line):
                    sub, rest = m.group(1), m.group(2)
                    opts = _options(sub)
                    if opts is None:
                        bad.append(f"{page.relative_to(REPO)}: mpvlab {sub}")
                        continue
                    for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest.split("#")[0]):
                        if opt not in opts:
                            bad.append(f"{page.relative_to(REPO)}: mpvlab {sub} {opt}")
                for tool in TOOL_RE.findall(line):
                    if not (REPO / ".venv" / "bin" / tool).exists():
                        bad.append(f"{page.relative_to(REPO)}: .venv/bin/{tool}")
    assert not bad, "docs name commands or options that do not exist:\n" + "\n".join(sorted(set(bad)))


def _resolves(name: str) -> bool:
    """A module, or an attribute of the longest module prefix (mpvlab.run: PEP 562 in mpvlab)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_named_modules_import() -> None:
    bad = []
    for page, codes in _pages():
        for code in codes:
            for name in MODULE_RE.findall(f"`{code}`"):
                if not _resolves(name):
                    bad.append(f"{page.relative_to(REPO)}: {name}")
    assert not bad, "docs name mpvlab modules that do not exist:\n" + "\n".join(sorted(set(bad)))


def test_the_package_docstring_names_real_files() -> None:
    import mpvlab
    for rel in re.findall(r'"((?:scenarios|sweeps)/[\w.-]+)"', mpvlab.__doc__ or ""):
        assert (REPO / rel).is_file(), rel


def test_code_fences_open_and_close_on_their_own_lines() -> None:
    """A fence glued to a line's end (`'```` on docs/cluster.md) leaves the block open, and the prose
    after it renders as code."""
    bad = []
    for page in PAGES:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if "```" in line and not line.lstrip().startswith("```"):
                bad.append(f"{page.relative_to(REPO)}:{n}: {line.strip()[:60]}")
    assert not bad, bad


def test_cluster_page_sizes_the_shipped_sweeps() -> None:
    from mpvlab.sweeps import expand, load_spec
    page = (REPO / "docs" / "cluster.md").read_text()
    for name in ("bbrs-dash-study", "wifi-lte-study"):
        spec = REPO / "sweeps" / f"{name}.yaml"
        n = len(expand(load_spec(spec), spec, quick=False).runs)
        assert f"{n:,} ×" in page, (name, n)
