package main

import (
	"container/list"
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"mpvlab/rtp/bbr"
)

// bbrEstimator puts WebRTC's 2018 BBR (package bbr) behind pion's cc.BandwidthEstimator, so the
// sender runs it exactly where it runs GCC: same packetiser, TWCC numbering and feedback path.
// What it adds around the controller: a pacer that sends at BBR's pacing rate while its congestion
// window admits packets, the TWCC feedback decoded into bbr.Acks (arrival times from the reference
// time and receive deltas), and the target callbacks.
type bbrEstimator struct {
	mu       sync.Mutex
	c        *bbr.Controller
	start    time.Time
	extID    uint8
	writer   interceptor.RTPWriter
	queue    *list.List
	onChange func(int)
	last     int
	lastSent int64 // unwrapped transport seq of the newest packet sent
	tokens   float64
	tick     time.Time
	blocked  time.Time // since when the window has held back a queued packet (zero: not blocked)
	done     chan struct{}
	wg       sync.WaitGroup
	minBps   int
	maxBps   int
	probes   int // packets sent past a window that stayed shut for windowStall
}

type queued struct {
	h       rtp.Header
	payload []byte
	attrs   interceptor.Attributes
}

const (
	bbrTick     = 2 * time.Millisecond
	windowStall = time.Second // a window shut this long (tail loss, no feedback to declare it) lets one packet out
	bbrBurst    = 2 * 1264    // bytes the pacer may send at once after an idle moment
)

func newBBREstimator(cfg controllerConfig) (*bbrEstimator, error) {
	bc := bbr.DefaultConfig()
	bc.MSS = maxPayloadMTU + 64
	bc.InitialRate, bc.MinRate, bc.MaxRate = float64(cfg.InitialBps), float64(cfg.MinBps), float64(cfg.MaxBps)
	if cfg.BBR.NonReplacingFilter {
		bc.Filter = bbr.NonReplacing
	}
	bc.ThirdBest, bc.NoRecovery, bc.ProbeRTTv2 = cfg.BBR.ThirdBest, cfg.BBR.NoRecovery, cfg.BBR.ProbeRTTv2
	c, err := bbr.New(bc)
	if err != nil {
		return nil, err
	}
	e := &bbrEstimator{c: c, start: time.Now(), queue: list.New(), done: make(chan struct{}), minBps: cfg.MinBps,
		maxBps: cfg.MaxBps, lastSent: -1}
	e.last = e.targetLocked()
	return e, nil
}

func (e *bbrEstimator) now() time.Duration { return time.Since(e.start) }

func (e *bbrEstimator) targetLocked() int { return int(e.c.TargetRate()) }

func (e *bbrEstimator) AddStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	e.mu.Lock()
	for _, x := range info.RTPHeaderExtensions {
		if x.URI == twccURI {
			e.extID = uint8(x.ID)
		}
	}
	e.writer = w
	e.tick = time.Now()
	e.mu.Unlock()
	e.wg.Add(1)
	go e.pace()
	return interceptor.RTPWriterFunc(func(h *rtp.Header, p []byte, a interceptor.Attributes) (int, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.queue.PushBack(&queued{h.Clone(), append([]byte(nil), p...), a})
		return h.MarshalSize() + len(p), nil
	})
}

// pace releases queued packets at BBR's pacing rate (a token bucket refilled every tick) while the
// congestion window admits them.
func (e *bbrEstimator) pace() {
	defer e.wg.Done()
	t := time.NewTicker(bbrTick)
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case now := <-t.C:
			e.mu.Lock()
			e.tokens = min(e.tokens+now.Sub(e.tick).Seconds()*e.c.PacingRate()/8, float64(bbrBurst))
			e.tick = now
			for e.queue.Len() > 0 && e.tokens > 0 {
				if !e.c.CanSend() {
					if e.blocked.IsZero() {
						e.blocked = now
					}
					if now.Sub(e.blocked) < windowStall {
						break
					}
					e.probes++
				}
				e.blocked = time.Time{}
				q := e.queue.Remove(e.queue.Front()).(*queued)
				e.tokens -= float64(e.sendLocked(q))
			}
			e.mu.Unlock()
		}
	}
}

// sendLocked tells the controller a packet leaves and writes it (e.mu is released for the write:
// the writer may take the sender's locks); its size.
func (e *bbrEstimator) sendLocked(q *queued) int {
	size := q.h.MarshalSize() + len(q.payload)
	seq := int64(-1)
	var ext rtp.TransportCCExtension
	if x := q.h.GetExtension(e.extID); x != nil && ext.Unmarshal(x) == nil {
		seq = int64(ext.TransportSequence)
		if e.lastSent >= 0 {
			seq = unwrap16(ext.TransportSequence, e.lastSent)
		}
		e.lastSent = seq
	}
	e.c.OnPacketSent(e.now(), seq, size, e.queue.Len() == 0)
	w := e.writer
	e.mu.Unlock()
	_, _ = w.Write(&q.h, q.payload, q.attrs)
	e.mu.Lock()
	return size
}

// WriteRTCP decodes TWCC feedback into the controller's acks: statuses for base, base+1, …, each
// received one with its arrival = reference time × 64 ms + the running sum of receive deltas.
func (e *bbrEstimator) WriteRTCP(pkts []rtcp.Packet, _ interceptor.Attributes) error {
	e.mu.Lock()
	var cb func(int)
	var changed int
	for _, p := range pkts {
		fb, ok := p.(*rtcp.TransportLayerCC)
		if !ok {
			continue
		}
		e.c.OnFeedback(e.now(), twccAcks(fb, max(e.lastSent, 0)))
	}
	if t := e.targetLocked(); t != e.last {
		e.last, cb, changed = t, e.onChange, t
	}
	e.mu.Unlock()
	if cb != nil {
		cb(changed)
	}
	return nil
}

// twccAcks: one bbr.Ack per status in the feedback. Arrival times get a 1 s offset so that none is
// zero (the controller reads a zero delivered-time as "nothing delivered yet").
func twccAcks(fb *rtcp.TransportLayerCC, ref int64) []bbr.Ack {
	arrival := time.Second + time.Duration(fb.ReferenceTime)*64*time.Millisecond
	deltas := fb.RecvDeltas
	acks := make([]bbr.Ack, 0, fb.PacketStatusCount)
	forEachStatus(fb, ref, func(seq int64, status uint16) {
		a := bbr.Ack{Seq: seq, Lost: status == rtcp.TypeTCCPacketNotReceived}
		if !a.Lost && len(deltas) > 0 {
			arrival += time.Duration(deltas[0].Delta) * time.Microsecond
			deltas = deltas[1:]
			a.Arrival = arrival
		}
		acks = append(acks, a)
	})
	return acks
}

func (e *bbrEstimator) GetTargetBitrate() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.targetLocked()
}

func (e *bbrEstimator) OnTargetBitrateChange(f func(int)) {
	e.mu.Lock()
	e.onChange = f
	e.mu.Unlock()
}

func (e *bbrEstimator) GetStats() map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	return map[string]any{
		"mode": e.c.Mode().String(), "recovery": e.c.Recovery().String(), "bwEstimate": e.c.BandwidthEstimate(),
		"minRTTms": float64(e.c.MinRTT().Microseconds()) / 1000, "cwnd": e.c.CongestionWindow(),
		"inflight": e.c.Inflight(), "maxAckHeight": e.c.MaxAckHeight(), "pacingRate": e.c.PacingRate(), "queued": e.queue.Len(), "windowProbes": e.probes,
	}
}

func (e *bbrEstimator) Close() error {
	e.stopPacer()
	return nil
}

func (e *bbrEstimator) stopPacer() {
	select {
	case <-e.done:
	default:
		close(e.done)
	}
	e.wg.Wait()
}
