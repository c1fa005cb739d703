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
	for _, p := range parts {
		if len(p) > maxPayloadMTU {
			t.Fatalf("payload of %d bytes > %d", len(p), maxPayloadMTU)
		}
		out, err := vc.unpack(p)
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
