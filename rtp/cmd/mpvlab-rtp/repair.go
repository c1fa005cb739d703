package main

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/pion/rtp"
)

// Loss repair as libwebrtc 2018 configured it for video (issue 48 §1; rtp/README.md "Losses were
// repaired", the audit rows NackModule, RtpPacketHistory, RTPSender::ReSendPacket, RTX,
// EncoderRtcpFeedback, VideoReceiveStream::Decode): the viewer NACKs missing sequence numbers
// (RFC 4585 generic NACK), the sender resends them on an RTX stream (RFC 4588) through its pacer,
// and the viewer asks for a key frame (PLI) when nothing was decodable for a while.

const (
	// The RTX stream: its own SSRC and payload type (RFC 4588 §4; negotiated in SDP, so any unused
	// pair; 97 is the padding stream's here).
	rtxSSRC = 0x6d707672 // "mpvr"
	rtxPT   = 98
	// video_send_stream.cc (2018) kMinSendSidePacketHistorySize: the sender keeps the last 600
	// media packets for retransmission (SetStorePacketsStatus(true, 600)).
	historySize = 600
	// rtp_sender.cc (2018) OnReceivedNack: packet_history_.SetRtt(5 + avg_rtt).
	historyRTTSlack = 5 * time.Millisecond
	// encoder_rtcp_feedback.cc (2018) kMinKeyFrameSendIntervalMs: key-frame requests closer than
	// this to the last one forwarded are dropped.
	minKeyFrameSendInterval = 300 * time.Millisecond
)

// wrapRTX is RTPSender::BuildRtxPacket (RFC 4588 §4): the original header with the RTX SSRC,
// payload type and the RTX stream's own sequence number, its header extensions kept (the frame
// stamp rides along), and the original sequence number (OSN) before the original payload.
func wrapRTX(h rtp.Header, payload []byte, rtxSeq uint16) (rtp.Header, []byte) {
	out := h.Clone()
	out.SSRC, out.PayloadType, out.SequenceNumber = rtxSSRC, rtxPT, rtxSeq
	p := make([]byte, 2+len(payload))
	binary.BigEndian.PutUint16(p, h.SequenceNumber)
	copy(p[2:], payload)
	return out, p
}

var errShortRTX = errors.New("RTX packet without its 2-byte original sequence number")

// unwrapRTX is RtxReceiveStream::OnRtpPacket: the original sequence number and payload.
func unwrapRTX(p *rtp.Packet) (osn uint16, payload []byte, err error) {
	if p.SSRC != rtxSSRC || p.PayloadType != rtxPT {
		return 0, nil, errors.New("not an RTX packet")
	}
	if len(p.Payload) < 2 {
		return 0, nil, errShortRTX
	}
	return binary.BigEndian.Uint16(p.Payload), p.Payload[2:], nil
}

// --- the sender's packet history (RtpPacketHistory, 2018) -----------------------------------------

type storedPacket struct {
	h             rtp.Header
	payload       []byte
	sentNs        int64 // when it (or its last retransmission) left the socket; 0: not yet
	retransmitted int   // times it was resent
}

// packetHistory keeps the last historySize media packets by sequence number.
type packetHistory struct {
	slots []*storedPacket
}

func newPacketHistory(n int) *packetHistory { return &packetHistory{slots: make([]*storedPacket, n)} }

func (ph *packetHistory) slot(seq uint16) **storedPacket { return &ph.slots[int(seq)%len(ph.slots)] }

// put stores a media packet as the packetiser hands it to the pacer.
func (ph *packetHistory) put(h rtp.Header, payload []byte) {
	*ph.slot(h.SequenceNumber) = &storedPacket{h: h.Clone(), payload: append([]byte(nil), payload...)}
}

// onSent records that the packet seq (the original, or its retransmission) left at nowNs.
func (ph *packetHistory) onSent(seq uint16, nowNs int64, retransmission bool) {
	p := *ph.slot(seq)
	if p == nil || p.h.SequenceNumber != seq {
		return
	}
	p.sentNs = nowNs
	if retransmission {
		p.retransmitted++
	}
}

// Why a NACKed packet was not resent.
const (
	resendOK = iota
	resendNotInHistory
	resendTooSoon
)

// forResend is ReSendPacket's look-up with RtpPacketHistory::VerifyRtt: a packet already resent
// once is not resent again before rtt (5 ms + the sender's RTT) has passed since it last left.
func (ph *packetHistory) forResend(seq uint16, nowNs int64, rtt time.Duration) (*storedPacket, int) {
	p := *ph.slot(seq)
	if p == nil || p.h.SequenceNumber != seq || p.sentNs == 0 {
		return nil, resendNotInHistory
	}
	if p.retransmitted > 0 && nowNs < p.sentNs+rtt.Nanoseconds() {
		return nil, resendTooSoon
	}
	return p, resendOK
}

// keyFrameLimiter is EncoderRtcpFeedback::OnReceivedIntraFrameRequest's rate limit.
type keyFrameLimiter struct {
	lastNs int64
	primed bool
}

// allow: whether a request at nowNs goes to the encoder (and then counts as the last one).
func (k *keyFrameLimiter) allow(nowNs int64) bool {
	if k.primed && k.lastNs+minKeyFrameSendInterval.Nanoseconds() > nowNs {
		return false
	}
	k.lastNs, k.primed = nowNs, true
	return true
}

// retransmitWindow is rtp_transport_controller_send.cc (2018) kRetransmitWindowSizeMs: the window of
// the RateLimiter every video RTPSender's ReSendPacket asks (retransmission_rate_limiter_), whose
// maximum is the bandwidth estimate (SetMaxRate on each target update).
const retransmitWindow = 500 * time.Millisecond

// rateLimiter is rate_limiter.cc's RateLimiter::TryUseRate over RateStatistics (rate_statistics.cc,
// scale 8000: bit/s from bytes per ms) with a window of retransmitWindow.
type rateLimiter struct {
	samples []rateSample // within the window, oldest first
	firstMs int64        // the first sample ever (RateStatistics' oldest_time_ before the window filled)
	started bool
}

type rateSample struct {
	ms    int64
	bytes int
}

// rate is RateStatistics::Rate (2018, rtc::Optional): the active window is now − oldest_time_ + 1,
// oldest_time_ being the first sample's time until the window has filled and now − window + 1
// after; no rate without a sample, over an active window of ≤ 1 ms, or from a single sample before
// the window has filled; else bytes × 8000 / active window + 0.5, truncated.
func (l *rateLimiter) rate(nowMs int64) (int64, bool) {
	w := retransmitWindow.Milliseconds()
	kept := l.samples[:0]
	for _, s := range l.samples {
		if s.ms > nowMs-w {
			kept = append(kept, s)
		}
	}
	l.samples = kept
	if len(l.samples) == 0 {
		return 0, false
	}
	active := min(nowMs-l.firstMs+1, w)
	if active <= 1 || (len(l.samples) <= 1 && active < w) {
		return 0, false
	}
	var sum int64
	for _, s := range l.samples {
		sum += int64(s.bytes)
	}
	return int64(float32(sum)*(float32(8000)/float32(active)) + 0.5), true
}

// tryUse is TryUseRate: refused when the current rate plus this packet spread over the window would
// exceed maxBps; with no current rate it is allowed (2018's comment: else a single packet at a very
// low rate would never be resent).
func (l *rateLimiter) tryUse(bytes int, nowMs int64, maxBps int64) bool {
	if cur, ok := l.rate(nowMs); ok {
		if cur+int64(bytes)*8*1000/retransmitWindow.Milliseconds() > maxBps {
			return false
		}
	}
	if !l.started {
		l.firstMs, l.started = nowMs, true
	}
	l.samples = append(l.samples, rateSample{nowMs, bytes})
	return true
}
