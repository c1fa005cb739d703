"""`buffer_counting` (issue 48 §3): how a link direction's queue counts its `buffer` — bytes (tbf's limit,
packets × 1514 B, the default), wire_packets (a pfifo child counting skbs that are each one wire frame:
GRO off at the router's ingress) or merged_packets (the same pfifo on a router whose ingress merges
packets: GRO on, a burst deep enough to queue a merged skb whole). links/README.md "Choosing how the
queue counts" is the design; the bounds asserted here are the kernel's (tbf and pfifo tail-drop).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mpvlab.core.errors import InputError
from mpvlab.input.scenario import ScenarioError, parse_scenario, resolved_dict
from mpvlab.links.emulator import child_argv, tbf_argv
from mpvlab.links.path import queue_record
from mpvlab.links.spec import MERGED_MIN_BURST, LinkDirection

FRAME = 1514
RATE = 6_000_000


def _scenario(down: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": "x", "paths": {"a": {"down": down}, "b": {}}, "video": {"duration": "5s"}, **top}


def test_bytes_is_the_default_and_builds_the_same_tbf_as_before() -> None:
    spec = LinkDirection.model_validate({"rate": "6mbit", "buffer": "256pkt"})
    assert spec.buffer_counting == "bytes"
    # today's command, written out: limit in bytes (256 × 1514), no handle, no child
    assert tbf_argv("eth9", spec) == ["tc", "qdisc", "replace", "dev", "eth9", "root", "tbf", "rate", "6000000bit",
                                      "burst", "3028", "limit", "387584"]
    assert child_argv("eth9", spec) is None
    assert spec.queue_byte_bound() == 256 * FRAME
    assert queue_record(spec, None) == {}


def test_packet_countings_build_a_pfifo_child_and_state_their_byte_bound() -> None:
    wire = LinkDirection.model_validate({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "wire_packets"})
    assert tbf_argv("eth9", wire)[6:8] == ["handle", "1:"]
    assert child_argv("eth9", wire) == ["tc", "qdisc", "add", "dev", "eth9", "parent", "1:1", "handle", "10:",
                                        "pfifo", "limit", "256"]
    assert wire.queue_byte_bound() == 256 * FRAME
    assert wire.effective_burst() == 3028                        # the default burst is unchanged
    merged = LinkDirection.model_validate({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "merged_packets"})
    assert merged.queue_byte_bound() is None
    assert merged.effective_burst() == MERGED_MIN_BURST == 45 * FRAME
    rec = queue_record(merged, "on")
    assert rec["buffer_counting"] == "merged_packets" and rec["limit_packets"] == 256 and rec["ingress_gro"] == "on"
    assert rec["limit_bytes_note"].startswith("none")


def test_the_choice_is_in_the_resolved_parameters() -> None:
    sc = parse_scenario(_scenario({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "wire_packets"}))
    d = resolved_dict(sc)
    assert d["paths"]["a"]["down"]["buffer_counting"] == "wire_packets"
    assert d["paths"]["a"]["up"]["buffer_counting"] == "bytes"


@pytest.mark.parametrize("down,top,words", [
    ({"buffer": "256pkt", "buffer_counting": "wire_packets"}, {}, "needs `rate`"),
    ({"capacity": {"rate": {"kind": "constant", "value": "6mbit"}}, "buffer": "256pkt", "buffer_counting": "merged_packets"},
     {}, "needs `rate`"),
    ({"rate": "6mbit", "buffer": "100KB", "buffer_counting": "wire_packets"}, {}, "must be a packet count"),
    ({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "wire_packets", "ecn_mark": {"threshold": "4ms"}},
     {}, "ecn_mark"),
    ({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "merged_packets", "order": "delay-then-shape"},
     {}, "shape-then-delay"),
    ({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "merged_packets", "line_rate": "1gbit"}, {}, "line_rate"),
    ({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "merged_packets", "burst": "64KB"}, {}, "68130"),
    ({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "wire_packets"}, {"hosts": {"offloads": True}},
     "hosts.offloads"),
    ({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "packets"}, {}, "buffer_counting"),
])
def test_combinations_that_cannot_be_honoured_are_refused(down: dict, top: dict, words: str) -> None:
    with pytest.raises((ScenarioError, InputError), match="buffer_counting") as e:
        parse_scenario(_scenario(down, **top))
    assert words in str(e.value)


def test_merged_packets_is_refused_where_a_byte_bound_is_needed() -> None:
    sc = {"name": "x", "topology": {"kind": "shared-bottleneck", "clients": 2},
          "paths": {"a": {"down": {"rate": "6mbit", "buffer": "64pkt", "buffer_counting": "merged_packets"}}},
          "video": {"duration": "5s"}}
    with pytest.raises((ScenarioError, InputError), match="merged_packets is not supported on topology"):
        parse_scenario(sc)
    sc["paths"]["a"]["down"]["buffer_counting"] = "wire_packets"
    assert parse_scenario(sc).paths["a"].down.queue_byte_bound() == 64 * FRAME
    # the up queue there sits behind one interface per client: GRO cannot be set for "the" ingress
    sc["paths"]["a"]["up"] = {"rate": "1mbit", "buffer": "64pkt", "buffer_counting": "wire_packets",
                              "order": "delay-then-shape"}
    with pytest.raises((ScenarioError, InputError), match="only the down queue can count packets"):
        parse_scenario(sc)


def test_the_fidelity_record_checks_the_backlog_against_the_counting() -> None:
    from mpvlab.runner.fidelity import _judge_queue

    def judge(counting: str, backlogs: list[tuple[int, int]]) -> tuple[dict[str, Any], list[str]]:
        spec = LinkDirection.model_validate({"rate": "6mbit", "buffer": "4pkt", "buffer_counting": counting})
        rows = [{"dev": "ifb9", "kind": "tbf", "backlog_bytes": b, "backlog_pkts": n} for b, n in backlogs]
        rows.append({"dev": "ifb9", "kind": "pfifo", "backlog_bytes": 10**9, "backlog_pkts": 10**6})  # the child: not read
        entry: dict[str, Any] = {}
        warnings: list[str] = []
        _judge_queue("a-down", "ifb9", spec, rows, entry, warnings)
        return entry["queue"], warnings

    q, w = judge("wire_packets", [(0, 0), (4 * FRAME, 4)])
    assert q["ok"] and not w and q["byte_bound"] == 4 * FRAME and q["backlog_bytes_max"] == 4 * FRAME
    q, w = judge("wire_packets", [(4 * FRAME + 1, 4)])
    assert not q["ok"] and "6057 B > 4 × 1514 B = 6056 B" in w[0]
    q, w = judge("merged_packets", [(200_000, 4)])       # bytes beyond 4 frames: what merged packets do
    assert q["ok"] and not w and q["byte_bound"] is None and q["byte_bound_note"].startswith("none")
    q, w = judge("merged_packets", [(200_000, 5)])
    assert not q["ok"] and "5 skbs > limit 4" in w[0]


def test_offloads_on_are_allowed_with_merged_packets() -> None:
    sc = parse_scenario(_scenario({"rate": "6mbit", "buffer": "256pkt", "buffer_counting": "merged_packets"},
                                  hosts={"offloads": True}))
    assert sc.paths["a"].down.buffer_counting == "merged_packets"


PACKETS = 16     # small enough that one CUBIC flow with no added delay fills it within the seconds run
SECONDS = 3.0


def _limit(tree: list[dict[str, Any]], kind: str) -> Any:
    return next(q for q in tree if q["kind"] == kind)["options"].get("limit")


@pytest.mark.netns
@pytest.mark.tools("iperf3", "ethtool")
@pytest.mark.cpu   # cpu: a real bulk flow through three namespaces, three times (~12 s)
def test_each_counting_builds_its_queue_and_holds_what_it_counts() -> None:
    from mpvlab.testbed import gro_queue

    runs = {}
    with gro_queue.GroBed() as gb:
        for c in ("bytes", "wire_packets", "merged_packets"):
            spec = LinkDirection.model_validate({"rate": "6mbit", "buffer": f"{PACKETS}pkt", "buffer_counting": c})
            runs[c] = gro_queue.measure(gb, spec, SECONDS)
    b, w, m = runs["bytes"], runs["wire_packets"], runs["merged_packets"]
    texts = "\n".join(f"{r.text(RATE)}\n  {json.dumps(r.tree)}" for r in runs.values())

    # bytes: one tbf, its limit in bytes (tc -raw shows it), the ingress as the offloads left it (off)
    assert [q["kind"] for q in b.tree] == ["tbf"], texts
    assert _limit(b.tree, "tbf") == PACKETS * FRAME, texts
    assert b.ingress_gro.startswith("off"), texts
    assert b.max_backlog_bytes <= PACKETS * FRAME, texts
    # wire_packets: tbf 1: with a pfifo of N skbs under it, GRO off, never more than N frames of bytes
    assert [q["kind"] for q in w.tree] == ["tbf", "pfifo"], texts
    assert _limit(w.tree, "pfifo") == PACKETS, texts
    assert next(q for q in w.tree if q["kind"] == "pfifo")["parent"] == "1:1", texts
    assert w.ingress_gro.startswith("off"), texts
    assert w.drops > 0, texts            # the queue reached its limit, so the bounds below were tested
    assert w.max_backlog_skbs <= PACKETS, texts
    assert w.max_backlog_bytes <= PACKETS * FRAME, texts
    # merged_packets: the same tree, the burst that queues a merged skb whole, GRO on; N skbs at most,
    # and the bytes are not bounded by N × 1514 (not asserted beyond: what GRO merges is the flow's)
    assert [q["kind"] for q in m.tree] == ["tbf", "pfifo"], texts
    assert _limit(m.tree, "pfifo") == PACKETS, texts
    assert m.burst_bytes == MERGED_MIN_BURST, texts
    assert m.ingress_gro.startswith("on"), texts
    assert m.max_backlog_skbs <= PACKETS, texts
    assert any(n and nbytes > n * FRAME for nbytes, n in m.samples), texts   # merged skbs were queued
