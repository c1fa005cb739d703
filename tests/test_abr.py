"""ABR registry (mpvlab/player/gstreamer/abr): each algorithm on scripted throughput/buffer sequences. Every expected
decision below is worked out BY HAND from the published rule (the arithmetic is in the comments),
never by calling the code under test.

Common ladder unless stated: 1, 2, 4 Mbit/s, 2 s segments, 20 s buffer. A download of T Mbit/s is
scripted as T/8 MB taking 1 s.
"""

from __future__ import annotations

import random
import sys

import pytest

from mpvlab.player.gstreamer.abr import REGISTRY, Download, Ladder, make  # noqa: E402

M = 1_000_000
L3 = Ladder((1 * M, 2 * M, 4 * M), 2.0, 20.0)


def dl(level: int, mbps: float, t: float = 0.0) -> Download:
    return Download(level=level, bytes=int(mbps * M / 8), download_s=1.0, t_end_s=t)


def run(algo, steps):
    """steps: [(buffer_s, history, now_s)] -> the levels decided, in order."""
    return [algo.decide(b, h, t).level for b, h, t in steps]


def test_registry_has_every_algorithm_and_rejects_bad_params() -> None:
    assert set(REGISTRY) == {"throughput", "bba", "bola", "dynamic", "festive", "sabre", "on-off"}
    for name, cls in REGISTRY.items():
        assert cls.__doc__ is not None or sys.modules[cls.__module__].__doc__, name
    with pytest.raises(ValueError, match="gama"):
        make("bola", L3, {"gama": 1})
    with pytest.raises(ValueError, match="unknown ABR 'mpc'"):
        make("mpc", L3)
    with pytest.raises(ValueError, match="safety"):
        make("throughput", L3, {"safety": 1.5})
    with pytest.raises(ValueError, match="reservoir"):
        make("bba", L3, {"reservoir_s": 8, "cushion_s": 12})      # 8 + 12 = 20 s = the buffer
    with pytest.raises(ValueError, match="ascending"):
        Ladder((2 * M, 1 * M), 2.0, 20.0)


def test_throughput_harmonic_mean_of_last_k() -> None:
    a = make("throughput", L3, {"safety": 0.9, "estimator": "harmonic", "k": 3})
    h: list[Download] = []
    seq = []
    for mbps, lvl in [(None, 0), (3, 1), (6, 1), (6, 2), (1, 1), (0.5, 0)]:
        if mbps is not None:
            h = h + [dl(lvl, mbps)]
        seq.append((5.0, list(h), 0.0))
    # 1: no sample -> lowest (0)
    # 2: [3]: hm 3.0, x0.9 = 2.7 -> highest <= 2.7 is 2 Mbit/s -> 1
    # 3: [3, 6]: hm = 2 / (1/3 + 1/6) = 4.0, 3.6 -> 1
    # 4: [3, 6, 6]: hm = 3 / (2/3) = 4.5, 4.05 -> 2
    # 5: [6, 6, 1] (last k=3): hm = 3 / (1/6 + 1/6 + 1) = 2.25, 2.025 -> 1
    # 6: [6, 1, 0.5]: hm = 3 / (1/6 + 1 + 2) = 18/19 = 0.947, 0.853 -> none -> lowest 0
    assert run(a, seq) == [0, 1, 1, 2, 1, 0]


def test_throughput_other_estimators() -> None:
    h = [dl(0, 3), dl(1, 6)]
    # mean of [3, 6] = 4.5, x0.9 = 4.05 -> 2 (the harmonic mean, 4.0 -> 3.6, gives 1)
    assert make("throughput", L3, {"estimator": "mean", "k": 2}).decide(5, h, 0).level == 2
    # last = 6 x 0.9 = 5.4 -> 2; after a 1 Mbit/s segment: 0.9 -> lowest 0
    assert make("throughput", L3, {"estimator": "last"}).decide(5, h, 0).level == 2
    assert make("throughput", L3, {"estimator": "last"}).decide(5, h + [dl(2, 1)], 0).level == 0


def test_bba0_rate_map_and_hysteresis() -> None:
    # reservoir 4 s, cushion 8 s: f(B) = 1 + 3 (B - 4) / 8 Mbit/s for 4 < B < 12.
    a = make("bba", L3, {"reservoir_s": 4, "cushion_s": 8})
    h = [dl(0, 3)]
    seq = [
        (0.0, [], 0),   # first segment -> R_min: 0
        (3.0, h, 0),    # B <= r -> 0
        (7.0, h, 0),    # f = 2.125 >= R+ (2) -> highest strictly below 2.125 = 2 Mbit/s -> 1
        (9.0, h, 0),    # prev 1: f = 2.875, R+ = 4, R- = 1 -> stay 1
        (10.8, h, 0),   # f = 3.55 -> stay 1
        (12.5, h, 0),   # B >= r + c = 12 -> top 2
        (9.0, h, 0),    # prev 2: f = 2.875, R- = 2: 2.875 > 2 -> stay 2
        (6.0, h, 0),    # f = 1.75 <= R- (2) -> lowest strictly above 1.75 = 2 Mbit/s -> 1
        (4.5, h, 0),    # prev 1: f = 1.1875, R- = 1: not <= 1 -> stay 1
        (4.0, h, 0),    # B <= r -> 0
    ]
    assert run(a, seq) == [0, 0, 1, 1, 1, 2, 2, 1, 1, 0]


def test_bola_basic_v_gamma_from_buffer() -> None:
    # Q_max = 20/2 = 10 segments, gamma_p = 5, v = ln(R/R_min) = [0, ln2, ln4] = [0, .693147, 1.386294]
    # V = (Q_max - 1)/(v_M + gamma_p) = 9 / 6.386294 = 1.409268
    # a_m = V (v_m + gamma_p) = [7.04634, 8.02316, 9.00000]; score_m = (a_m - Q) / R_m
    a = make("bola", L3, {"gamma_p": 5})
    assert a.V == pytest.approx(9 / (5 + 2 * 0.6931471805599453), rel=1e-9)
    # request once Q <= a_M = Q_max - 1 = 9 segments = 18 s
    assert a.request_threshold_s() == pytest.approx(18.0)
    h = [dl(0, 3)]
    seq = [
        (0.0, [], 0),   # first segment: lowest
        (6.0, h, 0),    # Q=3: scores 4.046, 2.512, 1.5 -> 0
        (13.0, h, 0),   # Q=6.5: 0.546, 0.762, 0.625 -> 1
        (16.0, h, 0),   # Q=8: -0.954, 0.012, 0.25 -> 2
        (12.0, h, 0),   # Q=6: 1.046, 1.012, 0.75 -> 0 (1 beats 0 only from Q = 6.0695)
        (14.0, h, 0),   # Q=7: 0.046, 0.512, 0.5 -> 1 (2 beats 1 only from Q = 7.0463)
        (14.2, h, 0),   # Q=7.1: -0.054, 0.462, 0.475 -> 2
    ]
    assert run(a, seq) == [0, 0, 1, 2, 0, 1, 2]


def test_dynamic_hand_over_hysteresis() -> None:
    # dash.js: useBola = buffer > (useBola ? 0.5 x stable : stable), stable = 12 -> on 12, off 6.
    # Throughput rule (harmonic, safety 0.9) on 3 Mbit/s samples: 2.7 -> level 1.
    # BOLA as in the test above (Q < 6.07 -> 0; Q in [6.07, 7.05) -> 1; Q >= 7.05 -> 2).
    a = make("dynamic", L3, {"stable_buffer_s": 12})
    h = [dl(0, 3)]
    steps = [
        (0.0, [], 0),    # throughput, no sample: 0
        (10.0, h, 0),    # 10 > 12? no: throughput -> 1
        (12.0, h, 0),    # 12 > 12? no (strict): throughput -> 1
        (16.0, h, 0),    # 16 > 12: BOLA, Q=8 -> 2
        (7.0, h, 0),     # BOLA on: 7 > 6 -> BOLA, Q=3.5 -> 0
        (6.0, h, 0),     # 6 > 6? no: throughput -> 1
        (11.0, h, 0),    # throughput on: 11 > 12? no -> 1
    ]
    rules = []
    levels = []
    for b, hist, t in steps:
        c = a.decide(b, hist, t)
        levels.append(c.level)
        rules.append(c.info["rule"])
    assert levels == [0, 1, 1, 2, 0, 1, 1]
    assert rules == ["throughput"] * 3 + ["bola"] * 2 + ["throughput"] * 2


def test_festive_gradual_switching_and_delayed_update() -> None:
    # window 1 (the estimate is the last sample) to keep the arithmetic short; p = 0.85, alpha = 12.
    # score(b) = 2^n (+1 for the candidate) + 12 |R_b / min(0.85 w, R_ref) - 1|
    a = make("festive", L3, {"window": 1})
    h: list[Download] = []
    seq_levels = []
    script = [  # (sample appended before the decision: (level, Mbit/s) or None, now)
        (None, 0.0),       # first segment: 0
        ((0, 10), 2.0),    # aim 8.5 -> b* 2 > 0, run 1 >= 1 -> ref 1; n 0: cur 1 + 12x0.5 = 7, ref 2 -> 1
        ((1, 0.5), 4.0),   # aim .425 -> ref 0; n 1: cur 2 + 12|2/.425-1| = 46.47, ref 4 + 12|1/.425-1| = 20.24 -> 0
        ((0, 10), 6.0),    # ref 1; n 2: cur 4 + 6 = 10, ref 8 -> 1
        ((1, 0.5), 8.0),   # ref 0; n 3: cur 8 + 44.47 = 52.47, ref 16 + 16.24 = 32.24 -> 0
        ((0, 10), 10.0),   # ref 1; n 4 (t 2,4,6,8 within 20 s): cur 16 + 6 = 22, ref 32 -> stay 0 (delayed)
        ((0, 10), 30.0),   # no switch in (10, 30]: n 0: 7 vs 2 -> 1
        ((1, 10), 32.0),   # b* 2 > 1 but run at level 1 is 1 < 2 -> ref 1: stay 1 (gradual)
        ((1, 10), 34.0),   # run 2 >= 2 -> ref 2; n 1: cur 2 + 12|2/4-1| = 8, ref 4 -> 2
    ]
    for sample, now in script:
        if sample is not None:
            h = h + [dl(sample[0], sample[1], now)]
        seq_levels.append(a.decide(5.0, list(h), now).level)
    assert seq_levels == [0, 1, 0, 1, 0, 0, 1, 1, 2]


def test_festive_harmonic_window_20() -> None:
    # default window 20: 25 samples, only the last 20 count. 5 x 0.5 then 20 x 5 Mbit/s:
    # hm of the last 20 = 5 -> aim 4.25 -> b* 2; from level 0 (run 25 >= 1) -> ref 1, n 0 -> 1.
    # Had all 25 counted: hm = 25 / (5/0.5 + 20/5) = 25/14 = 1.79, aim 1.52 -> b* 0 -> stay 0.
    a = make("festive", L3)
    h = [dl(0, 0.5)] * 5 + [dl(0, 5)] * 20
    a.decide(0, [], 0)
    assert a.decide(5.0, h, 50.0).level == 1


def test_festive_randomised_scheduling_is_seeded() -> None:
    # defaults: delta = one segment (2 s), target = buffer - segment - delta = 16 s:
    # randbuf ~ U[14, 18], drawn from random.Random(seed).
    def draws(seed: int) -> list[float]:
        a = make("festive", L3, seed=seed)
        return [a.request_threshold_s() for _ in range(50)]
    ref = random.Random(7)
    assert draws(7) == [ref.uniform(14.0, 18.0) for _ in range(50)]
    assert draws(7) != draws(8)
    assert all(14.0 <= x <= 18.0 for x in draws(3))
    with pytest.raises(ValueError, match="target_buffer_s"):
        make("festive", L3, {"target_buffer_s": 17, "delta_s": 2})   # 19 > 20 - 2


def test_sabre_pipelining_formula() -> None:
    a = make("sabre", L3)
    # 1 + ceil(rcvbuf x 8 / (r x s)):
    assert a.pipeline_depth(131072, 0) == 2      # 1048576 / 2e6 = 0.52 -> 1 -> 2
    assert a.pipeline_depth(1048576, 0) == 6     # 8388608 / 2e6 = 4.19 -> 5 -> 6
    assert a.pipeline_depth(1048576, 2) == 3     # 8388608 / 8e6 = 1.05 -> 2 -> 3
    assert a.pipeline_depth(4_000_000, 1) == 9   # 32e6 / 4e6 = 8 exactly -> 8 -> 9


def test_sabre_modes_follow_the_75_percent_rule() -> None:
    a = make("sabre", L3, {"variant": "unconstrained"})     # refill_below = buffer/2 = 10 s, backoff_above = 20 - 2 = 18 s
    a.level = 1
    rcv = 100_000
    a.rcvbuf_requested = rcv                                # the SO_RCVBUF set; tick gets the same here
    # (occupancy bytes, bytes read in the 0.2 s, playout buffer s) -> expected mode after the check
    script = [
        (10_000, 100_000, 5.0, "refill"),    # 10 % < 75 %: stay refill; sample 4 Mbit/s -> bw 4.0
        (74_999, 50_000, 8.0, "refill"),     # 74.999 %: refill; 2 Mbit/s -> bw .8x4 + .2x2 = 3.6
        (75_000, 25_000, 19.0, "backoff"),   # 75 % (>=) and buffer 19 >= 18: backoff; sample ignored
        (90_000, 20_000, 18.0, "backoff"),   # full and buffer 18 >= 10: stay
        (80_000, 20_000, 9.9, "refill"),     # full but buffer 9.9 < 10: refill
        (99_000, 20_000, 12.0, "refill"),    # full, but buffer 12 < 18: the network outruns 4.8 M: stay
        (99_000, 20_000, 18.5, "backoff"),   # full and buffer 18.5 >= 18: backoff
        (74_000, 25_000, 15.0, "refill"),    # 74 % < 75 % in backoff: refill; 1 Mbit/s -> .8x3.6+.2 = 3.08
        (50_000, 150_000, 15.0, "refill"),   # stays; 6 Mbit/s -> .8x3.08 + 1.2 = 3.664
    ]
    modes, bws = [], []
    for occ, nread, buf, _ in script:
        t = a.tick(occ, rcv, nread, 0.2, buf)
        modes.append(t.mode)
        bws.append(t.bw_bps)
    assert modes == [s[3] for s in script]
    assert bws == pytest.approx([4.0e6, 3.6e6, 3.6e6, 3.6e6, 3.6e6, 3.6e6, 3.6e6, 3.08e6, 3.664e6])
    # targets: refill lambda x R_highest = 1.2 x 4 = 4.8 Mbit/s; backoff delta x R_1 = 0.8 x 2 = 1.6
    a.mode = "refill"
    assert a.target_read_bps() == pytest.approx(4.8e6)
    a.mode = "backoff"
    assert a.target_read_bps() == pytest.approx(1.6e6)


def test_sabre_k_switching() -> None:
    a = make("sabre", L3, {"variant": "unconstrained"})
    def at(level: int, bw: float) -> int:
        a.level, a.bw = level, bw
        return a.decide(5.0, [], 0).level
    assert at(0, None) == 0          # no estimate yet: stay
    assert at(0, 3.6e6) == 1         # 3.6 > 1.1 x R_1 = 2.2 -> up one
    assert at(1, 3.6e6) == 1         # not > 4.4, not < 2.2 -> stay
    assert at(1, 5.0e6) == 2         # 5.0 > 4.4 -> up
    assert at(2, 2.0e6) == 0         # 2.0 < 4.4: highest j with 1.1 R_j <= 2.0: 1.1 (j 0) -> 0
    assert at(2, 2.3e6) == 1         # 2.2 <= 2.3 -> 1
    assert at(0, 8.0e6) == 1         # up is one level at a time


def test_on_off_ewma_of_segment_throughputs() -> None:
    a = make("on-off", L3)
    h: list[Download] = []
    out = [a.decide(20.0, [], 0).level]                     # first: 0
    for lvl, mbps in [(0, 3), (1, 6), (1, 10), (2, 1)]:
        h = h + [dl(lvl, mbps)]
        out.append(a.decide(5.0, list(h), 0).level)
    # bw: 3 -> 3 > 2.2: 1;  .8x3 + .2x6 = 3.6: stay 1;  .8x3.6 + .2x10 = 4.88 > 4.4: 2;
    # .8x4.88 + .2x1 = 4.104 < 4.4: highest j with 1.1 R_j <= 4.104 = 1
    assert out == [0, 1, 1, 2, 1]
    assert a.request_threshold_s() == 18.0                  # room for one segment: 20 - 2
