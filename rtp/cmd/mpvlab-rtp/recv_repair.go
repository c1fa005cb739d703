package main

import (
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp/codecs"
)

// The viewer's side of loss repair (repair.go): NackModule's NACKs, RTX accounting, and the
// key-frame request of VideoReceiveStream::Decode (2018).

const (
	viewerSSRC = 0x6d707677 // "mpvw": the viewer's RTCP sender SSRC
	// video_receive_stream.cc (2018) Decode(): kMaxWaitForFrameMs — no decodable frame for this long
	// (the stream active, no key frame arriving) → RequestKeyFrame (a PLI, the default
	// KeyFrameRequestMethod); kMaxWaitForKeyFrameMs — a key-frame packet this recent means one is
	// arriving; a packet within the last 5 s means the stream is active.
	maxWaitForFrame       = 3000 * time.Millisecond
	maxWaitForKeyFrame    = 200 * time.Millisecond
	streamActiveWithin    = 5 * time.Second
	pliReasonNoFrame      = "no_decodable_frame"
	pliReasonNackOverflow = "nack_list_overflow"
)

type recvRepair struct {
	nackOn, pliOn bool
	nack          *nackModule
	// NACK messages sent; the numbers are in nack.nacksSent
	nackMessages, nackSendErrors int
	// retransmissions (RTX stream) received
	rtxPackets                   int
	rtxBytes                     int64
	rtxDuplicate                 int
	repairedInTime, repairedLate int
	framesRepaired               int // complete frames with ≥ 1 packet that came only as a retransmission
	framesRepairedOnTime         int
	// key-frame requests
	plis            map[string]int
	lastDecodableNs int64 // the decode loop's last frame (or last time-out): its wait starts there
	lastKeyPacketNs int64 // a packet of a key frame's first packet arrived
	lastPacketNs    int64
}

func newRecvRepair(c recvConfig) recvRepair {
	return recvRepair{nackOn: c.nack, pliOn: c.pli, nack: newNackModule(), plis: map[string]int{}}
}

// onMediaPacket feeds a new media sequence number (an original or an unwrapped retransmission) to
// the NACK module and sends what it asks for; the caller holds r.mu.
func (rp *recvRepair) onMediaPacket(r *receiver, seq int64, st frameStamp, payload []byte, now int64) {
	rp.lastPacketNs = now
	key := st.Index == 0 && keyPacket(r.vc.name, payload)
	if key {
		rp.lastKeyPacketNs = now
	}
	if !rp.nackOn {
		return
	}
	batch, requestKey := rp.nack.onPacket(seq, key, now/1e6)
	r.sendNackLocked(batch)
	if requestKey {
		r.sendPLILocked(pliReasonNackOverflow)
	}
}

// keyPacket: the first packet of a key frame (NackModule's is_keyframe): for H.264 an IDR slice or
// SPS (alone, in a STAP-A, or an FU-A start), for VP8 a frame tag with its key-frame bit.
func keyPacket(codec string, payload []byte) bool {
	if len(payload) == 0 {
		return false
	}
	if codec == "vp8" {
		d := &codecs.VP8Packet{}
		out, err := d.Unmarshal(payload)
		return err == nil && d.S == 1 && d.PID == 0 && len(out) > 0 && out[0]&1 == 0
	}
	isKeyNAL := func(t byte) bool { return t == 5 || t == 7 }
	switch t := payload[0] & 0x1f; t {
	case 24: // STAP-A: 2-byte sizes, then NAL units
		for i := 1; i+2 < len(payload); {
			n := int(payload[i])<<8 | int(payload[i+1])
			if isKeyNAL(payload[i+2] & 0x1f) {
				return true
			}
			i += 2 + n
		}
		return false
	case 28: // FU-A
		return len(payload) > 1 && payload[1]&0x80 != 0 && isKeyNAL(payload[1]&0x1f)
	default:
		return isKeyNAL(t)
	}
}

func (r *receiver) sendRTCPLocked(p rtcp.Packet) bool {
	if r.peer == nil {
		return false
	}
	b, err := p.Marshal()
	if err != nil {
		return false
	}
	_, err = r.conn.WriteToUDP(b, r.peer)
	return err == nil
}

// sendNackLocked sends one generic NACK (RFC 4585 §6.2.1) naming batch.
func (r *receiver) sendNackLocked(batch []int64) {
	if len(batch) == 0 {
		return
	}
	seqs := make([]uint16, len(batch))
	for i, s := range batch {
		seqs[i] = uint16(s)
	}
	r.rep.nackMessages++
	if !r.sendRTCPLocked(&rtcp.TransportLayerNack{SenderSSRC: viewerSSRC, MediaSSRC: defaultSSRC,
		Nacks: rtcp.NackPairsFromSequenceNumbers(seqs)}) {
		r.rep.nackSendErrors++
	}
}

func (r *receiver) sendPLILocked(reason string) {
	r.rep.plis[reason]++
	_ = r.sendRTCPLocked(&rtcp.PictureLossIndication{SenderSSRC: viewerSSRC, MediaSSRC: defaultSSRC})
}

// startNackProcess runs NackModule::Process every kProcessIntervalMs until the returned channel
// is closed.
func (r *receiver) startNackProcess() chan struct{} {
	stop := make(chan struct{})
	if !r.rep.nackOn {
		return stop
	}
	go func() {
		t := time.NewTicker(nackProcessInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.mu.Lock()
				r.sendNackLocked(r.rep.nack.process(monotonicNs() / 1e6))
				r.mu.Unlock()
			}
		}
	}()
	return stop
}

// checkKeyFrameLocked is Decode()'s time-out branch, called at each playout tick: fed frames
// restart the wait; after maxWaitForFrame without one, a PLI when the stream is active and no key
// frame is arriving, and the wait starts over (the next NextFrame call).
func (r *receiver) checkKeyFrameLocked(now int64, fed int) {
	rp := &r.rep
	if rp.lastPacketNs == 0 {
		return // nothing arrived yet: the decode loop has not started
	}
	if fed > 0 || rp.lastDecodableNs == 0 {
		rp.lastDecodableNs = now
		return
	}
	if now-rp.lastDecodableNs < maxWaitForFrame.Nanoseconds() {
		return
	}
	rp.lastDecodableNs = now
	active := now-rp.lastPacketNs < streamActiveWithin.Nanoseconds()
	receivingKey := rp.lastKeyPacketNs != 0 && now-rp.lastKeyPacketNs < maxWaitForKeyFrame.Nanoseconds()
	if rp.pliOn && active && !receivingKey {
		r.sendPLILocked(pliReasonNoFrame)
	}
}

// totals is receiver.json's `repair`; lostOriginals = media packets expected − received.
func (rp *recvRepair) totals(end map[string]any, lostOriginals int) map[string]any {
	rtxExpected := any(nil)
	rtxLost := any(nil)
	if v, ok := end["rtx_packets"].(float64); ok {
		rtxExpected, rtxLost = int(v), int(v)-rp.rtxPackets
	}
	repaired := rp.repairedInTime + rp.repairedLate
	plis := 0
	for _, n := range rp.plis {
		plis += n
	}
	return map[string]any{
		"nack": rp.nackOn, "pli": rp.pliOn,
		"nack_messages_sent": rp.nackMessages, "nacked_packets": rp.nack.nacksSent, "nack_send_errors": rp.nackSendErrors,
		"nack_gave_up": rp.nack.gaveUp, "nack_rtt_ms": rp.nack.rtt.Milliseconds(),
		"rtx_packets_received": rp.rtxPackets, "rtx_bytes_received": rp.rtxBytes, "rtx_packets_expected": rtxExpected,
		"rtx_packets_lost": rtxLost, "rtx_duplicate": rp.rtxDuplicate,
		"packets_repaired": repaired, "repaired_in_time": rp.repairedInTime, "repaired_too_late": rp.repairedLate,
		"packets_lost_unrepaired": lostOriginals - repaired,
		"frames_repaired":         rp.framesRepaired, "frames_repaired_on_time": rp.framesRepairedOnTime,
		"pli_sent": plis, "pli_sent_by_reason": rp.plis,
		"definition": "retransmissions unwrapped to their original sequence number; in time = arrived by the " +
			"frame's capture + playout deadline; duplicate = that number had already arrived; " +
			"rtx_packets_received = packets_repaired + rtx_duplicate; packets_lost (the media stream) = " +
			"packets_repaired + packets_lost_unrepaired",
	}
}
