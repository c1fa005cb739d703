"""The cross-checks (mpvlab/results/checks.py): every row of the table names a function and a test
that exist, and each check, given a planted disagreement, fails with its named warning (and passes
on agreeing figures, so the test can fail)."""

from __future__ import annotations

import importlib
import re
from types import SimpleNamespace
from typing import Any

import pytest

from mpvlab.collectors.pcap import TapResult
from mpvlab.results import checks
from mpvlab.runner import capture, views
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


def _run(name: str, result: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = {}
    warnings: list[str] = []
    checks.record(out, warnings, name, result)
    return out, warnings


def test_every_check_names_a_function_and_a_test_that_exist() -> None:
    names = [c.name for c in checks.CHECKS]
    assert len(names) == len(set(names))
    for c in checks.CHECKS:
        mod, _, fn = c.function.partition(":")
        assert callable(getattr(importlib.import_module(mod), fn)), c.function
        path, _, test = c.test.partition("::")
        assert re.search(rf"^def {re.escape(test)}\(", (REPO / path).read_text(), re.M), c.test


def test_record_names_the_warning_and_needs_ok() -> None:
    out, warnings = _run("x", {"a": 1, "ok": False})
    assert out == {"x": {"a": 1, "ok": False}}
    assert warnings == ["cross-check x failed: {'a': 1, 'ok': False}"]
    assert checks.failed(warnings + ["fidelity: something"]) == ["x"]
    assert _run("y", {"ok": True})[1] == []
    with pytest.raises(ValueError, match="no `ok`"):
        _run("z", {"a": 1})


def test_interface_vs_collector_warns() -> None:
    # 1000 packets of 1514 B on the wire carry 1000 × 1424 B of payload (90 B of headers and options)
    assert views.interface_vs_collector(1000 * 1514, 1000, 1000 * 1424, 0)["ok"]
    # the interface saw 5 % more payload than the scheduler handed, with no retransmission to explain it
    r = views.interface_vs_collector(1000 * 1514, 1000, int(1000 * 1424 / 1.05), 0)
    _, w = _run("bytes_wifi_interface_vs_collector", r)
    assert not r["ok"] and w[0].startswith("cross-check bytes_wifi_interface_vs_collector failed:")
    # ... unless 60 retransmitted segments crossed it twice
    assert views.interface_vs_collector(1000 * 1514, 1000, int(1000 * 1424 / 1.05), 60)["ok"]


def test_collector_connections_warns() -> None:
    assert views.connections_check("apache_connections", 2, 3)["ok"]
    r = views.connections_check("apache_connections", 3, 2)
    _, w = _run("collector_saw_every_connection", r)
    assert w == ["cross-check collector_saw_every_connection failed: "
                 "{'apache_connections': 3, 'traced': 2, 'ok': False}"]


def test_subflow_addresses_fail() -> None:
    paths = [SimpleNamespace(name="wifi", client_addr="10.0.1.2", server_addr="10.0.1.1"),
             SimpleNamespace(name="lte", client_addr="10.0.2.2", server_addr="10.0.2.1")]
    topo: Any = SimpleNamespace(paths=paths, addressing="per-path")
    good = [{"local": "10.0.1.1:80", "peer": "10.0.1.2:4000"}, {"local": "10.0.2.1:80", "peer": "10.0.2.2:4001"}]
    assert views.subflow_address_check(topo, good)["ok"]
    crossed = good + [{"local": "10.0.2.1:80", "peer": "10.0.1.2:4002"}]     # wifi's client on lte's server
    r = views.subflow_address_check(topo, crossed)
    assert not r["ok"] and r["stray"] == [["10.0.1.2", "10.0.2.1"]]


def test_udp_wire_warns() -> None:
    per_path = {"wan": {"rx_bytes": 100 * (1200 + 42), "rx_packets": 100}}
    wire = {"udp_datagrams": 100, "udp_payload_bytes": 100 * 1200}
    assert views.udp_wire_check(per_path, wire, 10.0)["bytes_wan_interface_vs_udp_socket"]["ok"]
    # the interface saw 100 packets fewer than the receiver read: a miscount somewhere
    short = {"wan": {"rx_bytes": 50 * (1200 + 42), "rx_packets": 50}}
    (name, r), = views.udp_wire_check(short, wire, 10.0).items()
    _, w = _run(name, r)
    assert not r["ok"] and w[0].startswith("cross-check bytes_wan_interface_vs_udp_socket failed:")


def _tap(ok: bool) -> TapResult:
    counted = 1_000_000
    return TapResult("client", "mvabc0", "client-mvabc0.pcap", 900, counted if ok else counted // 2, 900, 900, 0,
                     False, counted, 900, 1.0 if ok else 0.5, ok)


def test_pcap_bytes_warns() -> None:
    topo: Any = SimpleNamespace(paths=[])
    for ok in (True, False):
        cap: Any = SimpleNamespace(results=[_tap(ok)], summary=lambda: {})
        out = capture.view(topo, cap, {"connections": []})
        assert out["checks"]["pcap_bytes_client_mvabc0"]["ok"] is ok
        assert checks.failed(out["warnings"]) == ([] if ok else ["pcap_bytes_client_mvabc0"])
