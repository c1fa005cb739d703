package main

import (
	"sort"
	"sync"

	"github.com/pion/rtcp"
)

// feedbackLedger checks TWCC at the sender: which transport-wide sequence numbers went out, and which
// the viewer's feedback reported (received, or not received). A sent number that no feedback ever
// mentions is missing feedback — the controller then never learnt that packet's fate.
type feedbackLedger struct {
	mu        sync.Mutex
	sent      map[int64]bool // transport seq → reported by some feedback
	received  map[int64]bool // reported received at least once
	lastSent  int64
	nSent     int
	nFeedback int // TransportLayerCC packets read
	nRTCP     int // RTCP compound packets read
	fbBytes   int
}

func newFeedbackLedger() *feedbackLedger {
	return &feedbackLedger{sent: map[int64]bool{}, received: map[int64]bool{}, lastSent: -1}
}

func (l *feedbackLedger) onSent(tseq uint16) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := int64(tseq)
	if l.lastSent >= 0 {
		u = unwrap16(tseq, l.lastSent)
	}
	l.lastSent = u
	l.sent[u] = false
	l.nSent++
	return u
}

func (l *feedbackLedger) onRTCP(raw []byte) {
	pkts, err := rtcp.Unmarshal(raw)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nRTCP++
	l.fbBytes += len(raw)
	if err != nil {
		return
	}
	for _, p := range pkts {
		if fb, ok := p.(*rtcp.TransportLayerCC); ok {
			l.nFeedback++
			l.account(fb)
		}
	}
}

// account marks every status the feedback carries (forEachStatus): reported, and received unless
// the status says not received.
func (l *feedbackLedger) account(fb *rtcp.TransportLayerCC) {
	forEachStatus(fb, max(l.lastSent, 0), func(seq int64, status uint16) {
		if _, ok := l.sent[seq]; !ok {
			return
		}
		l.sent[seq] = true
		if status != rtcp.TypeTCCPacketNotReceived {
			l.received[seq] = true
		}
	})
}

type feedbackSummary struct {
	PacketsSent            int     `json:"transport_seqs_sent"`
	Reported               int     `json:"transport_seqs_reported"`
	ReportedReceived       int     `json:"transport_seqs_reported_received"`
	ReportedLost           int     `json:"transport_seqs_reported_lost"`
	MissingFeedback        int     `json:"transport_seqs_without_feedback"`
	FeedbackPackets        int     `json:"twcc_feedback_packets"`
	RTCPPackets            int     `json:"rtcp_datagrams"`
	RTCPBytes              int     `json:"rtcp_bytes"`
	MissingLastConsecutive int     `json:"missing_feedback_at_tail"`
	MissingExamples        []int64 `json:"transport_seqs_without_feedback_first"`
}

func (l *feedbackLedger) summary() feedbackSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := feedbackSummary{PacketsSent: l.nSent, FeedbackPackets: l.nFeedback, RTCPPackets: l.nRTCP, RTCPBytes: l.fbBytes}
	for seq, rep := range l.sent {
		if rep {
			s.Reported++
			if l.received[seq] {
				s.ReportedReceived++
			} else {
				s.ReportedLost++
			}
		} else {
			s.MissingFeedback++
			s.MissingExamples = append(s.MissingExamples, seq)
		}
	}
	sort.Slice(s.MissingExamples, func(i, j int) bool { return s.MissingExamples[i] < s.MissingExamples[j] })
	s.MissingExamples = s.MissingExamples[:min(len(s.MissingExamples), 20)]
	for seq := l.lastSent; seq >= 0; seq-- {
		if rep, ok := l.sent[seq]; !ok || rep {
			break
		}
		s.MissingLastConsecutive++
	}
	return s
}

// covered reports whether feedback has mentioned the last sent packet (the sender waits for it).
func (l *feedbackLedger) lastCovered() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSent < 0 || l.sent[l.lastSent]
}
