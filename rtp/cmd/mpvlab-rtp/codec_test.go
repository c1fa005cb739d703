package main

import (
	"bytes"
	"testing"
)

func mustCodec(t *testing.T, name string) videoCodec {
	t.Helper()
	vc, err := codecByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return vc
}

// A VP8 frame larger than one payload is cut by pion's payloader and put back together by the
// viewer's reassembly byte for byte; its stamp is the frame's length; the frame tag's bit 0 tells a
// key frame (0) from an inter frame (1).
func TestVP8FrameRoundTrip(t *testing.T) {
	vc := mustCodec(t, "vp8")
	frame := make([]byte, 3*maxPayloadMTU+17)
	for i := range frame {
		frame[i] = byte(i * 7)
	}
	frame[0] = 0x10 // bit 0 clear: key frame
	parts := vc.payloader().Payload(maxPayloadMTU, frame)
	if len(parts) != 4 {
		t.Fatalf("%d payloads for %d bytes at MTU %d", len(parts), len(frame), maxPayloadMTU)
	}
	var got []byte
	unpack := vc.newUnpacker()
	for _, p := range parts {
		if len(p) > maxPayloadMTU {
			t.Fatalf("payload of %d bytes > %d", len(p), maxPayloadMTU)
		}
		out, err := unpack(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out...)
	}
	if !bytes.Equal(got, frame) || vc.stampBytes(got) != uint32(len(frame)) {
		t.Fatalf("reassembled %d bytes, want the %d sent", len(got), len(frame))
	}
	if !vc.isKey(frame) || vc.isKey([]byte{0x11}) {
		t.Fatal("key-frame bit misread")
	}
	if _, err := codecByName("h265"); err == nil {
		t.Fatal("an unknown codec was accepted")
	}
}

// An H.264 access unit with a NAL unit larger than one payload (FU-A fragments) goes through the
// same codec layer and comes back with the NAL bytes the stamp carries: the depacketiser keeps its
// fragment state across the frame's packets (a fresh one per packet loses every fragment).
func TestH264FrameRoundTripAcrossFragments(t *testing.T) {
	vc := mustCodec(t, "h264")
	nal := make([]byte, 2*maxPayloadMTU+100)
	nal[0] = 0x65 // IDR slice
	for i := 1; i < len(nal); i++ {
		nal[i] = byte(i%250 + 1)
	}
	au := append([]byte{0, 0, 0, 1}, nal...)
	parts := vc.payloader().Payload(maxPayloadMTU, au)
	if len(parts) < 3 {
		t.Fatalf("%d payloads: want FU-A fragments", len(parts))
	}
	var got []byte
	unpack := vc.newUnpacker()
	for _, p := range parts {
		out, err := unpack(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out...)
	}
	if vc.stampBytes(got) != vc.stampBytes(au) || !vc.isKey(got) {
		t.Fatalf("reassembled NAL bytes %d, want %d (key %v)", vc.stampBytes(got), vc.stampBytes(au), vc.isKey(got))
	}
}
