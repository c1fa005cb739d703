package main

import (
	"sync"
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// RemoteEstimatorProxy::OnBitrateChanged (2018): interval = int(0.5 + 68·8·1000 / clamp(0.05·bitrate,
// 68·8·1000/250, 68·8·1000/50)) ms. Expected values worked out by hand from that line.
func TestTWCCFeedbackIntervalFollows2018Formula(t *testing.T) {
	for _, c := range []struct {
		bps  int
		want time.Duration
	}{
		{0, 250 * time.Millisecond},        // clamped to kMinTwccRate: the 250 ms ceiling
		{40_000, 250 * time.Millisecond},   // 2 000 bit/s of reports < 2 176: still the ceiling
		{100_000, 109 * time.Millisecond},  // 5 000 bit/s: 544 000 / 5 000 = 108.8 → 109
		{150_000, 73 * time.Millisecond},   // 7 500 bit/s: 72.53 → 73
		{217_600, 50 * time.Millisecond},   // exactly kMaxTwccRate: 50
		{300_000, 50 * time.Millisecond},   // kDefaultStartBitrateBps: the viewer in the study's set-up
		{5_000_000, 50 * time.Millisecond}, // clamped to the 50 ms floor
	} {
		if got := twccFeedbackInterval(c.bps); got != c.want {
			t.Errorf("twccFeedbackInterval(%d) = %v, want %v", c.bps, got, c.want)
		}
	}
}

func TestRecvFeedbackIntervalFromItsOwnTarget(t *testing.T) {
	c, err := parseRecvFlags([]string{"--out", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c.ownTargetBps != 300000 || c.feedbackInterval != 50*time.Millisecond {
		t.Fatalf("default: own target %d, interval %v; want 300000 (kDefaultStartBitrateBps) and 50 ms", c.ownTargetBps, c.feedbackInterval)
	}
	c, err = parseRecvFlags([]string{"--out", t.TempDir(), "--own-target-bps", "100000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.feedbackInterval != 109*time.Millisecond {
		t.Fatalf("own target 100 kbit/s: interval %v, want 109 ms", c.feedbackInterval)
	}
	if _, err := parseRecvFlags([]string{"--out", t.TempDir(), "--own-target-bps", "-1"}); err == nil {
		t.Fatal("a negative own target was accepted")
	}
}

// manualTicker is a ticker the test fires by hand: the interceptor's clock without real time.
type manualTicker struct{ ch chan time.Time }

func (m *manualTicker) Ch() <-chan time.Time { return m.ch }
func (m *manualTicker) Stop()                {}

// The receiver's pion TWCC interceptor, built with the receiver's options at two bitrates, asks for
// a ticker of exactly the 2018 interval and sends one feedback per tick reporting the packets since
// the last one (the chain the receiver runs, the ticker fired by hand instead of by the clock).
func TestRecvTWCCInterceptorTicksAtThe2018Interval(t *testing.T) {
	for _, bps := range []int{300_000, 100_000} {
		want := twccFeedbackInterval(bps)
		var mu sync.Mutex
		var asked []time.Duration
		tick := &manualTicker{ch: make(chan time.Time)}
		factory := func(d time.Duration) twcc.Ticker {
			mu.Lock()
			asked = append(asked, d)
			mu.Unlock()
			return tick
		}
		tf, err := twcc.NewSenderInterceptor(twccSenderOptions(want, twcc.SendTicker(factory))...)
		if err != nil {
			t.Fatal(err)
		}
		reg := interceptor.Registry{}
		reg.Add(tf)
		chain, err := reg.Build("test")
		if err != nil {
			t.Fatal(err)
		}
		fbs := make(chan *rtcp.TransportLayerCC, 4)
		chain.BindRTCPWriter(interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, _ interceptor.Attributes) (int, error) {
			for _, p := range pkts {
				if fb, ok := p.(*rtcp.TransportLayerCC); ok {
					fbs <- fb
				}
			}
			return 0, nil
		}))
		next := uint16(0)
		info := &interceptor.StreamInfo{SSRC: defaultSSRC, RTPHeaderExtensions: []interceptor.RTPHeaderExtension{{URI: twccURI, ID: extTWCC}}}
		reader := chain.BindRemoteStream(info, interceptor.RTPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
			h := rtp.Header{Version: 2, SSRC: defaultSSRC, SequenceNumber: next}
			ext, _ := (&rtp.TransportCCExtension{TransportSequence: next}).Marshal()
			_ = h.SetExtension(extTWCC, ext)
			next++
			n, err := h.MarshalTo(b)
			return n, a, err
		}))
		buf := make([]byte, 1500)
		for round := 0; round < 2; round++ {
			for i := 0; i < 5; i++ {
				if _, _, err := reader.Read(buf, nil); err != nil {
					t.Fatal(err)
				}
			}
			tick.ch <- time.Now() // the interceptor's loop takes it after the packets (one goroutine, in order)
			select {
			case fb := <-fbs:
				if fb.BaseSequenceNumber != uint16(round*5) || fb.PacketStatusCount != 5 {
					t.Fatalf("%d bit/s round %d: feedback base %d count %d, want base %d count 5", bps, round,
						fb.BaseSequenceNumber, fb.PacketStatusCount, round*5)
				}
			case <-time.After(5 * time.Second): // a bound for a wedged goroutine, not a timing figure
				t.Fatalf("%d bit/s: no feedback after a tick", bps)
			}
		}
		_ = chain.Close()
		mu.Lock()
		if len(asked) != 1 || asked[0] != want {
			t.Fatalf("%d bit/s: ticker asked for %v, want one of %v", bps, asked, want)
		}
		mu.Unlock()
	}
}
