"""Topology kinds and workloads each have one home (issue 35): a kind's name is written only in
mpvlab/topologies/registry.py, a workload's only in its module under mpvlab/workloads/ (and in the kind
entries that say which workloads a kind runs). Everything else asks the registry entry. The scan
reads every product .py with `ast`, so docstrings and comments never count.

What counts: a string constant equal to a kind or workload name used as a value — compared,
assigned, listed, passed, returned, as a `Literal[...]` member or a dict key or value. What does
not: a subscript or a mapping look-up (`s["rtp"]`, `x.get("bulk")`): summary and scenario
sections whose key is the workload's name (its part of summary.json) and unrelated sections that
share the word (`cross_traffic.bulk`); a path component (`logs / "rtp"`, the folder `rtp/`). The few literals that share a word with a name but mean
something else are listed in OTHER_MEANINGS, each with what it means.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest
from mpvlab.topologies import registry as topologies

from mpvlab.workloads import registry as workloads
from mpvlab.core.paths import checkout_root

ROOT = checkout_root()
PRODUCT = ("mpvlab", "cc", "collectors", "core", "links", "mininet", "player", "rtp", "schedulers", "topologies",
           "testbed")
KIND_HOME = {"mpvlab/topologies/registry.py"}
WORKLOAD_HOMES = {f"mpvlab/workloads/{p.name}" for p in (ROOT / "mpvlab" / "workloads").glob("*.py")} | KIND_HOME
LOOKUPS = {"get", "pop", "setdefault"}
# (file, the literal's source line, stripped): what the word means there
OTHER_MEANINGS = {
    ("mpvlab/player/dashjs/qoe.py", 'if f.get("mediaType") == "video" and f.get("type") == "MediaSegment" and f.get("ok")]'):
        "dash.js's media type of a segment",
    ("mpvlab/player/gstreamer/dash_mpd.py", 'if "video" not in ctype and not mime.startswith("video/"):'):
        "an HTTP content type",
    ("mpvlab/runner/shared_summary.py", 'if "bulk" in cross:'): "the cross_traffic.bulk section of the summary",
    ("mpvlab/player/gstreamer/dash.py", 'if pad.get_name().startswith("video") and not sinkpad.is_linked():'):
        "the decoder's pad name",
    ("mpvlab/runner/cross.py", 'self.bulk_spec.cc, dur_s, self.workdir, "bulk", self.ctx.ledger.add_proc)'):
        "the cross-traffic bulk flow's log name",
    ("mpvlab/schema_rules.py", 'dash = {"required": ["video"], "properties": {"video": {"required": ["kind"], "properties": {"kind": {"const": "dash"}}}}}'):
        "the scenario's `video:` section (the content), in the DASH buffer rule",
    ("mpvlab/schema_rules.py", 'if "video" in schema.get("properties", {}) and "player" in schema.get("properties", {}):'):
        "the scenario's `video:` section (the content): the schema that has one",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _key_lookups(tree: ast.AST) -> set[int]:
    """Constants used as a key to read a mapping (`m["k"]`, `m.get("k")`) or as a path component
    (`logs / "rtp"`: a folder of the file layout, such as a workload's log folder)."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
            out.add(id(n.slice))
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LOOKUPS and n.args
                and isinstance(n.args[0], ast.Constant)):
            out.add(id(n.args[0]))
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
            out |= {id(side) for side in (n.left, n.right) if isinstance(side, ast.Constant)}
    return out


@functools.cache
def _string_constants() -> tuple[tuple[str, int, str, str], ...]:
    """(file, line, value, source line) of every counted string constant in the product, read once."""
    found = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text()
            tree = ast.parse(text)
            skip = _docstrings(tree) | _key_lookups(tree)
            lines = text.splitlines()
            found += [(rel, n.lineno, n.value, lines[n.lineno - 1].strip()) for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]
    return tuple(found)


def _literals(names: set[str]) -> list[tuple[str, int, str, str]]:
    """(file, line, name, source line) of every counted literal naming one of `names`."""
    return [c for c in _string_constants() if c[2] in names]


def _outside(found: list[tuple[str, int, str, str]], homes: set[str]) -> list[str]:
    return [f"{f}:{line}: {name!r} in `{src}`" for f, line, name, src in found
            if f not in homes and (f, src) not in OTHER_MEANINGS]


def test_kind_names_only_in_the_topology_registry() -> None:
    outside = _outside(_literals(set(topologies.NAMES)), KIND_HOME)
    assert outside == [], "topology-kind names written outside mpvlab/topologies/registry.py:\n" + "\n".join(outside)


def test_workload_names_only_in_their_homes() -> None:
    outside = _outside(_literals(set(workloads.REGISTRY)), WORKLOAD_HOMES)
    assert outside == [], "workload names written outside mpvlab/workloads/:\n" + "\n".join(outside)


def test_other_meanings_still_exist() -> None:
    """An exception whose line is gone is removed from the list, so the list never hides a new use."""
    names = set(topologies.NAMES) | set(workloads.REGISTRY)
    seen = {(f, src) for f, _, _, src in _literals(names)}
    assert [k for k in OTHER_MEANINGS if k not in seen] == []


def test_the_scan_sees_a_planted_name(tmp_path: Path) -> None:
    """The scan itself: a kind compared by name in product code counts, a docstring and a look-up do not."""
    tree = ast.parse('"""dumbbell"""\nx = s["dumbbell"]\ny = s.get("rtp")\nif k == "dumbbell":\n    pass\n')
    skip = _docstrings(tree) | _key_lookups(tree)
    hits = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in {"dumbbell", "rtp"}
            and id(n) not in skip]
    assert hits == [4]


def test_every_workload_has_its_schema_model() -> None:
    """The scenario's `workload:` union lists exactly the registry's models, each `kind` its name."""
    import typing
    union = typing.get_args(typing.get_args(workloads.WorkloadSpec)[0])
    assert list(union) == [w.spec for w in workloads.ENTRIES]
    for w in workloads.ENTRIES:
        assert typing.get_args(w.spec.model_fields["kind"].annotation) == (w.name,)


def test_every_kind_has_a_summary_model_backend_and_known_workloads() -> None:
    from mpvlab.results import summary
    from mpvlab.runner import kinds as runner_kinds
    for k in topologies.ENTRIES:
        model = getattr(summary, k.summary)
        import typing
        assert k.name in typing.get_args(model.model_fields["topology"].annotation)
        assert set(k.workloads) <= set(workloads.REGISTRY)
        assert set(k.workloads) <= set(typing.get_args(model.model_fields["workload"].annotation))
        assert k.backend in runner_kinds.BACKENDS
        assert k.name in runner_kinds.KINDS
        if k.builder is not None:
            assert callable(k.build())
        lo, hi = k.paths
        assert 1 <= lo <= hi <= topologies.MAX_PATHS


@pytest.mark.parametrize("n", range(10))
def test_path_count_rule(n: int) -> None:
    """The rule in words matches the rule in numbers for every kind."""
    names = [f"p{i}" for i in range(n)]
    for k in topologies.ENTRIES:
        problem = k.path_count_problem(names)
        assert (problem is None) == (k.paths[0] <= n <= k.paths[1])
        if problem:
            assert problem.startswith(f"paths: topology {k.name} ") and f"got {n}:" in problem


# --- the console summary: the kind's lines around the workload's (mpvlab/cli.py summary_lines) ------

_PATHS = {"wifi": {"rx_bytes": 7_150_000, "share": 0.5}, "lte": {"rx_bytes": 7_140_000, "share": 0.5}}


def test_console_one_client_video() -> None:
    from mpvlab.cli import summary_lines
    s = {"topology": topologies.DUAL_PATH.name, "workload": workloads.VIDEO.name, "paths": _PATHS,
         "underflows": 0, "underflow_total_s": 0.0, "picture_discards": 2, "startup_delay_s": 1.6064,
         "duration_s": 20.0, "fidelity_warnings": ["wifi: rate 4 % low"]}
    assert summary_lines(s) == [
        "  bytes per path: wifi 7.15 MB (50%), lte 7.14 MB (50%)",
        "  underflows 0 (0.000 s), picture discards 2, startup 1.606 s, playback 20.000 s",
        "[yellow]  1 warning(s):[/yellow]", "[yellow]  - fidelity: wifi: rate 4 % low[/yellow]"]


def test_console_one_client_bulk_and_rtp() -> None:
    from mpvlab.cli import summary_lines
    bulk = {"topology": topologies.DUMBBELL.name, "workload": workloads.BULK.name, "paths": _PATHS,
            "bulk": {"bytes_received": 10_000_000, "transfer_s": 8.5, "goodput_bps": 9_411_765, "cc_seen": "cubic"}}
    assert summary_lines(bulk)[1:] == ["  bulk transfer: 10.00 MB in 8.500 s (9.41 Mbit/s), cc cubic"]
    rtp = {"topology": topologies.DUMBBELL.name, "workload": workloads.RTP.name, "paths": _PATHS,
           "rtp": {"controller": "gcc", "frames_captured": 600, "frames_on_time": 590, "frames_late": 8,
                   "frames_lost": 2, "latency_ms": {"p50": 61.25}, "target_bps": {"steady_mean": 1_250_000},
                   "packet_loss": 0.0125}}
    assert summary_lines(rtp)[1:] == [
        "  rtp gcc: 600 frames captured, 590 on time, 8 late, 2 lost; latency p50 61.2 ms; steady target "
        "1250 kbit/s; packet loss 1.25%"]


def test_console_several_clients() -> None:
    from mpvlab.cli import summary_lines
    player = {"bytes_received": 5_000_000, "underflows": 1, "underflow_total_s": 0.5, "picture_discards": 0,
              "startup_delay_s": 1.0, "playback_s": 20.5}
    s = {"topology": topologies.SHARED_BOTTLENECK.name, "workload": workloads.VIDEO.name,
         "players": {"client0": player, "client1": player},
         "bottleneck": {"utilisation": 0.953, "tbf": {"drops": 12}},
         "cross_traffic": {"bulk": {"cc_requested": "cubic", "goodput_bps": 2_500_000}}}
    assert summary_lines(s) == [
        "  client0: 5.00 MB, underflows 1 (0.500 s), picture discards 0, startup 1.000 s, playback 20.500 s",
        "  client1: 5.00 MB, underflows 1 (0.500 s), picture discards 0, startup 1.000 s, playback 20.500 s",
        "  bottleneck utilisation 95.3%, drops 12",
        "  bulk cubic: 2.500 Mbit/s"]


def test_shell_and_plot_refusals_name_what_works() -> None:
    assert topologies.DUAL_PATH.shell_refusal() is None and topologies.DUMBBELL.shell_refusal() is None
    assert topologies.SHARED_BOTTLENECK.shell_refusal() == (
        "topology.kind shared-bottleneck: mpvlab shell supports dual-path and dumbbell only (run it with `mpvlab run`)")
    assert "has no emulated network" in (topologies.PHYSICAL.shell_refusal() or "")
    assert topologies.SHARED_BOTTLENECK.plot_refusal() is not None and topologies.DUAL_PATH.plot_refusal() is None
    # a physical run's provenance has no topology.paths to map subflows to paths: refused, not a KeyError
    assert (topologies.PHYSICAL.plot_refusal() or "").startswith("mpvlab plot draws per-path figures of dual-path/dumbbell runs")


def test_content_is_encoded_only_for_workloads_that_play_the_video_section() -> None:
    """`mpvlab prepare`, `sweep` and `mpvlab.sweep` encode the scenario's video before any run: not for
    bulk (sends none) or rtp (encodes its own test picture), as their registry entries say."""
    from mpvlab.input.scenario import load_scenario
    plays = {name: load_scenario(ROOT / "scenarios" / name)[0].workload_kind.plays_video_section
             for name in ("smoke.yaml", "lte-trace-bulk.yaml", "rtp-competition-short.yaml")}
    assert plays == {"smoke.yaml": True, "lte-trace-bulk.yaml": False, "rtp-competition-short.yaml": False}
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "prepare", "scenarios/lte-trace-bulk.yaml",
                         "scenarios/rtp-competition-short.yaml"], capture_output=True, text=True, cwd=ROOT,
                        timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stdout.splitlines() == [
        "scenarios/lte-trace-bulk.yaml: nothing to prepare (workload bulk plays no video file)",
        "scenarios/rtp-competition-short.yaml: nothing to prepare (workload rtp plays no video file)"]


def test_prepare_takes_a_sweep_spec_and_makes_each_distinct_video_once() -> None:
    """`mpvlab prepare SWEEP [--quick]` prepares the video of every run the sweep plans: the BBR-S
    study's quick variant plans 8 runs of one video, so one line; a file that is neither a scenario
    nor a sweep spec is refused naming it."""
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "prepare", "sweeps/bbrs-dash-study.yaml", "--quick"],
                        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sweeps/bbrs-dash-study.yaml: DASH "), lines
    assert "11 levels, 2 segments" in lines[0] and ("cached" in lines[0] or "encoded in" in lines[0])
    bad = subprocess.run([sys.executable, "-m", "mpvlab", "prepare", "pyproject.toml"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "pyproject.toml" in bad.stdout + bad.stderr
