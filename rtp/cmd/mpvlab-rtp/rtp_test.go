package main

import (
	"bytes"
	"testing"

	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp/codecs"
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
	if _, err := newController("nope", controllerConfig{300_000, 50_000, 1_000_000}); err == nil {
		t.Fatal("want an error")
	}
	if _, err := newController("gcc", controllerConfig{300_000, 50_000, 1_000_000}); err != nil {
		t.Fatal(err)
	}
}
