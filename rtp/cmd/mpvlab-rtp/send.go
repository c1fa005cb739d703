package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/cc"
	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtp"
)

type sendConfig struct {
	dest, controller, out, ready, encoder, python string
	content, local, codec                         string
	initialBps, minBps, maxBps                    int
	encoderMaxBps                                 int // 0: the encoder follows the target alone (issue 48)
	duration                                      time.Duration
	fps, width, height, keyint                    int
	t0Ns                                          int64
	drainWait, feedbackWait                       time.Duration
	bbr                                           bbrVariant
	// loss repair (repair.go, issue 48 §1): NACK → RTX retransmission; PLI → a key frame
	nack, pli bool
	audio     audioConfig // the call's audio (audio.go, issue 48 §1)
}

// sentPacket is one row of packets.csv: what left the socket.
type sentPacket struct {
	tNs         int64
	tseq        int64
	seq         uint16
	frame       uint32
	wireBytes   int // RTP header + payload: the UDP payload
	payloadSize int
	padding     bool // a padding-only packet (padding.go), not video
	rtx         bool // a retransmission on the RTX stream (repair.go); seq is the RTX stream's
	osn         uint16
	audio       bool // an audio packet (audio.go); seq is the audio stream's
}

// frameRow is one row of frames.csv: one encoded frame as captured and handed to the pacer.
type frameRow struct {
	frame      uint32
	captureNs  int64
	handedNs   int64
	keyframe   bool
	bytes      int
	nalBytes   uint32
	packets    int
	encoderBps int  // the encoder's bitrate setting when it produced the frame
	targetBps  int  // the controller's target when the frame was handed over
	forced     bool // the first key frame after a key-frame request went to the encoder
}

type targetRow struct {
	tNs                  int64
	targetBps, encoderBp int
	stats                map[string]any
}

type sender struct {
	cfg      sendConfig
	vc       videoCodec
	conn     *net.UDPConn
	bwe      cc.BandwidthEstimator
	ledger   *feedbackLedger
	mu       sync.Mutex
	packets  []sentPacket
	targets  []targetRow
	handed   int // packets handed to the interceptor chain (the pacer queues them)
	wireSent int // media packets written to the socket
	// padding-only packets the controller's pacer sent (padding.go), apart from the media counts
	paddingSent, paddingBytes, paddingUnsent int
	sendErrs                                 int
	// wireMu serialises writes with the close of the wire: once closed, what the pacer still
	// releases is not sent (unsentAtEnd), so the end record's packet count is the final one.
	wireMu      sync.Mutex
	wireClosed  bool
	unsentAtEnd int
	// loss repair (repair.go)
	hist       *packetHistory
	rtxWriter  interceptor.RTPWriter
	rtxSeq     uint16
	rep        repairCounts
	keyLimiter keyFrameLimiter
	// ReSendPacket's retransmission_rate_limiter_ (repair.go rateLimiter)
	retransmitLimit rateLimiter
	enc             *encoder // set once the encoder runs: PLIs reach it
	audio           audioCounts
}

// repairCounts is sender.json's `repair`: what the viewer asked for and what was done about it.
type repairCounts struct {
	NackMessages        int `json:"nack_messages_received"`    // RTCP generic NACKs read
	NackedSeqs          int `json:"nacked_packets"`            // sequence numbers they named (each time named)
	NotInHistory        int `json:"resend_not_in_history"`     // named but no longer (or never) in the history
	TooSoon             int `json:"resend_refused_too_soon"`   // VerifyRtt: resent less than an RTT ago
	RateLimited         int `json:"resend_rate_limited"`       // refused by the retransmission rate limiter, or after it in the same NACK
	Queued              int `json:"retransmissions_queued"`    // handed to the pacer on the RTX stream
	Sent                int `json:"retransmissions_sent"`      // left the socket (packets.csv rows with rtx true)
	Bytes               int `json:"retransmission_bytes_sent"` // their UDP payload
	Unsent              int `json:"retransmissions_unsent_at_end"`
	PLIs                int `json:"pli_received"`
	KeyFramesRequested  int `json:"keyframe_requests_to_encoder"`   // PLIs passed to the encoder
	KeyFramesRateLimit  int `json:"keyframe_requests_rate_limited"` // dropped: < 300 ms after the last passed
	KeyFramesAfterAsked int `json:"keyframes_forced"`               // key frames the encoder made while a request was pending
	keyPending          bool
}

func parseSendFlags(args []string) (sendConfig, error) {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	c := sendConfig{}
	fs.StringVar(&c.dest, "dest", "", "viewer address:port")
	fs.StringVar(&c.local, "local", "", "local address to send from (default: the route's source)")
	fs.StringVar(&c.controller, "controller", "gcc", "rate controller")
	fs.StringVar(&c.out, "out", "", "directory for the CSVs and sender.json")
	fs.StringVar(&c.ready, "ready", "", "file written once the encoder runs (pids)")
	fs.StringVar(&c.encoder, "encoder", "", "the live encoder script (rtp/encoder/live_encoder.py)")
	fs.StringVar(&c.python, "python", "/usr/bin/python3", "the Python with GStreamer's bindings (gi) that runs it")
	fs.StringVar(&c.content, "content", "moving-smpte", "the encoder's test picture")
	fs.StringVar(&c.codec, "codec", "h264", "video codec: h264 (x264) or vp8 (libvpx with libwebrtc's 2018 rate control)")
	fs.IntVar(&c.initialBps, "initial-bitrate", 300_000, "bit/s before feedback")
	fs.IntVar(&c.minBps, "min-bitrate", 50_000, "bit/s floor")
	fs.IntVar(&c.maxBps, "max-bitrate", 1_300_000, "bit/s cap of the controller's estimate and target")
	fs.IntVar(&c.encoderMaxBps, "encoder-max-bitrate", 0,
		"bit/s cap of the encoder, in the target's unit: the encoder gets what the target would give at min(target, this); 0 = none")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "media time to send, from the first captured frame")
	fs.IntVar(&c.fps, "fps", 30, "frames per second")
	fs.IntVar(&c.width, "width", 640, "")
	fs.IntVar(&c.height, "height", 360, "")
	fs.IntVar(&c.keyint, "keyint", 60, "frames between keyframes")
	fs.Int64Var(&c.t0Ns, "t0-ns", 0, "run time zero, CLOCK_MONOTONIC ns")
	fs.DurationVar(&c.drainWait, "drain-wait", 3*time.Second, "how long to wait for the pacer and the last feedback")
	fs.BoolVar(&c.bbr.NonReplacingFilter, "bbr-non-replacing-filter", false, "webrtc-bbr variant: the filter keeps the three highest samples")
	fs.BoolVar(&c.bbr.ThirdBest, "bbr-third-best", false, "webrtc-bbr variant: the third-highest sample is the estimate")
	fs.BoolVar(&c.bbr.NoRecovery, "bbr-no-recovery", false, "webrtc-bbr variant: no recovery state")
	fs.BoolVar(&c.bbr.ProbeRTTv2, "bbr-probe-rtt-v2", false, "webrtc-bbr variant: BBRv2-like RTT probing")
	fs.BoolVar(&c.bbr.NoPadding, "bbr-no-padding", false, "webrtc-bbr: no padding while BBR probes (WebRTC pads)")
	fs.BoolVar(&c.nack, "nack", true, "loss repair: resend NACKed packets on the RTX stream (libwebrtc 2018's default for video)")
	fs.BoolVar(&c.pli, "pli", true, "loss repair: a PLI makes the encoder's next frame a key frame (rate-limited as libwebrtc 2018)")
	fs.BoolVar(&c.audio.enabled, "audio", false, "send the call's audio: Opus as libwebrtc 2018 by default (audio.go)")
	fs.StringVar(&c.audio.script, "audio-encoder", "", "the live audio source (rtp/encoder/live_audio.py)")
	fs.IntVar(&c.audio.bitrate, "audio-bitrate", 32000, "Opus target bit/s (libwebrtc 2018: kOpusBitrateFbBps)")
	fs.DurationVar(&c.audio.frame, "audio-frame", 20*time.Millisecond, "Opus frame length (libwebrtc 2018: kDefaultFrameSizeMs)")
	fs.StringVar(&c.audio.wave, "audio-wave", "pink-noise", "the audio source's test signal (live_audio.py)")
	fs.DurationVar(&c.feedbackWait, "feedback-wait", 3*time.Second,
		"after the pacer's queue is dropped: how long to wait for the feedback on the last packet sent")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.dest == "" || c.out == "" || c.encoder == "" {
		return c, errors.New("send needs --dest, --out and --encoder")
	}
	if c.bbr != (bbrVariant{}) && c.controller != "webrtc-bbr" {
		return c, fmt.Errorf("the --bbr-* variants apply to controller webrtc-bbr, not %q", c.controller)
	}
	if c.audio.enabled && c.audio.script == "" {
		return c, errors.New("--audio needs --audio-encoder")
	}
	if f := c.audio.frame.Milliseconds(); c.audio.enabled && (f != 10 && f != 20 && f != 40 && f != 60 || c.audio.frame != time.Duration(f)*time.Millisecond) {
		return c, fmt.Errorf("--audio-frame %v: Opus frames are 10, 20, 40 or 60 ms", c.audio.frame)
	}
	if c.audio.enabled && (c.audio.bitrate < 6000 || c.audio.bitrate > 510000) {
		return c, fmt.Errorf("--audio-bitrate %d: Opus takes 6000 … 510000 bit/s", c.audio.bitrate)
	}
	if c.encoderMaxBps < 0 {
		return c, fmt.Errorf("--encoder-max-bitrate %d: need ≥ 0 (0 = no cap of its own)", c.encoderMaxBps)
	}
	if c.minBps <= 0 || c.initialBps < c.minBps || c.maxBps < c.initialBps {
		return c, fmt.Errorf("need 0 < min %d ≤ initial %d ≤ max %d bit/s", c.minBps, c.initialBps, c.maxBps)
	}
	return c, nil
}

func runSend(args []string) error {
	cfg, err := parseSendFlags(args)
	if err != nil {
		return err
	}
	raddr, err := net.ResolveUDPAddr("udp4", cfg.dest)
	if err != nil {
		return err
	}
	var laddr *net.UDPAddr
	if cfg.local != "" {
		if laddr, err = net.ResolveUDPAddr("udp4", cfg.local+":0"); err != nil {
			return err
		}
	}
	conn, err := net.DialUDP("udp4", laddr, raddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	vc, err := codecByName(cfg.codec)
	if err != nil {
		return err
	}
	s := &sender{cfg: cfg, vc: vc, conn: conn, ledger: newFeedbackLedger(), hist: newPacketHistory(historySize)}
	s.audio = audioCounts{Enabled: cfg.audio.enabled, BitrateBps: cfg.audio.bitrate, FrameMs: cfg.audio.frame.Milliseconds(),
		Wave: cfg.audio.wave, SSRC: audioSSRC, PayloadType: audioPT, ClockRate: audioClockRate}
	if !cfg.audio.enabled {
		s.audio.BitrateBps, s.audio.FrameMs, s.audio.Wave = 0, 0, ""
	}

	// The interceptor chain, as pion/webrtc builds it for a sender: the cc interceptor (estimator +
	// pacer) is added first so that it sits nearest the network, the TWCC header-extension
	// interceptor outside it numbers every packet as it is handed over — except for a controller
	// whose pacer numbers packets as they leave (numbersAtSend: webrtc-bbr, which pads, and gcc's
	// pacer with retransmissions first, gcc_pacer.go).
	ccf, err := cc.NewInterceptor(func() (cc.BandwidthEstimator, error) {
		return newController(cfg.controller, controllerConfig{InitialBps: cfg.initialBps, MinBps: cfg.minBps, MaxBps: cfg.maxBps, BBR: cfg.bbr})
	})
	if err != nil {
		return err
	}
	ccf.OnNewPeerConnection(func(_ string, e cc.BandwidthEstimator) { s.bwe = e })
	hdr, err := twcc.NewHeaderExtensionInterceptor()
	if err != nil {
		return err
	}
	reg := interceptor.Registry{}
	reg.Add(ccf)
	if !numbersAtSend[cfg.controller] {
		reg.Add(hdr)
	}
	chain, err := reg.Build("mpvlab")
	if err != nil {
		return err
	}
	info := &interceptor.StreamInfo{
		SSRC: defaultSSRC, ClockRate: 90000, MimeType: s.vc.mime, PayloadType: payloadType,
		RTPHeaderExtensions: []interceptor.RTPHeaderExtension{{URI: twccURI, ID: extTWCC}},
	}
	writer := chain.BindLocalStream(info, interceptor.RTPWriterFunc(s.writeWire))
	if cfg.nack {
		// the RTX stream through the same chain: numbered for the feedback and paced by the same
		// pacer, its bytes counted by the controller as 2018's pacer counted retransmissions
		rtxInfo := *info
		rtxInfo.SSRC, rtxInfo.PayloadType = rtxSSRC, rtxPT
		s.rtxWriter = chain.BindLocalStream(&rtxInfo, interceptor.RTPWriterFunc(s.writeWire))
	}
	var audioWriter interceptor.RTPWriter
	if cfg.audio.enabled {
		// the audio stream goes to the controller's pacer directly (audio.go): high priority, no
		// transport-wide number, its bytes not counted, as 2018's default
		ap, ok := s.bwe.(audioPacer)
		if !ok {
			return fmt.Errorf("controller %q has no pacer for the audio stream", cfg.controller)
		}
		audioWriter = ap.AddAudioStream(interceptor.RTPWriterFunc(s.writeWire))
	}
	rtcpReader := chain.BindRTCPReader(interceptor.RTCPReaderFunc(
		func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
			n, err := conn.Read(b)
			if err == nil {
				s.ledger.onRTCP(b[:n])
				s.onRepairRTCP(b[:n])
			}
			return n, a, err
		}))
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := rtcpReader.Read(buf, nil); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// an undecodable datagram is counted by the ledger; keep reading
			}
		}
	}()

	enc, err := startEncoder(cfg)
	if err != nil {
		return err
	}
	defer enc.stop()
	s.mu.Lock()
	s.enc = enc
	s.mu.Unlock()
	readyInfo := map[string]any{"pid": os.Getpid(), "encoder_pid": enc.cmd.Process.Pid}
	var audioSrc *audioSource
	audioStop := make(chan struct{})
	audioDone := make(chan error, 1)
	var audioEndNs int64
	if cfg.audio.enabled {
		if audioSrc, err = startAudio(cfg); err != nil {
			return fmt.Errorf("audio encoder: %w", err)
		}
		defer audioSrc.stop()
		readyInfo["audio_encoder_pid"] = audioSrc.cmd.Process.Pid
		go func() { audioDone <- s.sendAudio(audioSrc, audioWriter, audioStop, &audioEndNs) }()
	} else {
		audioDone <- nil
	}
	if cfg.ready != "" {
		if err := writeJSON(cfg.ready, readyInfo); err != nil {
			return err
		}
	}
	// Every target change goes to the encoder at once (the encoder's rate follows the controller
	// at every update) and into targets.csv.
	targets := make(chan int, 256)
	var targetsMu sync.Mutex
	targetsClosed := false
	// GCC calls this from its own goroutines, also after the stream ended: never send on a closed channel.
	s.bwe.OnTargetBitrateChange(func(bps int) {
		targetsMu.Lock()
		defer targetsMu.Unlock()
		if targetsClosed {
			return
		}
		select {
		case targets <- bps:
		default: // a burst of updates: the next one carries the newest value
		}
	})
	s.recordTarget(cfg.initialBps, cfg.encoderBps(cfg.initialBps))
	enc.setBitrate(cfg.encoderBps(cfg.initialBps))
	targetsDone := make(chan struct{})
	go func() {
		defer close(targetsDone)
		for bps := range targets {
			if bps == 0 { // webrtc-bbr's send queue is full (IsSendQueueFull): libwebrtc pauses the encoder
				enc.pause()
				s.recordTarget(0, 0)
				continue
			}
			e := cfg.encoderBps(bps)
			enc.resume()
			enc.setBitrate(e)
			s.recordTarget(bps, e)
		}
	}()

	frames, err := s.sendFrames(enc, writer)
	// the audio ends with the video: frames captured after the video's last are not sent
	audioEndNs = monotonicNs()
	if len(frames) > 0 && s.cfg.duration > 0 {
		audioEndNs = min(audioEndNs, frames[0].captureNs+s.cfg.duration.Nanoseconds())
	}
	close(audioStop)
	if audioSrc != nil {
		audioSrc.stop()
	}
	if aerr := <-audioDone; aerr != nil && err == nil {
		err = aerr
	}
	targetsMu.Lock()
	targetsClosed = true
	close(targets)
	targetsMu.Unlock()
	<-targetsDone
	enc.stop()
	if err != nil {
		return err
	}
	if p, ok := s.bwe.(interface{ StopPadding() }); ok {
		p.StopPadding() // the stream ended: only media from here, so the drain and feedback waits end
	}
	// Let the pacer drain and the feedback for the last packets come back, then tell the viewer
	// how many frames there were.
	// Up to drainWait for the pacer to send what it holds and the feedback on it; a window-limited
	// controller may still hold packets then — they are not sent (closeWire).
	s.waitDrained(cfg.drainWait)
	// A pacer still holding packets (a window-limited controller behind a long queue) would send
	// after the end record and the viewer would count one packet fewer than the sender: the wire
	// closes here, and the feedback on what was sent still comes back before the end record.
	sent, padding := s.closeWire()
	for deadline := time.Now().Add(cfg.feedbackWait); time.Now().Before(deadline) && !s.ledger.lastCovered(); {
		time.Sleep(10 * time.Millisecond)
	}
	end, _ := json.Marshal(map[string]any{"frames": len(frames), "packets": sent, "ssrc": defaultSSRC,
		"padding_packets": padding, "padding_ssrc": paddingSSRC, "rtx_packets": s.rtxSentCount(), "rtx_ssrc": rtxSSRC,
		"audio_packets": s.audioSentCount(), "audio_ssrc": audioSSRC})
	for i := 0; i < 5; i++ { // UDP: repeated, the viewer takes the first
		_, _ = conn.Write(append([]byte(endMagic), end...))
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the viewer's last feedback
	_ = chain.Close()
	return s.writeResults(frames)
}

// waitDrained waits up to d until the pacer has sent every packet handed to it and feedback covers
// the last one; whether they have.
func (s *sender) waitDrained(d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		drained := s.wireSent == s.handed && s.rep.Sent+s.rep.Unsent == s.rep.Queued && s.audio.Sent == s.audio.Handed
		s.mu.Unlock()
		if drained && s.ledger.lastCovered() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
	}
}

// closeWire stops writeWire sending and returns the media and padding packets it sent.
func (s *sender) closeWire() (media, padding int) {
	s.wireMu.Lock()
	defer s.wireMu.Unlock()
	s.wireClosed = true
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wireSent, s.paddingSent
}

// writeWire is the bottom of the chain: what the pacer releases goes to the socket here.
func (s *sender) writeWire(h *rtp.Header, payload []byte, _ interceptor.Attributes) (int, error) {
	buf, err := h.Marshal()
	if err != nil {
		return 0, err
	}
	s.wireMu.Lock()
	defer s.wireMu.Unlock()
	pad := h.SSRC == paddingSSRC
	rtx := h.SSRC == rtxSSRC
	aud := h.SSRC == audioSSRC
	if s.wireClosed {
		// after the end record's count: never sent, never in packets.csv
		if pad {
			s.paddingUnsent++
		} else if aud {
			s.mu.Lock()
			s.audio.Unsent++
			s.mu.Unlock()
		} else if rtx {
			s.mu.Lock()
			s.rep.Unsent++
			s.mu.Unlock()
		} else {
			s.unsentAtEnd++
		}
		return len(buf), nil
	}
	buf = append(buf, payload...)
	// Into the feedback ledger before the socket: on a short path the feedback naming this packet
	// can be read by the other goroutine before Write returns.
	var ext rtp.TransportCCExtension
	tseq := int64(-1)
	if e := h.GetExtension(extTWCC); e != nil && ext.Unmarshal(e) == nil {
		tseq = s.ledger.onSent(ext.TransportSequence)
	}
	now := monotonicNs()
	n, err := s.conn.Write(buf)
	st, _ := parseStamp(h.GetExtension(extFrame), h.GetExtension(extFramePart))
	s.mu.Lock()
	var osn uint16
	switch {
	case pad:
		s.paddingSent++
		s.paddingBytes += len(buf)
	case aud:
		s.audio.Sent++
		s.audio.Bytes += len(buf)
		s.audio.PayloadBytes += len(payload)
	case rtx:
		osn = binaryOSN(payload)
		s.rep.Sent++
		s.rep.Bytes += len(buf)
		s.hist.onSent(osn, now, true)
	default:
		s.wireSent++
		s.hist.onSent(h.SequenceNumber, now, false)
	}
	if err != nil {
		s.sendErrs++
	}
	s.packets = append(s.packets, sentPacket{now, tseq, h.SequenceNumber, st.Frame, len(buf), len(payload), pad, rtx, osn, aud})
	s.mu.Unlock()
	if err != nil {
		// ECONNREFUSED from an earlier ICMP, ENOBUFS: counted; the stream goes on as UDP would
		return len(buf), nil
	}
	return n, nil
}

func (s *sender) recordTarget(bps, encBps int) {
	var stats map[string]any
	if s.bwe != nil {
		stats = s.bwe.GetStats()
	}
	s.mu.Lock()
	s.targets = append(s.targets, targetRow{monotonicNs(), bps, encBps, stats})
	s.mu.Unlock()
}

// sendFrames reads encoded frames until `duration` of media has been captured, packetises each
// (pion's H264 payloader: single NAL, STAP-A for SPS+PPS, FU-A), stamps every packet with its frame
// and hands them to the chain (TWCC numbering, then the controller's pacer).
func (s *sender) sendFrames(enc *encoder, w interceptor.RTPWriter) ([]frameRow, error) {
	var rows []frameRow
	pay := s.vc.payloader()
	var seq uint16
	first := int64(-1)
	for {
		f, err := enc.next()
		if err != nil {
			return rows, fmt.Errorf("encoder: %w (%s)", err, filepath.Join(s.cfg.out, "encoder.log"))
		}
		if first < 0 {
			first = f.captureNs
		}
		if f.captureNs-first >= s.cfg.duration.Nanoseconds() {
			return rows, nil
		}
		payloads := pay.Payload(maxPayloadMTU, f.data)
		nb := s.vc.stampBytes(f.data)
		row := frameRow{frame: f.number, captureNs: f.captureNs, keyframe: f.key, bytes: len(f.data),
			nalBytes: nb, packets: len(payloads), encoderBps: f.kbps * 1000, targetBps: s.bwe.GetTargetBitrate()}
		for i, p := range payloads {
			st := frameStamp{Frame: f.number, CaptureNs: f.captureNs, Index: uint16(i), Count: uint16(len(payloads)), NALBytes: nb}
			fe, pe := st.marshal()
			h := rtp.Header{Version: 2, PayloadType: payloadType, SequenceNumber: seq, SSRC: defaultSSRC,
				Timestamp: uint32(f.captureNs * 9 / 100_000), Marker: i == len(payloads)-1}
			if err := h.SetExtension(extFrame, fe); err != nil {
				return rows, err
			}
			if err := h.SetExtension(extFramePart, pe); err != nil {
				return rows, err
			}
			seq++
			s.mu.Lock()
			s.handed++
			if s.cfg.nack {
				s.hist.put(h, p)
			}
			s.mu.Unlock()
			if _, err := w.Write(&h, p, interceptor.Attributes{}); err != nil {
				return rows, fmt.Errorf("pacer: %w", err)
			}
		}
		row.handedNs = monotonicNs()
		s.mu.Lock()
		if f.key && s.rep.keyPending { // the first key frame after a request passed to the encoder
			s.rep.KeyFramesAfterAsked++
			s.rep.keyPending = false
			row.forced = true
		}
		s.mu.Unlock()
		rows = append(rows, row)
	}
}

// encoderBps is what the encoder is asked for at a controller target. GCC (pion) counts whole
// packets, so its target is less the RTP/UDP/IP headers of the packets the encoder will fill (about
// 12 + 24 extension + 8 UDP + 20 IP bytes per ≤ 1200-byte payload). webrtc-bbr counts payload bytes
// as libwebrtc 2018 does (bbr_estimator.go sendLocked), so its target is already a payload rate and
// the encoder gets it whole, as 2018's VideoSendStreamImpl::OnBitrateUpdated does without the
// WebRTC-SendSideBwe-WithOverhead field trial (video_send_stream_impl.cc 0040b66a l. 890-905: the
// overhead is subtracted only with it; no FEC or NACK protection to take off here).
//
// A cap of the encoder (--encoder-max-bitrate, issue 48) applies before that conversion, so the
// encoder never gets more than it would at a target of the cap, whatever the controller estimates.
func (c sendConfig) encoderBps(target int) int {
	if c.encoderMaxBps > 0 && target > c.encoderMaxBps {
		target = c.encoderMaxBps
	}
	if c.controller == "webrtc-bbr" {
		return target
	}
	return target * maxPayloadMTU / (maxPayloadMTU + 64)
}

// --- the live encoder child (rtp/encoder/live_encoder.py) ---------------------------------------

type encoder struct {
	pythonChild
	paused bool
}

// command sends one line to the encoder; pause/resume only on a change of state.
func (e *encoder) command(c string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done || (c == "pause") == e.paused {
		return
	}
	e.paused = c == "pause"
	_, _ = fmt.Fprintln(e.stdin, c)
}

type encodedFrame struct {
	number    uint32
	captureNs int64
	key       bool
	kbps      int
	data      []byte
}

func startEncoder(c sendConfig) (*encoder, error) {
	// Started at the setting the initial target gives, so that every frame's bitrate is one the
	// controller set (tests/test_rtp_run.py checks it), even a frame made before the first command.
	argv := []string{c.python, c.encoder, "--content", c.content, "--fps", fmt.Sprint(c.fps), "--width", fmt.Sprint(c.width), "--height", fmt.Sprint(c.height),
		"--keyint", fmt.Sprint(c.keyint), "--codec", c.codec, "--bitrate-kbps", fmt.Sprint(max(c.encoderBps(c.initialBps)/1000, 16))}
	cmd, in, out, err := startPythonChild(argv, c.out, "encoder.log")
	if err != nil {
		return nil, err
	}
	return &encoder{pythonChild: pythonChild{cmd: cmd, stdin: in, stdout: bufio.NewReaderSize(out, 1<<20)}}, nil
}

// pause and resume: the encoder's valve before the encoder drops raw frames while paused (they are
// never encoded, so no reference is broken), as libwebrtc's encoder skips frames at a target of 0.
func (e *encoder) pause() { e.command("pause") }

func (e *encoder) resume() { e.command("resume") }

// keyFrame asks for the next frame to be a key frame (the viewer's PLI).
func (e *encoder) keyFrame() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		_, _ = fmt.Fprintln(e.stdin, "keyframe")
	}
}

func (e *encoder) setBitrate(bps int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		_, _ = fmt.Fprintf(e.stdin, "bitrate %d\n", max(bps/1000, 16))
	}
}

func (e *encoder) next() (encodedFrame, error) {
	var h [24]byte
	if _, err := io.ReadFull(e.stdout, h[:]); err != nil {
		return encodedFrame{}, err
	}
	n := binary.BigEndian.Uint32(h[20:])
	if n > 16<<20 {
		return encodedFrame{}, fmt.Errorf("frame of %d bytes", n)
	}
	f := encodedFrame{number: binary.BigEndian.Uint32(h[0:]), captureNs: int64(binary.BigEndian.Uint64(h[4:])),
		key: binary.BigEndian.Uint32(h[12:]) != 0, kbps: int(binary.BigEndian.Uint32(h[16:])), data: make([]byte, n)}
	_, err := io.ReadFull(e.stdout, f.data)
	return f, err
}
