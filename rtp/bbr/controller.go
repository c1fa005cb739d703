package bbr

import (
	"fmt"
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

// Constants of WebRTC's bbr_network_controller.cc (2018).
const (
	highGain          = 2.885 // 2/ln(2): doubles the sending rate each round in STARTUP
	drainGain         = 1 / highGain
	cwndGainProbeBW   = 2.0
	startupGrowth     = 1.25 // STARTUP ends when the estimate grew < 25 % ...
	startupRounds     = 3    // ... for 3 rounds
	probeRTTTime      = 200 * time.Millisecond
	similarRTT        = 1.125 // no PROBE_RTT while the latest RTT is within 12.5 % of min-RTT
	bandwidthWindow   = 10    // round trips: gain cycle length (8) + 2
	minCwndPackets    = 4
	initialCwndPacket = 32
)

var gainCycle = [...]float64{1.25, 0.75, 1, 1, 1, 1, 1, 1}

// Config holds the parameters and the study's variants.
type Config struct {
	MSS             int     // bytes per full packet (RTP packet size the sender uses)
	InitialRate     float64 // bit/s used before the first sample
	MinRate         float64 // bit/s floor of the target
	MaxRate         float64 // bit/s cap of the target (0 = none)
	Filter          FilterKind
	ThirdBest       bool          // variant: the third-highest sample is the estimate
	NoRecovery      bool          // variant: recovery state disabled
	ProbeRTTv2      bool          // variant: BBRv2-like RTT probing (cwnd = BDP/2, min-RTT expiry 5 s)
	StartupRecovery RecoveryState // sub-state entered on a loss in STARTUP (WebRTC default CONSERVATION)
}

// DefaultConfig is WebRTC's 2018 behaviour.
func DefaultConfig() Config {
	return Config{MSS: 1200, InitialRate: 300e3, MinRate: 30e3, StartupRecovery: Conservation}
}

// Ack is one packet's fate as reported by transport-wide feedback.
type Ack struct {
	Seq     int64         // unwrapped transport-wide sequence number
	Lost    bool          // reported not received
	Arrival time.Duration // arrival at the receiver (its clock; only differences are used)
}

type sentPacket struct {
	sent            time.Duration
	size            int
	delivered       int64         // bytes delivered when this packet was sent
	deliveredTime   time.Duration // arrival time of the last delivered packet then (0 = none yet)
	firstSentTime   time.Duration // send time of that packet
	appLimited      bool
	totalSentAtSend int64
	acked, declared bool
}

// Controller is one sender's BBR state. Not safe for concurrent use: the caller serialises.
type Controller struct {
	cfg Config

	mode          Mode
	filter        *Filter
	minRTT        time.Duration
	minRTTStamp   time.Duration
	latestRTT     time.Duration
	probeRTTDone  time.Duration // 0 = not yet scheduled
	probeRTTRound int64
	cycleIndex    int
	cycleStart    time.Duration

	// rounds
	round        int64
	roundEndSeq  int64
	lastSentSeq  int64
	lastAckedSeq int64

	// startup exit
	fullBW       float64
	fullBWRounds int

	// recovery
	recovery      RecoveryState
	recoveryWnd   int64
	endRecoveryAt int64

	// sampler
	packets        map[int64]*sentPacket
	delivered      int64
	deliveredTime  time.Duration
	firstSentTime  time.Duration
	totalSent      int64
	inflight       int64
	appLimitedUpTo int64 // samples from packets up to this seq are app-limited

	lastSample float64

	// ack aggregation (WebRTC's UpdateAckAggregationBytes): feedback arrives in batches, so more
	// bytes are acknowledged at once than the estimate delivers in that time; the largest excess
	// over the last bandwidthWindow rounds is added to the window once at full bandwidth.
	maxAckHeight  *Filter // bytes, in the Rate field
	aggEpochStart time.Duration
	aggEpochBytes int64
	aggStarted    bool
}

// New returns a controller in STARTUP.
func New(cfg Config) (*Controller, error) {
	if cfg.MSS <= 0 || cfg.MSS > 1500 {
		return nil, fmt.Errorf("webrtc-bbr: mss %d outside 1..1500", cfg.MSS)
	}
	if cfg.InitialRate <= 0 {
		return nil, fmt.Errorf("webrtc-bbr: initial rate must be > 0")
	}
	return &Controller{cfg: cfg, filter: NewFilter(cfg.Filter, bandwidthWindow), packets: map[int64]*sentPacket{},
		maxAckHeight: NewFilter(Replacing, bandwidthWindow), lastSentSeq: -1, lastAckedSeq: -1, roundEndSeq: -1}, nil
}

// MinRTTExpiry is 10 s as in WebRTC, 5 s in the BBRv2-like variant.
func (c *Controller) MinRTTExpiry() time.Duration {
	if c.cfg.ProbeRTTv2 {
		return 5 * time.Second
	}
	return 10 * time.Second
}

// BandwidthEstimate is the filter's output (best or third best), bit/s; 0 before any sample.
func (c *Controller) BandwidthEstimate() float64 {
	if c.cfg.ThirdBest {
		return c.filter.ThirdBest()
	}
	return c.filter.Best()
}

func (c *Controller) bw() float64 {
	if b := c.BandwidthEstimate(); b > 0 {
		return b
	}
	return c.cfg.InitialRate
}

// Config is what the controller was built with (its variants included).
func (c *Controller) Config() Config { return c.cfg }

// MinRTT is the min-RTT estimate (0 before any sample).
func (c *Controller) MinRTT() time.Duration { return c.minRTT }

// LatestRTT is the last RTT sample.
func (c *Controller) LatestRTT() time.Duration { return c.latestRTT }

// Mode and Recovery expose the states.
func (c *Controller) Mode() Mode              { return c.mode }
func (c *Controller) Recovery() RecoveryState { return c.recovery }
func (c *Controller) RecoveryWindow() int64   { return c.recoveryWnd }
func (c *Controller) Round() int64            { return c.round }
func (c *Controller) Inflight() int64         { return c.inflight }
func (c *Controller) Filter() *Filter         { return c.filter }
func (c *Controller) LastSample() float64     { return c.lastSample }

func (c *Controller) pacingGain() float64 {
	switch c.mode {
	case Startup:
		return highGain
	case Drain:
		return drainGain
	case ProbeBW:
		return gainCycle[c.cycleIndex]
	}
	return 1
}

// BDP in bytes from the estimate and min-RTT (initial window before an RTT sample).
func (c *Controller) BDP() int64 {
	if c.minRTT == 0 {
		return int64(initialCwndPacket * c.cfg.MSS)
	}
	return int64(c.bw() * c.minRTT.Seconds() / 8)
}

// CongestionWindow in bytes, including the recovery window and PROBE_RTT's limit.
func (c *Controller) CongestionWindow() int64 {
	minCwnd := int64(minCwndPackets * c.cfg.MSS)
	if c.mode == ProbeRTT {
		if c.cfg.ProbeRTTv2 {
			return max(c.BDP()/2, minCwnd)
		}
		return minCwnd
	}
	gain := cwndGainProbeBW
	if c.mode == Startup || c.mode == Drain {
		gain = highGain
	}
	cwnd := int64(gain * float64(c.BDP()))
	if c.atFullBandwidth() {
		cwnd += c.MaxAckHeight()
	}
	cwnd = max(cwnd, minCwnd)
	if c.recovery != NotInRecovery && !c.cfg.NoRecovery && c.recoveryWnd > 0 {
		cwnd = min(cwnd, c.recoveryWnd)
	}
	return cwnd
}

// atFullBandwidth is WebRTC's is_at_full_bandwidth_: STARTUP ended by the growth rule (it stays so).
func (c *Controller) atFullBandwidth() bool { return c.fullBWRounds >= startupRounds }

// MaxAckHeight is the largest ack-aggregation excess (bytes) of the last bandwidthWindow rounds.
func (c *Controller) MaxAckHeight() int64 { return int64(c.maxAckHeight.Best()) }

// updateAckAggregation is WebRTC's UpdateAckAggregationBytes at feedback time `now`: an epoch
// runs while more bytes were acknowledged than the estimate would deliver since it began; its
// excess (acknowledged − expected) feeds the max filter. An epoch whose bytes the estimate covers
// ends, and the next begins with this feedback's bytes.
func (c *Controller) updateAckAggregation(now time.Duration, acked int64) {
	expected := int64(c.BandwidthEstimate() / 8 * (now - c.aggEpochStart).Seconds())
	if c.aggEpochBytes <= expected {
		c.aggEpochBytes, c.aggEpochStart = acked, now
		return
	}
	c.aggEpochBytes += acked
	c.maxAckHeight.Update(Sample{Rate: float64(c.aggEpochBytes - expected), Round: c.round})
}

// PacingRate in bit/s.
func (c *Controller) PacingRate() float64 { return c.pacingGain() * c.bw() }

// TargetRate is what the encoder is told (bit/s): the bandwidth estimate, as WebRTC's BBR with
// encoder_rate_gain 1; in PROBE_RTT no more than the window allows per min-RTT.
func (c *Controller) TargetRate() float64 {
	t := c.bw()
	if c.mode == ProbeRTT && c.minRTT > 0 {
		t = min(t, float64(c.CongestionWindow())*8/c.minRTT.Seconds())
	}
	if c.cfg.MaxRate > 0 {
		t = min(t, c.cfg.MaxRate)
	}
	return max(t, c.cfg.MinRate)
}

// IsProbingForMoreBandwidth is WebRTC's rule for when its pacer may pad (BbrNetworkController's
// IsProbingForMoreBandwidth): STARTUP, or the PROBE_BW phase whose pacing gain is above 1.
func (c *Controller) IsProbingForMoreBandwidth() bool {
	return c.mode == Startup || (c.mode == ProbeBW && c.pacingGain() > 1)
}

// PadRate (bit/s) is how fast the pacer may send padding when it has no media queued: WebRTC's
// CreateRateUpdate sets the pacer's pad window to its data window while probing for more bandwidth
// and to zero otherwise, i.e. the pacing rate while probing, else 0. Without it a sender whose
// encoder stays below the window never fills it, and its bandwidth samples measure only itself.
func (c *Controller) PadRate() float64 {
	if c.IsProbingForMoreBandwidth() {
		return c.PacingRate()
	}
	return 0
}

// WindowRoom is how many bytes the congestion window admits beyond what is in flight (≥ 0): padding
// is sent only into it, never past the window.
func (c *Controller) WindowRoom() int64 { return max(0, c.CongestionWindow()-c.inflight) }

// CanSend reports whether the window admits another packet.
func (c *Controller) CanSend() bool { return c.inflight < c.CongestionWindow() }

// OnPacketSent records a packet leaving the socket. appLimited: the pacer had nothing else queued.
func (c *Controller) OnPacketSent(now time.Duration, seq int64, size int, appLimited bool) {
	if c.inflight == 0 { // nothing in flight: the send interval starts now
		c.firstSentTime = now
	}
	c.totalSent += int64(size)
	c.packets[seq] = &sentPacket{sent: now, size: size, delivered: c.delivered, deliveredTime: c.deliveredTime,
		firstSentTime: c.firstSentTime, appLimited: appLimited || seq <= c.appLimitedUpTo, totalSentAtSend: c.totalSent}
	if appLimited {
		c.appLimitedUpTo = seq
	}
	c.inflight += int64(size)
	c.lastSentSeq = seq
	if !c.aggStarted { // WebRTC: the first aggregation epoch starts at the first send
		c.aggEpochStart, c.aggStarted = now, true
	}
}

// OnFeedback processes one feedback report received at `now` (acks in sequence order).
func (c *Controller) OnFeedback(now time.Duration, acks []Ack) {
	var bytesAcked, bytesLost int64
	var maxArrival time.Duration
	for _, a := range acks {
		if !a.Lost && a.Arrival > maxArrival {
			maxArrival = a.Arrival
		}
	}
	rttSample := time.Duration(-1)
	var newestAcked int64 = -1
	for _, a := range acks {
		p, ok := c.packets[a.Seq]
		if !ok || p.acked || p.declared {
			continue // unknown or already reported
		}
		if a.Lost {
			p.declared = true
			bytesLost += int64(p.size)
			c.inflight -= int64(p.size)
			delete(c.packets, a.Seq)
			continue
		}
		p.acked = true
		bytesAcked += int64(p.size)
		c.inflight -= int64(p.size)
		c.delivered += int64(p.size)
		c.deliveredTime = a.Arrival
		// BBR delivery-rate sample: min of the send rate and the arrival rate over the interval.
		if p.deliveredTime != 0 {
			sendElapsed := p.sent - p.firstSentTime
			ackElapsed := a.Arrival - p.deliveredTime
			interval := max(sendElapsed, ackElapsed)
			if interval > 0 {
				rate := float64(c.delivered-p.delivered) * 8 / interval.Seconds()
				c.lastSample = rate
				if !p.appLimited || rate >= c.BandwidthEstimate() {
					c.filter.Update(Sample{Rate: rate, Round: c.round})
				}
			}
		}
		c.firstSentTime = p.sent
		// RTT: feedback arrival minus send, minus the time the report waited at the receiver.
		r := now - p.sent - (maxArrival - a.Arrival)
		if r > 0 && (rttSample < 0 || r < rttSample) {
			rttSample = r
		}
		newestAcked = max(newestAcked, a.Seq)
		delete(c.packets, a.Seq)
	}
	if bytesAcked == 0 && bytesLost == 0 {
		return
	}
	if newestAcked > c.lastAckedSeq {
		c.lastAckedSeq = newestAcked
	}
	isRoundStart := false
	if c.lastAckedSeq > c.roundEndSeq {
		c.round++
		c.roundEndSeq = c.lastSentSeq
		isRoundStart = true
	}
	if rttSample > 0 {
		c.updateMinRTT(now, rttSample)
	}
	if !c.cfg.NoRecovery {
		c.updateRecovery(bytesLost > 0, isRoundStart)
	}
	if bytesAcked > 0 {
		c.updateAckAggregation(now, bytesAcked)
	}
	if !c.cfg.NoRecovery {
		c.updateRecoveryWindow(bytesAcked, bytesLost)
	}
	c.updateMode(now, isRoundStart)
}

// updateMinRTT: a new minimum, or on expiry either refresh silently (latest RTT within 12.5 % of
// the estimate: WebRTC's probe_rtt_skipped_if_similar_rtt) or enter PROBE_RTT.
func (c *Controller) updateMinRTT(now, sample time.Duration) {
	c.latestRTT = sample
	if c.minRTT == 0 || sample < c.minRTT {
		c.minRTT, c.minRTTStamp = sample, now
		return
	}
	if now-c.minRTTStamp <= c.MinRTTExpiry() || c.mode == ProbeRTT {
		return
	}
	if float64(sample) <= similarRTT*float64(c.minRTT) {
		c.minRTTStamp = now // similar: extend the expiry, no probe
		return
	}
	c.mode, c.probeRTTDone = ProbeRTT, 0
	c.minRTT, c.minRTTStamp = sample, now // re-measured during the probe (any lower sample wins)
}

// updateRecovery is WebRTC's UpdateRecoveryState.
func (c *Controller) updateRecovery(hasLosses, isRoundStart bool) {
	if hasLosses {
		c.endRecoveryAt = c.lastSentSeq
	}
	switch c.recovery {
	case NotInRecovery:
		if hasLosses {
			c.recovery = Conservation
			if c.mode == Startup {
				c.recovery = c.cfg.StartupRecovery
			}
			c.recoveryWnd = 0
			c.roundEndSeq = c.lastSentSeq // the conservation phase lasts a whole round from now
		}
	case Conservation, MediumGrowth:
		if isRoundStart {
			c.recovery = Growth
		}
		fallthrough
	case Growth:
		if !hasLosses && c.lastAckedSeq > c.endRecoveryAt {
			c.recovery = NotInRecovery
		}
	}
}

// updateRecoveryWindow is WebRTC's CalculateRecoveryWindow.
func (c *Controller) updateRecoveryWindow(acked, lost int64) {
	if c.recovery == NotInRecovery {
		return
	}
	minCwnd := int64(minCwndPackets * c.cfg.MSS)
	if c.recoveryWnd == 0 {
		c.recoveryWnd = max(c.inflight+acked, minCwnd)
		return
	}
	if c.recoveryWnd >= lost {
		c.recoveryWnd -= lost
	} else {
		c.recoveryWnd = int64(c.cfg.MSS)
	}
	switch c.recovery {
	case Growth:
		c.recoveryWnd += acked
	case MediumGrowth:
		c.recoveryWnd += acked / 2
	}
	c.recoveryWnd = max(c.recoveryWnd, c.inflight+acked, minCwnd)
}

func (c *Controller) updateMode(now time.Duration, isRoundStart bool) {
	switch c.mode {
	case Startup:
		if isRoundStart && c.BandwidthEstimate() > 0 {
			if c.BandwidthEstimate() >= c.fullBW*startupGrowth {
				c.fullBW, c.fullBWRounds = c.BandwidthEstimate(), 0
			} else if c.fullBWRounds++; c.fullBWRounds >= startupRounds {
				c.mode = Drain
			}
		}
	case Drain:
		if c.inflight <= c.BDP() {
			c.enterProbeBW(now)
		}
	case ProbeBW:
		// Each phase lasts one min-RTT; the 0.75 phase ends early once in-flight is down to the BDP.
		if (c.minRTT > 0 && now-c.cycleStart > c.minRTT) ||
			(gainCycle[c.cycleIndex] == 0.75 && c.inflight <= c.BDP()) {
			c.cycleIndex = (c.cycleIndex + 1) % len(gainCycle)
			c.cycleStart = now
		}
	case ProbeRTT:
		if c.probeRTTDone == 0 {
			if c.inflight <= c.CongestionWindow() {
				c.probeRTTDone = now + probeRTTTime
				c.probeRTTRound = c.round
			}
		} else if now >= c.probeRTTDone && c.round > c.probeRTTRound {
			c.minRTTStamp = now
			if c.fullBW > 0 && c.fullBWRounds >= startupRounds {
				c.enterProbeBW(now)
			} else {
				c.mode = Startup
			}
		}
	}
}

func (c *Controller) enterProbeBW(now time.Duration) {
	c.mode = ProbeBW
	c.cycleIndex = 2 // start in a cruise phase (WebRTC picks a random phase other than the drain one)
	c.cycleStart = now
}
