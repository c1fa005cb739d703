"""The structure the README states: one import namespace whose file paths are its import paths, floors
that import only floors below them.

README.md's architecture table names every product folder with its floor; this test reads it and
checks every import in the product against it (function-level and TYPE_CHECKING imports included),
builds the wheel to see that nothing but `mpvlab` lands in site-packages, imports every module (and
starts every program the runner starts as `python -m`) to see that no file is ever loaded under two
names, and checks that no folder of the tree passes for a third-party package (the top-level
`mininet/` holds Mininet custom topologies, never a package named `mininet`)."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mpvlab.core.paths import checkout_root

REPO = checkout_root()
COMPONENTS = ("core", "emulation", "links", "cc", "collectors", "schedulers", "topologies", "player", "testbed")
# The package's front doors: __init__ resolves the API lazily, __main__ is `python -m mpvlab`.
FRONT_DOORS = ("mpvlab/__init__.py", "mpvlab/__main__.py")
# Names a file of this tree was once loaded under besides its mpvlab.* name (the old package-dir
# folders, the player's neighbours imported from its own folder on sys.path).
OLD_TOP_LEVEL_NAMES = (*COMPONENTS, "mininet", "abr", "dash_client", "h2_conn", "mpvlab_dash", "start_signal",
                       "mpvlab_player", "dashjs_player", "voip_probe", "bulk_endpoint", "probes")
# What the runner and the test bed start as programs: `python -m MODULE`, never a file path.
PROGRAMS = ("mpvlab.player.gstreamer.player", "mpvlab.player.dashjs.player", "mpvlab.topologies.voip_probe",
            "mpvlab.runner.workloads.bulk_endpoint", "mpvlab.testbed.probes")


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
    return sorted(p for p in (REPO / "mpvlab").rglob("*.py") if "build" not in p.relative_to(REPO).parts)


def module_names() -> list[str]:
    """Every product module's import name, read off its file path."""
    out = []
    for p in product_files():
        parts = list(p.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return out


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
    path = REPO.joinpath(*parts)
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


def test_no_two_files_import_each_other() -> None:
    """No circle of imports between product files, function-level and TYPE_CHECKING imports included: a
    module split in two whose halves import each other (even for an annotation) is one module in two
    files; the half that is imported describes what it needs (a Protocol) or takes it as parameters."""
    import graphlib
    graph = {p.relative_to(REPO).as_posix(): imported_files(ast.parse(p.read_text())) for p in product_files()}
    try:
        graphlib.TopologicalSorter({k: v - {k} for k, v in graph.items()}).prepare()
    except graphlib.CycleError as e:
        pytest.fail(f"files that import each other: {' -> '.join(e.args[1])}")
    assert sum(len(v) for v in graph.values()) > 300   # the scan sees the product's imports at all


def test_one_import_namespace_in_the_wheel(tmp_path: Path) -> None:
    """Building the wheel (what a non-editable install puts in site-packages): every file is under
    mpvlab/ or the wheel's metadata; the components are inside, as mpvlab.<folder>."""
    # Built from a copy of the files git knows (tracked, or new and not ignored): setuptools reuses a
    # checkout's build/ folder, where a module that has since moved would still be packed.
    src = tmp_path / "src"
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if (REPO / rel).is_file() and not (REPO / rel).is_symlink():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    cp = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                         "--disable-pip-version-check", "-w", str(tmp_path), str(src)],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    (wheel,) = tmp_path.glob("mpvlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"mpvlab"}, top
    for comp in COMPONENTS:
        assert f"mpvlab/{comp}/__init__.py" in names, comp
    assert "mpvlab/core/errors.py" in names and "mpvlab/emulation/nodes.py" in names
    assert not any(n.startswith("mpvlab/mininet/") for n in names)


def test_no_generic_top_level_name_is_importable() -> None:
    """Outside the checkout, `core`, `links`, … are not importable: only mpvlab.<folder> is."""
    code = ("import importlib.util\n"
            f"print([c for c in {COMPONENTS!r} if importlib.util.find_spec(c) is not None])\n"
            f"import mpvlab.core.errors, mpvlab.links.spec, mpvlab.topologies.spec\n"
            "print('ok')\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["[]", "ok"]


def test_the_mininet_folder_never_hides_the_mininet_library() -> None:
    """Started in the checkout (its root first on sys.path), `import mininet` still gets the library."""
    code = ("import sys; assert sys.path[0] == ''\n"
            "import mininet.net, mininet.node\n"
            "import mpvlab.emulation.nodes\n"
            "print(mininet.net.__file__); print(mpvlab.emulation.nodes.__file__)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert cp.returncode == 0, cp.stderr
    library, ours = cp.stdout.split()
    assert not library.startswith(str(REPO)), library
    assert ours == str(REPO / "mpvlab" / "emulation" / "nodes.py")


# Run in a fresh interpreter started in the checkout (its root first on sys.path, as `python -c`, a
# notebook or `python -m` there would have it): every module imported, then the files of sys.modules
# grouped by real path.
_LOADED_TWICE = """
import importlib, json, os, sys
names = json.loads(sys.argv[1])
for n in names:
    importlib.import_module(n)
by_file = {}
for name, mod in list(sys.modules.items()):
    f = getattr(mod, "__file__", None)
    if f and os.path.realpath(f).startswith(os.getcwd() + os.sep) and ".venv" not in f:    # the checkout's own
        by_file.setdefault(os.path.realpath(f), []).append(name)
print(json.dumps({"twice": {f: n for f, n in by_file.items() if len(n) > 1},
                  "top": sorted(m for m in sys.modules if "." not in m),
                  "mininet": getattr(sys.modules.get("mininet"), "__file__", None)}))
"""


def _loaded(code: str, *args: str) -> dict[str, object]:
    cp = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert cp.returncode == 0, cp.stderr[-3000:]
    return json.loads(cp.stdout.strip().splitlines()[-1])


def test_no_module_file_is_loaded_under_two_names() -> None:
    """Every module under mpvlab/ imported in one interpreter started in the checkout: each file is in
    sys.modules once, and none under an old top-level name (`core`, `abr`, `mpvlab_dash`, …)."""
    # a package's __main__ runs its program (`python -m mpvlab`): started below, with the programs
    names = [n for n in module_names() if not n.endswith(".__main__")]
    assert len(names) > 150 and "mpvlab.player.gstreamer.abr.sabre" in names and "mpvlab.emulation.nodes" in names
    seen = _loaded(_LOADED_TWICE, json.dumps(names))
    assert seen["twice"] == {}, f"files loaded under two names: {seen['twice']}"
    assert not (set(OLD_TOP_LEVEL_NAMES) - {"mininet"}) & set(seen["top"]), seen["top"]  # type: ignore[arg-type]
    assert seen["mininet"] is None or not str(seen["mininet"]).startswith(str(REPO)), seen["mininet"]


# A program as the runner starts it (`python -m MODULE --help`, run_module is what -m does), then the
# same check: the program's own file is __main__ only, never also imported under its name.
_PROGRAM = """
import json, os, runpy, sys
module = sys.argv[1]
sys.argv = [module, "--help"]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
else:
    code = 0
main_file = os.path.realpath(runpy._get_module_details(module)[1].origin)
by_file = {}
for name, mod in list(sys.modules.items()):
    f = getattr(mod, "__file__", None)
    if f and os.path.realpath(f).startswith(os.getcwd() + os.sep) and ".venv" not in f:    # the checkout's own
        by_file.setdefault(os.path.realpath(f), []).append(name)
print(json.dumps({"code": code, "again": by_file.get(main_file, []),
                  "twice": {f: n for f, n in by_file.items() if len(n) > 1},
                  "top": sorted(m for m in sys.modules if "." not in m)}))
"""


@pytest.mark.parametrize("module", (*PROGRAMS, "mpvlab", "mpvlab.content"))
def test_programs_run_as_modules_under_one_name(module: str) -> None:
    """Each program the runner starts gets as far as its --help as `python -m`, imports its
    neighbours under their mpvlab.* names only, and is never loaded a second time by name."""
    seen = _loaded(_PROGRAM, module)
    assert seen["code"] == 0, seen
    assert seen["again"] == [] and seen["twice"] == {}, seen
    assert not (set(OLD_TOP_LEVEL_NAMES) - {"mininet"}) & set(seen["top"]), seen["top"]  # type: ignore[arg-type]


def test_the_runner_starts_programs_by_module_name() -> None:
    """The argv the runner builds names the module (`-m mpvlab.player.gstreamer.player`), not a file."""
    from mpvlab.player import kinds
    from mpvlab.runner.physical import hostops
    assert {k.program for k in kinds.REGISTRY.values()} <= set(PROGRAMS)
    argv = hostops.player_argv()
    assert argv[-2:] == ["-m", "mpvlab.player.gstreamer.player"] and f"PYTHONPATH={REPO}" in argv


def _third_party_top_levels() -> set[str]:
    """Top-level import names of every installed distribution other than mpvlab."""
    return {name for name, dists in importlib.metadata.packages_distributions().items()
            if any(d.lower() != "mpvlab" for d in dists)}


def _tracked_dirs() -> set[Path]:
    files = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    return {REPO / Path(f).parent for f in files} | {REPO / "mininet"}


def test_no_folder_is_a_package_named_like_a_third_party_one() -> None:
    """No folder of the tree is a Python package (has __init__.py) named like an installed third-party
    top-level package, and none but mpvlab/ is a package at the top, where it would shadow one."""
    third = _third_party_top_levels()
    assert {"mininet", "pydantic", "yaml"} <= third, "the installed distributions were not read"
    packages = {d for d in _tracked_dirs() if (d / "__init__.py").is_file()}
    assert packages and all((d / "__init__.py").is_file() for d in packages)
    clash = sorted(d.relative_to(REPO).as_posix() for d in packages if d.name in third)
    assert clash == [], f"packages named like installed third-party ones: {clash}"
    top = sorted(d.name for d in packages if d.parent == REPO)
    assert top == ["mpvlab"], top


def test_top_level_mininet_holds_custom_topologies() -> None:
    """mininet/ is what a Mininet user expects there: files `mn --custom` reads (a `topos` dict of
    Topo classes), no package. Built (not started) as mn builds it: the links and hosts it declares."""
    from mininet.topo import Topo
    folder = REPO / "mininet"
    assert not (folder / "__init__.py").exists()
    files = sorted(folder.glob("*.py"))
    assert files, "no custom topology in mininet/"
    for f in files:
        env: dict[str, object] = {}
        exec(compile(f.read_text(), str(f), "exec"), env)      # what mn --custom does with the file
        topos = env["topos"]
        assert isinstance(topos, dict) and topos, f
        for name, make in topos.items():
            topo = make(prefix="t")
            assert isinstance(topo, Topo), name
    topo = {}
    exec(compile((folder / "dual_path.py").read_text(), "dual_path.py", "exec"), topo)
    built = topo["topos"]["dualpath"](prefix="t", lte_delay="30ms")   # type: ignore[index,operator]
    assert sorted(built.hosts()) == ["tc", "trl", "trw", "ts"] and built.switches() == []
    assert len(built.links()) == 4
    lte = [info for a, b, info in built.links(withInfo=True) if {a, b} == {"tc", "trl"}]
    assert lte and lte[0]["delay"] == "30ms" and lte[0]["bw"] == 10.0


def test_one_function_knows_the_checkout() -> None:
    """No product, test or bench module computes the checkout from its own depth in the tree."""
    depth = re.compile(r"Path\(__file__\)[^\n]*\.(parents\[\d\]|parent\.parent)|dirname\(\s*os\.path\.dirname\(")
    offenders = [p.relative_to(REPO).as_posix()
                 for d in ("mpvlab", "tests", "bench") for p in (REPO / d).rglob("*.py")
                 if depth.search(p.read_text()) and p != REPO / "mpvlab" / "core" / "paths.py"]
    assert offenders == [], offenders
    assert checkout_root() == REPO and (REPO / "setup.sh").is_file() and (REPO / "mpvlab").is_dir()


@pytest.mark.netns
def test_mininet_custom_topology_carries_traffic_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The custom topology started through Mininet's API as `mn --custom … --topo dualpath --link tc`
    starts it (its own node names, so its own interfaces; net.stop() removes them, never Mininet's
    global cleanup): the client reaches the server's Wi-Fi address over the Wi-Fi router and its LTE
    address over the LTE router, and every node reaches every other (`--test pingall`)."""
    import secrets

    from mininet.link import TCLink
    from mininet.net import Mininet

    import mininet.net

    # Mininet.__init__ runs Mininet.init() → fixLimits(), which raises ten root-namespace sysctls
    # (tcp_rmem, tcp_wmem, rmem_max, …) and never restores them: a test must not change the host.
    # init() returns early once the flag is set; fixLimits itself refuses, so a changed Mininet
    # that calls it another way fails here instead of touching the host (as tests/test_shell.py).
    def refuse() -> None:
        raise AssertionError("fixLimits() ran: it changes host-wide sysctls")

    monkeypatch.setattr(mininet.net, "fixLimits", refuse)
    monkeypatch.setattr(Mininet, "inited", True)
    env: dict[str, object] = {}
    exec(compile((REPO / "mininet" / "dual_path.py").read_text(), "dual_path.py", "exec"), env)
    prefix = "mv" + secrets.token_hex(2)            # mv<id>…: interfaces <prefix>c-eth0 and so on
    net = Mininet(topo=env["topos"]["dualpath"](prefix=prefix), link=TCLink, controller=None)  # type: ignore[index,operator]
    try:
        net.start()
        client = net[f"{prefix}c"]
        for dst, dev in (("10.0.11.2", f"{prefix}c-eth0"), ("10.0.12.2", f"{prefix}c-eth1")):
            assert f"dev {dev}" in client.cmd(f"ip route get {dst}"), dst
            assert " 0% packet loss" in client.cmd(f"ping -c 2 -W 2 {dst}"), dst
        assert net.pingAll(timeout="2") == 0.0
    finally:
        net.stop()
    left = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert prefix not in left
