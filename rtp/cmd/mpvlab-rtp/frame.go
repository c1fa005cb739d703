package main

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// RTP header extension IDs (one-byte form, RFC 8285). 1 is the transport-wide sequence number the
// TWCC feedback refers to; 2 and 3 are mpvlab's own and stamp every packet with its frame, so the
// viewer can account a frame even when its first or last packet is lost.
const (
	extTWCC       = 1
	extFrame      = 2 // frame number u32, capture time u64 (ns, CLOCK_MONOTONIC)
	extFramePart  = 3 // packet index u16, packets in frame u16, NAL bytes of the frame u32
	twccURI       = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
	defaultSSRC   = 0x6d70766c // "mpvl"
	payloadType   = 96
	endMagic      = "MPVE" // the sender's end-of-stream datagram; its first byte is not RTP version 2
	frameExtLen   = 12
	framePartLen  = 8
	maxPayloadMTU = 1200 // RTP payload bytes per packet, as WebRTC's video packetiser
	udpIPv4Header = 28   // UDP (8) + IPv4 (20) bytes around every RTP packet
)

type frameStamp struct {
	Frame     uint32
	CaptureNs int64
	Index     uint16
	Count     uint16
	NALBytes  uint32
}

func (s frameStamp) marshal() (frame, part []byte) {
	frame = make([]byte, frameExtLen)
	binary.BigEndian.PutUint32(frame[0:], s.Frame)
	binary.BigEndian.PutUint64(frame[4:], uint64(s.CaptureNs))
	part = make([]byte, framePartLen)
	binary.BigEndian.PutUint16(part[0:], s.Index)
	binary.BigEndian.PutUint16(part[2:], s.Count)
	binary.BigEndian.PutUint32(part[4:], s.NALBytes)
	return frame, part
}

var errNoStamp = errors.New("packet without mpvlab frame extensions")

func parseStamp(frame, part []byte) (frameStamp, error) {
	if len(frame) != frameExtLen || len(part) != framePartLen {
		return frameStamp{}, errNoStamp
	}
	return frameStamp{
		Frame:     binary.BigEndian.Uint32(frame[0:]),
		CaptureNs: int64(binary.BigEndian.Uint64(frame[4:])),
		Index:     binary.BigEndian.Uint16(part[0:]),
		Count:     binary.BigEndian.Uint16(part[2:]),
		NALBytes:  binary.BigEndian.Uint32(part[4:]),
	}, nil
}

// nalBytes sums the NAL units of an Annex B access unit the way pion's H264 payloader cuts them
// (3- or 4-byte start codes; AUD and filler NALs are dropped by the payloader, so not counted). The
// sender stamps the sum, the viewer recomputes it from what it depacketised: equal means the frame was
// reassembled whole.
func nalBytes(annexB []byte) uint32 {
	var total uint32
	forEachNAL(annexB, func(n []byte) {
		if len(n) == 0 {
			return
		}
		if t := n[0] & 0x1f; t == 9 || t == 12 {
			return
		}
		total += uint32(len(n))
	})
	return total
}

var startCode = []byte{0, 0, 1}

// forEachNAL is pion/rtp's emitNalus (codecs/h264_packet.go, unexported), kept identical so both
// ends cut NAL units exactly as the payloader does.
func forEachNAL(nals []byte, emit func([]byte)) {
	start := bytes.Index(nals, startCode)
	offset := 3
	if start == -1 {
		emit(nals)
		return
	}
	for start < len(nals) {
		end := bytes.Index(nals[start+offset:], startCode)
		if end == -1 {
			emit(nals[start+offset:])
			break
		}
		next := start + offset + end
		fourByte := nals[next-1] == 0
		if fourByte {
			next--
		}
		emit(nals[start+offset : next])
		start = next
		if fourByte {
			offset = 4
		} else {
			offset = 3
		}
	}
}

// unwrap16 extends a 16-bit sequence number to the int64 nearest to ref.
func unwrap16(x uint16, ref int64) int64 {
	return ref + int64(int16(x-uint16(ref)))
}
