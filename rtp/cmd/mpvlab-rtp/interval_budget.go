package main

// intervalBudget is libwebrtc 2018's IntervalBudget (github.com/HackWebRTC/webrtc 665174fd,
// modules/pacing/interval_budget.cc), line for line with its integer arithmetic: the byte budget
// the paced sender refills each Process() call and spends per packet. The pacer uses it without
// underuse build-up (paced_sender.cc l. 70-71: IntervalBudget(0), can_build_up_underuse false), so
// a budget left unspent at the end of one interval is lost at the next refill — the pacer cannot
// save up a burst while the queue is empty — while an overdraft (a packet bigger than what was
// left) is paid back from the following intervals.
type intervalBudget struct {
	targetRateKbps     int
	maxBytesInBudget   int
	bytesRemaining     int // may be negative: the overdraft the next intervals pay back
	canBuildUpUnderuse bool
}

// budgetWindowMs is interval_budget.cc's kWindowMs: the budget holds at most 500 ms at its rate.
const budgetWindowMs = 500

// setTargetRateKbps: interval_budget.cc l. 30-35.
func (b *intervalBudget) setTargetRateKbps(kbps int) {
	b.targetRateKbps = kbps
	b.maxBytesInBudget = (budgetWindowMs * b.targetRateKbps) / 8
	b.bytesRemaining = min(max(-b.maxBytesInBudget, b.bytesRemaining), b.maxBytesInBudget)
}

// increaseBudget: interval_budget.cc l. 37-46. Without build-up an unspent budget is replaced by
// this interval's bytes, an overdraft is compensated.
func (b *intervalBudget) increaseBudget(deltaMs int64) {
	bytes := int(int64(b.targetRateKbps) * deltaMs / 8)
	if b.bytesRemaining < 0 || b.canBuildUpUnderuse {
		b.bytesRemaining = min(b.bytesRemaining+bytes, b.maxBytesInBudget)
	} else {
		b.bytesRemaining = min(bytes, b.maxBytesInBudget)
	}
}

// useBudget: interval_budget.cc l. 48-51.
func (b *intervalBudget) useBudget(bytes int) {
	b.bytesRemaining = max(b.bytesRemaining-bytes, -b.maxBytesInBudget)
}

// remaining: interval_budget.cc l. 53-55 (bytes_remaining(), never below 0).
func (b *intervalBudget) remaining() int { return max(0, b.bytesRemaining) }
