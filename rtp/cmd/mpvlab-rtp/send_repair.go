package main

import (
	"encoding/binary"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
)

// The sender's side of loss repair (repair.go): NACKs → retransmissions on the RTX stream through
// the pacer; PLIs → a key-frame request to the encoder.

// onRepairRTCP handles the NACKs and PLIs of one RTCP datagram from the viewer.
func (s *sender) onRepairRTCP(raw []byte) {
	pkts, err := rtcp.Unmarshal(raw)
	if err != nil {
		return // counted by the ledger
	}
	for _, p := range pkts {
		switch m := p.(type) {
		case *rtcp.TransportLayerNack:
			if m.MediaSSRC == defaultSSRC {
				s.onNack(m)
			}
		case *rtcp.PictureLossIndication:
			if m.MediaSSRC == defaultSSRC {
				s.onPLI()
			}
		}
	}
}

// historyRTT is RTPSender::OnReceivedNack's packet_history_.SetRtt(5 + avg_rtt). The sender has no
// RTCP receiver reports here; its RTT is the newest one derived from TWCC feedback (feedback_rtt.csv,
// the RTT GCC derives), 0 before any (2018's avg_rtt before an RTT is known).
func (s *sender) historyRTT() time.Duration {
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	var rtt time.Duration
	if n := len(s.ledger.rtt); n > 0 {
		rtt = time.Duration(max(0, s.ledger.rtt[n-1].rttNs))
	}
	return historyRTTSlack + rtt
}

// onNack is RTPSender::OnReceivedNack → ReSendPacket per number, in the order named: each packet
// still in the history and not resent within the last RTT goes to the pacer as a retransmission,
// its payload counted by the retransmission rate limiter (≤ the controller's target over 500 ms);
// once the limiter refuses one, the rest of the NACK is dropped, as 2018's loop breaks.
func (s *sender) onNack(m *rtcp.TransportLayerNack) {
	if !s.cfg.nack || s.rtxWriter == nil {
		return
	}
	rtt := s.historyRTT()
	now := monotonicNs()
	maxBps := int64(s.bwe.GetTargetBitrate())
	var resend []*storedPacket
	s.mu.Lock()
	s.rep.NackMessages++
	seqs := []uint16{}
	for _, pair := range m.Nacks {
		seqs = append(seqs, pair.PacketList()...)
	}
	s.rep.NackedSeqs += len(seqs)
	for i, seq := range seqs {
		p, why := s.hist.forResend(seq, now, rtt)
		switch {
		case why == resendNotInHistory:
			s.rep.NotInHistory++
		case why == resendTooSoon:
			s.rep.TooSoon++
		case !s.retransmitLimit.tryUse(len(p.payload), now/1e6, maxBps):
			// ReSendPacket returns -1: OnReceivedNack gives up the rest of this NACK
			s.rep.RateLimited += len(seqs) - i
			s.mu.Unlock()
			s.writeRTX(resend)
			return
		default:
			h, payload := wrapRTX(p.h, p.payload, s.rtxSeq)
			s.rtxSeq++
			s.rep.Queued++
			resend = append(resend, &storedPacket{h: h, payload: payload})
		}
	}
	s.mu.Unlock()
	s.writeRTX(resend)
}

// writeRTX hands retransmissions to the pacer (outside s.mu: the pacer's writer may take it).
func (s *sender) writeRTX(resend []*storedPacket) {
	for _, p := range resend {
		_, _ = s.rtxWriter.Write(&p.h, p.payload, interceptor.Attributes{})
	}
}

// onPLI is EncoderRtcpFeedback::OnReceivedIntraFrameRequest: at most one request per
// kMinKeyFrameSendIntervalMs reaches the encoder.
func (s *sender) onPLI() {
	s.mu.Lock()
	s.rep.PLIs++
	enc := s.enc
	pass := s.cfg.pli && enc != nil && s.keyLimiter.allow(monotonicNs())
	if pass {
		s.rep.KeyFramesRequested++
		s.rep.keyPending = true
	} else if s.cfg.pli && enc != nil {
		s.rep.KeyFramesRateLimit++
	}
	s.mu.Unlock()
	if pass {
		enc.keyFrame()
	}
}

func (s *sender) rtxSentCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rep.Sent
}

// binaryOSN: the original sequence number an RTX payload starts with.
func binaryOSN(payload []byte) uint16 {
	if len(payload) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(payload)
}

// packetRowRTX: packets.csv's rtx columns.
func packetRowRTX(p sentPacket) (rtx, osn string) {
	if !p.rtx {
		return "false", ""
	}
	return "true", itoa(int64(p.osn))
}
