package main

import (
	"container/list"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
)

// One Opus frame per packet (RTPSenderAudio::SendAudio; pion's OpusPayloader), PT 111, the marker on
// the first packet only, the RTP timestamp the capture instant on the 48 kHz clock: 20 ms apart is
// 960 ticks, and the viewer recovers the capture instant within one tick, across the clock's wrap.
func TestAudioPacketAsRTPSenderAudio(t *testing.T) {
	const c0 = int64(123_456_789_012_345) // ~34 h of CLOCK_MONOTONIC: the 32-bit 48 kHz clock has wrapped
	f0 := audioFrame{number: 0, captureNs: c0, data: []byte{0xfc, 1, 2, 3}}
	f1 := audioFrame{number: 1, captureNs: c0 + 20_000_000, data: []byte{0xfc, 4, 5}}
	h0, p0 := audioPacket(f0, 0, true)
	h1, p1 := audioPacket(f1, 1, false)
	if !reflect.DeepEqual(p0, f0.data) || !reflect.DeepEqual(p1, f1.data) {
		t.Fatalf("payloads %x %x: want the Opus frames whole", p0, p1)
	}
	if h0.PayloadType != 111 || h0.SSRC != audioSSRC || !h0.Marker || h1.Marker || h1.SequenceNumber != 1 {
		t.Fatalf("headers %+v %+v", h0, h1)
	}
	if len(h0.Extensions) != 0 {
		t.Fatalf("audio packet with header extensions %v: 2018's default audio has no transport-wide number", h0.Extensions)
	}
	if d := h1.Timestamp - h0.Timestamp; d != 960 {
		t.Fatalf("20 ms = %d ticks of the 48 kHz clock, want 960", d)
	}
	for _, delay := range []int64{0, 35_000_000, 2_000_000_000} {
		got := audioCaptureNs(h1.Timestamp, f1.captureNs+delay)
		if diff := f1.captureNs - got; diff < 0 || diff > 1_000_000_000/audioClockRate+1 {
			t.Fatalf("delay %d ns: capture %d recovered as %d (off by %d ns)", delay, f1.captureNs, got, diff)
		}
	}
}

// audioWire is what a pacer handed to the wire.
type audioWire struct {
	ssrc     uint32
	seq      uint16
	tseq     int // -1: no transport-wide number
	inflight int64
}

func bbrWithRecorder(t *testing.T) (*bbrEstimator, *[]audioWire) {
	t.Helper()
	e, err := newBBREstimator(controllerConfig{InitialBps: 300_000, MinBps: 50_000, MaxBps: 1_300_000})
	if err != nil {
		t.Fatal(err)
	}
	var out []audioWire
	e.extID = extTWCC
	e.writer = interceptor.RTPWriterFunc(func(h *rtp.Header, p []byte, _ interceptor.Attributes) (int, error) {
		w := audioWire{ssrc: h.SSRC, seq: h.SequenceNumber, tseq: -1, inflight: e.c.Inflight()}
		var ext rtp.TransportCCExtension
		if b := h.GetExtension(extTWCC); b != nil && ext.Unmarshal(b) == nil {
			w.tseq = int(ext.TransportSequence)
		}
		out = append(out, w)
		return h.MarshalSize() + len(p), nil
	})
	e.tick = time.Unix(0, 0)
	return e, &out
}

func queueAudio(e *bbrEstimator, n int, seq *uint16) {
	for i := 0; i < n; i++ {
		e.enqueueLocked(&queued{h: rtp.Header{Version: 2, PayloadType: audioPT, SSRC: audioSSRC, SequenceNumber: *seq},
			payload: make([]byte, 80)})
		*seq++
	}
}

// webrtc-bbr's pacer, 2018's PacedSender with audio at its default: audio (kHighPriority) leaves
// before the video queued ahead of it, without a transport-wide number, unknown to the controller
// (bytes in flight unchanged), spending no budget — the video leaves tick by tick exactly as it does
// without audio, its transport-wide numbers consecutive from 0 — and it is held back with the video
// while the window is full (video_blocks_audio_).
func TestBBRPacerSendsAudioFirstUncountedAndHeldWithVideo(t *testing.T) {
	run := func(withAudio bool) ([]audioWire, [][]int) {
		e, out := bbrWithRecorder(t)
		var vseq, aseq uint16
		queueMedia(e, 30, &vseq)
		if withAudio {
			queueAudio(e, 2, &aseq)
		}
		var perTick [][]int // the video sequence numbers sent per tick
		now := e.tick
		for i := 0; i < 10; i++ {
			now = now.Add(bbrTick)
			n := len(*out)
			e.mu.Lock()
			e.tick = e.paceLocked(now)
			e.mu.Unlock()
			var tick []int
			for _, w := range (*out)[n:] {
				if w.ssrc == defaultSSRC {
					tick = append(tick, int(w.seq))
				}
			}
			perTick = append(perTick, tick)
		}
		return *out, perTick
	}
	with, withTicks := run(true)
	_, withoutTicks := run(false)
	if len(with) < 3 || with[0].ssrc != audioSSRC || with[1].ssrc != audioSSRC {
		t.Fatalf("first packets %+v: want the two audio packets first", with[:min(3, len(with))])
	}
	for i, w := range with[:2] {
		if w.tseq != -1 || w.inflight != 0 || w.seq != uint16(i) {
			t.Fatalf("audio packet %+v: want no transport-wide number and nothing in flight", w)
		}
	}
	for i, w := range with[2:] {
		if w.ssrc != defaultSSRC || w.tseq != i {
			t.Fatalf("video packet %d %+v: want transport-wide number %d (audio takes none)", i, w, i)
		}
	}
	if !reflect.DeepEqual(withTicks, withoutTicks) {
		t.Fatalf("video per tick with audio %v, without %v: audio must spend no budget", withTicks, withoutTicks)
	}

	// the window full: audio waits with the video
	e, out := bbrWithRecorder(t)
	var vseq, aseq uint16
	queueMedia(e, 200, &vseq)
	now := e.tick
	for i := 0; i < 400 && e.c.CanSend(); i++ {
		now = now.Add(bbrTick)
		e.mu.Lock()
		e.tick = e.paceLocked(now)
		e.mu.Unlock()
	}
	if e.c.CanSend() {
		t.Fatal("the window never filled")
	}
	n := len(*out)
	queueAudio(e, 1, &aseq)
	now = now.Add(bbrTick)
	e.mu.Lock()
	e.tick = e.paceLocked(now)
	e.mu.Unlock()
	for _, w := range (*out)[n:] {
		if w.ssrc == audioSSRC {
			t.Fatalf("an audio packet left through a full window (%d in flight)", w.inflight)
		}
	}
	if e.queue.Front().Value.(*queued).h.SSRC != audioSSRC {
		t.Fatal("the held audio packet is not at the head of the queue")
	}
}

// Audio goes before retransmissions, and retransmissions before video, in both pacers' queues.
func TestPacersQueueAudioBeforeRetransmissionsAndVideo(t *testing.T) {
	order := bbrQueueOrder(pushed{defaultSSRC, 10, 1}, pushed{audioSSRC, 0, 200}, pushed{rtxSSRC, 5, 100},
		pushed{audioSSRC, 0, 201}, pushed{defaultSSRC, 20, 2})
	if want := []uint16{200, 201, 100, 1, 2}; !reflect.DeepEqual(order, want) {
		t.Fatalf("webrtc-bbr queue order %v, want %v", order, want)
	}

	p := &gccPacer{rateBps: 1_000_000, queue: list.New(), writers: map[uint32]interceptor.RTPWriter{},
		done: make(chan struct{}), interval: 5 * time.Millisecond}
	var sent []audioWire
	var mu sync.Mutex
	w := interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, _ interceptor.Attributes) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		x := audioWire{ssrc: h.SSRC, seq: h.SequenceNumber, tseq: -1}
		var ext rtp.TransportCCExtension
		if b := h.GetExtension(extTWCC); b != nil && ext.Unmarshal(b) == nil {
			x.tseq = int(ext.TransportSequence)
		}
		sent = append(sent, x)
		return h.MarshalSize() + len(payload), nil
	})
	for _, ssrc := range []uint32{defaultSSRC, rtxSSRC} {
		p.AddStream(ssrc, w)
	}
	g := &gccBWE{pacer: p}
	aw := g.AddAudioStream(w)
	write := func(wr interceptor.RTPWriter, ssrc, ts uint32, seq uint16, size int) {
		if _, err := wr.Write(&rtp.Header{SSRC: ssrc, Timestamp: ts, SequenceNumber: seq}, make([]byte, size), nil); err != nil {
			t.Fatal(err)
		}
	}
	write(p, defaultSSRC, 10, 1, 1000)
	write(p, rtxSSRC, 5, 100, 1000)
	write(aw, audioSSRC, 0, 200, 80)
	write(aw, audioSSRC, 0, 201, 80)
	go p.run()
	defer p.Close()
	waitForCount(&mu, func() int { return len(sent) }, 4)
	mu.Lock()
	defer mu.Unlock()
	want := []audioWire{{audioSSRC, 200, -1, 0}, {audioSSRC, 201, -1, 0}, {rtxSSRC, 100, 0, 0}, {defaultSSRC, 1, 1, 0}}
	if !reflect.DeepEqual(sent, want) {
		t.Fatalf("gcc pacer sent %+v, want %+v (audio first, without transport-wide numbers)", sent, want)
	}
}

// The viewer keeps audio out of the video's packets, bytes and frames, and classifies each audio
// packet against the playout deadline from its RTP timestamp.
func TestViewerKeepsAudioOutOfTheVideo(t *testing.T) {
	r := &receiver{cfg: recvConfig{deadline: 100 * time.Millisecond}, vc: mustCodec(t, "h264"), frames: map[uint32]*recvFrame{},
		bins: map[int64]*rateBin{}, seqFirst: -1, seqMax: -1, seenSeq: map[int64]bool{}, maxFrame: -1,
		decode: map[uint32]string{}, padSeqs: newSeqSet(), audio: newRecvAudio()}
	now := monotonicNs()
	mk := func(seq uint16, captureNs int64) []byte {
		h, p := audioPacket(audioFrame{captureNs: captureNs, data: make([]byte, 70)}, seq, seq == 0)
		raw, _ := h.Marshal()
		return append(raw, p...)
	}
	onTime := mk(0, now-10_000_000) // captured 10 ms ago
	late := mk(2, now-300_000_000)  // 300 ms ago, past the 100 ms deadline
	r.onRTP(onTime)
	r.onRTP(onTime) // a duplicate
	r.onRTP(late)
	a := r.audio
	if a.packets != 2 || a.dups != 1 || a.onTime != 1 || a.late != 1 || a.bytes != int64(2*len(onTime)) {
		t.Fatalf("audio: %d packets, %d duplicates, %d on time, %d late, %d B", a.packets, a.dups, a.onTime, a.late, a.bytes)
	}
	if tot := a.totals(map[string]any{"audio_packets": float64(3)}, r.cfg.deadline, 0); tot["packets_lost"] != 1 {
		t.Fatalf("3 sent, 2 received: lost %v, want 1 (sequence number 1)", tot["packets_lost"])
	}
	if r.packets != 0 || r.rtpBytes != 0 || len(r.frames) != 0 || r.badPkts != 0 {
		t.Fatalf("video counts touched by audio: %d packets %d bytes %d frames %d unparsable", r.packets, r.rtpBytes,
			len(r.frames), r.badPkts)
	}
}
