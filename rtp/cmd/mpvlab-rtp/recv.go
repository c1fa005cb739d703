package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

type recvConfig struct {
	listen, out, ready string
	decoder, python    string        // the decoder script (rtp/decoder/live_decoder.py); none: no decoding
	codec              string        // h264 | vp8
	deadline           time.Duration // playout deadline: capture → frame complete
	t0Ns               int64
	startTimeout, idle time.Duration
	maxRun             time.Duration
	ownTargetBps       int           // the viewer's own send-side target, which sets the feedback interval
	feedbackInterval   time.Duration // twccFeedbackInterval(ownTargetBps)
	nack, pli          bool          // loss repair (recv_repair.go)
}

type recvFrame struct {
	captureNs  int64
	count      uint16
	nalBytes   uint32
	parts      map[uint16][]byte
	firstNs    int64
	completeNs int64 // arrival of the packet that completed it; 0 while incomplete
	bytes      int
	key        bool   // holds an IDR slice
	au         []byte // the access unit, kept for the decoder until played out
	repaired   int    // packets of it that arrived only as retransmissions (RTX)
}

type receiver struct {
	cfg       recvConfig
	vc        videoCodec
	conn      *net.UDPConn
	mu        sync.Mutex
	peer      *net.UDPAddr
	frames    map[uint32]*recvFrame
	end       map[string]any // the sender's end-of-stream record, once seen
	bins      map[int64]*rateBin
	packets   int
	rtpBytes  int64
	badPkts   int
	dupPkts   int
	seqFirst  int64
	seqMax    int64
	fbSent    int
	fbBytes   int
	firstNs   int64
	lastNs    int64
	mismatch  int // frames whose reassembled NAL bytes differ from the sender's stamp
	seenSeq   map[int64]bool
	fbErrs    int // feedback the socket refused (no route, buffer full)
	udpDgrams int // every datagram the socket read (RTP and the end records): the interface check
	udpBytes  int64
	// padding-only packets (padding.go): counted here, never in the video's packets, bytes or frames
	padPackets int
	padBytes   int64
	padDups    int
	padSeqs    seqSet
	// playout and decoding (playout.go)
	dec      *decoderChild
	next     uint32            // the next frame to play out
	maxFrame int64             // the highest frame number seen
	refOK    bool              // every frame since the last keyframe was played
	decode   map[uint32]string // decDecoded, decError, decUndecodable per on-time frame
	decErr   string            // the decoder child's failure, if any
	// loss repair (recv_repair.go)
	rep recvRepair
	// the call's audio (audio.go): never in the video's packets, bytes or frames
	audio recvAudio
}

type rateBin struct {
	bytes, paddingBytes int64 // video packets' and padding packets' UDP payload
	rtxBytes            int64 // retransmissions' (RTX stream) UDP payload, apart from bytes
	audioBytes          int64 // audio packets' UDP payload (audio.go), apart from bytes
	packets             int
}

func parseRecvFlags(args []string) (recvConfig, error) {
	fs := flag.NewFlagSet("recv", flag.ContinueOnError)
	c := recvConfig{}
	fs.StringVar(&c.listen, "listen", ":5600", "UDP address to listen on")
	fs.StringVar(&c.out, "out", "", "directory for the CSVs and receiver.json")
	fs.StringVar(&c.ready, "ready", "", "file written once the socket listens")
	fs.DurationVar(&c.deadline, "playout-deadline", 400*time.Millisecond, "a frame complete later than capture + this is late")
	fs.Int64Var(&c.t0Ns, "t0-ns", 0, "run time zero, CLOCK_MONOTONIC ns")
	fs.DurationVar(&c.startTimeout, "start-timeout", 60*time.Second, "give up when no packet came for this long from the start")
	fs.DurationVar(&c.idle, "idle-timeout", 10*time.Second, "end when no packet came for this long after the first")
	fs.DurationVar(&c.maxRun, "max-run", time.Hour, "end after this long in any case")
	fs.StringVar(&c.decoder, "decoder", "", "the viewer's decoder script (rtp/decoder/live_decoder.py); empty: no decoding")
	fs.StringVar(&c.python, "python", "/usr/bin/python3", "the Python with GStreamer's bindings (gi) that runs it")
	fs.StringVar(&c.codec, "codec", "h264", "video codec the sender uses: h264 or vp8")
	fs.IntVar(&c.ownTargetBps, "own-target-bps", viewerOwnTargetBps,
		"the viewer's own send-side target (bit/s) libwebrtc 2018 derives the TWCC feedback interval from (twcc_interval.go)")
	fs.BoolVar(&c.nack, "nack", true, "loss repair: NACK missing packets as libwebrtc 2018's NackModule (the sender resends them on RTX)")
	fs.BoolVar(&c.pli, "pli", true, "loss repair: send a PLI when no frame was decodable for 3 s, as libwebrtc 2018 (needs --decoder)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.out == "" {
		return c, errors.New("recv needs --out")
	}
	if c.ownTargetBps < 0 {
		return c, errors.New("recv --own-target-bps must be >= 0")
	}
	c.feedbackInterval = twccFeedbackInterval(c.ownTargetBps)
	return c, nil
}

func runRecv(args []string) error {
	cfg, err := parseRecvFlags(args)
	if err != nil {
		return err
	}
	laddr, err := net.ResolveUDPAddr("udp4", cfg.listen)
	if err != nil {
		return err
	}
	conn, err := net.ListenUDP("udp4", laddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	vc, err := codecByName(cfg.codec)
	if err != nil {
		return err
	}
	r := &receiver{cfg: cfg, vc: vc, conn: conn, frames: map[uint32]*recvFrame{}, bins: map[int64]*rateBin{},
		seqFirst: -1, seqMax: -1, seenSeq: map[int64]bool{}, maxFrame: -1, decode: map[uint32]string{},
		padSeqs: newSeqSet(), rep: newRecvRepair(cfg), audio: newRecvAudio()}
	ready := map[string]any{"pid": os.Getpid(), "listen": conn.LocalAddr().String()}
	if cfg.decoder != "" {
		if r.dec, err = startDecoder(cfg.python, cfg.decoder, cfg.out, cfg.codec); err != nil {
			return fmt.Errorf("decoder: %w", err)
		}
		ready["decoder_pid"] = r.dec.cmd.Process.Pid
	}

	// pion's TWCC sender interceptor records each packet's transport-wide number and arrival time
	// and sends the feedback through the RTCP writer, at the interval libwebrtc 2018's
	// RemoteEstimatorProxy uses in the study's set-up (twcc_interval.go: 50 ms), not pion's 100 ms.
	tf, err := twcc.NewSenderInterceptor(twccSenderOptions(cfg.feedbackInterval)...)
	if err != nil {
		return err
	}
	reg := interceptor.Registry{}
	reg.Add(tf)
	chain, err := reg.Build("mpvlab")
	if err != nil {
		return err
	}
	chain.BindRTCPWriter(interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, _ interceptor.Attributes) (int, error) {
		b, err := rtcp.Marshal(pkts)
		if err != nil {
			return 0, err
		}
		r.mu.Lock()
		peer := r.peer
		r.fbSent++
		r.fbBytes += len(b)
		r.mu.Unlock()
		if peer == nil {
			return 0, nil
		}
		n, err := conn.WriteToUDP(b, peer)
		if err != nil {
			r.mu.Lock()
			r.fbErrs++
			r.mu.Unlock()
		}
		return n, err
	}))
	info := &interceptor.StreamInfo{SSRC: defaultSSRC, ClockRate: 90000, MimeType: r.vc.mime, PayloadType: payloadType,
		RTPHeaderExtensions: []interceptor.RTPHeaderExtension{{URI: twccURI, ID: extTWCC}}}
	reader := chain.BindRemoteStream(info, interceptor.RTPReaderFunc(r.readWire))
	if cfg.ready != "" {
		if err := writeJSON(cfg.ready, ready); err != nil {
			return err
		}
	}
	stopNack := r.startNackProcess()
	defer close(stopNack)
	stopPlayout, playoutDone := make(chan struct{}), make(chan struct{})
	if r.dec != nil {
		go r.runPlayout(stopPlayout, playoutDone)
	} else {
		close(playoutDone)
	}
	started := time.Now()
	_ = conn.SetReadDeadline(started.Add(cfg.startTimeout))
	buf := make([]byte, 2048)
	for time.Since(started) < cfg.maxRun {
		n, _, err := reader.Read(buf, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break // the end (after the sender's end record) or silence
			}
			r.badPkts++ // an RTP packet the chain could not parse: counted, not fatal
			continue
		}
		r.onRTP(buf[:n])
	}
	_ = chain.Close()
	close(stopPlayout)
	<-playoutDone
	if r.dec != nil {
		if err := r.finishDecoding(); err != nil {
			r.decErr = err.Error() // reported in receiver.json; the frames it did not answer for are decode errors
		}
	}
	if err := r.writeResults(); err != nil {
		return err
	}
	if r.end == nil {
		return fmt.Errorf("the sender's end-of-stream record never arrived (%d packets received)", r.packets)
	}
	return nil
}

// readWire is the bottom of the chain: one datagram; the sender's end record is taken here and never
// reaches the chain, which parses every datagram it is given as RTP.
func (r *receiver) readWire(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
	for {
		n, from, err := r.conn.ReadFromUDP(b)
		if err != nil {
			return 0, a, err
		}
		r.mu.Lock()
		if r.peer == nil {
			r.peer = from
		}
		r.udpDgrams++
		r.udpBytes += int64(n)
		r.mu.Unlock()
		if n >= len(endMagic) && string(b[:len(endMagic)]) == endMagic {
			var end map[string]any
			r.mu.Lock() // the playout reads it
			first := json.Unmarshal(b[len(endMagic):n], &end) == nil && r.end == nil
			if first {
				r.end = end
			}
			r.mu.Unlock()
			if first {
				// Packets arrive before the end record (one FIFO path); half a second more lets the
				// twcc interceptor send its last feedback.
				_ = r.conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			}
			continue
		}
		if r.end == nil {
			_ = r.conn.SetReadDeadline(time.Now().Add(r.cfg.idle))
		}
		return n, a, nil
	}
}

func (r *receiver) onRTP(b []byte) {
	// Under the lock the playout takes: a frame's completion instant and the playout's view of it agree.
	r.mu.Lock()
	defer r.mu.Unlock()
	now := monotonicNs()
	var p rtp.Packet
	if err := p.Unmarshal(b); err != nil {
		r.badPkts++
		return
	}
	if p.SSRC == paddingSSRC {
		r.onPadding(&p, len(b), now)
		return
	}
	if p.SSRC == audioSSRC {
		r.onAudio(&p, len(b), now)
		return
	}
	rtx := p.SSRC == rtxSSRC
	if rtx {
		osn, payload, err := unwrapRTX(&p)
		if err != nil {
			r.badPkts++
			return
		}
		p.SSRC, p.PayloadType, p.SequenceNumber, p.Payload = defaultSSRC, payloadType, osn, payload
	}
	st, err := parseStamp(p.GetExtension(extFrame), p.GetExtension(extFramePart))
	if err != nil || st.Count == 0 || st.Index >= st.Count {
		r.badPkts++
		return
	}
	seq := int64(p.SequenceNumber)
	if r.seqMax >= 0 {
		seq = unwrap16(p.SequenceNumber, r.seqMax)
	}
	if rtx { // every retransmission that arrived, a duplicate too: its bytes crossed the link
		r.rep.rtxPackets++
		r.rep.rtxBytes += int64(len(b))
		r.bin(now).rtxBytes += int64(len(b))
	}
	if r.seenSeq[seq] {
		if rtx {
			r.rep.rtxDuplicate++ // the original, or an earlier retransmission, was here first
		} else {
			r.dupPkts++
		}
		return
	}
	r.seenSeq[seq] = true
	if r.seqFirst < 0 || seq < r.seqFirst {
		r.seqFirst = seq
	}
	r.seqMax = max(r.seqMax, seq)
	r.rep.onMediaPacket(r, seq, st, p.Payload, now)
	if rtx {
		if now-st.CaptureNs <= r.cfg.deadline.Nanoseconds() {
			r.rep.repairedInTime++
		} else {
			r.rep.repairedLate++
		}
	} else {
		r.packets++
		r.rtpBytes += int64(len(b))
	}
	if r.firstNs == 0 {
		r.firstNs = now
	}
	r.lastNs = now
	bin := (now - r.cfg.t0Ns) / 1e9
	if r.bins[bin] == nil {
		r.bins[bin] = &rateBin{}
	}
	if !rtx {
		r.bins[bin].bytes += int64(len(b))
		r.bins[bin].packets++
	}

	f := r.frames[st.Frame]
	if f == nil {
		f = &recvFrame{captureNs: st.CaptureNs, count: st.Count, nalBytes: st.NALBytes, parts: map[uint16][]byte{}, firstNs: now}
		r.frames[st.Frame] = f
		r.maxFrame = max(r.maxFrame, int64(st.Frame))
	}
	if f.completeNs != 0 {
		return
	}
	if _, had := f.parts[st.Index]; had { // cannot happen for a new sequence number; keep the count honest
		return
	}
	f.parts[st.Index] = append([]byte(nil), p.Payload...)
	f.bytes += len(b)
	if rtx {
		f.repaired++
	}
	if len(f.parts) == int(f.count) {
		f.completeNs = now
		au := r.reassemble(f)
		if r.vc.stampBytes(au) != f.nalBytes {
			r.mismatch++
		}
		f.key = au != nil && r.vc.isKey(au)
		if r.dec != nil && int64(st.Frame) >= int64(r.next) {
			f.au = au // until played out
		}
		f.parts = nil // the bytes are checked; keep the memory flat
	}
}

// bin is the rate.csv second that now falls in.
func (r *receiver) bin(now int64) *rateBin {
	k := (now - r.cfg.t0Ns) / 1e9
	if r.bins[k] == nil {
		r.bins[k] = &rateBin{}
	}
	return r.bins[k]
}

// onPadding counts a padding-only packet (padding.go) apart from the video: its bytes per second in
// rate.csv's own column, never a frame's or the video's packet count. Anything else on the padding
// stream is unparsable.
func (r *receiver) onPadding(p *rtp.Packet, size int, now int64) {
	if !r.admit(isPaddingOnly(p), &r.padSeqs, p.SequenceNumber, &r.padDups) {
		return
	}
	r.padPackets++
	r.padBytes += int64(size)
	r.bin(now).paddingBytes += int64(size)
}

// admit is the first step for a packet of a stream counted by sequence number alone (padding, audio):
// one that is not the stream's kind is unparsable, one whose number was seen is a duplicate; true for a
// new packet of the stream.
func (r *receiver) admit(ofTheStream bool, seqs *seqSet, seq uint16, dups *int) bool {
	if !ofTheStream {
		r.badPkts++
		return false
	}
	if !seqs.add(seq) {
		*dups++
		return false
	}
	return true
}

// reassemble depacketises a complete frame in packet order (pion's H264 depacketiser: single NAL,
// STAP-A, FU-A, into an Annex B access unit; or its VP8 one) ; nil if a packet does not depacketise.
func (r *receiver) reassemble(f *recvFrame) []byte {
	var au []byte
	unpack := r.vc.newUnpacker()
	for i := uint16(0); i < f.count; i++ {
		out, err := unpack(f.parts[i])
		if err != nil {
			return nil
		}
		au = append(au, out...)
	}
	return au
}

func (r *receiver) writeResults() error {
	c := r.cfg
	r.mu.Lock()
	defer r.mu.Unlock()
	// Which frames existed: 0 … frames-1 by the sender's end record; without it, up to the highest seen.
	total := 0
	for n := range r.frames {
		total = max(total, int(n)+1)
	}
	endSeen := r.end != nil
	if endSeen {
		if v, ok := r.end["frames"].(float64); ok {
			total = max(total, int(v))
		}
	}
	var rows [][]string
	var onTime, late, lostIncomplete, lostUnseen int
	var lat []float64
	for n := 0; n < total; n++ {
		f := r.frames[uint32(n)]
		status, latMs, capS, got, want, nbytes := "lost", "", "", "0", "", "0"
		switch {
		case f == nil:
			lostUnseen++
		case f.completeNs == 0:
			lostIncomplete++
			capS, got, want = secs(f.captureNs, c.t0Ns), strconv.Itoa(len(f.parts)), strconv.Itoa(int(f.count))
		default:
			l := float64(f.completeNs-f.captureNs) / 1e6
			lat = append(lat, l)
			latMs, capS, got, want = strconv.FormatFloat(l, 'f', 3, 64), secs(f.captureNs, c.t0Ns), strconv.Itoa(int(f.count)), strconv.Itoa(int(f.count))
			if f.completeNs-f.captureNs <= c.deadline.Nanoseconds() {
				status = "on_time"
				onTime++
			} else {
				status = "late"
				late++
			}
		}
		if f != nil {
			// the frame's packets as received (UDP payload, each sequence number once): the unit of
			// rate.csv's received_bps, so on-time and received bitrates compare (issue 48)
			nbytes = strconv.Itoa(f.bytes)
		}
		repaired := "0"
		if f != nil {
			repaired = strconv.Itoa(f.repaired)
			if f.completeNs != 0 && f.repaired > 0 {
				r.rep.framesRepaired++
				if status == "on_time" {
					r.rep.framesRepairedOnTime++
				}
			}
		}
		rows = append(rows, []string{strconv.Itoa(n), capS, status, latMs, got, want, r.decode[uint32(n)], nbytes, repaired})
	}
	if err := writeCSV(filepath.Join(c.out, "frames.csv"), []string{"frame", "capture_s", "status", "latency_ms",
		"packets_received", "packets_in_frame", "decode", "rtp_bytes", "packets_repaired"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	var secsKeys []int64
	for k := range r.bins {
		secsKeys = append(secsKeys, k)
	}
	sort.Slice(secsKeys, func(i, j int) bool { return secsKeys[i] < secsKeys[j] })
	if len(secsKeys) > 0 {
		for k := secsKeys[0]; k <= secsKeys[len(secsKeys)-1]; k++ {
			b := r.bins[k]
			if b == nil {
				b = &rateBin{}
			}
			rows = append(rows, []string{itoa(k), itoa(b.bytes * 8), strconv.Itoa(b.packets), itoa(b.paddingBytes * 8), itoa(b.rtxBytes * 8),
				itoa(b.audioBytes * 8)})
		}
	}
	if err := writeCSV(filepath.Join(c.out, "rate.csv"), []string{"second", "received_bps", "packets", "padding_bps", "rtx_bps", "audio_bps"}, rows); err != nil {
		return err
	}
	expected := 0
	if r.seqFirst >= 0 {
		expected = int(r.seqMax - r.seqFirst + 1)
	}
	if endSeen {
		if v, ok := r.end["packets"].(float64); ok {
			expected = int(v) // the sender numbers from 0: every packet it sent
		}
	}
	padExpected := r.padPackets
	if v, ok := r.end["padding_packets"].(float64); ok {
		padExpected = int(v)
	}
	sort.Float64s(lat)
	pct := func(q float64) any {
		if len(lat) == 0 {
			return nil
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	out := map[string]any{
		"end_record_seen": endSeen, "frames_sent_by_end_record": r.end["frames"],
		"frames_accounted": total, "frames_on_time": onTime, "frames_late": late,
		"frames_lost": lostIncomplete + lostUnseen, "frames_lost_incomplete": lostIncomplete, "frames_lost_unseen": lostUnseen,
		"frames_reassembly_mismatch": r.mismatch,
		"playout_deadline_ms":        float64(c.deadline.Nanoseconds()) / 1e6,
		"packets_received":           r.packets, "packets_expected": expected, "packets_lost": expected - r.packets,
		"duplicate_packets": r.dupPkts, "unparsable_packets": r.badPkts,
		"padding_packets_received": r.padPackets, "padding_bytes_received": r.padBytes, "padding_packets_expected": padExpected,
		"padding_packets_lost": padExpected - r.padPackets, "padding_duplicate_packets": r.padDups,
		"rtp_bytes_received": r.rtpBytes, "udp_datagrams_received": r.udpDgrams, "udp_payload_bytes_received": r.udpBytes, "feedback_rtcp_sent": r.fbSent, "feedback_interval_ms": c.feedbackInterval.Milliseconds(), "feedback_own_target_bps": c.ownTargetBps, "feedback_rtcp_bytes": r.fbBytes, "feedback_send_errors": r.fbErrs,
		"cpu": processCPU(),
		"latency_ms": map[string]any{"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "max": pct(1.0),
			"definition": "capture (encoder input, CLOCK_MONOTONIC) to the arrival of the frame's last missing packet"},
	}
	if r.dec != nil {
		out["decode"] = r.decodeTotals()
	}
	out["repair"] = r.rep.totals(r.end, expected-r.packets)
	out["audio"] = r.audio.totals(r.end, c.deadline, c.t0Ns)
	if r.firstNs != 0 {
		out["first_packet_s"] = float64(r.firstNs-c.t0Ns) / 1e9
		out["last_packet_s"] = float64(r.lastNs-c.t0Ns) / 1e9
	}
	return writeJSON(filepath.Join(c.out, "receiver.json"), out)
}

// decodeTotals: frames decoded + decode errors + undecodable = frames on time (played out).
func (r *receiver) decodeTotals() map[string]any {
	n := map[string]int{}
	for _, st := range r.decode {
		n[st]++
	}
	return map[string]any{
		"frames_decoded": n[decDecoded], "frames_decode_error": n[decError], "frames_undecodable": n[decUndecodable],
		"decoder": r.dec.end, "decoder_failure": r.decErr,
		"definition": "on-time frames fed in frame order to the decoder (avdec_h264 or vp8dec, rtp/decoder/live_decoder.py): decoded = it put " +
			"out their picture, decode_error = fed but no picture; undecodable = not fed because a frame since the " +
			"last keyframe was late or lost (every P-frame refers to the one before it; the next key frame, periodic or asked for by a PLI, ends it)",
	}
}
