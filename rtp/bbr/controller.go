package bbr

import (
	"fmt"
	"math"
	"time"
)

// Mode is BBR's top-level state.
type Mode int

const (
	Startup Mode = iota
	Drain
	ProbeBW
	ProbeRTT
)

func (m Mode) String() string {
	return [...]string{"STARTUP", "DRAIN", "PROBE_BW", "PROBE_RTT"}[m]
}

// RecoveryState is WebRTC BBR's loss-recovery sub-state.
type RecoveryState int

const (
	NotInRecovery RecoveryState = iota
	Conservation
	MediumGrowth
	Growth
)

func (r RecoveryState) String() string {
	return [...]string{"NOT_IN_RECOVERY", "CONSERVATION", "MEDIUM_GROWTH", "GROWTH"}[r]
}

// The 2018 source this package follows, function by function (rtp/README.md, "Audit against
// libwebrtc 2018"): github.com/HackWebRTC/webrtc (a mirror of libwebrtc) at commit 0040b66a,
// modules/congestion_controller/bbr/bbr_network_controller.cc (cited below as "bbr.cc"),
// bandwidth_sampler.cc (jbg/libwebrtc 9de73a3a, "sampler.cc"), rtt_stats.cc, rtc_base/random.cc.

// Constants of bbr.cc's anonymous namespace and DefaultConfig().
const (
	highGain            = 2.885 // kHighGain, 2/ln(2)
	drainGain           = 1 / highGain
	cwndGainProbeBW     = 2.0  // kProbeBWCongestionWindowGain
	startupGrowth       = 1.25 // kStartupGrowthTarget
	startupRounds       = 3    // config num_startup_rtts
	probeRTTTime        = 200 * time.Millisecond
	probeBWGainOffset   = 0.25 // config probe_bw_pacing_gain_offset
	gainCycleLength     = 8
	bandwidthWindow     = gainCycleLength + 2 // kBandwidthWindowSize, round trips
	initialRTT          = 100 * time.Millisecond
	tcpMSS              = 1460 // kDefaultTCPMSS: bbr.cc counts its windows in it, whatever the packet size
	maxPacketSize       = 1452 // kMaxPacketSize: PROBE_RTT's one-packet allowance
	initialCwnd         = 32 * tcpMSS
	minCwnd             = 4 * tcpMSS
	maxCwnd             = 2000 * tcpMSS
	gainCycleRandSeed   = 10 // bbr.cc constructs random_(10)
	probeRTTv2CwndGain  = 0.5
	encoderRateGain     = 1.0  // DefaultConfig l. 86-87: encoder_rate_gain, encoder_rate_gain_in_probe_rtt
	pacerTimeWindowGain = 0.25 // CreateRateUpdate: "a small time window ensures an even pacing rate" (l. 268-269)
)

// Config holds the parameters and the study's variants.
type Config struct {
	MSS             int     // bytes per full packet the sender uses (checked; the windows count in tcpMSS as bbr.cc)
	InitialRate     float64 // bit/s: default_bandwidth_, the estimate before the first sample
	MinRate         float64 // bit/s: constraints' min_data_rate (target and pacing rate floor)
	MaxRate         float64 // bit/s: constraints' max_data_rate (target and pacing rate cap; 0 = none)
	Filter          FilterKind
	ThirdBest       bool          // variant: the third-highest sample is the estimate
	NoRecovery      bool          // variant: recovery state disabled
	ProbeRTTv2      bool          // variant: BBRv2-like RTT probing (cwnd = BDP/2, min-RTT expiry 5 s)
	StartupRecovery RecoveryState // initial_conservation_in_startup (2018 default CONSERVATION)
}

// DefaultConfig is WebRTC's 2018 behaviour.
func DefaultConfig() Config {
	return Config{MSS: 1200, InitialRate: 300e3, MinRate: 30e3, StartupRecovery: Conservation}
}

// Ack is one packet's fate as reported by transport-wide feedback.
type Ack struct {
	Seq     int64         // unwrapped transport-wide sequence number
	Lost    bool          // reported not received
	Arrival time.Duration // arrival at the receiver; 2018's sampler does not use it (it samples at the feedback's receive time)
}

// sentPacket is what the sender knows of a packet in flight: its size (the transport feedback
// adapter's in-flight accounting) and, while the sampler tracks it, sampler.cc's
// ConnectionStateOnSentPacket.
type sentPacket struct {
	size      int64
	sampled   bool // still in the sampler's map (RemoveObsoletePackets drops older ones)
	sent      time.Duration
	totalSent int64 // total_data_sent including this packet
	// the sampler's state when this packet was sent
	totalSentAtLastAcked int64
	lastAckedSentTime    time.Duration
	lastAckedAckTime     time.Duration
	hasLastAcked         bool // both of the above are set
	totalAckedAtSend     int64
	appLimited           bool
}

// sampler is sampler.cc's BandwidthSampler.
type sampler struct {
	totalSent, totalAcked, totalSentAtLastAcked int64
	lastAckedSentTime, lastAckedAckTime         time.Duration
	hasLastAcked                                bool
	lastSent                                    int64
	isAppLimited                                bool
	endOfAppLimited                             int64
}

// bandwidthSample is sampler.cc's BandwidthSample (zero value: no sample, not app-limited).
type bandwidthSample struct {
	bandwidth  float64 // bit/s
	rtt        time.Duration
	appLimited bool
}

// Controller is one sender's BBR state. Not safe for concurrent use: the caller serialises.
type Controller struct {
	cfg Config

	mode           Mode
	pacingGain     float64
	cwndGain       float64
	filter         *Filter
	maxAckHeight   *Filter // bytes, in the Rate field
	round          int64
	lastSentSeq    int64
	roundEnd       int64 // current_round_trip_end_
	minRTT         time.Duration
	minRTTStamp    time.Duration
	lastRTT        time.Duration
	statsMinRTT    time.Duration // rtt_stats_.min_rtt(): from feedback time − the report's last packet's send time
	cwnd           int64
	pacingRate     float64 // pacing_rate_ (0 until CalculatePacingRate sets it)
	cycleOffset    int
	lastCycleStart time.Duration
	rng            uint64 // webrtc::Random's state

	atFullBW           bool
	roundsWithoutGain  int
	bwAtLastRound      float64
	exitingQuiescence  bool
	exitProbeRTTAt     time.Duration
	exitProbeRTTSet    bool
	probeRTTRoundGone  bool
	lastSampleAppLimit bool

	recovery        RecoveryState
	endRecoveryAt   int64
	endRecoverySet  bool
	recoveryWnd     int64
	aggEpochStart   time.Duration
	aggEpochStarted bool
	aggEpochBytes   int64

	s        sampler
	packets  map[int64]*sentPacket
	inflight int64 // data_in_flight: sent, neither acknowledged nor reported lost

	lastSample float64
}

// New returns a controller in STARTUP (bbr.cc's constructor and Reset()).
func New(cfg Config) (*Controller, error) {
	if cfg.MSS <= 0 || cfg.MSS > 1500 {
		return nil, fmt.Errorf("webrtc-bbr: mss %d outside 1..1500", cfg.MSS)
	}
	if cfg.InitialRate <= 0 {
		return nil, fmt.Errorf("webrtc-bbr: initial rate must be > 0")
	}
	c := &Controller{cfg: cfg, filter: NewFilter(cfg.Filter, bandwidthWindow), maxAckHeight: NewFilter(Replacing, bandwidthWindow),
		packets: map[int64]*sentPacket{}, lastSentSeq: -1, roundEnd: -1, cwnd: initialCwnd, recoveryWnd: maxCwnd,
		rng: gainCycleRandSeed}
	c.enterStartup()
	return c, nil
}

// MinRTTExpiry is kMinRttExpirySeconds (10 s), 5 s in the BBRv2-like variant.
func (c *Controller) MinRTTExpiry() time.Duration {
	if c.cfg.ProbeRTTv2 {
		return 5 * time.Second
	}
	return 10 * time.Second
}

// BandwidthEstimate is max_bandwidth_.GetBest() (or the third best in that variant), bit/s; 0 before any sample.
func (c *Controller) BandwidthEstimate() float64 {
	if c.cfg.ThirdBest {
		return c.filter.ThirdBest()
	}
	return c.filter.Best()
}

// Config is what the controller was built with (its variants included).
func (c *Controller) Config() Config { return c.cfg }

// MinRTT is the min-RTT estimate (0 before any sample).
func (c *Controller) MinRTT() time.Duration { return c.minRTT }

// LatestRTT is the last RTT sample (last_rtt_).
func (c *Controller) LatestRTT() time.Duration { return c.lastRTT }

// Mode and Recovery expose the states.
func (c *Controller) Mode() Mode              { return c.mode }
func (c *Controller) Recovery() RecoveryState { return c.recovery }
func (c *Controller) Round() int64            { return c.round }
func (c *Controller) Inflight() int64         { return c.inflight }
func (c *Controller) Filter() *Filter         { return c.filter }
func (c *Controller) LastSample() float64     { return c.lastSample }
func (c *Controller) AtFullBandwidth() bool   { return c.atFullBW }
func (c *Controller) PacingGain() float64     { return c.pacingGain }
func (c *Controller) CycleOffset() int        { return c.cycleOffset }

// RecoveryWindow is recovery_window_ while in recovery, 0 otherwise (for logs and tests).
func (c *Controller) RecoveryWindow() int64 {
	if c.recovery == NotInRecovery {
		return 0
	}
	return c.recoveryWnd
}

// getMinRTT is bbr.cc's GetMinRtt: the estimate, or rtt_stats' initial 100 ms before one.
func (c *Controller) getMinRTT() time.Duration {
	if c.minRTT != 0 {
		return c.minRTT
	}
	return initialRTT
}

// BDP in bytes: GetMinRtt() × BandwidthEstimate() (0 before a bandwidth sample), a TimeDelta ×
// DataRate, whole bytes rounded half up (bbr.cc l. 490; data_rate.h l. 170-173). Ours truncated.
func (c *Controller) BDP() int64 {
	return rateTimesTime(c.BandwidthEstimate(), c.getMinRTT())
}

// targetCwnd is bbr.cc's GetTargetCongestionWindow(gain).
func (c *Controller) targetCwnd(gain float64) int64 {
	// bbr.cc l. 491, 495: gain × a DataSize, rounded to whole bytes (data_size.h l. 116-121).
	w := sizeTimesGain(c.BDP(), gain)
	if w == 0 {
		w = sizeTimesGain(initialCwnd, gain)
	}
	return max(w, minCwnd)
}

// probeRTTCwnd is bbr.cc's ProbeRttCongestionWindow (4 × 1460 B; the variant: BDP/2).
func (c *Controller) probeRTTCwnd() int64 {
	if c.cfg.ProbeRTTv2 {
		return c.targetCwnd(probeRTTv2CwndGain)
	}
	return minCwnd
}

// CongestionWindow is bbr.cc's GetCongestionWindow.
func (c *Controller) CongestionWindow() int64 {
	if c.mode == ProbeRTT {
		return c.probeRTTCwnd()
	}
	if c.recovery != NotInRecovery && !c.cfg.NoRecovery {
		return min(c.cwnd, c.recoveryWnd)
	}
	return c.cwnd
}

// MaxAckHeight is the largest ack-aggregation excess (bytes) of the last bandwidthWindow rounds.
func (c *Controller) MaxAckHeight() int64 { return int64(c.maxAckHeight.Best()) }

// rawPacingRate is bbr.cc's PacingRate(): before CalculatePacingRate set one, kHighGain × the
// initial window per GetMinRtt().
func (c *Controller) rawPacingRate() float64 {
	if c.pacingRate == 0 {
		// bbr.cc l. 343: kHighGain × initial_congestion_window_ is a DataSize rounded to whole bytes
		// (134 787 B, not 134 787.2), then DataSize / TimeDelta truncates to whole bit/s.
		return sizeOverTime(sizeTimesGain(initialCwnd, highGain), c.getMinRTT())
	}
	return c.pacingRate
}

// clamp applies the constraints as CreateRateUpdate does.
func (c *Controller) clamp(r float64) float64 {
	if c.cfg.MaxRate > 0 {
		r = min(r, c.cfg.MaxRate)
	}
	if c.cfg.MinRate > 0 {
		r = max(r, c.cfg.MinRate)
	}
	return r
}

// PacingRate in bit/s as CreateRateUpdate hands it to the pacer (data_window / time_window),
// within the constraints.
func (c *Controller) PacingRate() float64 { return c.clamp(c.rawPacingRate()) }

// TargetRate is CreateRateUpdate's target_rate (bit/s), what the encoder is told: the estimate
// (default_bandwidth_ before one) × encoder_rate_gain 1 (also in PROBE_RTT), at most the pacing
// rate, within the constraints.
func (c *Controller) TargetRate() float64 {
	bw := c.BandwidthEstimate()
	if bw == 0 {
		bw = c.cfg.InitialRate
	}
	// bbr.cc l. 231-234: bandwidth × encoder_rate_gain (1.0, in PROBE_RTT too) is a DataRate ×
	// double, rounded to whole bit/s — the estimate itself, already whole.
	return c.clamp(min(rateTimesGain(bw, encoderRateGain), c.rawPacingRate()))
}

// IsProbingForMoreBandwidth is bbr.cc's rule for when its pacer may pad.
func (c *Controller) IsProbingForMoreBandwidth() bool {
	return (c.mode == ProbeBW && c.pacingGain > 1) || c.mode == Startup
}

// PadRate (bit/s): CreateRateUpdate sets the pad window to the data window while probing for
// more bandwidth and to zero otherwise, i.e. the pacing rate while probing, else 0.
func (c *Controller) PadRate() float64 {
	if c.IsProbingForMoreBandwidth() {
		return c.PacingRate()
	}
	return 0
}

// PacerRates are the pacing and padding rates (bit/s) the 2018 pacer is set to, after the
// PacerConfig round trip: CreateRateUpdate sends time_window = GetMinRtt() × 0.25 (whole µs) and
// data_window = time_window × pacing rate (whole bytes, rounded half up), pad_window = data_window
// while probing, else 0 (bbr.cc l. 267-276); PacerController::OnPacerConfig turns them back into
// data_window / time_window and pad_window / time_window, truncated to whole bit/s
// (pacer_controller.cc 665174fd l. 47-49), and the paced sender keeps bps / 1000 (SetPacingRates).
// So the pacer's rate moves in steps of 8 bit / time_window (1 600 bit/s at a 20 ms min RTT):
// 501 000 bit/s at 20 ms becomes 313 B / 5 ms = 500 800 bit/s, 500 kbit/s in the pacer, not 501.
func (c *Controller) PacerRates() (pacingBps, paddingBps int64) {
	timeWindow := timeTimesGain(c.getMinRTT(), pacerTimeWindowGain)
	dataWindow := rateTimesTime(c.PacingRate(), timeWindow)
	pacingBps = int64(sizeOverTime(dataWindow, timeWindow))
	if c.IsProbingForMoreBandwidth() {
		paddingBps = pacingBps // pad_window = data_window (l. 272-273)
	}
	return pacingBps, paddingBps
}

// WindowRoom is how many bytes the congestion window admits beyond what is in flight (≥ 0).
func (c *Controller) WindowRoom() int64 { return max(0, c.CongestionWindow()-c.inflight) }

// CanSend is bbr.cc's CanSend (and the paced sender's !Congested()): in flight below the window.
func (c *Controller) CanSend() bool { return c.inflight < c.CongestionWindow() }

// OnPacketSent is bbr.cc's OnSentPacket. Its data_in_flight is libwebrtc's, not QUIC's: the 2018
// SendSideCongestionController::OnSentPacket marks the packet sent in the feedback adapter first and
// then reads GetOutstandingBytes() (send_time_history.cc: every sent packet from the latest acked
// one on), so this packet is already counted — data_in_flight is never zero here, the sampler's
// A_0 reset and exiting_quiescence_ never fire, and the first samples come from packets sent after
// the first acknowledgement.
func (c *Controller) OnPacketSent(now time.Duration, seq int64, size int) {
	c.lastSentSeq = seq
	c.inflight += int64(size)
	if c.inflight == 0 && c.s.isAppLimited {
		c.exitingQuiescence = true
	}
	if !c.aggEpochStarted {
		c.aggEpochStart, c.aggEpochStarted = now, true
	}
	c.samplerOnSent(now, seq, int64(size), c.inflight)
}

// samplerOnSent is sampler.cc's OnPacketSent.
func (c *Controller) samplerOnSent(now time.Duration, seq, size, inflight int64) {
	s := &c.s
	s.lastSent = seq
	s.totalSent += size
	if inflight == 0 { // the A_0 point: a new transmission opens now
		s.lastAckedAckTime, s.totalSentAtLastAcked, s.lastAckedSentTime, s.hasLastAcked = now, s.totalSent, now, true
	}
	c.packets[seq] = &sentPacket{size: size, sampled: true, sent: now, totalSent: s.totalSent,
		totalSentAtLastAcked: s.totalSentAtLastAcked, lastAckedSentTime: s.lastAckedSentTime,
		lastAckedAckTime: s.lastAckedAckTime, hasLastAcked: s.hasLastAcked, totalAckedAtSend: s.totalAcked,
		appLimited: s.isAppLimited}
}

// samplerOnAcked is sampler.cc's OnPacketAcknowledged(Inner); ackTime is the feedback's receive time.
func (c *Controller) samplerOnAcked(ackTime time.Duration, seq int64, p *sentPacket) bandwidthSample {
	if !p.sampled {
		return bandwidthSample{}
	}
	p.sampled = false
	s := &c.s
	s.totalAcked += p.size
	s.totalSentAtLastAcked, s.lastAckedSentTime, s.lastAckedAckTime, s.hasLastAcked = p.totalSent, p.sent, ackTime, true
	if s.isAppLimited && seq > s.endOfAppLimited {
		s.isAppLimited = false
	}
	if !p.hasLastAcked {
		return bandwidthSample{}
	}
	// Times compared and divided in whole µs and rates in whole bit/s, as the 2018 code's Timestamp /
	// TimeDelta (µs) and DataRate (int64 bit/s) do (sampler.cc l. 114-135).
	sendRate := math.Inf(1)
	if sendUs := p.sent.Microseconds() - p.lastAckedSentTime.Microseconds(); sendUs > 0 {
		sendRate = dataRate(p.totalSent-p.totalSentAtLastAcked, sendUs)
	}
	ackUs := ackTime.Microseconds() - p.lastAckedAckTime.Microseconds()
	if ackUs <= 0 {
		return bandwidthSample{}
	}
	ackRate := dataRate(s.totalAcked-p.totalAckedAtSend, ackUs)
	return bandwidthSample{bandwidth: min(sendRate, ackRate), rtt: ackTime - p.sent, appLimited: p.appLimited}
}

// dataRate is api/units/data_rate.h's DataSize / TimeDelta (2018, l. 164-166): bytes × 8 000 000 /
// µs in int64, truncated to whole bit/s — the type of every bandwidth sample and of the filter's
// values, so equal samples compare equal as the 2018 filter's ">=" sees them.
func dataRate(bytes, us int64) float64 { return float64(bytes * 8_000_000 / us) }

// samplerOnAppLimited is sampler.cc's OnAppLimited.
func (c *Controller) samplerOnAppLimited() {
	c.s.isAppLimited, c.s.endOfAppLimited = true, c.s.lastSent
}

// OnFeedback is bbr.cc's OnTransportPacketsFeedback for one report received at `now` (acks in
// sequence order; unknown or already reported packets are ignored, as the feedback adapter does).
func (c *Controller) OnFeedback(now time.Duration, acks []Ack) {
	var lost, acked []int64
	var lastWithInfo *sentPacket
	priorInFlight := c.inflight
	for _, a := range acks {
		p, ok := c.packets[a.Seq]
		if !ok {
			continue
		}
		lastWithInfo = p
		if a.Lost {
			lost = append(lost, a.Seq)
		} else {
			acked = append(acked, a.Seq)
		}
	}
	if len(lost) == 0 && len(acked) == 0 {
		return
	}
	// rtt_stats_.UpdateRtt(feedback time − the last reported packet's send time): its min feeds
	// the STARTUP pacing rate before the first bandwidth sample.
	if d := now - lastWithInfo.sent; d > 0 && (c.statsMinRTT == 0 || d < c.statsMinRTT) {
		c.statsMinRTT = d
	}
	var dataLost int64
	for _, seq := range lost { // DiscardLostPackets; the adapter's in-flight drops them
		p := c.packets[seq]
		dataLost += p.size
		c.inflight -= p.size
		delete(c.packets, seq)
	}
	ackedBefore := c.s.totalAcked
	isRoundStart, minRTTExpired := false, false
	if len(acked) > 0 {
		lastAcked := acked[len(acked)-1]
		isRoundStart = c.updateRoundTripCounter(lastAcked)
		minRTTExpired = c.updateBandwidthAndMinRTT(now, acked)
		if !c.cfg.NoRecovery {
			c.updateRecoveryState(lastAcked, len(lost) > 0, isRoundStart)
		}
		c.updateAckAggregation(now, c.s.totalAcked-ackedBefore)
	}
	if c.mode == ProbeBW {
		c.updateGainCyclePhase(now, priorInFlight, len(lost) > 0)
	}
	if isRoundStart && !c.atFullBW {
		c.checkIfFullBandwidthReached()
	}
	c.maybeExitStartupOrDrain(now)
	c.maybeEnterOrExitProbeRTT(now, isRoundStart, minRTTExpired)
	dataAcked := c.s.totalAcked - ackedBefore
	c.calculatePacingRate()
	c.calculateCongestionWindow(dataAcked)
	if !c.cfg.NoRecovery {
		c.calculateRecoveryWindow(dataAcked, dataLost)
	}
	if len(acked) > 0 { // RemoveObsoletePackets(last acked): older unreported packets leave the sampler
		last := acked[len(acked)-1]
		for seq, p := range c.packets {
			if seq < last {
				p.sampled = false
			}
		}
	}
}

// updateRoundTripCounter is bbr.cc's UpdateRoundTripCounter.
func (c *Controller) updateRoundTripCounter(lastAcked int64) bool {
	if lastAcked > c.roundEnd {
		c.round++
		c.roundEnd = c.lastSentSeq
		return true
	}
	return false
}

// updateBandwidthAndMinRTT is bbr.cc's UpdateBandwidthAndMinRtt; true if min-RTT expired.
// (ShouldExtendMinRttExpiry is false with the 2018 defaults: probe_rtt_skipped_if_similar_rtt and
// probe_rtt_disabled_if_app_limited are both off.)
func (c *Controller) updateBandwidthAndMinRTT(now time.Duration, acked []int64) bool {
	sampleRTT := time.Duration(-1)
	for _, seq := range acked {
		p := c.packets[seq]
		c.inflight -= p.size
		b := c.samplerOnAcked(now, seq, p)
		delete(c.packets, seq)
		c.lastSampleAppLimit = b.appLimited
		if b.rtt != 0 && (sampleRTT < 0 || b.rtt < sampleRTT) {
			sampleRTT = b.rtt
		}
		if b.bandwidth > 0 {
			c.lastSample = b.bandwidth
		}
		if !b.appLimited || b.bandwidth > c.BandwidthEstimate() {
			c.filter.Update(Sample{Rate: b.bandwidth, Round: c.round})
		}
	}
	if sampleRTT < 0 {
		return false
	}
	c.lastRTT = sampleRTT
	expired := c.minRTT != 0 && now > c.minRTTStamp+c.MinRTTExpiry()
	if expired || sampleRTT < c.minRTT || c.minRTT == 0 {
		c.minRTT, c.minRTTStamp = sampleRTT, now
	}
	return expired
}

// updateGainCyclePhase is bbr.cc's UpdateGainCyclePhase (fully_drain_queue off).
func (c *Controller) updateGainCyclePhase(now time.Duration, priorInFlight int64, hasLosses bool) {
	advance := now-c.lastCycleStart > c.getMinRTT()
	if c.pacingGain > 1 && !hasLosses && priorInFlight < c.targetCwnd(c.pacingGain) {
		advance = false // a probing phase lasts until in-flight reached gain × BDP (or a loss)
	}
	if c.pacingGain < 1 && priorInFlight <= c.targetCwnd(1) {
		advance = true // the draining phase ends as soon as in-flight is down to the BDP
	}
	if advance {
		c.cycleOffset = (c.cycleOffset + 1) % gainCycleLength
		c.lastCycleStart = now
		c.pacingGain = gainOf(c.cycleOffset)
	}
}

// gainOf is bbr.cc's GetPacingGain(round_offset).
func gainOf(offset int) float64 {
	switch offset {
	case 0:
		return 1 + probeBWGainOffset
	case 1:
		return 1 - probeBWGainOffset
	}
	return 1
}

// checkIfFullBandwidthReached is bbr.cc's CheckIfFullBandwidthReached (exit_startup_on_loss on).
func (c *Controller) checkIfFullBandwidthReached() {
	if c.lastSampleAppLimit {
		return
	}
	if c.BandwidthEstimate() >= c.bwAtLastRound*startupGrowth {
		c.bwAtLastRound, c.roundsWithoutGain = c.BandwidthEstimate(), 0
		return
	}
	c.roundsWithoutGain++
	if c.roundsWithoutGain >= startupRounds || c.recovery != NotInRecovery {
		c.atFullBW = true
	}
}

// maybeExitStartupOrDrain is bbr.cc's MaybeExitStartupOrDrain (exit_startup_rtt_threshold_ms 0):
// both steps may happen on one feedback.
func (c *Controller) maybeExitStartupOrDrain(now time.Duration) {
	if c.mode == Startup && c.atFullBW {
		c.mode, c.pacingGain, c.cwndGain = Drain, drainGain, highGain
	}
	if c.mode == Drain && c.inflight <= c.targetCwnd(1) {
		c.enterProbeBW(now)
	}
}

// maybeEnterOrExitProbeRTT is bbr.cc's MaybeEnterOrExitProbeRtt.
func (c *Controller) maybeEnterOrExitProbeRTT(now time.Duration, isRoundStart, minRTTExpired bool) {
	if minRTTExpired && !c.exitingQuiescence && c.mode != ProbeRTT {
		c.mode, c.pacingGain, c.exitProbeRTTSet = ProbeRTT, 1, false
	}
	if c.mode == ProbeRTT {
		c.samplerOnAppLimited()
		if !c.exitProbeRTTSet {
			if c.inflight < c.probeRTTCwnd()+maxPacketSize {
				c.exitProbeRTTAt, c.exitProbeRTTSet, c.probeRTTRoundGone = now+probeRTTTime, true, false
			}
		} else {
			if isRoundStart {
				c.probeRTTRoundGone = true
			}
			if now >= c.exitProbeRTTAt && c.probeRTTRoundGone {
				c.minRTTStamp = now
				if !c.atFullBW {
					c.enterStartup()
				} else {
					c.enterProbeBW(now)
				}
			}
		}
	}
	c.exitingQuiescence = false
}

// updateRecoveryState is bbr.cc's UpdateRecoveryState.
func (c *Controller) updateRecoveryState(lastAcked int64, hasLosses, isRoundStart bool) {
	if hasLosses {
		c.endRecoveryAt, c.endRecoverySet = c.lastSentSeq, true
	}
	switch c.recovery {
	case NotInRecovery:
		if hasLosses {
			c.recovery = Conservation
			if c.mode == Startup {
				c.recovery = c.cfg.StartupRecovery
			}
			c.recoveryWnd = 0          // set in calculateRecoveryWindow
			c.roundEnd = c.lastSentSeq // the conservation phase lasts a whole round from now
		}
	case Conservation, MediumGrowth:
		if isRoundStart {
			c.recovery = Growth
		}
		fallthrough
	case Growth:
		if !hasLosses && (!c.endRecoverySet || lastAcked > c.endRecoveryAt) {
			c.recovery = NotInRecovery
		}
	}
}

// updateAckAggregation is bbr.cc's UpdateAckAggregationBytes.
func (c *Controller) updateAckAggregation(now time.Duration, acked int64) {
	if !c.aggEpochStarted {
		return
	}
	// DataRate × TimeDelta (data_rate.h l. 170-173): (bit/s × µs + 4 000 000) / 8 000 000, whole bytes
	// rounded to nearest.
	expected := (int64(c.filter.Best())*(now.Microseconds()-c.aggEpochStart.Microseconds()) + 4_000_000) / 8_000_000
	if c.aggEpochBytes <= expected {
		c.aggEpochBytes, c.aggEpochStart = acked, now
		return
	}
	c.aggEpochBytes += acked
	c.maxAckHeight.Update(Sample{Rate: float64(c.aggEpochBytes - expected), Round: c.round})
}

// calculatePacingRate is bbr.cc's CalculatePacingRate (rate_based_recovery, slower_startup off).
func (c *Controller) calculatePacingRate() {
	bw := c.BandwidthEstimate()
	if bw == 0 {
		return
	}
	target := rateTimesGain(bw, c.pacingGain) // bbr.cc l. 808: pacing_gain_ × DataRate, whole bit/s
	if c.atFullBW {
		c.pacingRate = target
		return
	}
	if c.pacingRate == 0 && c.statsMinRTT != 0 { // pace at initial window / RTT once an RTT is known
		c.pacingRate = sizeOverTime(initialCwnd, c.statsMinRTT) // bbr.cc l. 820, truncated
		return
	}
	c.pacingRate = max(c.pacingRate, target) // never lower in STARTUP
}

// calculateCongestionWindow is bbr.cc's CalculateCongestionWindow (rtt_variance_weight 0,
// max_aggregation_bytes_multiplier 0): the window grows toward its target by bytes acked.
func (c *Controller) calculateCongestionWindow(acked int64) {
	if c.mode == ProbeRTT {
		return
	}
	target := c.targetCwnd(c.cwndGain)
	if c.atFullBW {
		target += c.MaxAckHeight()
	}
	if c.atFullBW {
		c.cwnd = min(target, c.cwnd+acked)
	} else if c.cwnd < target || c.s.totalAcked < initialCwnd {
		c.cwnd += acked // not yet out of STARTUP: never decrease
	}
	c.cwnd = min(max(c.cwnd, minCwnd), maxCwnd)
}

// calculateRecoveryWindow is bbr.cc's CalculateRecoveryWindow (bytes_in_flight: after this feedback).
func (c *Controller) calculateRecoveryWindow(acked, lost int64) {
	if c.recovery == NotInRecovery {
		return
	}
	if c.recoveryWnd == 0 {
		c.recoveryWnd = max(minCwnd, c.inflight+acked)
		return
	}
	if c.recoveryWnd >= lost {
		c.recoveryWnd -= lost
	} else {
		c.recoveryWnd = tcpMSS
	}
	switch c.recovery {
	case Growth:
		c.recoveryWnd += acked
	case MediumGrowth:
		c.recoveryWnd += acked / 2
	}
	c.recoveryWnd = max(c.recoveryWnd, c.inflight+acked, minCwnd)
}

// enterStartup is bbr.cc's EnterStartupMode.
func (c *Controller) enterStartup() {
	c.mode, c.pacingGain, c.cwndGain = Startup, highGain, highGain
}

// enterProbeBW is bbr.cc's EnterProbeBandwidthMode: a random phase out of {0, 2..7} from
// webrtc::Random seeded 10, so the sequence of phases is the one libwebrtc draws.
func (c *Controller) enterProbeBW(now time.Duration) {
	c.mode, c.cwndGain = ProbeBW, cwndGainProbeBW
	c.cycleOffset = int(c.rand(gainCycleLength - 2))
	if c.cycleOffset >= 1 {
		c.cycleOffset++
	}
	c.lastCycleStart = now
	c.pacingGain = gainOf(c.cycleOffset)
}

// rand is webrtc::Random::Rand(t): uniform on [0, t] from xorshift64* (rtc_base/random.h's NextOutput).
func (c *Controller) rand(t uint32) uint32 {
	c.rng ^= c.rng >> 12
	c.rng ^= c.rng << 25
	c.rng ^= c.rng >> 27
	x := uint32(c.rng * 2685821657736338717)
	return uint32((uint64(x) * (uint64(t) + 1)) >> 32)
}
