"""SABRE's general case (the paper's §4.2, docs/studies.md §4) on scripted socket and segment samples:
one test per rule, every expected value worked out by hand from the rule as docs/studies.md §4 writes it
(the arithmetic is in the comments), never by calling the code under test. The same rules on a real
socket: tests/test_dash_client.py::test_sabre_general_rules_on_the_wire.

Ladder: 1, 2, 4 Mbit/s, 2 s segments, 20 s buffer, so with the defaults refill_below = 85 % x 20 = 17 s,
backoff_above = 20 - 2 = 18 s and the 60 s initial buffer is capped at 18 s. A download of T Mbit/s is
T/8 MB in 1 s. The socket buffer is 100 000 bytes, so 75 % is 75 000 bytes.
"""

from __future__ import annotations


import pytest

from mpvlab.player.abr import Download, Ladder, Sabre, make  # noqa: E402

M = 1_000_000
L3 = Ladder((1 * M, 2 * M, 4 * M), 2.0, 20.0)
RCV = 100_000
FULL = 90_000            # 90 % of RCV: above the 75 % threshold


def dl(level: int, mbps: float, t: float) -> Download:
    return Download(level=level, bytes=int(mbps * M / 8), download_s=1.0, t_end_s=t)


def kinds(a: Sabre) -> list[str]:
    return [e["type"] for e in a.drain_events()]


def steady_at_level(level: int, params: dict | None = None) -> Sabre:
    """A general-case SABRE past its initial buffering (B = 18 s reached at t = 0), at `level`, in
    backoff, socket full (not throttled)."""
    a = make("sabre", L3, params or {})
    assert isinstance(a, Sabre) and a.general
    a.level = level
    a.tick(FULL, RCV, 0, 0.2, 18.0, 0.0)
    assert (a.phase, a.mode) == ("steady", "backoff")
    a.drain_events()
    return a


def test_initial_buffering_is_unpaced_until_the_initial_buffer_is_full() -> None:
    a = make("sabre", L3)
    assert a.p.initial_buffer_s == 60 and a.initial_buffer_s == 18.0     # capped at backoff_above 18 s
    assert (a.phase, a.read_rate_bps()) == ("initial", None)            # None: read as fast as it comes
    a.tick(10_000, RCV, 50_000, 0.2, 17.99, 1.0)                         # below 18 s: still initial,
    assert (a.phase, a.read_rate_bps(), a.throttled) == ("initial", None, False)   # no throttling yet
    a.level = 1
    a.tick(FULL, RCV, 50_000, 0.2, 18.0, 1.2)
    # steady, buffer 18 >= backoff_above 18: backoff, target delta x R_1 = 0.8 x 2 = 1.6 Mbit/s
    assert (a.phase, a.mode, a.read_rate_bps()) == ("steady", "backoff", pytest.approx(1.6e6))
    (ev,) = a.drain_events()
    assert (ev["type"], ev["phase"], ev["mode"], ev["target_bps"]) == ("sabre_phase", "steady", "backoff",
                                                                      pytest.approx(1.6e6))


def test_mode_changes_at_the_buffer_thresholds_with_their_targets() -> None:
    a = steady_at_level(1)
    a.tick(FULL, RCV, 40_000, 0.2, 17.0, 1.0)      # 17 is not < 17: stay backoff
    assert a.mode == "backoff" and kinds(a) == []
    a.tick(FULL, RCV, 40_000, 0.2, 16.99, 1.2)     # < 17: refill, target lambda x R_1 = 1.2 x 2 = 2.4
    (ev,) = a.drain_events()
    assert (ev["type"], ev["mode"], ev["target_bps"]) == ("sabre_mode", "refill", pytest.approx(2.4e6))
    assert a.read_rate_bps() == pytest.approx(2.4e6)
    a.tick(FULL, RCV, 40_000, 0.2, 18.0, 1.4)      # >= 18: backoff, 1.6 Mbit/s
    (ev,) = a.drain_events()
    assert (ev["mode"], ev["target_bps"]) == ("backoff", pytest.approx(1.6e6))


def test_a_congestion_event_lowers_the_target() -> None:
    a = steady_at_level(1)
    a.tick(FULL, RCV, 0, 0.2, 16.0, 0.2)            # refill, target 2.4 Mbit/s; BW restarts (None)
    a.drain_events()
    assert a.bw is None
    a.on_segment(dl(1, 1.0, 0.5), 0.5)              # read partly at the backoff pace: not a sample
    assert a.bw is None and kinds(a) == []
    a.bw = 2.4e6
    a.on_segment(dl(1, 2.0, 1.0), 1.0)              # bw .8 x 2.4 + .2 x 2.0 = 2.32 >= .85 x 2.4 = 2.04
    assert a.target_bps == pytest.approx(2.4e6) and kinds(a) == []
    a.on_segment(dl(1, 1.0, 2.0), 2.0)              # bw .8 x 2.32 + .2 x 1.0 = 2.056 >= 2.04: none
    assert "sabre_congestion" not in kinds(a)
    a.on_segment(dl(1, 1.0, 3.0), 3.0)              # bw .8 x 2.056 + .2 = 1.8448 < 2.04: congestion
    evs = [e for e in a.drain_events() if e["type"] == "sabre_congestion"]
    assert len(evs) == 1
    assert evs[0]["target_before_bps"] == pytest.approx(2.4e6)
    assert evs[0]["target_bps"] == pytest.approx(1.8448e6)     # lowered to BW (floor theta x R = 1.0)
    assert a.read_rate_bps() == pytest.approx(1.8448e6)
    assert a.bw is None                             # the new pace restarts BW
    a.bw = 0.5e6
    a.on_segment(dl(1, 0.5, 4.0), 4.0)              # bw .8 x .5 + .2 x .5 = 0.5 < .85 x 1.8448: floor 1.0
    assert a.target_bps == pytest.approx(1.0e6)
    a.tick(FULL, RCV, 0, 0.2, 18.0, 4.2)            # a mode change restores the mode's nominal target
    assert a.target_bps == pytest.approx(1.6e6)


def test_occupancy_below_75_percent_throttles_reads_to_theta_r_and_75_restores_them() -> None:
    a = steady_at_level(1)
    assert a.read_rate_bps() == pytest.approx(1.6e6)
    a.tick(74_999, RCV, 40_000, 0.2, 18.0, 0.2)     # 74.999 % < 75 %: throttle to theta x R_1 = 1.0
    (ev,) = a.drain_events()
    assert (ev["type"], ev["on"], ev["occupancy"], ev["read_bps"]) == ("sabre_throttle", True, 0.74999,
                                                                      pytest.approx(1.0e6))
    assert a.read_rate_bps() == pytest.approx(1.0e6)
    a.tick(60_000, RCV, 40_000, 0.2, 18.0, 0.4)     # still below: no new event, still throttled
    assert kinds(a) == [] and a.read_rate_bps() == pytest.approx(1.0e6)
    a.tick(75_000, RCV, 40_000, 0.2, 18.0, 0.6)     # exactly 75 %: restored to the target 1.6
    (ev,) = a.drain_events()
    assert (ev["on"], ev["occupancy"], ev["read_bps"]) == (False, 0.75, pytest.approx(1.6e6))
    # theta is the parameter: 0.25 x 2 Mbit/s
    b = steady_at_level(1, {"theta": 0.25})
    b.tick(0, RCV, 0, 0.2, 18.0, 0.2)
    assert b.read_rate_bps() == pytest.approx(0.5e6)


def test_a_significant_drop_is_counted_only_when_d_is_below_r() -> None:
    a = steady_at_level(2)                          # R_2 = 4 Mbit/s
    a.tick(FULL, RCV, 0, 0.2, 10.0, 0.2)            # refill
    a.drain_events()
    a.on_segment(dl(2, 4.0, 1.0), 1.0)              # D = R: not significant
    assert a.significant_drops == 0
    a.on_segment(dl(2, 3.99, 2.0), 2.0)             # D < R: significant, a run starts at t = 2
    drops = [e for e in a.drain_events() if e["type"] == "sabre_significant_drop"]
    assert a.significant_drops == 1 and len(drops) == 1
    assert (drops[0]["d_bps"], drops[0]["r_bps"], drops[0]["run_count"]) == (3.99e6, 4e6, 1)
    a.on_segment(dl(2, 5.0, 3.0), 3.0)              # D >= R ends the run: a random drop, ignored
    assert "sabre_drop_ignored" in kinds(a) and a.drop_run_start is None
    # In backoff the reader holds D at delta x R = 3.2 < R by design: not judged
    a.tick(FULL, RCV, 0, 0.2, 18.0, 3.2)
    a.on_segment(dl(2, 3.2, 4.0), 4.0)              # this segment was read (partly) in backoff
    assert a.significant_drops == 1


def test_significant_drops_persisting_over_the_window_halve_the_level_and_double_wait_to_probe() -> None:
    a = steady_at_level(2)
    a.tick(FULL, RCV, 0, 0.2, 10.0, 0.2)            # refill
    a.on_segment(dl(2, 3.0, 0.5), 0.5)              # read partly in backoff (until 0.2 s): not judged
    assert a.significant_drops == 0
    for t in (1.0, 3.0, 5.0, 7.0, 9.0):             # runs from t = 1: 8 s < 10 s window: no decision yet
        a.on_segment(dl(2, 3.0, t), t)
    assert "sabre_bandwidth_drop" not in kinds(a)
    a.on_segment(dl(2, 3.0, 11.0), 11.0)            # 11 - 1 = 10 s >= 10: bandwidth drop
    (ev,) = [e for e in a.drain_events() if e["type"] == "sabre_bandwidth_drop"]
    assert (ev["level_before"], ev["level"], ev["run_count"], ev["wait_to_probe_s"]) == (2, 1, 6, 32.0)
    assert a.decide(10.0, [], 11.5).level == 1      # multiplicative decrease: R_{2/2} = R_1
    a.wait_to_probe_s = 32.0
    b = steady_at_level(2, {"wait_to_probe_s": 20, "wait_to_probe_max_s": 30})
    b.tick(FULL, RCV, 0, 0.2, 10.0, 0.2)
    for t in (0.5, 1.0, 11.0):
        b.on_segment(dl(2, 3.0, t), t)
    assert b.wait_to_probe_s == 30.0                # doubled 40, capped at max 30


def test_probing_up_after_wait_to_probe_and_halving_it_after_a_successful_up_shift() -> None:
    a = steady_at_level(0)                          # steady from t = 0, backoff, socket full
    assert a.decide(18.0, [], 15.99).level == 0     # 15.99 < 16 s: wait
    assert a.decide(18.0, [], 16.0).level == 1      # 16 s: probe one level up (additive increase)
    assert kinds(a) == ["sabre_probe"]
    assert a.read_rate_bps() == pytest.approx(0.8 * 2e6)    # the new level's backoff target
    assert a.decide(18.0, [], 25.99).level == 1     # < 10 s after the probe: not yet judged
    # 26 s: 10 s (the significant-drop window) without a bandwidth drop: the up-shift succeeded,
    # wait_to_probe halves to 8 s, and 26 - 16 = 10 s >= 8 s since the last change: the next probe
    assert a.decide(18.0, [], 26.0).level == 2
    assert kinds(a) == ["sabre_probe_success", "sabre_probe"] and a.wait_to_probe_s == 8.0
    assert a.decide(18.0, [], 40.0).level == 2      # top level: nothing above to probe
    assert a.wait_to_probe_s == 4.0                 # the 26 s probe held 10 s: success, 8 / 2 = 4 (the min)
    # no probe while a significant-drop run is open or reads are throttled
    b = steady_at_level(0)
    b.tick(0, RCV, 0, 0.2, 18.0, 0.2)               # occupancy 0: throttled
    assert b.decide(18.0, [], 20.0).level == 0


def test_unconstrained_variant_keeps_section_4_1() -> None:
    a = make("sabre", L3, {"variant": "unconstrained"})
    assert (a.phase, a.refill_below_s) == ("steady", 10.0)     # no initial phase; half the buffer
    a.level = 1
    assert a.read_rate_bps() == pytest.approx(4.8e6)           # lambda x R_highest from the start
    a.tick(74_000, RCV, 1, 0.2, 5.0, 0.0)
    assert not a.throttled and a.drain_events() == []          # no §4.2 rules


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="wait_to_probe_s"):
        make("sabre", L3, {"wait_to_probe_s": 2})               # below min 4
    with pytest.raises(ValueError, match="variant"):
        make("sabre", L3, {"variant": "4.3"})
    with pytest.raises(ValueError, match="gamma"):
        make("sabre", L3, {"gamma": 1.5})


def simulate(a: Sabre, net_bps: float, t0: float, seconds: float, buffer_s: float,
             drain_to_s: float | None = None) -> float:
    """The reader of mpvlab/player/dash_client.py in script form: every 0.2 s a check with the socket full
    (the network keeps up with the pace) or, when the pace exceeds the network, draining; one 2 s
    segment at a time, its D(i) = min(network, pace in force while it was read) (level R_2 = 4 Mbit/s,
    a segment = 8 Mbit). The playout buffer moves linearly from buffer_s to drain_to_s."""
    t, got, seg_start = t0, 0.0, t0
    steps = round(seconds / 0.2)
    for i in range(1, steps + 1):
        b = buffer_s if drain_to_s is None else buffer_s + (drain_to_s - buffer_s) * i / steps
        pace = a.read_rate_bps() or net_bps
        got += min(pace, net_bps) * 0.2
        t = t0 + i * 0.2
        occ = FULL if net_bps >= pace else 0
        a.tick(occ, RCV, int(min(pace, net_bps) * 0.2 / 8), 0.2, b, t)
        seg_bits = a.ladder.rates_bps[a.level] * a.ladder.segment_s
        if got >= seg_bits:
            a.on_segment(Download(level=a.level, bytes=int(seg_bits / 8), download_s=t - seg_start, t_end_s=t), t)
            got, seg_start = got - seg_bits, t
            a.decide(b, [], t)
    return t


def test_a_backoff_to_refill_transition_at_constant_bandwidth_is_no_congestion() -> None:
    # Issue 43 item 5: backoff reads at delta x R = 3.2 Mbit/s fed BW; at the switch to refill the
    # target became lambda x R = 4.8 while BW still held about 3.2 < gamma x 4.8 = 4.08: a congestion
    # event with the network at 6 Mbit/s, the lowered target made every D(i) < R a significant drop and
    # 10 s later a forced down-shift. Now BW restarts at each change of pace.
    a = steady_at_level(2, {"wait_to_probe_s": 32, "wait_to_probe_max_s": 32})
    t = simulate(a, 6e6, 0.0, 20.0, 18.0)                    # backoff at the full buffer, D = 3.2
    t = simulate(a, 6e6, t, 30.0, 16.0)                      # refill (16 < 17), D = 4.8 <= 6
    evs = kinds(a)
    assert "sabre_mode" in evs
    assert [e for e in evs if e in ("sabre_congestion", "sabre_significant_drop", "sabre_bandwidth_drop")] == []
    assert a.level == 2 and a.target_bps == pytest.approx(4.8e6)
    # refill samples only: D = lambda x R (within the script's 0.2 s quantisation of segment ends)
    assert a.bw == pytest.approx(4.8e6, rel=0.05)


def test_a_real_drop_below_the_refill_pace_is_still_congestion_then_a_bandwidth_drop() -> None:
    # The control of the test above: the network falls to 3 Mbit/s < gamma x 4.8 = 4.08 while refilling;
    # at level 1 the refill pace 2.4 Mbit/s fits in 3 and D = 2.4 >= R_1 = 2: no further drop.
    a = steady_at_level(2, {"wait_to_probe_s": 32, "wait_to_probe_max_s": 32})
    t = simulate(a, 6e6, 0.0, 10.0, 18.0)
    t = simulate(a, 6e6, t, 6.0, 16.0)
    a.drain_events()
    simulate(a, 3e6, t, 40.0, 16.0)
    evs = kinds(a)
    assert "sabre_congestion" in evs and "sabre_bandwidth_drop" in evs
    assert a.level == 1                                      # multiplicative decrease: 2 // 2


def test_unconstrained_variant_does_not_fall_a_level_per_backoff_segment() -> None:
    # Issue 43 item 5: §4.1's BW is the periodic checks' samples taken while the socket was not full;
    # D(i) of a backoff segment (delta x R by construction) fed it and k-switching fell one level.
    a = make("sabre", L3, {"variant": "unconstrained"})
    a.level = 2
    t = 0.0
    for i in range(1, 21):                                  # full buffer, socket full: backoff
        t = i * 0.2
        a.tick(FULL, RCV, int(3.2e6 * 0.2 / 8), 0.2, 18.0, t)
        if i % 5 == 0:                                      # a 2 s segment of 8 Mbit read in 2.5 s
            a.on_segment(Download(level=2, bytes=1_000_000, download_s=2.5, t_end_s=t), t)
            assert a.decide(18.0, [], t).level == 2
    assert a.mode == "backoff" and a.bw is None             # every check app-limited: no sample
