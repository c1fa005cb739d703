package main

import (
	"fmt"
	"sort"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/cc"
	"github.com/pion/interceptor/pkg/gcc"
)

// controllerConfig is what every rate controller is built from.
type controllerConfig struct {
	InitialBps, MinBps, MaxBps int
	BBR                        bbrVariant // webrtc-bbr only: the study's variants (zero value: WebRTC's own)
}

// bbrVariant is docs/studies.md §3's variants of WebRTC's BBR, each off by default.
type bbrVariant struct {
	NonReplacingFilter bool // the filter keeps the three highest samples as separate entries
	ThirdBest          bool // the third-highest sample is the estimate
	NoRecovery         bool // the recovery state is disabled
	ProbeRTTv2         bool // BBRv2-like RTT probing: cwnd = BDP/2 in PROBE_RTT, min-RTT expiry 5 s
	NoPadding          bool // no padding while probing (mpvlab-rtp's behaviour before it padded; not WebRTC's)
}

// numbersAtSend: controllers whose own pacer gives the transport-wide sequence numbers as packets
// leave (it sends padding between media packets); the sender then leaves pion's numbering
// interceptor, which numbers at handover, out of the chain. GCC keeps pion's chain unchanged.
// Both number as they leave since the retransmissions-first queue (repair.go) reorders packets
// after the packetiser handed them over; libwebrtc 2018 numbers in the pacer too.
var numbersAtSend = map[string]bool{"webrtc-bbr": true, "gcc": true}

// controllers: the registry of send-side rate controllers, by the name a scenario uses
// (mpvlab/workloads/rtp.py RTP_CONTROLLERS keeps the same list). Each returns pion's BandwidthEstimator, the
// interface the cc interceptor drives with TWCC feedback and asks for the target.
var controllers = map[string]func(controllerConfig) (cc.BandwidthEstimator, error){
	// Google Congestion Control as pion implements it: delay-based (arrival-group trendline,
	// overuse detector, AIMD rate controller) and loss-based estimates, the lower wins; pion's
	// leaky-bucket pacer sends at 1.5 × the target, here with 2018's retransmissions-first queue
	// order (gcc_pacer.go).
	"gcc": func(c controllerConfig) (cc.BandwidthEstimator, error) {
		pacer := newGCCPacer(c.InitialBps)
		bwe, err := gcc.NewSendSideBWE(
			gcc.SendSideBWEInitialBitrate(c.InitialBps),
			gcc.SendSideBWEMinBitrate(c.MinBps),
			gcc.SendSideBWEMaxBitrate(c.MaxBps),
			gcc.SendSideBWEPacer(pacer),
		)
		if err != nil {
			return nil, err
		}
		return &gccBWE{SendSideBWE: bwe, pacer: pacer}, nil
	},
	// WebRTC's 2018 BBR (rtp/bbr: three-best-samples filter, loss recovery sub-states, similar-RTT
	// PROBE_RTT skip) with its own pacer and window (bbr_estimator.go).
	"webrtc-bbr": func(c controllerConfig) (cc.BandwidthEstimator, error) {
		return newBBREstimator(c)
	},
}

// gccBWE is pion's send-side GCC with a handle on its pacer, so the audio stream can be added to
// the pacer directly (audio.go): pion's SendSideBWE.AddStream would put every packet of the stream
// in its feedback adapter's history, which audio — without a transport-wide number in 2018 — never is.
type gccBWE struct {
	*gcc.SendSideBWE
	pacer *gccPacer
}

func (g *gccBWE) AddAudioStream(w interceptor.RTPWriter) interceptor.RTPWriter {
	g.pacer.AddStream(audioSSRC, w)
	return g.pacer
}

func newController(name string, c controllerConfig) (cc.BandwidthEstimator, error) {
	f, ok := controllers[name]
	if !ok {
		names := make([]string, 0, len(controllers))
		for n := range controllers {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown controller %q (known: %v)", name, names)
	}
	return f(c)
}
