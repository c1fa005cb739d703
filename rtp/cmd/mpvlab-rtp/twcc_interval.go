package main

import (
	"math"
	"time"

	"github.com/pion/interceptor/pkg/twcc"
)

// The receiver's TWCC feedback interval as libwebrtc 2018 sets it
// (github.com/HackWebRTC/webrtc 0040b66a, modules/remote_bitrate_estimator/remote_estimator_proxy.cc):
// the interval starts at kDefaultSendIntervalMs (l. 28, 44) and RemoteEstimatorProxy::OnBitrateChanged
// (l. 94-111) sets it so that reports of kTwccReportSize = 68 B take 5 % of the bitrate it is given,
// clamped to kMinSendIntervalMs … kMaxSendIntervalMs.
//
// Who calls it in 2018's receive path: Call::OnTargetTransferRate (call/call.cc l. 1085,
// "For controlling the rate of feedback messages") → ReceiveSideCongestionController::OnBitrateChanged
// (receive_side_congestion_controller.cc l. 163-165) → the proxy. The bitrate is the receiving Call's
// OWN send-side target (its network controller's TargetTransferRate), not the rate of the video it
// receives. In the study's set-up the viewer sends no media, so no transport feedback reaches its
// controller and that target stays at the start rate: BbrNetworkController::CreateRateUpdate
// (bbr_network_controller.cc l. 224-227: before an estimate, default_bandwidth_ = the starting
// bandwidth) or the legacy controller alike (SendSideBandwidthEstimation::UpdateEstimate, l. 313-316
// of modules/bitrate_controller/send_side_bandwidth_estimation.cc: no packet report ever → the
// current, i.e. start, bitrate), BitrateConstraints::
// kDefaultStartBitrateBps = 300 000 (call/bitrate_constraints.h l. 26). 5 % of 300 kbit/s is above
// the 50 ms clamp (68 × 8 / 0.05 s = 10 880 bit/s), so the viewer's feedback goes every 50 ms — and
// so for any own target ≥ 217.6 kbit/s.
const (
	twccDefaultInterval = 100 * time.Millisecond // kDefaultSendIntervalMs
	twccMinIntervalMs   = 50                     // kMinSendIntervalMs
	twccMaxIntervalMs   = 250                    // kMaxSendIntervalMs
	twccReportBytes     = 20 + 8 + 10 + 30       // kTwccReportSize: IPv4 + UDP + SRTP + an average report
	// viewerOwnTargetBps is the viewer's own send-side target in the study's set-up (above).
	viewerOwnTargetBps = 300000
)

// twccFeedbackInterval is OnBitrateChanged's interval for a bitrate (bit/s), in whole ms as the
// 2018 code rounds it: static_cast<int>(0.5 + 68 × 8 × 1000 / clamp(0.05 × bitrate, min, max)).
func twccFeedbackInterval(bitrateBps int) time.Duration {
	const minRate = twccReportBytes * 8.0 * 1000.0 / twccMaxIntervalMs
	const maxRate = twccReportBytes * 8.0 * 1000.0 / twccMinIntervalMs
	rate := math.Min(math.Max(0.05*float64(bitrateBps), minRate), maxRate)
	return time.Duration(int(0.5+twccReportBytes*8.0*1000.0/rate)) * time.Millisecond
}

// twccSenderOptions are the options of the viewer's pion TWCC sender interceptor: feedback every
// `interval` (pion's default is a fixed 100 ms).
func twccSenderOptions(interval time.Duration, extra ...twcc.Option) []twcc.Option {
	return append([]twcc.Option{twcc.SendInterval(interval)}, extra...)
}
