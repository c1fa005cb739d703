package bbr

import (
	"testing"
	"time"
)

// Tests of the differences the 2018 audit closed (rtp/README.md, "Audit against libwebrtc 2018").
// Each replays a scripted sequence of sends and feedback and checks what the 2018 code does; the
// expected figures are worked out by hand from the cited function, not read back from this code.

func near(got, want float64) bool { return got >= want*0.9999 && got <= want*1.0001 }

// sampler.cc OnPacketAcknowledgedInner, called by bbr.cc with ack_time = the feedback's receive
// time for every packet of a report; the receiver's arrival times play no part. libwebrtc's
// data_in_flight at send includes the packet (OnPacketSent's comment), so packets sent before the
// first acknowledgement carry no last-acked state and give no sample, and no RTT sample either.
// Ten 1000-byte packets sent 1 ms apart from t = 0, acknowledged by one feedback at 50 ms: no
// estimate, no min-RTT. Ten more sent at 51 … 60 ms, acknowledged at 100 ms: each carries the
// state of packet 9 (sent 9 ms, acked 50 ms, 10 000 B sent and acked then). Packet 10 + k:
//
//	send rate (k+1)·1000 B / (42 + k) ms, ack rate (k+1)·1000 B / (100 − 50) ms;
//
// the best min of the two is packet 19's: min(10 000 B / 51 ms, 10 000 B / 50 ms) = 80 000 / 0.051
// bit/s. RTT samples are feedback time − send time: the minimum is packet 19's, 100 − 60 = 40 ms.
func TestSamplerUsesFeedbackTimeAsAckTime(t *testing.T) {
	c, _ := New(DefaultConfig())
	batch := func(from int64, t0, fb time.Duration) {
		var acks []Ack
		for s := from; s < from+10; s++ {
			c.OnPacketSent(t0+time.Duration(s-from)*ms, s, 1000)
			// arrivals 1 ms apart: an arrival-based sampler would see 10 000 B in 9 ms (8.9 Mbit/s)
			acks = append(acks, Ack{Seq: s, Arrival: 20*ms + time.Duration(s)*ms})
		}
		c.OnFeedback(fb, acks)
	}
	batch(0, 0, 50*ms)
	if c.BandwidthEstimate() != 0 || c.MinRTT() != 0 {
		t.Fatalf("after the first report: estimate %g min-RTT %v, want none (no packet had a last-acked state)",
			c.BandwidthEstimate(), c.MinRTT())
	}
	batch(10, 51*ms, 100*ms)
	// A DataRate is whole bit/s: DataSize / TimeDelta = 10 000 × 8 000 000 / 51 000 µs, truncated
	// (data_rate.h l. 164-166): 1 568 627, not 1 568 627.45.
	if got := c.BandwidthEstimate(); got != 1_568_627 {
		t.Fatalf("estimate %.2f bit/s, want 1568627 (10 000 B per 51 ms of send time, whole bit/s)", got)
	}
	if c.MinRTT() != 40*ms || c.LatestRTT() != 40*ms {
		t.Fatalf("min-RTT %v latest %v, want 40ms (feedback 100 ms − last send 60 ms)", c.MinRTT(), c.LatestRTT())
	}
	if c.Inflight() != 0 {
		t.Fatalf("in flight %d after every packet was acknowledged", c.Inflight())
	}
}

// bbr.cc's initial window and STARTUP rates: the window starts at 32 × 1460 B and, before full
// bandwidth, grows by every byte acknowledged while the total acknowledged is under the initial
// window; PacingRate() before CalculatePacingRate ran is kHighGain × 32 × 1460 B / 100 ms (RttStats'
// initial RTT); the first feedback with a bandwidth sample sets it to 32 × 1460 B / rtt_stats' min
// RTT (feedback time − the report's last packet's send time); CreateRateUpdate caps the pacing rate
// by max_data_rate and gives the encoder min(estimate, pacing rate) — default_bandwidth_ before one.
func TestStartupWindowAndPacingRate(t *testing.T) {
	cfg := DefaultConfig()
	c, _ := New(cfg)
	if c.CongestionWindow() != 46_720 {
		t.Fatalf("initial window %d, want 32 × 1460 = 46 720", c.CongestionWindow())
	}
	if want := 2.885 * 46_720 * 8 / 0.1; !near(c.PacingRate(), want) {
		t.Fatalf("initial pacing rate %g, want %g", c.PacingRate(), want)
	}
	if c.TargetRate() != 300e3 {
		t.Fatalf("initial target %g, want default_bandwidth_ 300 kbit/s", c.TargetRate())
	}
	capped := cfg
	capped.MaxRate = 1.3e6
	c2, _ := New(capped)
	if c2.PacingRate() != 1.3e6 || c2.PadRate() != 1.3e6 {
		t.Fatalf("pacing %g pad %g with max_data_rate 1.3 Mbit/s, want both capped at it", c2.PacingRate(), c2.PadRate())
	}
	var acks []Ack
	for s := int64(0); s < 10; s++ {
		c.OnPacketSent(time.Duration(s)*ms, s, 1000)
		acks = append(acks, Ack{Seq: s})
	}
	c.OnFeedback(50*ms, acks) // no bandwidth sample yet: CalculatePacingRate leaves the rate unset
	if want := 2.885 * 46_720 * 8 / 0.1; !near(c.PacingRate(), want) || c.TargetRate() != 300e3 {
		t.Fatalf("after a report without samples: pacing %g target %g, want %g and 300 kbit/s", c.PacingRate(),
			c.TargetRate(), want)
	}
	if c.CongestionWindow() != 46_720+10_000 {
		t.Fatalf("window %d, want 46 720 + 10 000 acknowledged", c.CongestionWindow())
	}
	acks = acks[:0]
	for s := int64(10); s < 20; s++ {
		c.OnPacketSent(51*ms+time.Duration(s-10)*ms, s, 1000)
		acks = append(acks, Ack{Seq: s})
	}
	c.OnFeedback(100*ms, acks)
	// rtt_stats' min: 50 − 9 = 41 ms, then 100 − 60 = 40 ms
	if want := 46_720 * 8 / 0.040; !near(c.PacingRate(), want) {
		t.Fatalf("pacing rate after the first sample %g, want initial window / 40 ms = %g", c.PacingRate(), want)
	}
	if c.CongestionWindow() != 46_720+20_000 {
		t.Fatalf("window %d, want 46 720 + 20 000 acknowledged", c.CongestionWindow())
	}
	if !near(c.TargetRate(), 80_000/0.051) {
		t.Fatalf("target %g, want the estimate %g (below the pacing rate)", c.TargetRate(), 80_000/0.051)
	}
	// The next feedback's samples are lower: STARTUP never lowers the pacing rate.
	before := c.PacingRate()
	for s := int64(20); s < 22; s++ {
		c.OnPacketSent(110*ms+time.Duration(s)*ms, s, 1000)
	}
	c.OnFeedback(300*ms, []Ack{{Seq: 20}, {Seq: 21}})
	if c.PacingRate() != before {
		t.Fatalf("pacing rate moved from %g to %g in STARTUP", before, c.PacingRate())
	}
}

// bbr.cc UpdateGainCyclePhase, estimate 8 Mbit/s and min-RTT 50 ms (BDP 50 000 B): the 1.25 phase
// does not end after a min-RTT while the prior in-flight is below 1.25 × BDP (62 500 B) and no loss
// came; it ends once it reached it, or on a loss; the 0.75 phase ends as soon as the prior
// in-flight is at most the BDP, even before a min-RTT.
func TestGainCycleWaitsForInflight(t *testing.T) {
	c, _ := New(DefaultConfig())
	c.filter.Reset(Sample{Rate: 8e6})
	c.minRTT = 50 * ms
	c.mode, c.cycleOffset, c.pacingGain, c.lastCycleStart = ProbeBW, 0, 1.25, 0
	c.updateGainCyclePhase(100*ms, 40_000, false)
	if c.cycleOffset != 0 {
		t.Fatalf("1.25 phase left with prior in-flight 40 000 < 62 500 and no loss")
	}
	c.updateGainCyclePhase(110*ms, 40_000, true)
	if c.cycleOffset != 1 || c.pacingGain != 0.75 {
		t.Fatalf("a loss did not end the 1.25 phase: offset %d gain %g", c.cycleOffset, c.pacingGain)
	}
	c.updateGainCyclePhase(120*ms, 60_000, false)
	if c.cycleOffset != 1 {
		t.Fatalf("0.75 phase left after 10 ms with in-flight 60 000 above the BDP")
	}
	c.updateGainCyclePhase(125*ms, 50_000, false)
	if c.cycleOffset != 2 || c.pacingGain != 1 {
		t.Fatalf("0.75 phase kept with in-flight at the BDP: offset %d gain %g", c.cycleOffset, c.pacingGain)
	}
	c.cycleOffset, c.pacingGain, c.lastCycleStart = 0, 1.25, 0
	c.updateGainCyclePhase(60*ms, 62_500, false)
	if c.cycleOffset != 1 {
		t.Fatalf("1.25 phase kept after a min-RTT with in-flight at 1.25 × BDP")
	}
}

// bbr.cc EnterProbeBandwidthMode draws the first phase from webrtc::Random(10).Rand(6), shifted
// past 1. The sequence of draws, computed by hand from xorshift64* (state ^= state >> 12,
// ^= state << 25, ^= state >> 27, output × 2685821657736338717, low 32 bits × 7 >> 32), is
// 6, 2, 5, 2, 7, 5, 3, 3 — the phases libwebrtc starts PROBE_BW in, entry after entry.
func TestProbeBWPhaseFromWebRTCRandom(t *testing.T) {
	c, _ := New(DefaultConfig())
	for i, want := range []int{6, 2, 5, 2, 7, 5, 3, 3} {
		c.enterProbeBW(0)
		if c.cycleOffset != want || c.pacingGain != gainOf(want) {
			t.Fatalf("entry %d: phase %d gain %g, want phase %d", i, c.cycleOffset, c.pacingGain, want)
		}
	}
}

// bbr.cc CheckIfFullBandwidthReached with exit_startup_on_loss (2018 default on), at a round start
// whose estimate (1.1 Mbit/s) is below 1.25 × the last round's (1 Mbit/s): outside recovery that is
// the first of three such rounds; in recovery it ends STARTUP at once, and MaybeExitStartupOrDrain
// moves to DRAIN — and on to PROBE_BW on the same feedback if in-flight is already at most the BDP.
// An app-limited last sample skips the check altogether.
func TestStartupExitsOnLossInRecovery(t *testing.T) {
	for _, tc := range []struct {
		recovery   RecoveryState
		appLimited bool
		inflight   int64
		wantFull   bool
		wantRounds int
		wantMode   Mode
	}{
		{NotInRecovery, false, 100_000, false, 1, Startup},
		{Conservation, false, 100_000, true, 1, Drain},
		{Conservation, false, 1_000, true, 1, ProbeBW},
		{Conservation, true, 100_000, false, 0, Startup},
	} {
		c, _ := New(DefaultConfig())
		c.filter.Reset(Sample{Rate: 1.1e6})
		c.minRTT, c.bwAtLastRound, c.recovery, c.lastSampleAppLimit, c.inflight = 40*ms, 1e6, tc.recovery, tc.appLimited, tc.inflight
		c.checkIfFullBandwidthReached()
		c.maybeExitStartupOrDrain(time.Second)
		if c.atFullBW != tc.wantFull || c.roundsWithoutGain != tc.wantRounds || c.Mode() != tc.wantMode {
			t.Errorf("%+v: full %v rounds without gain %d mode %v", tc, c.atFullBW, c.roundsWithoutGain, c.Mode())
		}
	}
}

// bbr.cc CreateRateUpdate: encoder_rate_gain_in_probe_rtt is 1, so in PROBE_RTT the target is the
// estimate (not limited by the 4-packet window per min-RTT); only min(estimate, pacing rate) and the
// constraints apply.
func TestTargetInProbeRTTIsTheEstimate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRate = 5e6
	c, _ := New(cfg)
	c.filter.Reset(Sample{Rate: 2e6})
	c.minRTT = 100 * ms
	c.mode, c.pacingGain, c.pacingRate, c.atFullBW = ProbeRTT, 1, 2e6, true
	if c.TargetRate() != 2e6 {
		t.Fatalf("PROBE_RTT target %g, want the estimate 2e6 (window-per-RTT would be %g)", c.TargetRate(),
			float64(c.CongestionWindow())*8/0.1)
	}
}

// bbr.cc MaybeEnterOrExitProbeRtt: the 200 ms are counted from the first feedback with in-flight
// below the PROBE_RTT window + one kMaxPacketSize (4 × 1460 + 1452 = 7292 B); leaving needs those
// 200 ms and a round start after that; the exit goes to PROBE_BW at full bandwidth, else STARTUP,
// and restamps min-RTT.
func TestProbeRTTExitSchedule(t *testing.T) {
	c, _ := New(DefaultConfig())
	c.filter.Reset(Sample{Rate: 1e6})
	c.minRTT, c.minRTTStamp, c.atFullBW = 40*ms, 0, true
	c.mode, c.pacingGain = ProbeRTT, 1
	c.inflight = 8000
	c.maybeEnterOrExitProbeRTT(10*time.Second, false, false)
	if c.exitProbeRTTSet {
		t.Fatal("exit scheduled with 8000 B in flight (≥ 7292)")
	}
	c.inflight = 7291
	c.maybeEnterOrExitProbeRTT(10*time.Second+20*ms, false, false)
	if !c.exitProbeRTTSet || c.exitProbeRTTAt != 10*time.Second+220*ms {
		t.Fatalf("exit at %v (set %v), want 10.22 s", c.exitProbeRTTAt, c.exitProbeRTTSet)
	}
	c.maybeEnterOrExitProbeRTT(10*time.Second+300*ms, false, false)
	if c.Mode() != ProbeRTT {
		t.Fatal("left PROBE_RTT without a round start")
	}
	c.maybeEnterOrExitProbeRTT(10*time.Second+320*ms, true, false)
	if c.Mode() != ProbeBW || c.minRTTStamp != 10*time.Second+320*ms {
		t.Fatalf("mode %v min-RTT stamp %v, want PROBE_BW restamped at 10.32 s", c.Mode(), c.minRTTStamp)
	}
	if !c.s.isAppLimited {
		t.Fatal("PROBE_RTT did not mark the sampler app-limited (sampler_->OnAppLimited())")
	}
}

// bbr.cc OnTransportPacketsFeedback updates the recovery state only when the report acknowledges
// something: a report of losses alone leaves NOT_IN_RECOVERY (and counts nothing acknowledged).
func TestLossOnlyReportDoesNotEnterRecovery(t *testing.T) {
	c, _ := New(DefaultConfig())
	sendRange(c, 0, 9, 0)
	c.OnFeedback(50*ms, acks(0, 2, 0, 1, 2))
	if c.Recovery() != NotInRecovery || c.Inflight() != 7000 {
		t.Fatalf("after a loss-only report: %v, in flight %d (want NOT_IN_RECOVERY, 7000)", c.Recovery(), c.Inflight())
	}
	c.OnFeedback(60*ms, acks(3, 4, 4))
	if c.Recovery() != Conservation {
		t.Fatalf("loss with an ack: %v, want CONSERVATION", c.Recovery())
	}
}
