package bbr

import (
	"testing"
	"time"
)

const ms = time.Millisecond

func sendRange(c *Controller, from, to int64, t0 time.Duration) {
	for s := from; s <= to; s++ {
		c.OnPacketSent(t0+time.Duration(s-from)*ms, s, 1000)
	}
}

func acks(from, to int64, lost ...int64) []Ack {
	isLost := map[int64]bool{}
	for _, l := range lost {
		isLost[l] = true
	}
	out := []Ack{}
	for s := from; s <= to; s++ {
		out = append(out, Ack{Seq: s, Lost: isLost[s], Arrival: 20*ms + time.Duration(s)*ms})
	}
	return out
}

func expect(t *testing.T, c *Controller, step string, st RecoveryState, wnd int64) {
	t.Helper()
	if c.Recovery() != st || c.RecoveryWindow() != wnd {
		t.Fatalf("%s: state %v window %d, want %v window %d (in flight %d)", step, c.Recovery(),
			c.RecoveryWindow(), st, wnd, c.Inflight())
	}
}

// A scripted loss pattern with 1000-byte packets; the windows are computed by hand from the rules:
// entry sets window = in-flight + acked; CONSERVATION subtracts bytes lost; GROWTH adds bytes acked;
// always at least in-flight + acked; exit after a round (last acked > last sent at the last loss).
func TestRecoverySubStates(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MSS = 1000
	c, _ := New(cfg)
	sendRange(c, 0, 19, 0) // in flight 20000
	expect(t, c, "before loss", NotInRecovery, 0)

	c.OnFeedback(50*ms, acks(0, 5, 5)) // 5000 acked, 1000 lost -> in flight 14000
	expect(t, c, "first loss", Conservation, 14000+5000)

	c.OnFeedback(60*ms, acks(6, 10, 10)) // 4000 acked, 1000 lost -> in flight 9000
	// 19000 - 1000 lost = 18000 >= in flight + acked = 13000
	expect(t, c, "loss in conservation", Conservation, 18000)

	sendRange(c, 20, 29, 61*ms)       // in flight 19000, last sent 29
	c.OnFeedback(80*ms, acks(11, 19)) // 9000 acked, no loss; last acked 19 = end of round: no round start
	// 18000 - 0 = 18000 < in flight 10000 + acked 9000 = 19000 -> 19000
	expect(t, c, "no loss, same round", Conservation, 19000)

	c.OnFeedback(90*ms, acks(20, 24, 24)) // round start (24 > 19): GROWTH; a loss: stays in recovery
	// 19000 - 1000 + 4000 acked = 22000 (in flight 5000 + 4000 is smaller)
	expect(t, c, "round start with loss", Growth, 22000)

	c.OnFeedback(95*ms, acks(25, 29)) // no loss but last acked 29 is not past the last loss's end (29)
	expect(t, c, "round without loss not complete", Growth, 27000)

	sendRange(c, 30, 31, 96*ms)
	c.OnFeedback(130*ms, acks(30, 30)) // 30 > 29: a whole round without loss -> exit
	if c.Recovery() != NotInRecovery {
		t.Fatalf("after a round without loss: %v", c.Recovery())
	}
}

// With the sub-state entered in STARTUP set to MEDIUM_GROWTH, half the bytes acked are released.
func TestRecoveryMediumGrowth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MSS = 1000
	cfg.StartupRecovery = MediumGrowth
	c, _ := New(cfg)
	sendRange(c, 0, 39, 0)             // in flight 40000
	c.OnFeedback(50*ms, acks(0, 5, 5)) // entry: 34000 + 5000
	expect(t, c, "entry in startup", MediumGrowth, 39000)
	c.OnFeedback(60*ms, acks(6, 10, 10)) // 39000 - 1000 + 4000/2 = 40000 (in flight 29000 + 4000 smaller)
	expect(t, c, "medium growth", MediumGrowth, 40000)
	if c.CongestionWindow() > 40000 {
		t.Fatalf("cwnd %d exceeds the recovery window", c.CongestionWindow())
	}
}

func TestRecoveryDisabled(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MSS = 1000
	cfg.NoRecovery = true
	c, _ := New(cfg)
	sendRange(c, 0, 19, 0)
	c.OnFeedback(50*ms, acks(0, 5, 5))
	expect(t, c, "loss with recovery disabled", NotInRecovery, 0)
}

// One packet per feedback: the RTT sample is feedback time − send time (sampler.cc: ack_time −
// sent_time; the receiver's hold time is not subtracted).
func rttStep(c *Controller, seq int64, sent, rtt time.Duration) {
	c.OnPacketSent(sent, seq, 1000)
	c.OnFeedback(sent+rtt, []Ack{{Seq: seq, Arrival: sent + rtt/2}})
}

// bbr.cc UpdateBandwidthAndMinRtt with the 2018 defaults (probe_rtt_skipped_if_similar_rtt off):
// once min-RTT is older than its expiry, the next sample replaces it whatever its value and the
// controller enters PROBE_RTT, with the 4 × 1460 B window (the v2 variant: BDP/2).
func TestMinRTTExpiryEntersProbeRTT(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.ProbeRTTv2 = v2
		c, _ := New(cfg)
		expiry := 10 * time.Second
		if v2 {
			expiry = 5 * time.Second
		}
		rttStep(c, 0, 0, 100*ms) // sent before any ack: no sample (audit2018_test.go)
		if c.MinRTT() != 0 {
			t.Fatalf("v2=%v: an RTT sample from the first packet", v2)
		}
		rttStep(c, 1, 200*ms, 100*ms)
		rttStep(c, 10, time.Second, 130*ms) // higher: min-RTT kept
		if c.MinRTT() != 100*ms || c.LatestRTT() != 130*ms || c.Mode() == ProbeRTT {
			t.Fatalf("v2=%v: min %v latest %v mode %v", v2, c.MinRTT(), c.LatestRTT(), c.Mode())
		}
		// expired; a similar 105 ms sample: 2018 probes anyway and takes it as the new min-RTT
		rttStep(c, 11, expiry+time.Second, 105*ms)
		if c.Mode() != ProbeRTT || c.MinRTT() != 105*ms {
			t.Fatalf("v2=%v: after expiry: mode %v min-RTT %v, want PROBE_RTT and 105ms", v2, c.Mode(), c.MinRTT())
		}
		want := int64(4 * 1460)
		if v2 {
			want = max(c.BDP()/2, want)
		}
		if c.CongestionWindow() != want {
			t.Fatalf("v2=%v: cwnd in PROBE_RTT %d, want %d (BDP %d)", v2, c.CongestionWindow(), want, c.BDP())
		}
	}
}
