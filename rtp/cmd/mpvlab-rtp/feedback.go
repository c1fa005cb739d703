package main

import (
	"math"
	"sort"
	"sync"
	"time"

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
	sentNs    map[int64]int64 // transport seq → when it was handed to the socket (CLOCK_MONOTONIC ns)
	rtt       []rttSample     // one per feedback with a received packet: the RTT GCC derives from it
}

// rttSample is the round-trip time pion's GCC (pkg/gcc send_side_bwe.go, v0.1.51) derives from one
// TWCC feedback: the minimum over its received packets of now − departure − (latest arrival in the
// feedback − the packet's arrival); the latest arrival stands in for when the feedback was sent.
type rttSample struct {
	tNs, rttNs int64
	acks       int // received packets of the feedback the minimum is taken over
}

func newFeedbackLedger() *feedbackLedger {
	return &feedbackLedger{sent: map[int64]bool{}, received: map[int64]bool{}, lastSent: -1, sentNs: map[int64]int64{}}
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
	l.sentNs[u] = monotonicNs()
	l.nSent++
	return u
}

func (l *feedbackLedger) onRTCP(raw []byte) {
	now := monotonicNs()
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
			l.feedbackRTT(fb, now)
			l.account(fb)
		}
	}
}

// feedbackRTT records the RTT GCC derives from fb, read at nowNs (rttSample). Arrivals are the
// viewer's clock, departures and now the sender's; only arrival differences enter, as in pion.
func (l *feedbackLedger) feedbackRTT(fb *rtcp.TransportLayerCC, nowNs int64) {
	acks := twccAcks(fb, max(l.lastSent, 0))
	var latest time.Duration
	for _, a := range acks {
		if !a.Lost && a.Arrival > latest {
			latest = a.Arrival
		}
	}
	minRTT, n := int64(math.MaxInt64), 0
	for _, a := range acks {
		dep, ok := l.sentNs[a.Seq]
		if a.Lost || !ok {
			continue
		}
		n++
		minRTT = min(minRTT, nowNs-dep-int64(latest-a.Arrival))
	}
	if n > 0 {
		l.rtt = append(l.rtt, rttSample{tNs: nowNs, rttNs: minRTT, acks: n})
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
