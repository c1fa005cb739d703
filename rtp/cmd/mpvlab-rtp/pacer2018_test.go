package main

import (
	"testing"
	"time"
)

// The pacer replays a send sequence Process() call by Process() call, and the packets each call
// sends are the ones libwebrtc 2018's paced sender (paced_sender.cc 665174fd l. 258-353, with
// IntervalBudget, interval_budget.cc) sends: every expected count below is worked out by hand from
// those lines. STARTUP's pacing rate is above max_bitrate here, so the pacing rate is max_bitrate
// exactly; no feedback comes, and every sequence stays under the 32 × 1460 B initial window.
// The pacer counts a media packet as its 1200 B payload and a padding packet as its 224 B of padding
// (payload_size, padding_bytes_in_packet: rtp_sender.cc 2018 l. 917-927, 611), not the RTP header.

// paceCalls drives e's Process() at the given offsets from its last process time (cumulative) and
// returns how many packets each call sent.
// wantPerCall fails the test unless the first len(want) calls sent want[i] packets each.
func wantPerCall(t *testing.T, got, want []int) {
	t.Helper()
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("packets per call %v, want %v", got, want)
		}
	}
}

func paceCalls(e *bbrEstimator, out *[]wirePacket, steps []time.Duration) []int {
	counts := make([]int, len(steps))
	now := e.tick
	for i, d := range steps {
		now = now.Add(d)
		before := len(*out)
		e.mu.Lock()
		e.tick = e.paceLocked(now)
		e.mu.Unlock()
		counts[i] = len(*out) - before
	}
	return counts
}

func every(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

// At 5 Mbit/s each 5 ms call adds 5000 × 5 / 8 = 3125 B; packets go while the budget has a byte left
// (a packet may overdraw it) and an overdraft is paid from the next call: 3125 → 1925 → 725 → −475
// (3 packets), −475 + 3125 = 2650 → 1450 → 250 → −950 (3), 2175 → 975 → −225 (2), 2900 → … → −700
// (3), 2425 → … → −1175 (3), 1950 → 750 → −450 (2), … The burst is never more than
// ceil(3125 / 1200) = 3 packets, and the bytes of n calls are 3125·n plus the last overdraft:
// 5.000 Mbit/s of payload. (Ours before: 2 ms ticks, a token bucket of 2 packets.)
func TestPacer2018BurstsAt5Mbit(t *testing.T) {
	e, out := pacerUnderTestAt(t, bbrVariant{NoPadding: true}, 5_000_000)
	if kbps := int(e.c.PacingRate()) / 1000; kbps != 5000 {
		t.Fatalf("pacing rate %d kbit/s, want max_bitrate 5000", kbps)
	}
	var seq uint16
	queueMedia(e, 30, &seq)
	got := paceCalls(e, out, every(bbrTick, 10))
	want := []int{3, 3, 2, 3, 3, 2, 3, 2, 3, 3}
	wantPerCall(t, got, want)
	var bytes int
	for _, p := range *out {
		bytes += p.counted
	}
	if bytes != 27*1200 || e.media.bytesRemaining != 10*3125-27*1200 {
		t.Fatalf("%d payload bytes sent, budget left %d; want 32400 and -1150", bytes, e.media.bytesRemaining)
	}
	// The controller's bytes in flight count the payload too (AddPacketToTransportFeedback, 2018).
	if e.c.Inflight() != 27*1200 {
		t.Fatalf("controller in flight %d, want 27 × 1200 = 32400", e.c.Inflight())
	}
	// Idle: the queue runs empty (the 3 packets left go in the next 2 calls), then 20 calls with nothing
	// queued. Without underuse build-up the unspent budget is not saved: 10 packets queued at once
	// leave 3 in the next call (3125 B), not all 10 (with build-up: up to 500 ms of budget).
	paceCalls(e, out, every(bbrTick, 22))
	if e.queue.Len() != 0 || e.media.bytesRemaining != 3125 {
		t.Fatalf("after idling: %d queued, budget %d; want 0 and 3125 (one interval, no build-up)",
			e.queue.Len(), e.media.bytesRemaining)
	}
	queueMedia(e, 10, &seq)
	if got := paceCalls(e, out, every(bbrTick, 1)); got[0] != 3 {
		t.Fatalf("after 100 ms idle, 10 queued: %d packets in the next call, want 3", got[0])
	}
}

// Process() rounds the elapsed time to whole ms (l. 261) and refills at most kMaxIntervalTimeMs
// (30 ms, l. 412): a call 50 ms late adds 5000 × 30 / 8 = 18 750 B — 16 packets (15 × 1200 = 18 000
// leave 750 B > 0; −450 after the 16th) — and one 2.6 ms after it adds 5000 × 3 / 8 = 1875 B:
// 1425 → 225 → −975, 2 packets.
func TestPacer2018LateCallAndRounding(t *testing.T) {
	e, out := pacerUnderTestAt(t, bbrVariant{NoPadding: true}, 5_000_000)
	var seq uint16
	queueMedia(e, 30, &seq)
	got := paceCalls(e, out, []time.Duration{50 * time.Millisecond, 2600 * time.Microsecond})
	if got[0] != 16 || got[1] != 2 {
		t.Fatalf("a 50 ms late call then one 2.6 ms after: %v packets, want [16 2]", got)
	}
}

// At 500 kbit/s a call adds 500 × 5 / 8 = 312 B (312.5 truncated, as the 2018 integer code does) —
// less than a packet, so one packet per call at most, and packet k (from 1) leaves at the first call
// n whose budget 312·n − 1200·(k − 1) is above 0: n = ⌊1200·(k − 1) / 312⌋ + 1. That is 1200 B per
// 19.23 ms, 499.2 kbit/s.
func TestPacer2018SpacingAt500kbit(t *testing.T) {
	e, out := pacerUnderTestAt(t, bbrVariant{NoPadding: true}, 500_000)
	var seq uint16
	queueMedia(e, 20, &seq)
	got := paceCalls(e, out, every(bbrTick, 80))
	k := 1
	for n, c := range got {
		if c > 1 {
			t.Fatalf("call %d sent %d packets, want at most 1", n+1, c)
		}
		if c == 1 {
			if want := 1200*(k-1)/312 + 1; n+1 != want {
				t.Fatalf("packet %d left at call %d, want call %d", k, n+1, want)
			}
			k++
		}
	}
	if k-1 != 20 {
		t.Fatalf("%d packets sent in 80 calls, want all 20 (the last at call 74)", k-1)
	}
}

// Padding (l. 335-346): with the queue empty and the window open, after a media packet, a call pads
// for what the padding budget has left, in whole padding packets; media spends the padding budget
// too (l. 417-421). STARTUP's pad rate = its pacing rate, 5 Mbit/s: one media packet (1200 B) of
// 3125 B leaves 1925 B → 9 padding packets of 224 B (8 × 224 = 1792 < 1925; −91 after the 9th), the
// next call 3125 − 91 = 3034 B → 14 (13 × 224 = 2912 < 3034).
func TestPacer2018PaddingBudget(t *testing.T) {
	e, out := pacerUnderTestAt(t, bbrVariant{}, 5_000_000)
	var seq uint16
	queueMedia(e, 1, &seq)
	got := paceCalls(e, out, every(bbrTick, 2))
	if got[0] != 1+9 || got[1] != 14 {
		t.Fatalf("calls sent %v packets, want [10 14] (1 media + 9 padding, then 14 padding)", got)
	}
}

// The controller's clock is whole milliseconds (sscc.cc 2018 l. 616, 724: Timestamp::ms of the send
// and feedback times): 1 234.5678 ms after the start it reads 1 234 ms (or a later whole ms).
func TestEstimatorClockInWholeMilliseconds(t *testing.T) {
	e, _ := pacerUnderTest(t, bbrVariant{})
	e.start = time.Now().Add(-1234567800 * time.Nanosecond)
	got := e.now()
	if got%time.Millisecond != 0 || got < 1234*time.Millisecond {
		t.Fatalf("controller time %v: want whole ms, at least 1234 ms", got)
	}
}

// The encoder's setting: webrtc-bbr's target is a payload rate (2018 counts payload bytes), so the
// encoder gets it whole; GCC's counts whole packets, so its encoder gets 1200/1264 of it.
func TestEncoderSettingPerController(t *testing.T) {
	if got := (sendConfig{controller: "webrtc-bbr"}).encoderBps(500_000); got != 500_000 {
		t.Fatalf("webrtc-bbr at 500 kbit/s: encoder %d, want 500000", got)
	}
	if got := (sendConfig{controller: "gcc"}).encoderBps(500_000); got != 500_000*1200/1264 {
		t.Fatalf("gcc at 500 kbit/s: encoder %d, want %d", got, 500_000*1200/1264)
	}
}

// The encoder's own cap (--encoder-max-bitrate, issue 48): above it the encoder gets what it would at
// the cap, below it the target's setting; 0 is no cap.
func TestEncoderCap(t *testing.T) {
	for _, tc := range []struct {
		controller     string
		capBps, target int
		want           int
	}{
		{"gcc", 600_000, 900_000, 600_000 * 1200 / 1264},
		{"gcc", 600_000, 400_000, 400_000 * 1200 / 1264},
		{"gcc", 0, 900_000, 900_000 * 1200 / 1264},
		{"webrtc-bbr", 600_000, 900_000, 600_000},
		{"webrtc-bbr", 600_000, 500_000, 500_000},
	} {
		c := sendConfig{controller: tc.controller, encoderMaxBps: tc.capBps}
		if got := c.encoderBps(tc.target); got != tc.want {
			t.Fatalf("%s cap %d target %d: encoder %d, want %d", tc.controller, tc.capBps, tc.target, got, tc.want)
		}
	}
}
