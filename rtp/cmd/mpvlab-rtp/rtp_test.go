package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp/codecs"
	"mpvlab/rtp/bbr"
)

func TestStampRoundTrip(t *testing.T) {
	in := frameStamp{Frame: 123456, CaptureNs: 38_468_154_510_820, Index: 7, Count: 9, NALBytes: 70_000}
	f, p := in.marshal()
	out, err := parseStamp(f, p)
	if err != nil || out != in {
		t.Fatalf("got %+v, %v; want %+v", out, err, in)
	}
	if _, err := parseStamp(f[:11], p); err == nil {
		t.Fatal("a short extension must be rejected")
	}
}

// An access unit as x264 writes it (4- and 3-byte start codes, SPS, PPS, SEI, an IDR slice larger
// than one packet): pion's payloader then depacketiser must give back the NAL bytes the sender counts.
func TestNALBytesSurvivePacketisation(t *testing.T) {
	au := []byte{0, 0, 0, 1, 0x67, 1, 2, 3, 0, 0, 0, 1, 0x68, 4, 5, 0, 0, 1, 0x06, 9, 9, 0, 0, 0, 1, 0x65}
	au = append(au, bytes.Repeat([]byte{0xab}, 5000)...)
	au = append(au, 0, 0, 1, 0x09, 0xf0) // an AUD: the payloader drops it, so it is not counted
	want := nalBytes(au)
	if want != 4+3+3+5001 {
		t.Fatalf("nalBytes = %d", want)
	}
	pay := &codecs.H264Payloader{}
	pkts := pay.Payload(maxPayloadMTU, au)
	if len(pkts) < 5 {
		t.Fatalf("expected FU-A fragmentation, got %d packets", len(pkts))
	}
	d := &codecs.H264Packet{}
	var out []byte
	for _, p := range pkts {
		b, err := d.Unmarshal(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	if got := nalBytes(out); got != want {
		t.Fatalf("depacketised %d NAL bytes, sent %d", got, want)
	}
}

// Feedback built by pion's own TWCC recorder (the viewer's) across the 16-bit wrap: 12 numbers
// reported (one of them lost), the last 8 sent never reported.
func TestFeedbackLedgerCountsEveryStatus(t *testing.T) {
	l := newFeedbackLedger()
	rec := twcc.NewRecorder(1)
	for i := 0; i < 20; i++ {
		seq := uint16(65530 + i) // wraps at 65536
		l.onSent(seq)
		if i < 12 && i != 10 {
			rec.Record(defaultSSRC, seq, int64(1000*i))
		}
	}
	raw, err := rtcp.Marshal(rec.BuildFeedbackPacket())
	if err != nil {
		t.Fatal(err)
	}
	l.onRTCP(raw)
	s := l.summary()
	if s.PacketsSent != 20 || s.Reported != 12 || s.ReportedReceived != 11 || s.ReportedLost != 1 || s.MissingFeedback != 8 {
		t.Fatalf("%+v", s)
	}
	if s.MissingLastConsecutive != 8 || l.lastCovered() || s.FeedbackPackets != 1 {
		t.Fatalf("tail: %+v", s)
	}
}

func TestUnknownControllerIsNamed(t *testing.T) {
	if _, err := newController("nope", controllerConfig{InitialBps: 300_000, MinBps: 50_000, MaxBps: 1_000_000}); err == nil {
		t.Fatal("want an error")
	}
	if _, err := newController("gcc", controllerConfig{InitialBps: 300_000, MinBps: 50_000, MaxBps: 1_000_000}); err != nil {
		t.Fatal(err)
	}
}

// The BBR adapter's decoding of TWCC: pion's recorder reports arrivals 5 ms apart (µs on its clock)
// and one loss; the acks must carry the same spacing and the loss, in sequence order.
func TestTWCCAcksKeepArrivalSpacing(t *testing.T) {
	rec := twcc.NewRecorder(1)
	for i := 0; i < 10; i++ {
		if i != 4 {
			rec.Record(defaultSSRC, uint16(65533+i), int64(100_000+5_000*i))
		}
	}
	pkts := rec.BuildFeedbackPacket()
	raw, err := rtcp.Marshal(pkts)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := rtcp.Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	acks := twccAcks(parsed[0].(*rtcp.TransportLayerCC), 65530)
	if len(acks) != 10 {
		t.Fatalf("%d acks", len(acks))
	}
	for i, a := range acks {
		if a.Seq != int64(65533+i) || a.Lost != (i == 4) {
			t.Fatalf("ack %d: %+v", i, a)
		}
		if i > 0 && i != 4 && i != 5 {
			if d := a.Arrival - acks[i-1].Arrival; d < 4750*time.Microsecond || d > 5250*time.Microsecond {
				t.Fatalf("ack %d: arrival step %v, want 5 ms (±250 µs, TWCC's resolution)", i, d)
			}
		}
	}
}

// The shared chunk walk: statuses for base, base+1, … across the 16-bit wrap, and no more than
// PacketStatusCount of them although the chunks hold more symbols (a run longer than needed, a
// status vector's padding), which both the ledger and the BBR adapter must ignore.
func TestForEachStatusStopsAtStatusCount(t *testing.T) {
	fb := &rtcp.TransportLayerCC{
		BaseSequenceNumber: 65534,
		PacketStatusCount:  6,
		PacketChunks: []rtcp.PacketStatusChunk{
			&rtcp.RunLengthChunk{PacketStatusSymbol: rtcp.TypeTCCPacketReceivedSmallDelta, RunLength: 3},
			&rtcp.StatusVectorChunk{SymbolSize: rtcp.TypeTCCSymbolSizeOneBit, SymbolList: []uint16{
				rtcp.TypeTCCPacketNotReceived, rtcp.TypeTCCPacketReceivedSmallDelta, rtcp.TypeTCCPacketNotReceived,
				rtcp.TypeTCCPacketReceivedSmallDelta, rtcp.TypeTCCPacketReceivedSmallDelta, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
			&rtcp.RunLengthChunk{PacketStatusSymbol: rtcp.TypeTCCPacketReceivedSmallDelta, RunLength: 5},
		},
	}
	var seqs []int64
	var lost []bool
	forEachStatus(fb, 65530, func(seq int64, status uint16) {
		seqs = append(seqs, seq)
		lost = append(lost, status == rtcp.TypeTCCPacketNotReceived)
	})
	wantLost := []bool{false, false, false, true, false, true}
	if len(seqs) != 6 {
		t.Fatalf("%d statuses, want 6: %v", len(seqs), seqs)
	}
	for i := range seqs {
		if seqs[i] != int64(65534+i) || lost[i] != wantLost[i] {
			t.Fatalf("status %d: seq %d lost %v; want seq %d lost %v", i, seqs[i], lost[i], 65534+i, wantLost[i])
		}
	}
}

// The study's variants reach the controller from the command line, and only for webrtc-bbr.
func TestBBRVariantFlagsReachTheController(t *testing.T) {
	base := []string{"--dest", "10.0.0.1:5000", "--out", "/nonexistent", "--encoder", "x.py"}
	cfg, err := parseSendFlags(append(base, "--controller", "webrtc-bbr", "--bbr-third-best",
		"--bbr-non-replacing-filter", "--bbr-no-recovery", "--bbr-probe-rtt-v2"))
	if err != nil {
		t.Fatal(err)
	}
	want := bbrVariant{NonReplacingFilter: true, ThirdBest: true, NoRecovery: true, ProbeRTTv2: true}
	if cfg.bbr != want {
		t.Fatalf("parsed %+v, want %+v", cfg.bbr, want)
	}
	e, err := newBBREstimator(controllerConfig{InitialBps: 300_000, MinBps: 50_000, MaxBps: 1_000_000, BBR: cfg.bbr})
	if err != nil {
		t.Fatal(err)
	}
	got := e.c.Config()
	if got.Filter != bbr.NonReplacing || !got.ThirdBest || !got.NoRecovery || !got.ProbeRTTv2 {
		t.Fatalf("controller config %+v does not carry the variants", got)
	}
	if def, _ := newBBREstimator(controllerConfig{InitialBps: 300_000, MinBps: 50_000, MaxBps: 1_000_000}); def.c.Config().Filter != bbr.Replacing || def.c.Config().ThirdBest {
		t.Fatalf("default config %+v is not WebRTC's", def.c.Config())
	}
	if _, err := parseSendFlags(append(base, "--controller", "gcc", "--bbr-third-best")); err == nil {
		t.Fatal("a BBR variant with gcc was accepted")
	}
}

// The RTT GCC derives from one TWCC feedback (issue 48, feedback.go feedbackRTT): three packets sent
// 0, 10, 20 ms after T, arriving 50, 60, 80 ms (the viewer's clock), the feedback read at T + 120 ms:
// now − departure − (latest arrival − arrival) = 90, 90, 100 ms; the minimum, 90 ms, over 3 packets.
func TestFeedbackRTTAsGCCDerivesIt(t *testing.T) {
	l := newFeedbackLedger()
	rec := twcc.NewRecorder(1)
	const T = int64(5e9)
	for i, arr := range []int64{50_000, 60_000, 80_000} { // µs
		u := l.onSent(uint16(i))
		l.sentNs[u] = T + int64(i)*10e6
		rec.Record(defaultSSRC, uint16(i), arr)
	}
	l.onSent(3) // sent, never arrived: reported lost only if a later one arrives; not in the minimum
	raw, err := rtcp.Marshal(rec.BuildFeedbackPacket())
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := rtcp.Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	l.feedbackRTT(pkts[0].(*rtcp.TransportLayerCC), T+120e6)
	if len(l.rtt) != 1 || l.rtt[0].rttNs != 90e6 || l.rtt[0].acks != 3 {
		t.Fatalf("rtt samples %+v, want one of 90 ms over 3 packets", l.rtt)
	}
}
