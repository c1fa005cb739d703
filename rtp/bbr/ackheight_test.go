package bbr

import (
	"testing"
	"time"
)

// The ack-aggregation rule on a scripted feedback sequence, with the estimate held at 8 Mbit/s
// (1 000 000 bytes/s). Expected values from the rule (WebRTC's UpdateAckAggregationBytes), not from
// the code: expected = estimate × (feedback time − epoch start); an epoch whose bytes do not exceed
// that ends and restarts with this feedback's bytes; otherwise its bytes grow and the excess
// (bytes − expected) is a max-filter sample.
func TestAckAggregationFollowsTheRule(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.filter.Reset(Sample{Rate: 8e6, Round: 0})
	c.aggEpochStarted = true // the epoch starts at 0 with 0 bytes
	steps := []struct {
		atMs               int64
		acked              int64
		wantEpoch, wantMax int64
	}{
		{100, 100_000, 100_000, 0},       // 0 <= 100 000 expected: new epoch at 100 ms
		{150, 100_000, 200_000, 150_000}, // 100 000 > 50 000: bytes 200 000, excess 200 000 − 50 000
		{200, 20_000, 220_000, 150_000},  // 200 000 > 100 000: excess 120 000, the max stays
		{400, 10_000, 10_000, 150_000},   // 220 000 <= 300 000: new epoch at 400 ms
		{420, 100_000, 100_000, 150_000}, // 10 000 <= 20 000: new epoch at 420 ms
	}
	for _, st := range steps {
		c.updateAckAggregation(time.Duration(st.atMs)*ms, st.acked)
		if c.aggEpochBytes != st.wantEpoch || c.MaxAckHeight() != st.wantMax {
			t.Fatalf("at %d ms: epoch bytes %d max height %d, want %d and %d", st.atMs, c.aggEpochBytes,
				c.MaxAckHeight(), st.wantEpoch, st.wantMax)
		}
	}
}

// The window moves toward its target by bytes acknowledged (bbr.cc CalculateCongestionWindow):
// before full bandwidth it never decreases; at full bandwidth it is min(target, window + acked) with
// the target 2 × BDP + the max ack height.
func TestWindowAddsAckHeightAtFullBandwidth(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.filter.Reset(Sample{Rate: 8e6, Round: 0})
	c.minRTT = 50 * ms // BDP 50 000 bytes
	c.maxAckHeight.Reset(Sample{Rate: 30_000, Round: 0})
	c.mode, c.cwndGain = ProbeBW, cwndGainProbeBW
	c.cwnd = 400_000
	c.s.totalAcked = initialCwnd // past the initial window: no growth-only exception
	c.calculateCongestionWindow(0)
	if got := c.CongestionWindow(); got != 400_000 {
		t.Fatalf("before full bandwidth: cwnd %d, want it kept at 400 000 (never decreases)", got)
	}
	c.atFullBW = true
	c.calculateCongestionWindow(0)
	if got := c.CongestionWindow(); got != 130_000 {
		t.Fatalf("at full bandwidth: cwnd %d, want 2 × BDP + 30 000 = 130 000", got)
	}
	c.cwnd = 100_000
	c.calculateCongestionWindow(12_000)
	if got := c.CongestionWindow(); got != 112_000 {
		t.Fatalf("growing: cwnd %d, want 100 000 + 12 000 acked = 112 000", got)
	}
}
