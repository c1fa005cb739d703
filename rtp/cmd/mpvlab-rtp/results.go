package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path) // readers never see half a file
}

func writeCSV(path string, header []string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(header)
	_ = w.WriteAll(rows)
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// secs is a run-time instant in seconds since t0, as the other collectors write it.
func secs(ns, t0 int64) string { return strconv.FormatFloat(float64(ns-t0)/1e9, 'f', 6, 64) }

// stepMean is the time-weighted mean of a step function (values set at times ts) over [a, b).
func stepMean(ts []int64, vs []int, a, b int64) float64 {
	if b <= a || len(ts) == 0 {
		return 0
	}
	var acc float64
	for i := range ts {
		lo, hi := ts[i], b
		if i+1 < len(ts) {
			hi = ts[i+1]
		}
		if i == 0 && lo > a {
			lo = a // before the first record the first value held (the initial target)
		}
		lo, hi = max(lo, a), min(hi, b)
		if hi > lo {
			acc += float64(vs[i]) * float64(hi-lo)
		}
	}
	return acc / float64(b-a)
}

func (s *sender) writeResults(frames []frameRow) error {
	c := s.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows [][]string
	for _, f := range frames {
		rows = append(rows, []string{itoa(int64(f.frame)), itoa(f.captureNs), secs(f.captureNs, c.t0Ns),
			strconv.FormatFloat(float64(f.handedNs-f.captureNs)/1e6, 'f', 3, 64), strconv.FormatBool(f.keyframe),
			itoa(int64(f.bytes)), itoa(int64(f.nalBytes)), itoa(int64(f.packets)), itoa(int64(f.encoderBps)), itoa(int64(f.targetBps)),
			strconv.FormatBool(f.forced)})
	}
	if err := writeCSV(filepath.Join(c.out, "frames.csv"), []string{"frame", "capture_ns", "capture_s",
		"encode_to_pacer_ms", "keyframe", "bytes", "nal_bytes", "packets", "encoder_bps", "target_bps", "forced_keyframe"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	var rtpBytes int64 // the video's packets: padding is counted apart
	for _, p := range s.packets {
		frame := itoa(int64(p.frame))
		if p.padding || p.audio {
			frame = "" // padding and audio belong to no video frame; rtp_seq is their stream's
		} else if !p.rtx {
			rtpBytes += int64(p.wireBytes) // the media stream's; retransmissions are in repair
		}
		rtx, osn := packetRowRTX(p)
		rows = append(rows, []string{secs(p.tNs, c.t0Ns), itoa(p.tseq), itoa(int64(p.seq)), frame, itoa(int64(p.wireBytes)),
			strconv.FormatBool(p.padding), rtx, osn, strconv.FormatBool(p.audio)})
	}
	if err := writeCSV(filepath.Join(c.out, "packets.csv"), []string{"t_s", "transport_seq", "rtp_seq", "frame", "udp_payload_bytes",
		"padding", "rtx", "original_seq", "audio"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	ts, tv, ev := []int64{}, []int{}, []int{}
	for _, t := range s.targets {
		ts, tv, ev = append(ts, t.tNs), append(tv, t.targetBps), append(ev, t.encoderBp)
		st, _ := json.Marshal(t.stats)
		rows = append(rows, []string{secs(t.tNs, c.t0Ns), itoa(int64(t.targetBps)), itoa(int64(t.encoderBp)), string(st)})
	}
	if err := writeCSV(filepath.Join(c.out, "targets.csv"), []string{"t_s", "target_bps", "encoder_set_bps", "controller_stats"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	s.ledger.mu.Lock()
	for _, r := range s.ledger.rtt {
		rows = append(rows, []string{secs(r.tNs, c.t0Ns), fmtFloat(float64(r.rttNs) / 1e6), strconv.Itoa(r.acks)})
	}
	s.ledger.mu.Unlock()
	if err := writeCSV(filepath.Join(c.out, "feedback_rtt.csv"), []string{"t_s", "rtt_ms", "acks"}, rows); err != nil {
		return err
	}
	if sl, ok := s.bwe.(interface{ StateRows(int64) [][]string }); ok {
		if err := writeCSV(filepath.Join(c.out, "bbr_state.csv"), bbrStateHeader, sl.StateRows(c.t0Ns)); err != nil {
			return err
		}
	}
	// The encoder's achieved bitrate per 1 s of capture time beside what it was asked for then: the
	// H.264 bytes (the video, against the encoder's setting) and the same frames' packets as the IP
	// layer carried them (RTP + UDP + IPv4 headers: what the controller's target budgets for). The
	// wire bytes are those of the packets as they left the socket (packets.csv): with every RTP
	// header extension, the transport-wide sequence number the pacer or TWCC interceptor adds after
	// the frame was handed over included (the RTP header at hand-over lacks its 4 B),
	// and without the packets a pacer still held at the end (never on the wire).
	sentWire := map[uint32]int64{}
	for _, p := range s.packets {
		if !p.padding && !p.rtx && !p.audio {
			sentWire[p.frame] += int64(p.wireBytes + udpIPv4Header)
		}
	}
	rows = rows[:0]
	if len(frames) > 0 {
		first := frames[0].captureNs
		nwin := int((frames[len(frames)-1].captureNs-first)/1e9) + 1
		bits := make([]int64, nwin)
		wireBits := make([]int64, nwin)
		nfr := make([]int, nwin)
		for _, f := range frames {
			w := int((f.captureNs - first) / 1e9)
			bits[w] += int64(f.bytes) * 8
			wireBits[w] += sentWire[f.frame] * 8
			nfr[w]++
		}
		for w := 0; w < nwin; w++ {
			a, b := first+int64(w)*1e9, first+int64(w+1)*1e9
			rows = append(rows, []string{secs(a, c.t0Ns), itoa(int64(nfr[w])), itoa(bits[w]), itoa(wireBits[w]),
				fmt.Sprintf("%.0f", stepMean(ts, tv, a, b)), fmt.Sprintf("%.0f", stepMean(ts, ev, a, b))})
		}
	}
	if err := writeCSV(filepath.Join(c.out, "encoder.csv"), []string{"window_start_s", "frames", "achieved_bps",
		"achieved_wire_bps", "target_bps_mean", "encoder_set_bps_mean"}, rows); err != nil {
		return err
	}
	fb := s.ledger.summary()
	out := map[string]any{
		"controller": c.controller, "frames_captured": len(frames), "packets_sent": s.wireSent,
		"packets_handed": s.handed, "packets_unsent_at_end": s.unsentAtEnd, "rtp_bytes_sent": rtpBytes, "send_errors": s.sendErrs, "feedback": fb,
		"padding":              !c.bbr.NoPadding && c.controller == "webrtc-bbr",
		"padding_packets_sent": s.paddingSent, "padding_bytes_sent": s.paddingBytes, "padding_packets_unsent_at_end": s.paddingUnsent,
		"fps": c.fps, "width": c.width, "height": c.height, "duration_s": c.duration.Seconds(),
		"bitrate_bps":    map[string]int{"initial": c.initialBps, "min": c.minBps, "max": c.maxBps, "encoder_max": c.encoderMaxBps},
		"target_updates": len(s.targets), "cpu": processCPU(),
		"repair": map[string]any{"nack": c.nack, "pli": c.pli, "counts": s.rep, "history_packets": historySize,
			"keyframe_min_interval_ms": minKeyFrameSendInterval.Milliseconds(), "rtx_ssrc": rtxSSRC, "rtx_payload_type": rtxPT},
		"audio": s.audio,
	}
	if len(frames) > 0 {
		out["first_capture_s"] = float64(frames[0].captureNs-c.t0Ns) / 1e9
		out["last_capture_s"] = float64(frames[len(frames)-1].captureNs-c.t0Ns) / 1e9
	}
	if len(s.targets) > 0 {
		out["final_target_bps"] = s.targets[len(s.targets)-1].targetBps
	}
	return writeJSON(filepath.Join(c.out, "sender.json"), out)
}

// processCPU: this process's CPU time so far (every goroutine; not the encoder child, which has
// its own), for the per-packet cost of a real run (bench/bench_rtp.py prints it per packet).
func processCPU() map[string]float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return nil
	}
	return map[string]float64{"user_s": float64(ru.Utime.Nano()) / 1e9, "system_s": float64(ru.Stime.Nano()) / 1e9}
}
