package main

import "github.com/pion/rtcp"

// forEachStatus calls f for every packet a TWCC feedback reports, in sequence order: the statuses
// are for base, base+1, … (unwrapped near ref), PacketStatusCount of them. A chunk may hold more
// symbols than packets are left (a status vector's padding in the last chunk); those are not
// packets and are skipped. The one walk of the chunks, shared by the sender's feedback ledger
// (feedback.go) and the webrtc-bbr adapter's ack decoding (bbr_estimator.go), so both read the
// same feedback the same way.
func forEachStatus(fb *rtcp.TransportLayerCC, ref int64, f func(seq int64, status uint16)) {
	seq := unwrap16(fb.BaseSequenceNumber, ref)
	left := int(fb.PacketStatusCount)
	emit := func(status uint16) bool {
		if left <= 0 {
			return false
		}
		f(seq, status)
		seq++
		left--
		return true
	}
	for _, c := range fb.PacketChunks {
		switch ch := c.(type) {
		case *rtcp.RunLengthChunk:
			for i := 0; i < int(ch.RunLength); i++ {
				if !emit(ch.PacketStatusSymbol) {
					break
				}
			}
		case *rtcp.StatusVectorChunk:
			for _, s := range ch.SymbolList {
				if !emit(s) {
					break
				}
			}
		}
		if left <= 0 {
			return
		}
	}
}
