"""A run with mpvlab's own DASH client and an ABR from the registry (scenarios/dash-own-bola-short.yaml):
the scenario's player.fetcher/abr/abr_params reach the player, the client fetches over one MPTCP
socket, every segment is one ABR decision, and every frame is accounted for."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)


@pytest.mark.netns
@pytest.mark.e2e
def test_own_client_with_bola_runs_end_to_end(tmp_path: Path) -> None:
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", "scenarios/dash-own-bola-short.yaml", "--results",
                         str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [d for d in (tmp_path / "dash-own-bola-short").iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    p = json.loads((run_dir / "logs" / "player-summary.json").read_text())
    # The scenario's choice reached the player.
    assert p["fetcher"] == "own" and s["dash"]["abr"] == {"name": "bola", "params": {"gamma_p": 5.0}, "seed": 1,
                                                     "version": None}
    assert p["transport"]["mptcp"] is True and p["transport"]["so_protocol"] == IPPROTO_MPTCP
    # 12 s of 2 s segments, 30 fps: 6 segments, 360 frames, each frame rendered or discarded.
    assert p["segments_downloaded"] == p["segments_expected"] == s["dash"]["segments"] == 6
    assert s["frames_accounted"] and s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == 360
    segs = p["segments"]
    assert [g["number"] for g in segs] == list(range(1, 7))
    assert sum(g["frames_rendered"] + g["frames_discarded"] for g in segs) == 360
    rates = {r["level"]: r["bitrate_bps"] for r in s["dash"]["representations"]}
    assert rates == {0: 500_000, 1: 1_000_000, 2: 2_000_000}
    assert all(g["bitrate_bps"] == rates[g["level"]] for g in segs)
    # One ABR decision per segment, and the level fetched is the level decided.
    assert [d["level"] for d in p["abr_decisions"]] == [g["level"] for g in segs]
    assert p["abr_policy_mismatches"] == 0
    # Bytes add up: media + init bytes of the segments are what the client received (plus the MPD).
    media = sum(g["bytes"] + g["init_bytes"] for g in segs)
    assert media <= p["bytes_received"] <= media + 64 * 1024
    assert p["download_complete"] is True


@pytest.mark.netns
@pytest.mark.e2e
def test_own_client_over_http2_with_sabre(tmp_path: Path) -> None:
    """scenarios/dash-own-h2-short.yaml: our own client over HTTP/2 (TLS, ALPN h2) on its MPTCP socket.
    Apache logged every request of the run as HTTP/2.0 over TLS (the run fails otherwise), one per MPD,
    init and media segment; SABRE's pipeline of concurrent streams keeps 1 + ceil(rcvbuf·8/(r·s))
    requests outstanding; the bytes and frames add up as over HTTP/1.1."""
    cp = subprocess.run([sys.executable, "-m", "mpvlab", "run", "scenarios/dash-own-h2-short.yaml", "--results",
                         str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [d for d in (tmp_path / "dash-own-h2-short").iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    p = json.loads((run_dir / "logs" / "player-summary.json").read_text())
    t = p["transport"]
    assert (t["protocol"], t["tls"], t["alpn"], t["so_protocol"]) == ("h2", True, "h2", IPPROTO_MPTCP)
    segs = p["segments"]
    assert p["segments_downloaded"] == p["segments_expected"] == 6 and [g["index"] for g in segs] == list(range(6))
    # Over HTTP/2 every representation's init segment is fetched once, before the first media request.
    assert sorted(i["level"] for i in p["init_downloads"]) == [0, 1, 2]
    n_requests = 1 + 3 + len(segs)
    assert s["http"]["by_protocol"] == {"HTTP/2.0": n_requests}, s["http"]
    assert "-" not in s["http"]["by_tls_version"]
    rates = [r["bitrate_bps"] for r in p["representations"]]
    rcv = t["rcvbuf_bytes"]
    assert rcv == 262144

    def depth(level: int) -> int:      # 0.5 Mbit/s: 1 + ceil(2.10) = 4; 1 M: 3; 2 M: 2
        return 1 + math.ceil(rcv * 8 / (rates[level] * 2.0))
    decs = p["abr_decisions"]
    assert all(d["outstanding"] <= depth(d["level_before"]) for d in decs), decs
    # The pipeline is filled to the formula (concurrent streams on the one connection), not just bounded.
    assert any(d["outstanding"] == depth(d["level_before"]) > 1 for d in decs), decs
    assert max(i["t_last_byte"] for i in p["init_downloads"]) <= min(g["t_request"] for g in segs)
    # each level change hands the decoder that level's init (from the prefetch) before the segment
    assert [g["init_bytes"] > 0 for g in segs] == [i == 0 or g["level"] != segs[i - 1]["level"]
                                                  for i, g in enumerate(segs)]
    assert s["frames_accounted"] and s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == 360
    media = sum(g["bytes"] + g["init_bytes"] for g in segs)
    assert media <= p["bytes_received"] <= media + 64 * 1024


def test_own_fetcher_abr_is_checked_against_ladder_segment_and_buffer() -> None:
    """The ABR's checks that need the ladder (BBA's reservoir + cushion, FESTIVE's target buffer, SABRE's
    thresholds) refuse a scenario before any run, naming the ABR, the segment and the buffer; the
    dashdemux BBA rule (player.bba_*) does not speak for the own fetcher's bba (abr_params)."""
    from mpvlab.input.scenario import parse_scenario
    from mpvlab.core.errors import InputError
    base = yaml.safe_load((REPO / "scenarios" / "bbrs-dash-own-short.yaml").read_text())
    cases = {"bba": ({}, "bba: reservoir + cushion (20 s) must be below the buffer (10 s)"),
             "festive": ({}, "festive: target_buffer_s"),
             "sabre": ({"refill_below_s": 9, "backoff_above_s": 8}, "refill_below_s (9) must not exceed")}
    for abr, (params, why) in cases.items():
        data = {**base, "player": {**base["player"], "abr": abr, "abr_params": params}}
        with pytest.raises((InputError, ValueError)) as e:
            parse_scenario(data)
        msg = str(e.value)
        assert f"player.abr {abr} with this ladder, 5 s segments and a 10 s buffer" in msg and why in msg, msg
        assert "player.bba_reservoir" not in msg
    # fitting parameters pass: BBA with a reservoir + cushion below the 10 s buffer
    ok = {**base, "player": {**base["player"], "abr": "bba", "abr_params": {"reservoir_s": 2, "cushion_s": 6}}}
    assert parse_scenario(ok).player.abr == "bba"
