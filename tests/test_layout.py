"""The structure the README states: one import namespace, floors that import only floors below them.

README.md's architecture table names every product folder with its floor; this test reads it and
checks every import in the product against it (function-level and TYPE_CHECKING imports included),
builds the wheel to see that nothing but `mpvlab` lands in site-packages, and checks that the
checkout's `mininet/` folder never hides the Mininet library."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMPONENTS = ("core", "mininet", "links", "cc", "collectors", "schedulers", "topologies", "player", "testbed")
# The package's front doors: __init__ resolves the API lazily, __main__ is `python -m mpvlab`.
FRONT_DOORS = ("mpvlab/__init__.py", "mpvlab/__main__.py")


def floors_from_readme() -> dict[str, int]:
    """Folder or file (as the README writes it) -> floor number, from the architecture table."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    floors: dict[str, int] = {}
    for line in section.splitlines():
        if m := re.match(r"^\|\s*(\d+)\s*\|([^|]*)\|", line):
            for name in re.findall(r"`([^`]+)`", m.group(2)):
                floors[name] = int(m.group(1))
    return floors


def product_files() -> list[Path]:
    return sorted(p for d in ("mpvlab", *COMPONENTS) for p in (REPO / d).rglob("*.py")
                  if "build" not in p.relative_to(REPO).parts)


def entry_of(rel: str, floors: dict[str, int]) -> str | None:
    """The README entry a file belongs to: the file itself or the longest folder containing it."""
    if rel in floors:
        return rel
    folders = [f for f in floors if f.endswith("/") and rel.startswith(f)]
    return max(folders, key=len) if folders else None


def module_file(module: str) -> str | None:
    """Repository path of an `mpvlab.…` module (package → its __init__.py), or None if not ours."""
    parts = module.split(".")
    if parts[0] != "mpvlab":
        return None
    base = [parts[1]] + parts[2:] if len(parts) > 1 and parts[1] in COMPONENTS else ["mpvlab", *parts[1:]]
    path = REPO.joinpath(*base)
    if path.is_dir():
        return (path / "__init__.py").relative_to(REPO).as_posix()
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py").relative_to(REPO).as_posix()
    return None


def imported_files(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import mod` imports pkg.mod when that is a module, else a name of pkg
            names = [f"{node.module}.{a.name}" if module_file(f"{node.module}.{a.name}") else node.module
                     for a in node.names]
        out |= {f for n in names if (f := module_file(n))}
    return out


def test_every_product_file_has_a_floor() -> None:
    floors = floors_from_readme()
    assert floors, "README.md has no architecture table"
    missing = [p.relative_to(REPO).as_posix() for p in product_files()
               if p.relative_to(REPO).as_posix() not in FRONT_DOORS
               and entry_of(p.relative_to(REPO).as_posix(), floors) is None]
    assert not missing, f"files in no floor of README.md's architecture table: {missing}"


def test_each_floor_imports_only_floors_below() -> None:
    floors = floors_from_readme()
    wrong: list[str] = []
    n_imports = 0
    for p in product_files():
        rel = p.relative_to(REPO).as_posix()
        src = entry_of(rel, floors)
        if rel in FRONT_DOORS or src is None:
            continue
        for dst_file in imported_files(ast.parse(p.read_text())):
            dst = entry_of(dst_file, floors)
            if dst is None or dst == src or dst_file in FRONT_DOORS:
                continue
            n_imports += 1
            if floors[dst] >= floors[src]:
                wrong.append(f"{rel} (floor {floors[src]}, {src}) imports {dst_file} (floor {floors[dst]}, {dst})")
    assert n_imports > 100, n_imports          # the scan sees the product's imports at all
    assert not wrong, "imports that do not go down a floor:\n" + "\n".join(wrong)


def test_one_import_namespace_in_the_wheel(tmp_path: Path) -> None:
    """Building the wheel (what a non-editable install puts in site-packages): every file is under
    mpvlab/ or the wheel's metadata; the components are inside, as mpvlab.<folder>."""
    cp = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                         "--disable-pip-version-check", "-w", str(tmp_path), str(REPO)],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    (wheel,) = tmp_path.glob("mpvlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"mpvlab"}, top
    for comp in COMPONENTS:
        assert f"mpvlab/{comp}/__init__.py" in names, comp
    assert "mpvlab/core/errors.py" in names and "mpvlab/mininet/nodes.py" in names


def test_no_generic_top_level_name_is_importable() -> None:
    """Outside the checkout, `core`, `links`, … are not importable: only mpvlab.<folder> is."""
    code = ("import importlib.util\n"
            f"print([c for c in {COMPONENTS!r} if importlib.util.find_spec(c) is not None and c != 'mininet'])\n"
            f"import mpvlab.core.errors, mpvlab.links.spec, mpvlab.topologies.spec\n"
            "print('ok')\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["[]", "ok"]


def test_the_mininet_folder_never_hides_the_mininet_library() -> None:
    """Started in the checkout (its root first on sys.path), `import mininet` still gets the library."""
    code = ("import sys; assert sys.path[0] == ''\n"
            "import mininet.net, mininet.node\n"
            "import mpvlab.mininet.nodes\n"
            "print(mininet.net.__file__); print(mpvlab.mininet.nodes.__file__)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert cp.returncode == 0, cp.stderr
    library, ours = cp.stdout.split()
    assert not library.startswith(str(REPO)), library
    assert ours == str(REPO / "mininet" / "nodes.py")
