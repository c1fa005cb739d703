"""The BBR-S study's five ABRs (throughput, bba, bola, dynamic, festive) with mpvlab's own DASH client over
HTTP/2 (TLS, ALPN h2, IPPROTO_MPTCP), each on a short real run — and, beside each, the same run over
HTTP/1.1 for comparison. tests/test_dash_own_run.py's h2 test covers one ABR (sabre) and stays the
short variant in the default suite.

Each case is scenarios/dash-own-h2-short.yaml (two 3 Mbit/s paths, 12 s of video, 500k/1M/2M in 2 s
segments, 8 s buffer) with the ABR swapped in; ~17 s of wall per run. Checked against the server's files
and the ABR unit, not against timings:
- every media segment's bytes equal its file's size in the content cache Apache serves, and so does
  every init segment the client fetched;
- the segment records are complete and in order (index 0…5, number 1…6, one decision per segment, the
  level fetched is the level decided, request ≤ first byte ≤ last byte, requests in time order);
- the QoE record adds up from the segments (quality, bitrate, switches, stall rate, rebuffer ratio,
  frames rendered + discarded = expected, bytes received ≥ media + init bytes);
- the ABR's decisions replayed: a fresh instance of the same registry entry, with the same parameters
  and seed, fed the recorded buffer level, time and the downloads finished before each decision
  (bytes, download time, level — one request at a time, so the history is every earlier segment),
  chooses the recorded level at every step (FESTIVE's randomised request threshold is drawn in the same
  order, so its random stream matches).

Opt-in: CI runs `.venv/bin/pytest -q` (.ci/run) with no `-m` filter, so the `slow` marker alone does not
keep a test out of it. These ten runs (~3 min) are skipped unless MPVLAB_LONG_TESTS=1:
    MPVLAB_LONG_TESTS=1 .venv/bin/pytest -q -s tests/test_dash_h2_abrs.py
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
BASE = REPO / "scenarios" / "dash-own-h2-short.yaml"
OPT_IN = "MPVLAB_LONG_TESTS"

pytestmark = [
    pytest.mark.first, pytest.mark.netns, pytest.mark.e2e,
    pytest.mark.long,   # ten real runs (~3 min): deselected unless MPVLAB_LONG_TESTS=1 (tests/policy.py)
]

# Parameters that fit the 8 s buffer and 2 s segments: BBA's reservoir + cushion below the buffer;
# DYNAMIC's hand-over at 4 s (BOLA above, throughput below 2 s), so that both of its rules can run.
ABRS: dict[str, dict[str, Any]] = {
    "throughput": {},
    "bba": {"reservoir_s": 2, "cushion_s": 4},
    "bola": {},
    "dynamic": {"stable_buffer_s": 4},
    "festive": {},
}
N_SEGMENTS, FRAMES = 6, 360

# What the runs gave (printed with -s); the module's report prints one line per case.
_RESULTS: dict[tuple[str, str], dict[str, Any]] = {}


def _run(tmp_path: Path, abr: str, protocol: str) -> Path:
    data = yaml.safe_load(BASE.read_text())
    data["name"] = f"h2abrs-{abr}-{'h2' if protocol == 'h2' else 'http11'}"
    data["player"] = {**data["player"], "abr": abr, "abr_params": ABRS[abr]}
    data["server"] = {"protocol": protocol, "tls": "auto"}
    scen = tmp_path / f"{data['name']}.yaml"
    scen.write_text(yaml.safe_dump(data, sort_keys=False))
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", str(scen), "--results", str(tmp_path / "res")],
                        capture_output=True, text=True, timeout=300, cwd=REPO, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [d for d in (tmp_path / "res" / data["name"]).iterdir() if d.is_dir()]
    return run_dir


def _content_dir(run_dir: Path) -> tuple[Path, Path]:
    """(the folder the server's URIs are relative to, the content's own folder) from the run's provenance."""
    prov = json.loads((run_dir / "provenance.json").read_text())
    sidecar = Path(prov["content"]["sidecar"])
    return sidecar.parent, sidecar.parent / json.loads(sidecar.read_text())["dir"]


def _replay(p: dict[str, Any]) -> list[int]:
    """The levels the registry's ABR chooses when fed the run's recorded buffer levels, times and
    downloads, in the client's call order (request threshold, then the decision)."""
    from mpvlab.player.gstreamer.abr import Download, Ladder, make
    rates = tuple(r["bitrate_bps"] for r in p["representations"])
    ladder = Ladder(rates, float(p["segment_s"]), float(p["buffer_ms"]) / 1e3)
    algo = make(p["abr"]["name"], ladder, p["abr"]["params"], int(p["abr"]["seed"]))
    segs = sorted(p["segments"], key=lambda s: s["index"])
    out = []
    for dec in p["abr_decisions"]:
        k = dec["index"]
        hist = [Download(level=s["level"], bytes=s["bytes"], download_s=s["download_s"], t_end_s=s["t_last_byte"])
                for s in segs[:k]]
        algo.request_threshold_s()
        out.append(algo.decide(float(dec["buffer_s"]), hist, float(dec["t"])).level)
    return out


@pytest.mark.parametrize("protocol", ["h2", "http/1.1"])
@pytest.mark.parametrize("abr", list(ABRS))
def test_own_client_abr_over_protocol(tmp_path: Path, abr: str, protocol: str) -> None:
    run_dir = _run(tmp_path, abr, protocol)
    s = json.loads((run_dir / "summary.json").read_text())
    p = json.loads((run_dir / "logs" / "player-summary.json").read_text())
    t = p["transport"]
    # The protocol asked for, on the client's own MPTCP socket; Apache logged every request as it.
    assert t["so_protocol"] == IPPROTO_MPTCP and t["protocol"] == protocol
    assert (t["tls"], t["alpn"]) == ((True, "h2") if protocol == "h2" else (False, None))
    assert p["fetcher"] == "own" and p["abr"]["name"] == abr and s["dash"]["abr"]["name"] == abr
    log_proto = "HTTP/2.0" if protocol == "h2" else "HTTP/1.1"
    assert set(s["http"]["by_protocol"]) == {log_proto}, s["http"]

    # Segment records complete and in order; one decision per segment, fetched at the level decided.
    segs = p["segments"]
    assert p["segments_downloaded"] == p["segments_expected"] == s["dash"]["segments"] == N_SEGMENTS
    assert [g["index"] for g in segs] == list(range(N_SEGMENTS))
    assert [g["number"] for g in segs] == list(range(1, N_SEGMENTS + 1))
    decs = p["abr_decisions"]
    assert [d["index"] for d in decs] == list(range(N_SEGMENTS))
    assert [d["level"] for d in decs] == [g["level"] for g in segs]
    assert all(d["outstanding"] == 1 for d in decs)          # on/off clients: one request at a time
    for a, b in zip(segs, segs[1:]):
        assert a["t_last_byte"] <= b["t_request"], (a, b)     # the next request only after the last byte
    for g in segs:
        assert g["t_request"] <= g["t_first_byte"] <= g["t_last_byte"], g
        assert g["throughput_bps"] == pytest.approx(g["bytes"] * 8 / g["download_s"], rel=1e-5)

    # Bytes: each response is exactly its file on the server.
    root, content = _content_dir(run_dir)
    for g in segs:
        f = root / g["uri"].lstrip("/")
        assert f.parent == content and g["bytes"] == f.stat().st_size > 0, (g["uri"], g["bytes"])
    inits = p["init_downloads"]
    for i in inits:
        assert i["bytes"] == (root / i["uri"].lstrip("/")).stat().st_size > 0, i
    if protocol == "h2":      # every representation's init prefetched once (mpvlab/player/gstreamer/dash_client.py)
        assert sorted(i["level"] for i in inits) == list(range(len(p["representations"])))
    else:                     # HTTP/1.1: an init with the first segment and with each level change
        assert len(inits) == 1 + sum(a["level"] != b["level"] for a, b in zip(segs, segs[1:]))
    media = sum(g["bytes"] + g["init_bytes"] for g in segs)
    assert media <= p["bytes_received"] <= media + 64 * 1024

    # The QoE record adds up.
    rates = [r["bitrate_bps"] for r in p["representations"]]
    levels = [g["level"] for g in segs]
    assert all(g["bitrate_bps"] == rates[g["level"]] for g in segs)
    d = s["dash"]
    assert d["quality_avg"] == pytest.approx(sum(levels) / N_SEGMENTS)
    assert d["bitrate_avg_bps"] == pytest.approx(sum(rates[lv] for lv in levels) / N_SEGMENTS)
    assert d["bitrate_switches"] == sum(a != b for a, b in zip(levels, levels[1:]))
    assert d["stall_rate"] == pytest.approx(max(0.0, (p["playback_s"] - p["video_length_s"]) / p["video_length_s"]),
                                            abs=2e-6)
    assert d["rebuffer_events"] == s["underflows"]
    assert d["rebuffer_ratio"] == pytest.approx(s["underflow_total_s"] / p["playback_s"], abs=2e-6)
    assert s["frames_accounted"] and s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == FRAMES
    assert sum(g["frames_rendered"] + g["frames_discarded"] for g in segs) == FRAMES
    assert s["startup_delay_s"] is not None and 0 <= s["startup_delay_s"] < p["playback_s"]

    # The ABR's decisions are the ones its registry entry gives for the recorded sequence.
    assert _replay(p) == levels, (levels, decs)

    _RESULTS[(abr, protocol)] = {"levels": levels, "bitrate": d["bitrate_avg_bps"], "switches": d["bitrate_switches"],
                                 "startup": s["startup_delay_s"], "rebuffer": d["rebuffer_ratio"],
                                 "stall": d["stall_rate"], "underflows": s["underflows"]}
    r = _RESULTS[(abr, protocol)]
    print(f"\n{abr:10} {protocol:8}: levels {levels}, avg bitrate {r['bitrate'] / 1e6:.3f} Mbit/s, switches "
          f"{r['switches']}, startup {r['startup']:.3f} s, rebuffer ratio {r['rebuffer']:.4f}, "
          f"stall rate {r['stall']:.4f}, underflows {r['underflows']}")
