package main

import (
	"testing"
	"time"
)

// replayProcessThread runs ProcessThreadImpl::Process's loop (process_thread_impl.cc 665174fd
// l. 170-221) on a virtual clock with the scheduler the sender uses: the wait before call i ends
// late[i] after it should (a busy host), call i takes took[i]; process is the module's Process().
// The instants the calls began.
func replayProcessThread(origin time.Time, calls int, late, took map[int]time.Duration, process func(time.Time)) []time.Time {
	s := newProcessScheduler(origin)
	now := origin // the pacer was constructed here: time_last_process_us_ (paced_sender.cc l. 78)
	s.plan(origin, now)
	var at []time.Time
	for len(at) < calls {
		if w := s.wait(now); w > 0 {
			now = now.Add(w + late[len(at)])
		}
		if !s.due(now) {
			continue
		}
		at = append(at, now)
		process(now)
		last := now
		now = now.Add(took[len(at)-1])
		s.plan(last, now)
	}
	return at
}

// The schedule libwebrtc 2018 gives, worked out from the lines above (the thread's clock whole ms,
// the pacer's in µs): thread start at 0 plans 0 + (5 − 0) = 5. Call 1 at 5 → next 10; call 2 at 10
// → next 15, but the wake-up comes 7 ms late: call 3 at 22 (elapsed 12) → next 27 (a ticker would
// call again at its grid point 25, 3 ms later); call 4 at 27 takes 2.6 ms: TimeMillis() 29,
// TimeUntilNextProcess 5 − round(2.6) = 2 → next 31, the thread waits 31 − 29 = 2 ms from 29.6:
// call 5 at 31.6 (elapsed 4.6 → 5) → next 31 + 5 = 36, waits 5 ms from 31.6: call 6 at 36.6.
//
// At 5 Mbit/s (no padding, 30 packets of 1200 B queued) Process() refills the media budget by
// 5000 × elapsed ms / 8 (≤ 30 ms) and sends while it has a byte left: 3125 → 3 packets (−475);
// 2650 → 3 (−950); 12 ms: −950 + 7500 = 6550 → 6 (−650); 2475 → 3 (−1125); 2000 → 2 (−400);
// 2725 → 3 (−875): 3, 3, 6, 3, 2, 3. On the 5 ms grid call 4 would come at 25 with 3 ms of budget
// (−650 + 1875 = 1225 → 2 packets): 3, 3, 6, 2, 2, 3.
func TestProcessScheduledFromTheLastCall(t *testing.T) {
	e, out := pacerUnderTestAt(t, bbrVariant{NoPadding: true}, 5_000_000)
	var seq uint16
	queueMedia(e, 30, &seq)
	origin := e.tick
	var perCall []int
	at := replayProcessThread(origin, 6, map[int]time.Duration{2: 7 * time.Millisecond},
		map[int]time.Duration{3: 2600 * time.Microsecond}, func(now time.Time) {
			before := len(*out)
			e.mu.Lock()
			e.tick = e.paceLocked(now)
			e.mu.Unlock()
			perCall = append(perCall, len(*out)-before)
		})
	wantAt := []time.Duration{5 * ms, 10 * ms, 22 * ms, 27 * ms, 31600 * time.Microsecond, 36600 * time.Microsecond}
	for i, w := range wantAt {
		if got := at[i].Sub(origin); got != w {
			t.Fatalf("Process() calls at %v, want %v", offsets(at, origin), wantAt)
		}
	}
	want := []int{3, 3, 6, 3, 2, 3}
	wantPerCall(t, perCall, want)
	if e.media.bytesRemaining != -875 {
		t.Fatalf("media budget %d after six calls, want -875", e.media.bytesRemaining)
	}
	// The same late wake-up on a fixed 5 ms ticker (ours before): calls at 5, 10, 22, 25, 30, 35.
	g, gout := pacerUnderTestAt(t, bbrVariant{NoPadding: true}, 5_000_000)
	queueMedia(g, 30, &seq)
	grid := paceCalls(g, gout, []time.Duration{5 * ms, 5 * ms, 12 * ms, 3 * ms, 5 * ms, 5 * ms})
	for i, w := range []int{3, 3, 6, 2, 2, 3} {
		if grid[i] != w {
			t.Fatalf("on the grid: packets per call %v, want 3, 3, 6, 2, 2, 3", grid)
		}
	}
}

// Without late wake-ups or slow calls the schedule is the 5 ms grid: 5, 10, …, 50 ms.
func TestProcessScheduleOnAnIdleHostIsEvery5ms(t *testing.T) {
	origin := time.Unix(0, 0)
	at := replayProcessThread(origin, 10, nil, nil, func(time.Time) {})
	for i, a := range at {
		if a.Sub(origin) != time.Duration(5*(i+1))*ms {
			t.Fatalf("calls at %v, want every 5 ms from 5 ms", offsets(at, origin))
		}
	}
}

const ms = time.Millisecond

func offsets(at []time.Time, origin time.Time) []time.Duration {
	d := make([]time.Duration, len(at))
	for i, a := range at {
		d[i] = a.Sub(origin)
	}
	return d
}
