"""The probe's delay windows (mpvlab/results/delaywindows.py) on hand-made probe rows and player records: every
expected window bound, count, quantile and share is worked out by hand below."""

from __future__ import annotations

from typing import Any

from mpvlab.results import delaywindows as dw
from mpvlab.results.summary import VoipWindows

T0 = 1_000_000_000_000


def rows(points: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """(send time s since t0, queuing delay ms) -> probe CSV rows (string fields, as csv.DictReader gives)."""
    return [{"t_send_ns": str(T0 + round(t * 1e9)), "queuing_delay_ns": str(round(d * 1e6))} for t, d in points]


def player(done: list[tuple[float, float]], checks: list[tuple[float, str, str]] | None = None) -> dict[str, Any]:
    """segments (t_last_byte, buffer_s_at_done), 2 s segments; checks (t, phase, mode)."""
    p: dict[str, Any] = {"segment_s": 2.0,
                         "segments": [{"t_last_byte": t, "buffer_s_at_done": b} for t, b in done]}
    if checks is not None:
        p["sabre_checks"] = [{"t": t, "phase": ph, "mode": m} for t, ph, m in checks]
    return p


def test_steady_state_runs_from_the_last_buffer_full_to_the_last_download() -> None:
    # 10 s buffer: target 10 - 2 = 8 s. Player a first holds >= 8 s after the download ending at 5 s,
    # player b at 7 s (7.999999 at 6 s counts: within 1e-6 of 8); last downloads 20 s and 24 s.
    a = player([(1, 2), (3, 4), (5, 8.0), (20, 9)])
    b = player([(2, 2), (6, 7.9999995), (7, 9), (24, 3)])
    assert dw.buffer_target_reached_s(b, 10.0) == 6.0
    assert dw.steady_state({"client0": a, "client1": b}, 10.0) == (6.0, 24.0)
    assert "never held" in str(dw.steady_state({"client0": player([(1, 2)])}, 10.0))
    assert "no media segments" in str(dw.steady_state({"client0": {"segment_s": 2.0}}, 10.0))


def test_whole_run_and_steady_state_figures() -> None:
    # packets every 1 s from 0 to 29 s; delay 600 ms before 6 s (start-up), 10..240 ms in steady state,
    # 300 ms after the last download (24 s)
    pts = [(float(t), 600.0 if t < 6 else (300.0 if t > 24 else 10.0 * (t - 5))) for t in range(30)]
    w = dw.windows(rows(pts), T0, {"client0": player([(6, 8.0), (24, 1)])}, 10.0)
    whole, steady = w["whole_run"], w["steady_state"]
    assert (whole["packets"], whole["max"], whole["start_s"], whole["end_s"]) == (30, 600.0, 0.0, 29.0)
    # steady: t = 6..24 inclusive = 19 packets, delays 10, 20, ..., 190 ms
    assert (steady["packets"], steady["start_s"], steady["end_s"]) == (19, 6.0, 24.0)
    assert (steady["p50"], steady["max"]) == (100.0, 190.0)          # nearest rank: ceil(9.5) = 10th = 100
    assert steady["p95"] == 190.0                                      # ceil(18.05) = 19th
    # strictly above 50: 60..190 = 14 of 19; above 100: 110..190 = 9; above 200: none
    assert steady["share_above_ms"] == {"50": round(14 / 19, 6), "100": round(9 / 19, 6), "200": 0.0,
                                        "400": 0.0, "500": 0.0}
    # whole run: 6 x 600 + 5 x 300 are above 200 ms: 11 / 30
    assert whole["share_above_ms"]["200"] == round(11 / 30, 6) and whole["share_above_ms"]["500"] == 0.2
    assert "sabre_refill" not in w                                     # no SABRE player
    VoipWindows.model_validate(w)                                      # the summary's typed shape


def test_per_sabre_mode_windows_need_every_sabre_player_in_the_mode() -> None:
    # two SABRE players; steady state 4..16 s. a: refill from 4, backoff from 10; b: refill from 4,
    # backoff from 12. Packets every 1 s, delay = 5 ms x t.
    a = player([(4, 8.0), (16, 1)], [(0, "initial", "refill"), (4, "steady", "refill"), (10, "steady", "backoff")])
    b = player([(3, 8.0), (15, 1)], [(0, "initial", "refill"), (4, "steady", "refill"), (12, "steady", "backoff")])
    w = dw.windows(rows([(float(t), 5.0 * t) for t in range(20)]), T0, {"client0": a, "client1": b}, 10.0)
    # refill both: 4..9 (6 packets); mixed: 10, 11 (2); backoff both: 12..16 (5)
    assert (w["sabre_refill"]["packets"], w["sabre_mixed"]["packets"], w["sabre_backoff"]["packets"]) == (6, 2, 5)
    assert (w["sabre_refill"]["max"], w["sabre_mixed"]["p50"], w["sabre_backoff"]["max"]) == (45.0, 50.0, 80.0)
    assert w["steady_state"]["packets"] == 13 and "sabre_initial" not in w
    VoipWindows.model_validate(w)
