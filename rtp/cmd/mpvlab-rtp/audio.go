package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
)

// The call's audio (issue 48 §1; rtp/README.md "The call had audio"): an Opus stream beside the
// video, sent as libwebrtc 2018 sent it by default — every constant below names the 2018 line it
// follows (the audit rows "AudioEncoderOpusImpl" … "WebRtcVoiceEngine::GetCapabilities"):
//
//   - its own SSRC, payload type 111 (PayloadTypeMapper: opus/48000/2 → 111), RTP clock 48 kHz,
//     one Opus frame per packet (RTPSenderAudio::SendAudio; pion's OpusPayloader), the marker bit
//     on the first packet (RTPSenderAudio::MarkerBit);
//   - through the same pacer as the video at high priority (RTPSenderAudio::SendAudio →
//     SendToNetwork(…, kHighPriority)): queued before every video packet and retransmission;
//   - held back while the pacer holds video back (PacedSender::SendPacket: `video_blocks_audio_`,
//     on unless the field trial WebRTC-Pacer-BlockAudio is Disabled): an empty media budget or a
//     full congestion window stops audio too;
//   - its bytes not counted (PacedSender::SendPacket: `account_for_audio_` false unless
//     AudioSendStream::Start calls SetAccountForAudioPackets(true), which it does only with
//     audio BWE configured): they spend no media or padding budget, are not bytes in flight and do
//     not reset the keep-alive padding's idle timer (last_send_time_us_);
//   - without a transport-wide sequence number: WebRtcVoiceEngine::GetCapabilities offers the
//     extension for audio only with the field trial WebRTC-Audio-SendSideBwe (off by default in
//     2018), so audio packets are not in the TWCC feedback, the delay-based estimate, or the
//     controller's bytes in flight; and without min/max bitrates (UpdateAllowedBitrateRange sets
//     them only under the same trial) AudioSendStream::Start registers no BitrateAllocator
//     observer: the video gets the whole estimate, the audio its fixed 32 kbit/s.
//
// The RTP timestamp is the capture instant on the 48 kHz clock (CLOCK_MONOTONIC × 48 000, modulo
// 2^32): consecutive 20 ms frames differ by 960, as a sample counter would, and the viewer recovers
// each packet's capture time from it (within one tick, 20.8 µs) without a header extension of
// mpvlab's own — audio packets carry no header extension at all. 2018's carried the audio-level
// extension (RFC 6464: 4 B extension header + 2 B element + 2 B padding = 8 B per packet,
// 3.2 kbit/s at 50 packets/s); it is not sent here, the level it would carry would be made up.
const (
	audioSSRC      = 0x6d707661 // "mpva"
	audioPT        = 111
	audioClockRate = 48000
)

// audioPacer is a controller's pacer taking the audio stream beside the video (bypassing pion's
// send-side wrapper, which would record audio packets in its feedback history); the writer the
// sender hands audio packets to.
type audioPacer interface {
	AddAudioStream(w interceptor.RTPWriter) interceptor.RTPWriter
}

// rtpTicks48k is ns (CLOCK_MONOTONIC) on the 48 kHz RTP clock, without overflowing int64.
func rtpTicks48k(ns int64) int64 {
	return ns/1_000_000*(audioClockRate/1000) + ns%1_000_000*(audioClockRate/1000)/1_000_000
}

// audioCaptureNs recovers a packet's capture instant from its 48 kHz RTP timestamp, given the
// arrival instant (capture is before arrival, by less than the clock's 2^32 ticks ≈ 24.8 h): the
// newest instant ≤ arrival whose tick is ts modulo 2^32, back in ns (rounded down to the tick).
func audioCaptureNs(ts uint32, arrivalNs int64) int64 {
	now := rtpTicks48k(arrivalNs)
	back := uint32(now) - ts // (now − ts) mod 2^32
	ticks := now - int64(back)
	return ticks/(audioClockRate/1000)*1_000_000 + ticks%(audioClockRate/1000)*1_000_000/(audioClockRate/1000)
}

// --- the sender's audio --------------------------------------------------------------------------

// audioConfig is the sender's --audio-* flags.
type audioConfig struct {
	enabled bool
	bitrate int           // Opus target, bit/s (2018: kOpusBitrateFbBps 32 000)
	frame   time.Duration // Opus frame length (2018: kDefaultFrameSizeMs 20)
	wave    string        // the test signal (live_audio.py)
	script  string        // rtp/encoder/live_audio.py
}

// audioCounts is sender.json's `audio`.
type audioCounts struct {
	Enabled       bool   `json:"enabled"`
	BitrateBps    int    `json:"bitrate_bps"`
	FrameMs       int64  `json:"frame_ms"`
	Wave          string `json:"wave"`
	SSRC          uint32 `json:"ssrc"`
	PayloadType   int    `json:"payload_type"`
	ClockRate     int    `json:"clock_rate"`
	Frames        int    `json:"frames"`                // encoded frames handed to the pacer (one packet each)
	FramesDropped int    `json:"frames_after_end"`      // captured after the video's end: not sent
	Handed        int    `json:"packets_handed"`        // packets given to the pacer
	Sent          int    `json:"packets_sent"`          // left the socket (packets.csv rows with audio true)
	Bytes         int    `json:"bytes_sent"`            // their UDP payload (RTP header + Opus frame)
	PayloadBytes  int    `json:"payload_bytes_sent"`    // the Opus frames alone
	Unsent        int    `json:"packets_unsent_at_end"` // still in the pacer when the wire closed
	FirstCaptureS any    `json:"first_capture_s"`
	LastCaptureS  any    `json:"last_capture_s"`
	TransportCC   bool   `json:"transport_wide_sequence_numbers"`
	PacerCounts   bool   `json:"counted_in_pacer_budget"`
}

type audioSource struct {
	pythonChild
}

type audioFrame struct {
	number    uint32
	captureNs int64
	data      []byte
}

func startAudio(c sendConfig) (*audioSource, error) {
	argv := []string{c.python, c.audio.script, "--bitrate", fmt.Sprint(c.audio.bitrate),
		"--frame-ms", fmt.Sprint(c.audio.frame.Milliseconds()), "--wave", c.audio.wave}
	cmd, in, out, err := startPythonChild(argv, c.out, "audio.log")
	if err != nil {
		return nil, err
	}
	return &audioSource{pythonChild{cmd: cmd, stdin: in, stdout: bufio.NewReaderSize(out, 1<<16)}}, nil
}

func (a *audioSource) next() (audioFrame, error) {
	var h [16]byte
	if _, err := io.ReadFull(a.stdout, h[:]); err != nil {
		return audioFrame{}, err
	}
	n := binary.BigEndian.Uint32(h[12:])
	if n > 1500 {
		return audioFrame{}, fmt.Errorf("audio frame of %d bytes", n)
	}
	f := audioFrame{number: binary.BigEndian.Uint32(h[0:]), captureNs: int64(binary.BigEndian.Uint64(h[4:])), data: make([]byte, n)}
	_, err := io.ReadFull(a.stdout, f.data)
	return f, err
}

// audioPacket builds the RTP packet of one Opus frame (pion's OpusPayloader: the frame is the
// payload, one per packet).
func audioPacket(f audioFrame, seq uint16, first bool) (rtp.Header, []byte) {
	pay := (&codecs.OpusPayloader{}).Payload(maxPayloadMTU, f.data)
	h := rtp.Header{Version: 2, PayloadType: audioPT, SequenceNumber: seq, SSRC: audioSSRC,
		Timestamp: uint32(rtpTicks48k(f.captureNs)), Marker: first}
	if len(pay) != 1 {
		return h, nil
	}
	return h, pay[0]
}

// sendAudio hands every audio frame to the pacer until stopAt is closed; a frame captured after the
// video's end (endNs, set before stopAt closes) is not sent.
func (s *sender) sendAudio(src *audioSource, w interceptor.RTPWriter, stopAt <-chan struct{}, endNs *int64) error {
	var seq uint16
	for {
		f, err := src.next()
		if err != nil {
			select {
			case <-stopAt:
				return nil // the child was stopped
			default:
				return fmt.Errorf("audio encoder: %w", err)
			}
		}
		select {
		case <-stopAt:
			if f.captureNs >= *endNs {
				s.mu.Lock()
				s.audio.FramesDropped++
				s.mu.Unlock()
				continue // drain the pipe until the child exits
			}
		default:
		}
		h, p := audioPacket(f, seq, seq == 0)
		if p == nil {
			return fmt.Errorf("audio frame %d: the Opus payloader gave no single packet", f.number)
		}
		seq++
		s.mu.Lock()
		s.audio.Frames++
		s.audio.Handed++
		if s.audio.FirstCaptureS == nil {
			s.audio.FirstCaptureS = float64(f.captureNs-s.cfg.t0Ns) / 1e9
		}
		s.audio.LastCaptureS = float64(f.captureNs-s.cfg.t0Ns) / 1e9
		s.mu.Unlock()
		if _, err := w.Write(&h, p, interceptor.Attributes{}); err != nil {
			return fmt.Errorf("pacer (audio): %w", err)
		}
	}
}

// --- the viewer's audio ----------------------------------------------------------------------------

// recvAudio is the viewer's account of the audio stream, apart from the video: packets by
// sequence number (received, duplicates; lost = the sender's count − received), bytes, and each
// packet on time or late against the playout deadline (capture, from the RTP timestamp, to
// arrival). Not decoded: the Opus frames are counted, not played (no opusdec), so "on time" is the
// packet's transport, as a video frame's status is.
type recvAudio struct {
	seqs     seqSet
	packets  int
	bytes    int64
	payload  int64
	dups     int
	onTime   int
	late     int
	latMs    []float64
	firstNs  int64
	lastNs   int64
	capFirst int64
	capLast  int64
}

func newRecvAudio() recvAudio { return recvAudio{seqs: newSeqSet()} }

// onAudio counts one audio packet (r.mu held).
func (r *receiver) onAudio(p *rtp.Packet, size int, now int64) {
	a := &r.audio
	if !r.admit(p.PayloadType == audioPT, &a.seqs, p.SequenceNumber, &a.dups) {
		return
	}
	a.packets++
	a.bytes += int64(size)
	a.payload += int64(len(p.Payload))
	capture := audioCaptureNs(p.Timestamp, now)
	lat := now - capture
	a.latMs = append(a.latMs, float64(lat)/1e6)
	if lat <= r.cfg.deadline.Nanoseconds() {
		a.onTime++
	} else {
		a.late++
	}
	if a.firstNs == 0 {
		a.firstNs, a.capFirst = now, capture
	}
	a.lastNs, a.capLast = now, max(a.capLast, capture)
	r.bin(now).audioBytes += int64(size)
}

// totals is receiver.json's `audio`.
func (a *recvAudio) totals(end map[string]any, deadline time.Duration, t0 int64) map[string]any {
	expected := any(nil)
	lost := any(nil)
	if v, ok := end["audio_packets"].(float64); ok {
		expected, lost = int(v), int(v)-a.packets
	}
	lat := append([]float64(nil), a.latMs...)
	sort.Float64s(lat)
	pct := func(q float64) any {
		if len(lat) == 0 {
			return nil
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	out := map[string]any{
		"packets_received": a.packets, "packets_expected": expected, "packets_lost": lost, "duplicate_packets": a.dups,
		"bytes_received": a.bytes, "payload_bytes_received": a.payload,
		"packets_on_time": a.onTime, "packets_late": a.late, "playout_deadline_ms": float64(deadline.Nanoseconds()) / 1e6,
		"latency_ms": map[string]any{"p50": pct(0.5), "p95": pct(0.95), "max": pct(1.0)},
		"definition": "audio packets (SSRC 0x6d707661, PT 111), each sequence number once; on time = arrived by its capture " +
			"instant (from the 48 kHz RTP timestamp) + the playout deadline; not decoded",
	}
	if a.firstNs != 0 {
		out["first_packet_s"] = float64(a.firstNs-t0) / 1e9
		out["last_packet_s"] = float64(a.lastNs-t0) / 1e9
	}
	return out
}

func (s *sender) audioSentCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.audio.Sent
}
