package bbr

import (
	"testing"
	"time"
)

// WebRTC's pad-window rule (BbrNetworkController::CreateRateUpdate): pad window = data window while
// probing for more bandwidth — STARTUP, or PROBE_BW's phase with a pacing gain above 1 — else zero.
// So the pad rate is the pacing rate (gain × estimate) in STARTUP and the 1.25 phase, and 0 in
// DRAIN, PROBE_BW's drain (0.75) and cruise (1.0) phases, and PROBE_RTT. Expected rates are
// computed from the gains the rule names, not from the controller's own pacing figure.
func TestPadRateFollowsProbingPerMode(t *testing.T) {
	const bw = 1e6
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.filter.Reset(Sample{Rate: bw, Round: 0})
	if c.BandwidthEstimate() != bw {
		t.Fatalf("estimate %g, want %g", c.BandwidthEstimate(), bw)
	}
	cases := []struct {
		mode    Mode
		cycle   int
		probing bool
		padRate float64
	}{
		// STARTUP with an estimate but no RTT sample yet: CalculatePacingRate's max(0, gain × estimate)
		{Startup, 0, true, 2.885 * bw},
		{Drain, 0, false, 0},
		{ProbeBW, 0, true, 1.25 * bw},
		{ProbeBW, 1, false, 0}, // 0.75: draining the probe's queue
		{ProbeBW, 2, false, 0}, // cruise phases at 1.0
		{ProbeBW, 7, false, 0},
		{ProbeRTT, 0, false, 0},
	}
	for _, tc := range cases {
		c.mode, c.cycleOffset, c.atFullBW, c.pacingRate = tc.mode, tc.cycle, tc.mode != Startup, 0
		c.pacingGain = map[Mode]float64{Startup: highGain, Drain: drainGain, ProbeBW: gainOf(tc.cycle), ProbeRTT: 1}[tc.mode]
		c.calculatePacingRate()
		if got := c.IsProbingForMoreBandwidth(); got != tc.probing {
			t.Errorf("%v phase %d: probing %v, want %v", tc.mode, tc.cycle, got, tc.probing)
		}
		if got := c.PadRate(); got < tc.padRate*0.999 || got > tc.padRate*1.001 {
			t.Errorf("%v phase %d: pad rate %g bit/s, want %g", tc.mode, tc.cycle, got, tc.padRate)
		}
		if tc.probing && c.PadRate() != c.PacingRate() {
			t.Errorf("%v phase %d: pad rate %g differs from the pacing rate %g while probing", tc.mode, tc.cycle,
				c.PadRate(), c.PacingRate())
		}
	}
}

// The same rule along a real run of the controller: a sender that keeps the window full on a
// 1 Mbit/s path with 40 ms RTT goes STARTUP → DRAIN → PROBE_BW and cycles; at every feedback the pad
// rate is the pacing rate exactly when the mode probes for more bandwidth, else 0, and each state
// the rule distinguishes is visited.
func TestPadRateAlongARun(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MSS = 1000
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const linkBytesPerS = 125_000 // 1 Mbit/s
	const rtt = 40 * time.Millisecond
	var seq int64
	var linkFree time.Duration // when the bottleneck finishes the last packet sent
	type flight struct {
		seq     int64
		arrival time.Duration
	}
	var pending []flight
	seen := map[string]bool{}
	for now := time.Duration(0); now < 20*time.Second; now += time.Millisecond {
		// send while the window admits, at most what the link would carry plus a little
		for c.CanSend() && linkFree < now+5*time.Millisecond {
			c.OnPacketSent(now, seq, 1000)
			linkFree = max(linkFree, now) + time.Second*1000/linkBytesPerS
			pending = append(pending, flight{seq, linkFree + rtt/2})
			seq++
		}
		// feedback every 20 ms for what arrived by then less the return half
		if now%(20*time.Millisecond) == 0 {
			var acks []Ack
			for len(pending) > 0 && pending[0].arrival+rtt/2 <= now {
				acks = append(acks, Ack{Seq: pending[0].seq, Arrival: pending[0].arrival})
				pending = pending[1:]
			}
			if len(acks) == 0 {
				continue
			}
			c.OnFeedback(now, acks)
			probing := c.Mode() == Startup || (c.Mode() == ProbeBW && c.pacingGain > 1)
			want := 0.0
			if probing {
				want = c.PacingRate()
			}
			if c.PadRate() != want || c.IsProbingForMoreBandwidth() != probing {
				t.Fatalf("at %v in %v (gain %g): pad rate %g, want %g", now, c.Mode(), c.pacingGain, c.PadRate(), want)
			}
			key := c.Mode().String()
			if c.Mode() == ProbeBW {
				key += map[bool]string{true: " probing", false: " not probing"}[probing]
			}
			seen[key] = true
		}
	}
	for _, k := range []string{"STARTUP", "DRAIN", "PROBE_BW probing", "PROBE_BW not probing"} {
		if !seen[k] {
			t.Errorf("the run never reached %s (saw %v)", k, seen)
		}
	}
}
