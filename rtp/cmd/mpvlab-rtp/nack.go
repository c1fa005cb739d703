package main

import (
	"sort"
	"time"
)

// nackModule is libwebrtc's NackModule (modules/video_coding/nack_module.cc; the defaults that
// 2018 had: no field trial — no send delay, no exponential backoff) on unwrapped sequence numbers
// (the viewer's unwrap16, so the list's order is plain integer order).
//
// Behaviour followed: the first packet initialises; a packet newer than the newest adds every
// number between them to the list (send_at_seq_num = the number itself: the reordering histogram
// is never fed, OnReceivedPacket's is_retransmitted is hard-wired true, so WaitNumberOfPackets is
// 0) and sends those due at once (kSeqNumOnly); an older one (reordered or retransmitted) leaves
// the list. Process() every kProcessIntervalMs resends every entry last sent ≥ rtt ago
// (kTimeOnly; an entry never sent counts as sent at -1 ms). An entry leaves the list after
// kMaxNackRetries sends, or when older than kMaxPacketAge numbers; a list that would grow past
// kMaxNackPackets is cut back to the newest key frame's first packet, else cleared with a key-frame
// request.
const (
	nackMaxPacketAge    = 10000
	nackMaxPackets      = 1000
	nackDefaultRTT      = 100 * time.Millisecond
	nackMaxRetries      = 10
	nackProcessInterval = 20 * time.Millisecond // 1000 / kProcessFrequency (50)
)

type nackInfo struct {
	sentAtMs int64 // -1: never sent
	retries  int
}

type nackModule struct {
	initialized bool
	newest      int64
	list        map[int64]*nackInfo
	keyframes   map[int64]bool // first packets of key frames seen
	rtt         time.Duration
	// counts
	nacksSent       int // sequence numbers requested (each request of each number)
	gaveUp          int // numbers dropped after kMaxNackRetries
	keyFrameRequest int // list overflows that asked for a key frame
}

func newNackModule() *nackModule {
	return &nackModule{list: map[int64]*nackInfo{}, keyframes: map[int64]bool{}, rtt: nackDefaultRTT}
}

// onPacket is OnReceivedPacket; it returns the numbers to NACK now and whether a key frame must be
// requested (the list overflowed).
func (m *nackModule) onPacket(seq int64, keyframe bool, nowMs int64) (batch []int64, requestKey bool) {
	if !m.initialized {
		m.newest, m.initialized = seq, true
		if keyframe {
			m.keyframes[seq] = true
		}
		return nil, false
	}
	if seq == m.newest {
		return nil, false
	}
	if seq < m.newest { // out of order or a retransmission
		delete(m.list, seq)
		return nil, false
	}
	if keyframe {
		m.keyframes[seq] = true
	}
	for k := range m.keyframes {
		if k < seq-nackMaxPacketAge {
			delete(m.keyframes, k)
		}
	}
	requestKey = m.addPackets(m.newest+1, seq)
	m.newest = seq
	return m.batch(nowMs, true, false), requestKey
}

// addPackets is AddPacketsToNack: [start, end) into the list.
func (m *nackModule) addPackets(start, end int64) (requestKey bool) {
	for s := range m.list {
		if s < end-nackMaxPacketAge {
			delete(m.list, s)
		}
	}
	n := int(end - start)
	if len(m.list)+n > nackMaxPackets {
		for m.removeUntilKeyFrame() && len(m.list)+n > nackMaxPackets {
		}
		if len(m.list)+n > nackMaxPackets {
			m.list = map[int64]*nackInfo{}
			m.keyFrameRequest++
			return true
		}
	}
	for s := start; s < end; s++ {
		m.list[s] = &nackInfo{sentAtMs: -1}
	}
	return false
}

// removeUntilKeyFrame is RemovePacketsUntilKeyFrame: drop the entries older than the oldest key
// frame that has any older than it; false when no key frame does.
func (m *nackModule) removeUntilKeyFrame() bool {
	keys := make([]int64, 0, len(m.keyframes))
	for k := range m.keyframes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		removed := false
		for s := range m.list {
			if s < k {
				delete(m.list, s)
				removed = true
			}
		}
		if removed {
			return true
		}
		delete(m.keyframes, k)
	}
	return false
}

// process is Process(): the entries whose last NACK is ≥ rtt old.
func (m *nackModule) process(nowMs int64) []int64 { return m.batch(nowMs, false, true) }

// batch is GetNackBatch in list order (std::map: ascending numbers).
func (m *nackModule) batch(nowMs int64, bySeq, byTime bool) []int64 {
	seqs := make([]int64, 0, len(m.list))
	for s := range m.list {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var out []int64
	for _, s := range seqs {
		e := m.list[s]
		onSeq := e.sentAtMs == -1 && m.newest >= s // send_at_seq_num = s
		onTime := nowMs-e.sentAtMs >= m.rtt.Milliseconds()
		if (bySeq && onSeq) || (byTime && onTime) {
			out = append(out, s)
			e.retries++
			e.sentAtMs = nowMs
			m.nacksSent++
			if e.retries >= nackMaxRetries {
				delete(m.list, s)
				m.gaveUp++
			}
		}
	}
	return out
}
