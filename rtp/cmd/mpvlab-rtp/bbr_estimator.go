package main

import (
	"container/list"
	"strconv"
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"mpvlab/rtp/bbr"
)

// bbrEstimator puts WebRTC's 2018 BBR (package bbr) behind pion's cc.BandwidthEstimator, so the
// sender runs it exactly where it runs GCC: same packetiser, TWCC numbering and feedback path.
// What it adds around the controller: a pacer that sends at BBR's pacing rate while its congestion
// window admits packets, padding while BBR probes for more bandwidth (as libwebrtc's pacer pads up
// to the pad window its BBR sets), the transport-wide sequence numbers (given here, at the point of
// sending, so media and padding share one consecutive sequence), the TWCC feedback decoded into
// bbr.Acks (arrival times from the reference time and receive deltas), and the target callbacks.
type bbrEstimator struct {
	mu       sync.Mutex
	c        *bbr.Controller
	start    time.Time
	extID    uint8
	writer   interceptor.RTPWriter
	queue    *list.List
	onChange func(int)
	last     int
	lastSent int64 // unwrapped transport seq of the newest packet sent
	nextSeq  int64 // the transport seq the next packet sent gets (media and padding alike)
	// The paced sender's two budgets (paced_sender.cc 2018 media_budget_, padding_budget_;
	// interval_budget.go): refilled every Process() at the pacing rate (media, raised by the queue-time
	// limit) and the controller's pad rate, each spent by media and padding alike.
	media, pad intervalBudget
	// Padding (padding.go): on unless the scenario turned it off.
	padding   bool
	padOff    bool // the stream ended: no more padding
	padSeq    uint16
	lastTS    uint32 // RTP timestamp of the newest media packet: padding carries it, as libwebrtc's does
	padSent   int
	padBytes  int64
	tick      time.Time // the last Process() (paced_sender.cc time_last_process_us_)
	blocked   time.Time // since when the window has held back a queued packet (zero: not blocked)
	lastSend  time.Time // when the pacer last sent anything (paced_sender.cc's last_send_time_us_)
	mediaSent bool      // a media packet has left (libwebrtc pads only after one: packet_counter_ > 0)
	done      chan struct{}
	wg        sync.WaitGroup
	minBps    int
	maxBps    int
	probes    int // packets sent past a window that stayed shut for windowStall (no-padding mode only)
	keepAlive int // padding packets sent because the window stayed shut for congestedPacketInterval
	states    []bbrState
	// queueFull is sscc.cc's ControlHandler::IsSendQueueFull: the pacer's expected queue time
	// (queued bytes / pacing rate, PacedSender::ExpectedQueueTimeMs) above kMaxQueueLengthMs, while
	// which libwebrtc 2018 tells the encoder a target of 0 (it pauses); fullSpells counts entries.
	queueFull  bool
	fullSpells int
}

// bbrState is the controller after one feedback report (bbr_state.csv): what a reader needs to
// tell the time spent per mode and recovery state, and the estimate and min-RTT over time.
type bbrState struct {
	tNs              int64 // CLOCK_MONOTONIC, as the other CSVs
	mode, recovery   string
	estimate, pacing float64
	minRTT           time.Duration
	cwnd, inflight   int64
	pacingGain       float64
	target           int
	atFullBW         bool
}

type queued struct {
	h        rtp.Header
	payload  []byte
	attrs    interceptor.Attributes
	enqueued time.Time // when the packetiser handed it over (the queue-time limit averages these)
}

const (
	// paced_sender.cc (2018) kMinPacketLimitMs: TimeUntilNextProcess() schedules Process() 5 ms after
	// the last one (l. 35, 255); the tests' nominal interval, process_thread.go the real schedule.
	bbrTick = pacerMinPacketLimitMs * time.Millisecond
	// kMaxElapsedTimeMs, kMaxIntervalTimeMs (l. 38, 42): the elapsed time Process() accounts at most,
	// and the refill one call gives at most.
	maxElapsedMs  = 2000
	maxIntervalMs = 30
	windowStall   = time.Second // without padding: a window shut this long (tail loss, no feedback to declare it) lets one media packet out
	// paced_sender.cc (2018): while Congested() (in flight >= window) one padding packet goes out
	// once nothing was sent for kCongestedPacketIntervalMs, so feedback keeps coming.
	congestedPacketInterval = 500 * time.Millisecond
	// paced_sender.cc kMaxQueueLengthMs: the media rate rises so the queue drains within 2 s.
	maxQueueTime = 2 * time.Second
)

func newBBREstimator(cfg controllerConfig) (*bbrEstimator, error) {
	bc := bbr.DefaultConfig()
	bc.MSS = maxPayloadMTU + 64
	bc.InitialRate, bc.MinRate, bc.MaxRate = float64(cfg.InitialBps), float64(cfg.MinBps), float64(cfg.MaxBps)
	if cfg.BBR.NonReplacingFilter {
		bc.Filter = bbr.NonReplacing
	}
	bc.ThirdBest, bc.NoRecovery, bc.ProbeRTTv2 = cfg.BBR.ThirdBest, cfg.BBR.NoRecovery, cfg.BBR.ProbeRTTv2
	c, err := bbr.New(bc)
	if err != nil {
		return nil, err
	}
	e := &bbrEstimator{c: c, start: time.Now(), queue: list.New(), done: make(chan struct{}), minBps: cfg.MinBps,
		maxBps: cfg.MaxBps, lastSent: -1, padding: !cfg.BBR.NoPadding}
	e.last = e.targetLocked()
	return e, nil
}

// now is the time the controller is given, in whole milliseconds: libwebrtc 2018 hands BBR
// millisecond clocks — a packet's send time is Timestamp::ms(rtc::SentPacket's send_time_ms) and a
// report's feedback time Timestamp::ms(clock_->TimeInMilliseconds()) (send_side_congestion_controller.cc
// 0040b66a l. 616, 710, 724) — so the bandwidth sampler's intervals and the RTT samples are whole ms.
func (e *bbrEstimator) now() time.Duration { return time.Since(e.start).Truncate(time.Millisecond) }

func (e *bbrEstimator) targetLocked() int {
	if e.queueFull {
		return 0
	}
	return int(e.c.TargetRate())
}

// updateQueueFullLocked re-evaluates IsSendQueueFull; the new target when it changed the target, else -1.
func (e *bbrEstimator) updateQueueFullLocked() int {
	var bytes int
	for el := e.queue.Front(); el != nil; el = el.Next() {
		q := el.Value.(*queued)
		bytes += len(q.payload) // the pacer's SizeInBytes: payload bytes as inserted (sendLocked)
	}
	// IsSendQueueFull (send_side_congestion_controller.cc 0040b66a l. 356-358, 690): the pacer's
	// ExpectedQueueTimeMs() > kMaxQueueLengthMs, i.e. bytes × 8 / the pacer's integer kbit/s, in whole
	// ms (paced_sender.cc 665174fd l. 207-212).
	full := int64(bytes)*8/max(1, e.pacerKbpsLocked()) > maxQueueTime.Milliseconds()
	if full == e.queueFull {
		return -1
	}
	e.queueFull = full
	if full {
		e.fullSpells++
	}
	if t := e.targetLocked(); t != e.last {
		e.last = t
		return t
	}
	return -1
}

func (e *bbrEstimator) AddStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	e.mu.Lock()
	enqueue := interceptor.RTPWriterFunc(func(h *rtp.Header, p []byte, a interceptor.Attributes) (int, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.enqueueLocked(&queued{h.Clone(), append([]byte(nil), p...), a, time.Now()})
		return h.MarshalSize() + len(p), nil
	})
	if e.writer != nil {
		// a further stream (the RTX stream, repair.go) shares the one pacer and its writer: one
		// pacer per call, as libwebrtc's PacedSender
		e.mu.Unlock()
		return enqueue
	}
	for _, x := range info.RTPHeaderExtensions {
		if x.URI == twccURI {
			e.extID = uint8(x.ID)
		}
	}
	e.writer = w
	e.tick = time.Now()
	e.mu.Unlock()
	e.wg.Add(1)
	go e.pace()
	return enqueue
}

// enqueueLocked is PacketQueue::Push with 2018's order (paced_sender.h PacketQueue::Comparator,
// all video at kNormalPriority): retransmissions (the RTX stream) before other packets, among
// retransmissions the older capture time first, then the order of insertion. Media and padding
// are never reordered among themselves (the packetiser hands them over in capture order).
//
// Audio (audio.go) is kHighPriority in 2018 (RTPSenderAudio::SendAudio), so it goes before every
// video packet and retransmission, audio among itself in the order of arrival.
func (e *bbrEstimator) enqueueLocked(q *queued) {
	if q.h.SSRC == audioSSRC {
		for el := e.queue.Front(); el != nil; el = el.Next() {
			if el.Value.(*queued).h.SSRC != audioSSRC {
				e.queue.InsertBefore(q, el)
				return
			}
		}
		e.queue.PushBack(q)
		return
	}
	if q.h.SSRC != rtxSSRC {
		e.queue.PushBack(q)
		return
	}
	for el := e.queue.Front(); el != nil; el = el.Next() {
		o := el.Value.(*queued)
		if o.h.SSRC == audioSSRC {
			continue
		}
		if o.h.SSRC != rtxSSRC || int32(o.h.Timestamp-q.h.Timestamp) > 0 { // RTP time wraps: compare the difference
			e.queue.InsertBefore(q, el)
			return
		}
	}
	e.queue.PushBack(q)
}

// pace runs Process() when libwebrtc 2018's process thread would (processScheduler): 5 ms after the
// previous call began, planned from the end of that call, so a late call delays the ones after it.
func (e *bbrEstimator) pace() {
	defer e.wg.Done()
	sched := newProcessScheduler(e.start)
	e.mu.Lock()
	sched.plan(e.tick, time.Now())
	e.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if w := sched.wait(time.Now()); w > 0 {
			timer.Reset(w)
			select {
			case <-e.done:
				return
			case <-timer.C:
			}
		} else {
			select {
			case <-e.done:
				return
			default:
			}
		}
		now := time.Now()
		if !sched.due(now) {
			continue
		}
		e.mu.Lock()
		e.tick = e.paceLocked(now)
		changed, cb := e.updateQueueFullLocked(), e.onChange
		sched.plan(e.tick, time.Now())
		e.mu.Unlock()
		if changed >= 0 && cb != nil {
			cb(changed)
		}
	}
}

// paceLocked is paced_sender.cc's Process() (665174fd l. 258-353) at `now`, step by step; the
// process time it leaves. Not carried over: the paused state (network down, never here), the
// prober (BBR's updates carry no probe clusters) and the ALR detector (nothing reads it with BBR).
func (e *bbrEstimator) paceLocked(now time.Time) time.Time {
	// l. 261-268: elapsed ms since the last call, rounded, at most kMaxElapsedTimeMs.
	elapsedMs := min((now.Sub(e.tick).Microseconds()+500)/1000, maxElapsedMs)
	// l. 269-282: congested (or paused) and nothing sent for kCongestedPacketIntervalMs → one
	// padding packet, past the window, so feedback keeps coming; only after a media packet.
	if e.padding && !e.padOff && e.mediaSent && !e.c.CanSend() && now.Sub(e.lastSend) >= congestedPacketInterval {
		e.keepAlive++
		e.useBudgetsLocked(e.sendPaddingLocked(now))
	}
	// l. 286-304: the media budget's rate is the pacing rate, or what the queue needs to leave
	// within kMaxQueueLengthMs; both budgets get the elapsed time (≤ kMaxIntervalTimeMs, l. 411-415).
	if elapsedMs > 0 {
		e.media.setTargetRateKbps(e.mediaTargetKbpsLocked(now))
		e.pad.setTargetRateKbps(int(e.padRateLocked() / 1000)) // SetPacingRates l. 173-179: bps / 1000
		d := min(elapsedMs, maxIntervalMs)
		e.media.increaseBudget(d)
		e.pad.increaseBudget(d)
	}
	// l. 316-333 with SendPacket l. 361-394: media while the window is open and the media budget
	// has any byte left (a packet may overdraw it; the next intervals pay that back).
	for e.queue.Len() > 0 {
		if !e.c.CanSend() {
			if e.padding { // Congested(): media waits until feedback opens the window
				break
			}
			// Ours, no-padding mode only: without keep-alive padding a window shut by tail loss
			// would get no feedback again; one media packet leaves after windowStall.
			if e.blocked.IsZero() {
				e.blocked = now
			}
			if now.Sub(e.blocked) < windowStall {
				break
			}
			e.probes++
		} else if e.media.remaining() == 0 {
			break
		}
		e.blocked = time.Time{}
		q := e.queue.Remove(e.queue.Front()).(*queued)
		if q.h.SSRC == audioSSRC {
			e.sendAudioLocked(q)
			continue
		}
		e.useBudgetsLocked(e.sendLocked(q, now))
	}
	// l. 335-346 with SendPadding l. 396-409: the queue empty and the window open, after a media
	// packet: padding for the padding budget's bytes left, in whole padding packets (RTPSender's
	// SendPadData sends full packets until the bytes asked for are covered).
	if e.queue.Len() == 0 && e.c.CanSend() && e.mediaSent && e.padRateLocked() > 0 {
		if needed := e.pad.remaining(); needed > 0 {
			sent := 0
			for sent < needed {
				sent += e.sendPaddingLocked(now)
			}
			e.useBudgetsLocked(sent)
		}
	}
	return now
}

// useBudgetsLocked is UpdateBudgetWithBytesSent (l. 417-421): every byte sent, media or padding,
// is spent from both budgets.
func (e *bbrEstimator) useBudgetsLocked(bytes int) {
	e.media.useBudget(bytes)
	e.pad.useBudget(bytes)
}

// mediaTargetKbpsLocked is the media budget's rate in Process() (l. 287-300), in libwebrtc's integer
// kbit/s: the pacing rate (SetPacingRates: bps / 1000), raised with bytes queued to
// queue bytes × 8 / max(1, kMaxQueueLengthMs − the queue's average wait in ms).
func (e *bbrEstimator) mediaTargetKbpsLocked(now time.Time) int {
	target := int(e.pacerKbpsLocked())
	if e.queue.Len() == 0 {
		return target
	}
	var bytes int
	var waitedMs int64
	for el := e.queue.Front(); el != nil; el = el.Next() {
		q := el.Value.(*queued)
		bytes += len(q.payload) // payload bytes as inserted (sendLocked)
		if !q.enqueued.IsZero() {
			waitedMs += now.Sub(q.enqueued).Milliseconds()
		}
	}
	left := max(1, maxQueueTime.Milliseconds()-waitedMs/int64(e.queue.Len()))
	return max(target, int(int64(bytes)*8/left))
}

// pacerKbpsLocked is the paced sender's pacing_bitrate_kbps_: the controller's pacing rate after the
// PacerConfig round trip (bbr.Controller.PacerRates), bps / 1000 (SetPacingRates l. 173-179).
func (e *bbrEstimator) pacerKbpsLocked() int64 {
	pacing, _ := e.c.PacerRates()
	return pacing / 1000
}

// padRateLocked: the pacer's padding rate (bit/s, after the PacerConfig round trip), or 0 with
// padding turned off or the stream ended.
func (e *bbrEstimator) padRateLocked() int64 {
	if !e.padding || e.padOff {
		return 0
	}
	_, padding := e.c.PacerRates()
	return padding
}

// paddingSize is a padding packet's UDP payload: the RTP header with the transport-wide sequence
// number extension, and the padding.
func (e *bbrEstimator) paddingSize() int {
	h := rtp.Header{Version: 2}
	_ = h.SetExtension(max(e.extID, 1), make([]byte, 2))
	return h.MarshalSize() + paddingBytes
}

// sendPaddingLocked sends one padding-only packet (padding.go); the bytes the pacer counts for it
// (its padding, as SendPadData's bytes_sent += padding_bytes_in_packet).
func (e *bbrEstimator) sendPaddingLocked(now time.Time) int {
	h := rtp.Header{Version: 2, Padding: true, PayloadType: paddingPT, SequenceNumber: e.padSeq, Timestamp: e.lastTS,
		SSRC: paddingSSRC}
	e.padSeq++
	q := &queued{h: h, payload: paddingPayload()}
	counted := e.sendLocked(q, now)
	e.padSent++
	e.padBytes += int64(q.h.MarshalSize() + len(q.payload)) // on the wire, as the totals count
	return counted
}

// StopPadding: the stream has ended (the sender waits for the pacer to drain and the feedback on
// the last packet): padding then would only delay that.
func (e *bbrEstimator) StopPadding() {
	e.mu.Lock()
	e.padOff = true
	e.mu.Unlock()
}

// sendLocked gives a packet the next transport-wide sequence number, tells the controller it leaves
// (libwebrtc's send path never marks a packet app-limited: BbrNetworkController::OnApplicationLimited
// is private and uncalled) and writes it (e.mu is
// released for the write: the writer may take the sender's locks); the bytes the pacer and the
// controller count for it. Those are the RTP payload (+ padding), not the packet: libwebrtc 2018
// inserts payload_size into the pacer (rtp_sender.cc 0040b66a l. 917, 927), gives the feedback
// adapter, and so BBR, payload_size() + padding_size() (AddPacketToTransportFeedback l. 1320;
// the whole packet only with the WebRTC-SendSideBwe-WithOverhead field trial, off by default) and
// counts a padding packet as its padding (SendPadData l. 611). Numbering here, where
// packets leave in order, rather than where the packetiser hands them over, is what lets padding
// (made here) and media share one consecutive sequence, as libwebrtc numbers in its pacer.
func (e *bbrEstimator) sendLocked(q *queued, now time.Time) int {
	seq := e.nextSeq
	e.nextSeq++
	if e.extID != 0 {
		ext, _ := (&rtp.TransportCCExtension{TransportSequence: uint16(seq)}).Marshal()
		_ = q.h.SetExtension(e.extID, ext) // replaces a number given upstream, if any
	}
	e.lastSent = seq
	if q.h.SSRC == defaultSSRC {
		e.lastTS = q.h.Timestamp
		e.mediaSent = true
	}
	e.lastSend = now
	size := len(q.payload)
	e.c.OnPacketSent(e.now(), seq, size)
	w := e.writer
	e.mu.Unlock()
	_, _ = w.Write(&q.h, q.payload, q.attrs)
	e.mu.Lock()
	return size
}

// AddAudioStream: the audio stream (audio.go) into this pacer's queue, at high priority.
func (e *bbrEstimator) AddAudioStream(_ interceptor.RTPWriter) interceptor.RTPWriter {
	return interceptor.RTPWriterFunc(func(h *rtp.Header, p []byte, a interceptor.Attributes) (int, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.enqueueLocked(&queued{h.Clone(), append([]byte(nil), p...), a, time.Now()})
		return h.MarshalSize() + len(p), nil
	})
}

// sendAudioLocked is PacedSender::SendPacket for an audio packet in 2018's default (audio.go): it
// was let out by the same gate as video (window open, media budget left: video_blocks_audio_), and
// leaves without a transport-wide number, unknown to the controller (no OnPacketSent: it is never
// in the feedback, so never in flight), spending no budget and not resetting the keep-alive
// padding's idle timer (account_for_audio_ false: neither UpdateBudgetWithBytesSent nor
// last_send_time_us_). It counts as a packet inserted for the padding rule (packet_counter_ > 0).
func (e *bbrEstimator) sendAudioLocked(q *queued) {
	e.mediaSent = true
	w := e.writer
	e.mu.Unlock()
	_, _ = w.Write(&q.h, q.payload, q.attrs)
	e.mu.Lock()
}

// WriteRTCP decodes TWCC feedback into the controller's acks: statuses for base, base+1, …, each
// received one with its arrival = reference time × 64 ms + the running sum of receive deltas.
func (e *bbrEstimator) WriteRTCP(pkts []rtcp.Packet, _ interceptor.Attributes) error {
	e.mu.Lock()
	var cb func(int)
	var changed int
	for _, p := range pkts {
		fb, ok := p.(*rtcp.TransportLayerCC)
		if !ok {
			continue
		}
		e.c.OnFeedback(e.now(), twccAcks(fb, max(e.lastSent, 0)))
		e.states = append(e.states, bbrState{monotonicNs(), e.c.Mode().String(), e.c.Recovery().String(),
			e.c.BandwidthEstimate(), e.c.PacingRate(), e.c.MinRTT(), e.c.CongestionWindow(), e.c.Inflight(),
			e.c.PacingGain(), e.targetLocked(), e.c.AtFullBandwidth()})
	}
	if t := e.targetLocked(); t != e.last {
		e.last, cb, changed = t, e.onChange, t
	}
	e.mu.Unlock()
	if cb != nil {
		cb(changed)
	}
	return nil
}

// twccAcks: one bbr.Ack per status in the feedback. Arrival times get a 1 s offset so that none is
// zero (the controller reads a zero delivered-time as "nothing delivered yet").
func twccAcks(fb *rtcp.TransportLayerCC, ref int64) []bbr.Ack {
	arrival := time.Second + time.Duration(fb.ReferenceTime)*64*time.Millisecond
	deltas := fb.RecvDeltas
	acks := make([]bbr.Ack, 0, fb.PacketStatusCount)
	forEachStatus(fb, ref, func(seq int64, status uint16) {
		a := bbr.Ack{Seq: seq, Lost: status == rtcp.TypeTCCPacketNotReceived}
		if !a.Lost && len(deltas) > 0 {
			arrival += time.Duration(deltas[0].Delta) * time.Microsecond
			deltas = deltas[1:]
			a.Arrival = arrival
		}
		acks = append(acks, a)
	})
	return acks
}

func (e *bbrEstimator) GetTargetBitrate() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.targetLocked()
}

func (e *bbrEstimator) OnTargetBitrateChange(f func(int)) {
	e.mu.Lock()
	e.onChange = f
	e.mu.Unlock()
}

func (e *bbrEstimator) GetStats() map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	return map[string]any{
		"mode": e.c.Mode().String(), "recovery": e.c.Recovery().String(), "bwEstimate": e.c.BandwidthEstimate(),
		"minRTTms": float64(e.c.MinRTT().Microseconds()) / 1000, "cwnd": e.c.CongestionWindow(),
		"inflight": e.c.Inflight(), "maxAckHeight": e.c.MaxAckHeight(), "pacingRate": e.c.PacingRate(), "queued": e.queue.Len(), "windowProbes": e.probes, "keepAlivePadding": e.keepAlive, "sendQueueFull": e.queueFull, "sendQueueFullSpells": e.fullSpells,
		"atFullBandwidth": e.c.AtFullBandwidth(), "pacingGain": e.c.PacingGain(),
		"padRate": e.padRateLocked(), "paddingPackets": e.padSent,
	}
}

// StateRows is bbr_state.csv's rows, one per feedback report, times from the run's origin t0Ns.
func (e *bbrEstimator) StateRows(t0Ns int64) [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	rows := make([][]string, 0, len(e.states))
	for _, s := range e.states {
		rows = append(rows, []string{secs(s.tNs, t0Ns), s.mode, s.recovery, fmtFloat(s.estimate), fmtFloat(s.pacing),
			fmtFloat(float64(s.minRTT.Microseconds()) / 1000), itoa(s.cwnd), itoa(s.inflight), fmtFloat(s.pacingGain),
			itoa(int64(s.target)), strconv.FormatBool(s.atFullBW)})
	}
	return rows
}

func (e *bbrEstimator) Close() error {
	e.stopPacer()
	return nil
}

func (e *bbrEstimator) stopPacer() {
	select {
	case <-e.done:
	default:
		close(e.done)
	}
	e.wg.Wait()
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// bbrStateHeader names bbr_state.csv's columns.
var bbrStateHeader = []string{"t_s", "mode", "recovery", "estimate_bps", "pacing_bps", "min_rtt_ms", "cwnd_bytes",
	"inflight_bytes", "pacing_gain", "target_bps", "at_full_bandwidth"}
