"""The typed result (mpvlab/results/summary.py): its committed JSON Schema is current, and the model accepts
what each kind of run writes and refuses what drifts (an unknown key, a wrong type, a missing field)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from mpvlab.results import summary as model
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


def test_committed_schema_is_generated_from_the_model() -> None:
    generated = subprocess.run([sys.executable, "-m", "mpvlab.results.summary"], capture_output=True, text=True,
                               check=True, cwd=REPO).stdout
    committed = (REPO / "docs" / "summary.schema.json").read_text()
    assert json.loads(committed) == json.loads(generated), \
        "docs/summary.schema.json is stale: python -m mpvlab.results.summary > docs/summary.schema.json"


def _bulk_summary() -> dict[str, Any]:
    steal = {"fraction": 0.0, "window_s": 7.0, "per_cpu_s": [0.0, 0.0]}
    return {
        "run_id": "abc123", "scenario": "bulk", "topology": "dual-path", "workload": "bulk", "cc": "cubic",
        "scheduler": "default", "seed": 1, "duration_s": 6.8, "bytes_total": 17_000_000,
        "paths": {"wifi": {"interface": "mvabc123c0", "rx_bytes": 8_500_000, "rx_packets": 6000, "share": 0.5,
                           "mean_throughput_bps": 10_000_000, "bottleneck": {}, "payload_bytes_handed": 8_000_000}},
        "subflows": [{"local": "10.0.100.1:5401", "peer": "10.0.1.2:40000", "cc": "cubic"}],
        "bulk": {"size_bytes": 16_000_000, "duration_configured_s": None, "bytes_sent": 16_000_000,
                 "bytes_received": 16_000_000, "connect_s": 0.1, "first_byte_s": 0.11, "last_byte_s": 6.9,
                 "transfer_s": 6.8, "goodput_bps": 18_800_000, "cc_seen": "cubic", "definition": "d"},
        "path_switches": 300, "steering": None, "scheduler_decisions": 900, "path_switch_definition": "d",
        "cross_checks": {"collector_lost_events": {"lost": 0, "ok": True}},
        "warnings": [], "fidelity_ok": None, "fidelity_warnings": [], "sampler_errors": [],
        "mptcp": {"reinjected_segments": 0, "duplicate_data_segments_received": 0, "mib": {"server": {}}},
        "host_steal_during_playback": steal, "run_wall_s": 9.1,
    }


def test_a_bulk_summary_validates_and_drift_is_refused() -> None:
    good = _bulk_summary()
    assert model.validated(good) is good
    for mutate, where in [
        (lambda s: s.update(unknown_key=1), "unknown_key"),
        (lambda s: s["bulk"].update(bytes_sent="many"), "bytes_sent"),
        (lambda s: s.pop("cross_checks"), "cross_checks"),
        (lambda s: s.update(topology="ring"), "topology"),
        (lambda s: s["cross_checks"]["collector_lost_events"].pop("ok"), "ok"),
    ]:
        bad = copy.deepcopy(good)
        mutate(bad)
        with pytest.raises(ValidationError) as e:
            model.validated(bad)
        assert where in str(e.value), str(e.value)
