package main

import (
	"fmt"

	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
)

// videoCodec is what the sender and the viewer do differently per codec: how a frame is cut into
// RTP payloads and put back together, which byte count the frame stamp carries for the viewer to
// check the reassembly against, and how a keyframe is recognised.
type videoCodec struct {
	name      string // h264 | vp8: the encoder's and the decoder's --codec
	mime      string
	payloader func() rtp.Payloader
	// newUnpacker: one depacketiser per frame — H.264's keeps FU-A state from packet to packet —
	// turning each packet's payload, in order, into its part of the frame
	newUnpacker func() func(payload []byte) ([]byte, error)
	stampBytes  func(frame []byte) uint32 // what the viewer compares after reassembly
	isKey       func(frame []byte) bool
}

func codecByName(name string) (videoCodec, error) {
	switch name {
	case "h264":
		return videoCodec{name: "h264", mime: "video/H264",
			payloader:   func() rtp.Payloader { return &codecs.H264Payloader{} },
			newUnpacker: func() func([]byte) ([]byte, error) { return (&codecs.H264Packet{}).Unmarshal },
			// pion's payloader drops what is not a NAL unit (start codes, filler): the NAL bytes
			stampBytes: nalBytes, isKey: isKeyframe}, nil
	case "vp8":
		return videoCodec{name: "vp8", mime: "video/VP8",
			// RFC 7741 with a one-byte payload descriptor (no picture ID), as pion builds it
			payloader: func() rtp.Payloader { return &codecs.VP8Payloader{} },
			newUnpacker: func() func([]byte) ([]byte, error) {
				return func(p []byte) ([]byte, error) {
					d := &codecs.VP8Packet{}
					if _, err := d.Unmarshal(p); err != nil {
						return nil, err
					}
					return d.Payload, nil
				}
			},
			stampBytes: func(f []byte) uint32 { return uint32(len(f)) }, isKey: isVP8Keyframe}, nil
	}
	return videoCodec{}, fmt.Errorf("codec %q: h264 or vp8", name)
}

// isVP8Keyframe: the frame tag's first bit (RFC 6386 §9.1, frame_type) is 0 for a key frame.
func isVP8Keyframe(frame []byte) bool { return len(frame) > 0 && frame[0]&1 == 0 }
