package main

import "testing"

// The paced sender's rate is the controller's pacing rate after the PacerConfig round trip
// (bbr_network_controller.cc 0040b66a l. 267-276, pacer_controller.cc 665174fd l. 47-49,
// paced_sender.cc l. 173-179): time window = GetMinRtt() × 0.25, data window = time window × rate
// in whole bytes (rounded half up), the pacer's rate = data window / time window truncated, kept as
// bps / 1000. Before any RTT sample GetMinRtt() is 100 ms: a time window of 25 000 µs, 320 bit/s per
// byte of window. With max_data_rate 4 999 900 bit/s (STARTUP's rate is far above it, so the pacing
// rate is the cap): data window (4 999 900 × 25 000 + 4 000 000) / 8 000 000 = 15 625 B (15 624.69
// + 0.5, truncated), 15 625 × 320 = 5 000 000 bit/s: the pacer runs at 5 000 kbit/s, 3 125 B per
// 5 ms call, not at the 4 999 kbit/s (3 124 B) the rate itself gives. Ten 5 ms calls with 30 packets
// queued send 27 packets (3, 3, 2, 3, 3, 2, 3, 2, 3, 3, as TestPacer2018BurstsAt5Mbit) and leave
// 10 × 3 125 − 27 × 1 200 = −1 150 B in the media budget (at 4 999 kbit/s: −1 160). STARTUP probes,
// so the padding budget runs at the same 5 000 kbit/s.
func TestPacerRunsAtThePacerConfigRate(t *testing.T) {
	e, out := pacerUnderTestAt(t, bbrVariant{NoPadding: true}, 4_999_900)
	if got := e.pacerKbpsLocked(); got != 5000 {
		t.Fatalf("pacer rate %d kbit/s, want 5000 (15 625 B per 25 ms)", got)
	}
	var seq uint16
	queueMedia(e, 30, &seq)
	got := paceCalls(e, out, every(bbrTick, 10))
	want := []int{3, 3, 2, 3, 3, 2, 3, 2, 3, 3}
	wantPerCall(t, got, want)
	if e.media.targetRateKbps != 5000 || e.media.bytesRemaining != 10*3125-27*1200 {
		t.Fatalf("media budget at %d kbit/s with %d B left; want 5000 and -1150", e.media.targetRateKbps,
			e.media.bytesRemaining)
	}
	padded, _ := pacerUnderTestAt(t, bbrVariant{}, 4_999_900)
	padded.mu.Lock()
	padded.tick = padded.paceLocked(padded.tick.Add(bbrTick))
	padded.mu.Unlock()
	if padded.pad.targetRateKbps != 5000 {
		t.Fatalf("padding budget at %d kbit/s, want 5000", padded.pad.targetRateKbps)
	}
}
