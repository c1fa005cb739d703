package main

import (
	"container/list"
	"io"
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
)

// gccPacer is the pacer the gcc controller runs: pion's leaky bucket (pkg/gcc leaky_bucket_pacer.go,
// v0.1.51, its default) with one change, the queue order of libwebrtc 2018's PacketQueue for video
// (paced_sender.h Comparator; repair.go): retransmissions (the RTX stream) go before other packets,
// among themselves the older capture time first. Everything else is pion's: every 5 ms the budget
// is the time since the last send × the rate (1.5 × the target once a target was set, the initial
// bitrate before) / 8000, whole packets leave while it is positive (the last one may overdraw it).
// Audio (audio.go) goes first, waits for a positive budget like video, spends none and gets no
// transport-wide number, as 2018's pacer treated audio by default.
// It gives each packet its transport-wide sequence number as it leaves (pion numbers at hand-over,
// in its interceptor before the pacer, which with a FIFO is the same order; with retransmissions
// first it is not), before pion's send-side wrapper records the packet for its feedback adapter.
type gccPacer struct {
	mu       sync.Mutex
	rateBps  int
	queue    *list.List
	writers  map[uint32]interceptor.RTPWriter
	done     chan struct{}
	interval time.Duration
	nextSeq  uint16 // the transport-wide sequence number the next packet leaving gets
}

// pion's LeakyBucketPacer: f = 1.5, pacingInterval = 5 ms.
const (
	gccPacingFactor   = 1.5
	gccPacingInterval = 5 * time.Millisecond
)

type gccQueued struct {
	h       rtp.Header
	payload []byte
	attrs   interceptor.Attributes
}

func newGCCPacer(initialBps int) *gccPacer {
	p := &gccPacer{rateBps: initialBps, queue: list.New(), writers: map[uint32]interceptor.RTPWriter{},
		done: make(chan struct{}), interval: gccPacingInterval}
	go p.run()
	return p
}

func (p *gccPacer) AddStream(ssrc uint32, w interceptor.RTPWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writers[ssrc] = w
}

func (p *gccPacer) SetTargetBitrate(bps int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rateBps = int(gccPacingFactor * float64(bps))
}

func (p *gccPacer) Write(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return 0, io.ErrClosedPipe
	default:
	}
	attrs := interceptor.Attributes{}
	for k, v := range a {
		attrs[k] = v
	}
	p.push(&gccQueued{h.Clone(), append([]byte(nil), payload...), attrs})
	return h.MarshalSize() + len(payload), nil
}

// push inserts in 2018's order (the caller holds p.mu): as bbrEstimator.enqueueLocked — audio
// (kHighPriority) first in its order of arrival, then retransmissions, older capture first.
func (p *gccPacer) push(q *gccQueued) {
	switch q.h.SSRC {
	case audioSSRC:
		for el := p.queue.Front(); el != nil; el = el.Next() {
			if el.Value.(*gccQueued).h.SSRC != audioSSRC {
				p.queue.InsertBefore(q, el)
				return
			}
		}
	case rtxSSRC:
		for el := p.queue.Front(); el != nil; el = el.Next() {
			o := el.Value.(*gccQueued)
			if o.h.SSRC == audioSSRC {
				continue
			}
			if o.h.SSRC != rtxSSRC || int32(o.h.Timestamp-q.h.Timestamp) > 0 {
				p.queue.InsertBefore(q, el)
				return
			}
		}
	}
	p.queue.PushBack(q)
}

func (p *gccPacer) run() {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-p.done:
			return
		case now := <-t.C:
			p.mu.Lock()
			budget := int(float64(now.Sub(last).Milliseconds()) * float64(p.rateBps) / 8000.0)
			for p.queue.Len() > 0 && budget > 0 {
				q := p.queue.Remove(p.queue.Front()).(*gccQueued)
				w := p.writers[q.h.SSRC]
				audio := q.h.SSRC == audioSSRC
				if !audio { // 2018's audio carries no transport-wide number (audio.go)
					ext, _ := (&rtp.TransportCCExtension{TransportSequence: p.nextSeq}).Marshal()
					_ = q.h.SetExtension(extTWCC, ext)
					p.nextSeq++
				}
				p.mu.Unlock() // the writer takes the sender's locks
				n := 0
				if w != nil {
					n, _ = w.Write(&q.h, q.payload, q.attrs)
				}
				if !audio {
					// audio waits for a positive budget like video (2018's video_blocks_audio_) but
					// spends none of it (account_for_audio_ false): pion's budget is the time since
					// the last send, so an audio send does not move that instant
					budget -= n
					last = now
				}
				p.mu.Lock()
			}
			p.mu.Unlock()
		}
	}
}

func (p *gccPacer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.queue = list.New()
	return nil
}
