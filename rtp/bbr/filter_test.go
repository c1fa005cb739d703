package bbr

import "testing"

type step struct {
	in                  Sample
	best, second, third float64
}

func runFilter(t *testing.T, f *Filter, steps []step) {
	t.Helper()
	for i, s := range steps {
		f.Update(s.in)
		got := f.Samples()
		if got[0].Rate != s.best || got[1].Rate != s.second || got[2].Rate != s.third {
			t.Fatalf("step %d (sample %.0f at round %d): slots %.0f/%.0f/%.0f, want %.0f/%.0f/%.0f",
				i+1, s.in.Rate, s.in.Round, got[0].Rate, got[1].Rate, got[2].Rate, s.best, s.second, s.third)
		}
	}
}

// The expected slots are worked out by hand from the rule: a new best (or a fully expired window)
// resets all three slots; otherwise the sample replaces every slot <= it; the best expires after 10
// rounds (the others shift up); the 2nd slot is refreshed once it equals the best and is > 10/4 = 2
// rounds old, the 3rd once it equals the 2nd and is > 10/2 = 5 rounds old.
func TestReplacingFilterRecordedSequence(t *testing.T) {
	f := NewFilter(Replacing, 10)
	runFilter(t, f, []step{
		{Sample{100, 0}, 100, 100, 100},  // first sample fills all slots
		{Sample{80, 1}, 100, 100, 100},   // below every slot, 2nd slot only 1 round old: dropped
		{Sample{90, 3}, 100, 90, 90},     // 2nd slot == best and 3 > 2 rounds old: refreshed
		{Sample{95, 4}, 100, 95, 95},     // replaces both slots <= 95
		{Sample{92, 6}, 100, 95, 95},     // below both; 3rd slot 2 rounds old (not > 5)
		{Sample{93, 10}, 100, 95, 93},    // 3rd == 2nd and 6 > 5 rounds old: refreshed
		{Sample{85, 11}, 95, 93, 85},     // best (round 0) is 11 > 10 rounds old: shift up
		{Sample{120, 12}, 120, 120, 120}, // new best resets
		{Sample{50, 23}, 50, 50, 50},     // 3rd slot (round 12) 11 rounds old: whole window expired
	})
	if f.Best() != 50 || f.ThirdBest() != 50 {
		t.Fatalf("best %v third %v", f.Best(), f.ThirdBest())
	}
}

func TestThirdBestIsThirdSlot(t *testing.T) {
	f := NewFilter(Replacing, 10)
	for _, s := range []Sample{{100, 0}, {90, 3}, {95, 4}, {93, 10}, {85, 11}} {
		f.Update(s)
	}
	// slots after the sequence above: 95/93/85
	if f.Best() != 95 || f.ThirdBest() != 85 {
		t.Fatalf("best %v third %v, want 95 and 85", f.Best(), f.ThirdBest())
	}
}

// Non-replacing: the three highest unexpired samples, each its own entry.
func TestNonReplacingFilterRecordedSequence(t *testing.T) {
	f := NewFilter(NonReplacing, 10)
	runFilter(t, f, []step{
		{Sample{100, 0}, 100, 0, 0},
		{Sample{80, 1}, 100, 80, 0},
		{Sample{90, 3}, 100, 90, 80},
		{Sample{95, 4}, 100, 95, 90},   // 80 drops out (lowest of four)
		{Sample{120, 5}, 120, 100, 95}, // a replacing filter would have reset to 120/120/120
		{Sample{50, 12}, 120, 95, 50},  // 100 (round 0) expired; 95 (round 4) is 8 rounds old
		{Sample{60, 16}, 60, 50, 0},    // 120 (round 5) and 95 (round 4) expired
	})
	if f.ThirdBest() != 50 {
		t.Fatalf("third best with two samples kept = %v, want the lowest kept (50)", f.ThirdBest())
	}
}
