"""The checks' one entry point (mpvlab/runner/crosschecks.py, issue 43): a run's checks on its own
figures are called from there only, exactly the registry's rows for the run's workload, in the
registry's order, and no record outside a row's name can reach a summary."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpvlab.core.paths import checkout_root
from mpvlab.results import checks
from mpvlab.runner import crosschecks
from mpvlab.runner.workloads.base import Outcome

PKG = checkout_root() / "mpvlab"
ENTRY = PKG / "runner" / "crosschecks.py"


REGISTRY = PKG / "results" / "checks.py"


def _references(tree: ast.AST, strings: bool = True) -> dict[str, list[int]]:
    """Name → lines where it is used as a name, an attribute, an import or (`strings`) a string
    constant (a getattr by name)."""
    out: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        name = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                else (node.asname or node.name).split(".")[-1] if isinstance(node, ast.alias)
                else node.value if strings and isinstance(node, ast.Constant) and isinstance(node.value, str)
                else None)
        if name is not None:
            out.setdefault(name, []).append(getattr(node, "lineno", 0))
    return out


def test_no_module_but_the_entry_point_calls_a_check() -> None:
    """Every registry row's function is named only by the entry point (and defined in its own module:
    not called there either). Main before this change called them from views.py, capture.py, video.py,
    shared.py, rtp_checks.run_all and runchecks.run, and this test listed each of those."""
    functions = {c.function.partition(":")[2]: c.function.partition(":")[0] for c in checks.CHECKS}
    assert len(functions) == len({c.function for c in checks.CHECKS})   # a function name names one check
    stray = []
    for f in sorted(PKG.rglob("*.py")):
        if f == ENTRY:
            continue
        # the registry names each function in a string (`module:function`), never as code
        refs = _references(ast.parse(f.read_text(), str(f)), strings=f != REGISTRY)
        stray += [f"{f.relative_to(PKG.parent)}:{line} names {fn}" for fn in functions for line in refs.get(fn, [])]
    assert not stray, stray
    # the entry point names every one of them
    entry = _references(ast.parse(ENTRY.read_text()))
    assert [fn for fn in functions if fn not in entry] == []


def test_the_entry_point_has_one_adapter_per_registry_row() -> None:
    assert list(crosschecks.ADAPTERS) == [c.name for c in checks.CHECKS]


@pytest.mark.parametrize("workload", list(checks.WORKLOADS))
def test_a_run_calls_exactly_its_workloads_rows_in_the_registry_order(workload: str, monkeypatch: Any) -> None:
    called: list[str] = []

    def recorder(name: str) -> Any:
        def adapter(s: Any, st: Any) -> dict[str, Any]:
            called.append(name)
            return {}
        return adapter
    for name in crosschecks.ADAPTERS:
        monkeypatch.setitem(crosschecks.ADAPTERS, name, recorder(name))
    crosschecks.run({}, crosschecks.CheckState(SimpleNamespace(), Outcome({}, 0.0, "", 0)), workload)  # type: ignore[arg-type]
    assert called == [c.name for c in checks.CHECKS if workload in c.applies]


def test_a_record_outside_the_rows_name_is_refused(monkeypatch: Any) -> None:
    """A record a row's function makes under another name (or one of another workload's) would reach
    the summary unlisted: the entry point refuses it; a record named by the row's pattern passes."""
    st = crosschecks.CheckState(SimpleNamespace(), Outcome({}, 0.0, "", 0))  # type: ignore[arg-type]
    monkeypatch.setitem(crosschecks.ADAPTERS, "bytes_{path}_interface_vs_collector",
                        lambda s, st: {"bytes_wifi_interface_vs_collector": {"ok": True}})
    assert set(crosschecks.run({}, st, "bulk").records["cross_checks"]) == {"bytes_wifi_interface_vs_collector"}
    monkeypatch.setitem(crosschecks.ADAPTERS, "collector_lost_events",
                        lambda s, st: {"stalls_vs_element_buffered": {"ok": True}})
    with pytest.raises(ValueError, match="stalls_vs_element_buffered.*outside its registry row"):
        crosschecks.run({}, st, "bulk")


def test_a_failed_check_is_its_named_warning_and_a_fatal_one_ends_the_run(monkeypatch: Any) -> None:
    from mpvlab.core.errors import RunFailed
    st = crosschecks.CheckState(SimpleNamespace(), Outcome({}, 0.0, "", 0))  # type: ignore[arg-type]
    monkeypatch.setitem(crosschecks.ADAPTERS, "collector_lost_events",
                        lambda s, st: {"collector_lost_events": {"lost": 3, "ok": False}})
    r = crosschecks.run({}, st, "own-dash")
    assert checks.failed(r.warnings) == ["collector_lost_events"] and not r.fidelity_warnings
    summary: dict[str, Any] = {"warnings": ["the workload's own"]}
    crosschecks.apply(summary, {}, r, lambda _m: None)
    assert summary["warnings"][0] == "the workload's own" and summary["cross_checks"]["collector_lost_events"]["lost"] == 3
    monkeypatch.setitem(crosschecks.ADAPTERS, "subflow_addresses",
                        lambda s, st: {"subflow_addresses": {"stray": [["a", "b"]], "ok": False}})
    with pytest.raises(RunFailed, match="MPTCP subflows on unexpected"):
        crosschecks.run({}, st, "own-dash")


@pytest.mark.parametrize("scenario, workload", [
    ("smoke.yaml", "progressive"), ("dash-own-bola-short.yaml", "own-dash"), ("dashjs-bbrs-short.yaml", "dash.js"),
    ("sabre-own-short.yaml", "sabre"), ("rtp-gcc-short.yaml", "rtp-gcc"), ("bulk-two-path.yaml", "bulk")])
def test_the_workload_of_a_scenario(scenario: str, workload: str) -> None:
    from mpvlab.input.scenario import load_scenario
    sc, _ = load_scenario(checkout_root() / "scenarios" / scenario)
    assert crosschecks.workload_of(sc) == workload


def test_a_physical_run_and_the_view_make_no_record(tmp_path: Path) -> None:
    """The check functions' old callers make no record now: the capture's view has no `checks`."""
    from mpvlab.runner import capture
    topo: Any = SimpleNamespace(paths=[])
    assert "checks" not in capture.view(topo, None, {"connections": []})
