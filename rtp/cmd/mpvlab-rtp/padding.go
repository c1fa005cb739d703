package main

import (
	"github.com/pion/rtp"
)

// Padding-only RTP packets, as libwebrtc's pacer asks its RTP sender for while its controller
// probes for more bandwidth. They travel on their own SSRC and payload type — the stream libwebrtc
// sends padding on when RTX is negotiated — so the media stream's RTP sequence numbers, and with
// them the viewer's packet and frame accounting, are those of the video alone. Each carries the
// transport-wide sequence number like media, so the viewer's TWCC feedback reports it and the
// controller counts its delivery.
const (
	paddingSSRC = 0x6d70766e // "mpvn"
	paddingPT   = 97
	// paddingBytes per padding-only packet: libwebrtc's kMaxPaddingLength (RFC 3550 allows 255 in
	// the one-byte count; 224 keeps it a multiple of 32 for SRTP), sent as whole packets.
	paddingBytes = 224
)

// paddingPayload is what follows a padding packet's header: paddingBytes of padding whose last
// byte is their count (RFC 3550 §5.1, P bit set). pion's Packet.Unmarshal strips it and leaves an
// empty payload, which is how the viewer recognises padding.
func paddingPayload() []byte {
	p := make([]byte, paddingBytes)
	p[len(p)-1] = paddingBytes
	return p
}

// isPaddingOnly: a packet that is nothing but RTP padding on the padding stream.
func isPaddingOnly(p *rtp.Packet) bool {
	return p.SSRC == paddingSSRC && p.Padding && len(p.Payload) == 0
}
