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

func TestRTXWrapUnwrapKeepsOriginalSequenceAndExtensions(t *testing.T) {
	h := rtp.Header{Version: 2, PayloadType: payloadType, SequenceNumber: 65535, SSRC: defaultSSRC, Timestamp: 1234, Marker: true}
	if err := h.SetExtension(extFrame, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	payload := []byte{9, 8, 7}
	rh, rp := wrapRTX(h, payload, 7)
	if rh.SSRC != rtxSSRC || rh.PayloadType != rtxPT || rh.SequenceNumber != 7 || rh.Timestamp != 1234 || !rh.Marker {
		t.Fatalf("RTX header %+v", rh)
	}
	if !reflect.DeepEqual(rh.GetExtension(extFrame), []byte{1, 2, 3}) {
		t.Fatal("the frame stamp extension was not kept")
	}
	if h.SSRC != defaultSSRC || h.SequenceNumber != 65535 {
		t.Fatal("wrapRTX changed the original header")
	}
	raw, err := (&rtp.Packet{Header: rh, Payload: rp}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var p rtp.Packet
	if err := p.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	osn, got, err := unwrapRTX(&p)
	if err != nil || osn != 65535 || !reflect.DeepEqual(got, payload) {
		t.Fatalf("unwrap: osn %d payload %v err %v", osn, got, err)
	}
	p.Payload = p.Payload[:1]
	if _, _, err := unwrapRTX(&p); err == nil {
		t.Fatal("a 1-byte RTX payload was accepted")
	}
	p.SSRC = defaultSSRC
	if _, _, err := unwrapRTX(&p); err == nil {
		t.Fatal("a media packet was unwrapped as RTX")
	}
}

func TestNackModuleListAsIn2018(t *testing.T) {
	m := newNackModule()
	if b, _ := m.onPacket(100, true, 0); b != nil {
		t.Fatal("the first packet only initialises")
	}
	// 101, 102 missing: NACKed at once (send_at_seq_num = the number itself, no reordering data)
	b, key := m.onPacket(103, false, 10)
	if key || !reflect.DeepEqual(b, []int64{101, 102}) {
		t.Fatalf("first batch %v key %v", b, key)
	}
	// Process() before an RTT (100 ms default) passed: nothing; at 110 ms: both again
	if got := m.process(109); len(got) != 0 {
		t.Fatalf("re-NACKed before the RTT: %v", got)
	}
	if got := m.process(110); !reflect.DeepEqual(got, []int64{101, 102}) {
		t.Fatalf("after the RTT: %v", got)
	}
	// 102 arrives (retransmitted): it leaves the list; an older duplicate changes nothing
	m.onPacket(102, false, 120)
	if _, ok := m.list[102]; ok {
		t.Fatal("102 still listed after it arrived")
	}
	// 101 is requested kMaxNackRetries times in all, then dropped
	now := int64(110)
	for i := 3; i <= nackMaxRetries; i++ {
		now += 100
		if got := m.process(now); !reflect.DeepEqual(got, []int64{101}) {
			t.Fatalf("retry %d: %v", i, got)
		}
	}
	if _, ok := m.list[101]; ok || m.gaveUp != 1 {
		t.Fatalf("101 not dropped after %d retries (gave up %d)", nackMaxRetries, m.gaveUp)
	}
	if got := m.process(now + 1000); len(got) != 0 {
		t.Fatalf("dropped number NACKed again: %v", got)
	}
	if m.nacksSent != 2+nackMaxRetries {
		t.Fatalf("nacks sent %d, want %d", m.nacksSent, 2+nackMaxRetries)
	}
}

func TestNackModuleOverflowCutsToKeyFrameThenRequestsOne(t *testing.T) {
	m := newNackModule()
	m.onPacket(0, false, 0)
	m.onPacket(600, true, 0) // 1..599 listed; 600 starts a key frame
	if len(m.list) != 599 {
		t.Fatalf("listed %d", len(m.list))
	}
	// 500 more would pass kMaxNackPackets: the list is cut back to the key frame at 600
	if _, key := m.onPacket(1101, false, 0); key || len(m.list) != 500 {
		t.Fatalf("after the cut: %d listed, key request %v", len(m.list), key)
	}
	// no key frame newer than the listed ones: cleared, a key frame requested
	if _, key := m.onPacket(1700, false, 0); !key || len(m.list) != 0 || m.keyFrameRequest != 1 {
		t.Fatalf("overflow without a key frame: %d listed, key request %v", len(m.list), key)
	}
}

func TestHistoryResendRules(t *testing.T) {
	ph := newPacketHistory(historySize)
	h := rtp.Header{SequenceNumber: 5, SSRC: defaultSSRC}
	ph.put(h, []byte{1})
	if _, why := ph.forResend(5, 1e9, 0); why != resendNotInHistory {
		t.Fatal("a packet not yet sent was resendable")
	}
	ph.onSent(5, 1e9, false)
	rtt := 45 * time.Millisecond
	if p, why := ph.forResend(5, 1e9+1, rtt); why != resendOK || p.payload[0] != 1 {
		t.Fatal("the first resend was refused")
	}
	ph.onSent(5, 2e9, true) // the retransmission left at 2 s
	if _, why := ph.forResend(5, 2e9+rtt.Nanoseconds()-1, rtt); why != resendTooSoon {
		t.Fatal("resent again within an RTT")
	}
	if _, why := ph.forResend(5, 2e9+rtt.Nanoseconds(), rtt); why != resendOK {
		t.Fatal("refused after an RTT")
	}
	if _, why := ph.forResend(6, 3e9, rtt); why != resendNotInHistory {
		t.Fatal("an unknown packet was found")
	}
	// the history keeps the last historySize packets: 5 + 600 replaces 5
	ph.put(rtp.Header{SequenceNumber: 5 + historySize}, []byte{2})
	if _, why := ph.forResend(5, 4e9, rtt); why != resendNotInHistory {
		t.Fatal("a packet older than the history was resent")
	}
}

func TestKeyFrameRequestRateLimit(t *testing.T) {
	var k keyFrameLimiter
	ms := int64(time.Millisecond)
	got := []bool{k.allow(1000 * ms), k.allow(1100 * ms), k.allow(1299 * ms), k.allow(1300 * ms), k.allow(1400 * ms), k.allow(1600 * ms)}
	want := []bool{true, false, false, true, false, true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("allowed %v, want %v (300 ms apart)", got, want)
	}
}

func TestPacerPutsRetransmissionsFirstOldestCaptureFirst(t *testing.T) {
	order := bbrQueueOrder(pushed{defaultSSRC, 10, 1}, pushed{defaultSSRC, 20, 2}, pushed{rtxSSRC, 5, 100},
		pushed{paddingSSRC, 20, 50}, pushed{rtxSSRC, 3, 101}, pushed{rtxSSRC, 5, 102})
	if want := []uint16{101, 100, 102, 1, 2, 50}; !reflect.DeepEqual(order, want) {
		t.Fatalf("queue order %v, want %v", order, want)
	}
}

func TestKeyPacketH264(t *testing.T) {
	stapSPS := []byte{24, 0, 2, 0x67, 0x42, 0, 2, 0x68, 0xce}
	if !keyPacket("h264", stapSPS) || !keyPacket("h264", []byte{0x65, 1}) || !keyPacket("h264", []byte{0x7c, 0x85, 1}) {
		t.Fatal("a key frame's first packet not recognised")
	}
	if keyPacket("h264", []byte{0x41, 1}) || keyPacket("h264", []byte{0x7c, 0x81, 1}) {
		t.Fatal("a P-slice taken for a key frame")
	}
}

func TestRetransmissionRateLimiterAsIn2018(t *testing.T) {
	var l rateLimiter
	const max = 100_000 // bit/s: 6 250 B per 500 ms window
	// no rate yet (one sample, window not full): allowed even past the maximum
	if !l.tryUse(10_000, 0, max) {
		t.Fatal("first packet refused")
	}
	// two samples over 2 ms: 20 000 B × 8000 / 2 ms ≫ max — refused, and not counted
	if !l.tryUse(10_000, 1, max) {
		t.Fatal("second packet (a single sample before it, window not full) refused")
	}
	if l.tryUse(100, 2, max) {
		t.Fatal("allowed while the window's rate exceeds the maximum")
	}
	// after the window has passed the old samples are gone: no rate, allowed again
	if !l.tryUse(1000, 600, max) {
		t.Fatal("refused after the window emptied")
	}
	// now the window has filled (first sample 600 ms ago): rate = 1000 B × 8000 / 500 = 16 kbit/s;
	// + 3 000 B spread over 500 ms (48 kbit/s) = 64 kbit/s ≤ max: allowed; then 80 + 48 > 100: refused
	if !l.tryUse(3000, 601, max) {
		t.Fatal("refused below the maximum")
	}
	if l.tryUse(3000, 602, max) {
		t.Fatal("allowed above the maximum")
	}
}

func TestGCCPacerPutsRetransmissionsFirstAndPacesAsPion(t *testing.T) {
	p := &gccPacer{rateBps: 1_000_000, queue: list.New(), writers: map[uint32]interceptor.RTPWriter{},
		done: make(chan struct{}), interval: 5 * time.Millisecond}
	var sent []uint16
	var mu sync.Mutex
	w := interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, _ interceptor.Attributes) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, h.SequenceNumber)
		return h.MarshalSize() + len(payload), nil
	})
	for _, ssrc := range []uint32{defaultSSRC, rtxSSRC, paddingSSRC} {
		p.AddStream(ssrc, w)
	}
	write := func(ssrc, ts uint32, seq uint16) {
		if _, err := p.Write(&rtp.Header{SSRC: ssrc, Timestamp: ts, SequenceNumber: seq}, make([]byte, 1000), nil); err != nil {
			t.Fatal(err)
		}
	}
	write(defaultSSRC, 10, 1)
	write(defaultSSRC, 20, 2)
	write(rtxSSRC, 5, 100)
	write(rtxSSRC, 3, 101)
	go p.run()
	defer p.Close()
	// at 1 Mbit/s a 5 ms tick allows 625 B: one ~1 kB packet per tick, all four within ~40 ms
	waitForCount(&mu, func() int { return len(sent) }, 4)
	mu.Lock()
	defer mu.Unlock()
	if want := []uint16{101, 100, 1, 2}; !reflect.DeepEqual(sent, want) {
		t.Fatalf("sent %v, want %v", sent, want)
	}
	p.SetTargetBitrate(400_000)
	if p.rateBps != 600_000 {
		t.Fatalf("pacing rate %d, want 1.5 × the target", p.rateBps)
	}
}

// waitForCount polls count() under mu every 5 ms until it reaches want or 2 s have passed (the
// pacer tests' wait for their packets; the test then checks what was sent).
func waitForCount(mu *sync.Mutex, count func() int, want int) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := count()
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pushed is one packet handed to a pacer queue: its SSRC, RTP timestamp (the capture order) and
// sequence number.
type pushed struct {
	ssrc, ts uint32
	seq      uint16
}

// bbrQueueOrder hands these packets to webrtc-bbr's pacer queue in this order and returns the
// queue's order, by sequence number.
func bbrQueueOrder(ps ...pushed) []uint16 {
	e := &bbrEstimator{queue: list.New()}
	for _, p := range ps {
		e.enqueueLocked(&queued{h: rtp.Header{SSRC: p.ssrc, Timestamp: p.ts, SequenceNumber: p.seq}})
	}
	var order []uint16
	for el := e.queue.Front(); el != nil; el = el.Next() {
		order = append(order, el.Value.(*queued).h.SequenceNumber)
	}
	return order
}
