package main

import "time"

// processScheduler is when libwebrtc 2018's process thread calls the paced sender's Process()
// (github.com/HackWebRTC/webrtc 665174fd, modules/utility/source/process_thread_impl.cc
// ProcessThreadImpl::Process l. 170-221 with GetNextCallbackTime l. 27-34, and
// modules/pacing/paced_sender.cc TimeUntilNextProcess l. 240-256). Not a fixed 5 ms grid: each call
// is planned from the end of the previous one, 5 ms after that Process() began, so a call the host
// delivered late pushes every later call back instead of being followed by a short catch-up
// interval (a ticker keeps its grid, so the call after a late one came early). The thread's clock
// is rtc::TimeMillis(), whole ms; the pacer's own elapsed time is in µs, rounded to ms.
type processScheduler struct {
	origin time.Time // the thread's ms clock counts from here (rtc::TimeMillis' origin is arbitrary)
	nextMs int64     // the pacer's next_callback on that clock
}

// pacerMinPacketLimitMs is paced_sender.cc's kMinPacketLimitMs (l. 35).
const pacerMinPacketLimitMs = 5

func newProcessScheduler(origin time.Time) *processScheduler {
	return &processScheduler{origin: origin}
}

// clockMs is rtc::TimeMillis(): whole ms, truncated.
func (s *processScheduler) clockMs(t time.Time) int64 { return t.Sub(s.origin).Milliseconds() }

// timeUntilNextProcess is PacedSender::TimeUntilNextProcess (not paused, no probe cluster: BBR's
// updates carry none): kMinPacketLimitMs less the ms since the last Process() began, rounded
// ((µs + 500) / 1000), never below 0.
func timeUntilNextProcess(lastProcess, now time.Time) int64 {
	elapsedMs := (now.Sub(lastProcess).Microseconds() + 500) / 1000
	return max(pacerMinPacketLimitMs-elapsedMs, 0)
}

// plan sets next_callback = GetNextCallbackTime(now): the thread's ms clock plus the pacer's
// TimeUntilNextProcess(). The thread does this when it first sees the module (l. 184-185) and with a
// fresh clock reading right after each Process() (l. 195-199).
func (s *processScheduler) plan(lastProcess, now time.Time) {
	s.nextMs = s.clockMs(now) + timeUntilNextProcess(lastProcess, now)
}

// due is l. 187: Process() runs once next_callback is not after the thread's clock.
func (s *processScheduler) due(now time.Time) bool { return s.nextMs <= s.clockMs(now) }

// wait is l. 216-218: the thread sleeps next_checkpoint − TimeMillis() whole ms from now (an
// EventWrapper wait relative to the current instant, so a fraction of a ms carries over).
func (s *processScheduler) wait(now time.Time) time.Duration {
	return time.Duration(max(s.nextMs-s.clockMs(now), 0)) * time.Millisecond
}
