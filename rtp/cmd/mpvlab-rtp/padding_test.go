package main

import (
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
)

// wirePacket is what the BBR pacer handed to the wire, with the pacer's state at that moment.
type wirePacket struct {
	tseq          uint16
	padding       bool
	size          int   // on the wire (RTP header + payload)
	counted       int   // what the pacer and the controller count: the payload (or the padding)
	inflightAfter int64 // the controller's bytes in flight once it was sent
	cwnd          int64
	queued        int       // media packets still queued
	at            time.Time // the pacer tick that sent it
}

// pacerUnderTest: the webrtc-bbr estimator's pacer driven tick by tick (no goroutine, no feedback:
// the controller stays in STARTUP, where it probes), writing into a recorder.
func pacerUnderTest(t *testing.T, v bbrVariant) (*bbrEstimator, *[]wirePacket) {
	t.Helper()
	return pacerUnderTestAt(t, v, 1_300_000)
}

// pacerUnderTestAt: the same with max_bitrate maxBps, which caps STARTUP's pacing rate.
func pacerUnderTestAt(t *testing.T, v bbrVariant, maxBps int) (*bbrEstimator, *[]wirePacket) {
	t.Helper()
	e, err := newBBREstimator(controllerConfig{InitialBps: 300_000, MinBps: 50_000, MaxBps: maxBps, BBR: v})
	if err != nil {
		t.Fatal(err)
	}
	var out []wirePacket
	e.extID = extTWCC
	e.writer = interceptor.RTPWriterFunc(func(h *rtp.Header, p []byte, _ interceptor.Attributes) (int, error) {
		var ext rtp.TransportCCExtension
		if err := ext.Unmarshal(h.GetExtension(extTWCC)); err != nil {
			t.Fatalf("a packet left without a transport-wide sequence number: %v", err)
		}
		pad := h.SSRC == paddingSSRC
		if pad {
			pkt := rtp.Packet{}
			raw, _ := h.Marshal()
			if err := pkt.Unmarshal(append(raw, p...)); err != nil || !isPaddingOnly(&pkt) {
				t.Fatalf("padding packet does not parse as padding-only: %v %+v", err, pkt.Header)
			}
		}
		out = append(out, wirePacket{ext.TransportSequence, pad, h.MarshalSize() + len(p), len(p), e.c.Inflight(),
			e.c.CongestionWindow(), e.queue.Len(), e.lastSend})
		return h.MarshalSize() + len(p), nil
	})
	e.tick = time.Unix(0, 0)
	return e, &out
}

func queueMedia(e *bbrEstimator, n int, seq *uint16) {
	for i := 0; i < n; i++ {
		h := rtp.Header{Version: 2, PayloadType: payloadType, SequenceNumber: *seq, SSRC: defaultSSRC}
		*seq++
		e.queue.PushBack(&queued{h: h, payload: make([]byte, maxPayloadMTU)})
	}
}

// While BBR probes (STARTUP here), the pacer pads when its media queue is empty and the window is
// not full (paced_sender.cc 2018: packets_->Empty() && !Congested()), no faster than the pad rate;
// once the window is full only a keep-alive padding packet leaves, after 500 ms without sending
// (kCongestedPacketIntervalMs); media and padding share one consecutive transport-wide sequence;
// with the media queued, media goes first.
func TestPacerPadsWithinWindowAndRate(t *testing.T) {
	e, out := pacerUnderTest(t, bbrVariant{})
	padRate := e.c.PadRate()
	if padRate <= 0 || padRate != e.c.PacingRate() {
		t.Fatalf("STARTUP: pad rate %g, pacing rate %g: want equal and > 0", padRate, e.c.PacingRate())
	}
	var mediaSeq uint16
	now := e.tick
	const ticks = 1200 // 6 s of 5 ms Process() calls, no feedback: the window must stop the padding
	for i := 0; i < ticks; i++ {
		if i%13 == 0 && i < 200 { // a frame of 3 packets every 65 ms for the first second
			queueMedia(e, 3, &mediaSeq)
		}
		now = now.Add(bbrTick)
		e.mu.Lock()
		e.tick = e.paceLocked(now)
		e.mu.Unlock()
	}
	var pads, media, padBytes, keepAlives int
	for i, p := range *out {
		if p.tseq != uint16(i) {
			t.Fatalf("packet %d left with transport seq %d: not consecutive", i, p.tseq)
		}
		if p.padding {
			pads++
			padBytes += p.size
			before := p.inflightAfter - int64(p.counted)
			if p.queued != 0 && before < p.cwnd {
				t.Fatalf("packet %d: padding sent with %d media packets queued and the window open", i, p.queued)
			}
			first := i // the first padding packet of this Process() call
			for first > 0 && (*out)[first-1].padding && (*out)[first-1].at.Equal(p.at) {
				first--
			}
			if before >= p.cwnd && first < i && (*out)[first].inflightAfter-int64((*out)[first].counted) < p.cwnd {
				// The rest of one SendPadding call that began with the window open: 2018's
				// SendPadData sends whole packets until the bytes asked for are covered and does
				// not look at the window between them.
				continue
			}
			if before >= p.cwnd {
				keepAlives++
				if gap := p.at.Sub((*out)[i-1].at); gap < congestedPacketInterval {
					t.Fatalf("packet %d: padding with the window full (%d of %d) only %v after the last send",
						i, before, p.cwnd, gap)
				}
			}
		} else {
			media++
		}
	}
	// Without feedback the padding fills the window too, and media waits behind it (Congested()).
	if media+e.queue.Len() != int(mediaSeq) {
		t.Fatalf("%d media packets sent + %d still queued != %d queued", media, e.queue.Len(), mediaSeq)
	}
	t.Logf("%d media and %d padding packets (%d bytes); window %d, in flight %d", media, pads, padBytes,
		e.c.CongestionWindow(), e.c.Inflight())
	if pads == 0 {
		t.Fatal("no padding while probing")
	}
	// Nothing acknowledged: the window filled, and from then on one keep-alive every 500 ms.
	if e.c.CanSend() {
		t.Fatalf("no feedback for 6 s and the window (%d) still admits packets (in flight %d)",
			e.c.CongestionWindow(), e.c.Inflight())
	}
	var filled time.Time
	for i, p := range *out {
		if p.inflightAfter >= p.cwnd {
			filled = p.at
			t.Logf("window full at packet %d, %v into the run", i, p.at.Sub(time.Unix(0, 0)))
			break
		}
	}
	wantAlive := int(now.Sub(filled) / congestedPacketInterval)
	if keepAlives != e.keepAlive || keepAlives < wantAlive-1 || keepAlives > wantAlive {
		t.Fatalf("%d keep-alive padding packets (estimator counted %d), want %d (one per 500 ms of %v full)",
			keepAlives, e.keepAlive, wantAlive, now.Sub(filled))
	}
	// Rate: the budgets refill at the pacing rate = the pad rate here and never build up, so all
	// bytes counted (payload and padding; the RTP headers are not budgeted, as in libwebrtc 2018)
	// ≤ that rate × elapsed + what one call may overdraw (a media packet and a padding packet) + the
	// keep-alive packets, which no budget gates.
	var total int
	for _, p := range *out {
		total += p.counted
	}
	limit := padRate/8*float64(ticks)*bbrTick.Seconds() + float64(maxPayloadMTU) + paddingBytes +
		float64(keepAlives*paddingBytes)
	if float64(total) > limit {
		t.Fatalf("sent %d bytes in %v, more than the pad rate allows (%.0f)", total, ticks*bbrTick, limit)
	}
	if e.padSent != pads || e.padBytes != int64(padBytes) {
		t.Fatalf("estimator counted %d padding packets / %d bytes, the wire %d / %d", e.padSent, e.padBytes, pads, padBytes)
	}
}

// With padding turned off (workload.bbr.padding: false → --bbr-no-padding) the pacer sends media
// only, numbered consecutively; StopPadding (the stream's end) also stops it.
func TestPacerWithoutPadding(t *testing.T) {
	for _, stop := range []bool{false, true} {
		v := bbrVariant{NoPadding: !stop}
		e, out := pacerUnderTest(t, v)
		if stop {
			e.StopPadding()
		}
		var mediaSeq uint16
		now := e.tick
		for i := 0; i < 200; i++ {
			if i%13 == 0 {
				queueMedia(e, 2, &mediaSeq)
			}
			now = now.Add(bbrTick)
			e.mu.Lock()
			e.tick = e.paceLocked(now)
			e.mu.Unlock()
		}
		for i, p := range *out {
			if p.padding || p.tseq != uint16(i) {
				t.Fatalf("stop=%v packet %d: padding %v transport seq %d", stop, i, p.padding, p.tseq)
			}
		}
		if len(*out) != int(mediaSeq) {
			t.Fatalf("stop=%v: %d packets sent of %d queued", stop, len(*out), mediaSeq)
		}
	}
	base := []string{"--dest", "10.0.0.1:5000", "--out", "/nonexistent", "--encoder", "x.py"}
	cfg, err := parseSendFlags(append(base, "--controller", "webrtc-bbr", "--bbr-no-padding"))
	if err != nil || !cfg.bbr.NoPadding {
		t.Fatalf("--bbr-no-padding: %+v %v", cfg.bbr, err)
	}
	if _, err := parseSendFlags(append(base, "--controller", "gcc", "--bbr-no-padding")); err == nil {
		t.Fatal("--bbr-no-padding with gcc was accepted")
	}
}

// The viewer counts a padding-only packet apart: not a video packet, byte or frame.
func TestViewerKeepsPaddingOutOfTheVideo(t *testing.T) {
	r := &receiver{vc: mustCodec(t, "h264"), frames: map[uint32]*recvFrame{}, bins: map[int64]*rateBin{}, seqFirst: -1, seqMax: -1,
		seenSeq: map[int64]bool{}, maxFrame: -1, decode: map[uint32]string{}, padSeqs: newSeqSet()}
	pad := rtp.Header{Version: 2, Padding: true, PayloadType: paddingPT, SSRC: paddingSSRC, SequenceNumber: 7}
	raw, _ := pad.Marshal()
	raw = append(raw, paddingPayload()...)
	r.onRTP(raw)
	r.onRTP(raw) // a duplicate
	st := frameStamp{Frame: 0, Index: 0, Count: 1, NALBytes: 3}
	fe, pe := st.marshal()
	h := rtp.Header{Version: 2, PayloadType: payloadType, SSRC: defaultSSRC}
	_ = h.SetExtension(extFrame, fe)
	_ = h.SetExtension(extFramePart, pe)
	media, _ := h.Marshal()
	media = append(media, 0x65, 0x88, 0x84)
	r.onRTP(media)
	// padding bytes on the padding stream that are not padding-only: unparsable, not padding
	bad := rtp.Header{Version: 2, PayloadType: paddingPT, SSRC: paddingSSRC, SequenceNumber: 8}
	rawBad, _ := bad.Marshal()
	r.onRTP(append(rawBad, 1, 2, 3))
	if r.padPackets != 1 || r.padBytes != int64(len(raw)) || r.padDups != 1 {
		t.Fatalf("padding: %d packets %d bytes %d duplicates, want 1, %d, 1", r.padPackets, r.padBytes, r.padDups, len(raw))
	}
	if r.packets != 1 || r.rtpBytes != int64(len(media)) || len(r.frames) != 1 || r.badPkts != 1 {
		t.Fatalf("video: %d packets %d bytes %d frames %d unparsable, want 1, %d, 1, 1", r.packets, r.rtpBytes,
			len(r.frames), r.badPkts, len(media))
	}
}

// paced_sender.cc Process() (2018, l. 287-300): with bytes queued, the media budget's rate is at least
// queue bytes × 8 / max(1, kMaxQueueLengthMs − the queue's average wait in ms), in integer kbit/s.
// The pacer counts payload bytes (rtp_sender.cc 2018 l. 917-927): 100 packets of 1200 B that waited
// 1.5 s on average must leave within 0.5 s: 120 000 × 8 / 500 = 1920 kbit/s, above the 1.3 Mbit/s
// pacing rate; with no wait the pacing rate (1300 kbit/s) stays.
func TestPacerQueueTimeLimitRaisesTheRate(t *testing.T) {
	e, _ := pacerUnderTest(t, bbrVariant{})
	now := time.Unix(100, 0)
	var seq uint16
	queueMedia(e, 100, &seq)
	for el := e.queue.Front(); el != nil; el = el.Next() {
		el.Value.(*queued).enqueued = now
	}
	pacing := int(e.c.PacingRate()) / 1000
	if pacing != 1300 {
		t.Fatalf("STARTUP capped by max_bitrate: pacing %d kbit/s, want 1300", pacing)
	}
	if got := e.mediaTargetKbpsLocked(now); got != pacing {
		t.Fatalf("fresh queue: media rate %d kbit/s, want the pacing rate %d", got, pacing)
	}
	if got := e.mediaTargetKbpsLocked(now.Add(1500 * time.Millisecond)); got != 1920 {
		t.Fatalf("queue waited 1.5 s: media rate %d kbit/s, want 1920", got)
	}
}

// sscc.cc (2018) ControlHandler::OnNetworkInvalidation: while the pacer's expected queue time
// (queued bytes × 8 / pacing rate) exceeds kMaxQueueLengthMs (2 s), the encoder is told 0. At the
// 1.3 Mbit/s pacing rate (STARTUP, capped by max_bitrate) 2 s hold 325 000 B of payload (what the
// 2018 pacer's SizeInBytes counts): 200 packets of 1200 B (1.48 s) keep the target, 300 (2.22 s) turn
// it to 0, and once the queue is gone it comes back.
func TestSendQueueFullPausesTheEncoder(t *testing.T) {
	e, _ := pacerUnderTest(t, bbrVariant{NoPadding: true})
	target := e.GetTargetBitrate()
	var seq uint16
	queueMedia(e, 200, &seq)
	if c := e.updateQueueFullLocked(); c != -1 || e.GetTargetBitrate() != target {
		t.Fatalf("1.55 s of queue: change %d target %d, want none and %d", c, e.GetTargetBitrate(), target)
	}
	queueMedia(e, 100, &seq)
	if c := e.updateQueueFullLocked(); c != 0 || e.GetTargetBitrate() != 0 || !e.queueFull {
		t.Fatalf("2.33 s of queue: change %d target %d, want 0", c, e.GetTargetBitrate())
	}
	e.queue.Init()
	if c := e.updateQueueFullLocked(); c != target || e.GetTargetBitrate() != target || e.fullSpells != 1 {
		t.Fatalf("queue gone: change %d target %d spells %d, want %d", c, e.GetTargetBitrate(), e.fullSpells, target)
	}
}
