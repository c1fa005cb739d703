// Package bbr is the BBR variant WebRTC shipped in 2018 (modules/congestion_controller/bbr), written
// for mpvlab from its description (docs/studies.md §3): a max filter over the three best bandwidth
// samples, a recovery state entered on a single loss, min-RTT probing skipped while the RTT is
// similar — plus the study's variants as parameters. Time is passed in explicitly (no clock reads),
// so the unit tests drive it with recorded sequences.
package bbr

// Sample is one bandwidth sample (bits per second) taken at round trip `Round`.
type Sample struct {
	Rate  float64
	Round int64
}

// FilterKind selects how a new sample enters the three-slot filter.
type FilterKind int

const (
	// Replacing is WebRTC's windowed max filter (Kathleen Nichols' algorithm, as in WebRTC's
	// windowed_filter.h): a new sample replaces every kept sample that is less than or equal to it.
	Replacing FilterKind = iota
	// NonReplacing keeps the three highest samples as separate entries: a new sample only displaces
	// the lowest of the three, and only if it is higher (the study's "does not replace" variant).
	NonReplacing
)

// Filter keeps three samples, best first, over a window measured in round trips.
type Filter struct {
	Kind   FilterKind
	Window int64 // round trips a sample stays valid (WebRTC: 10 = gain cycle length + 2)
	s      [3]Sample
	n      int // 0 until the first sample
}

// NewFilter returns an empty filter.
func NewFilter(kind FilterKind, window int64) *Filter { return &Filter{Kind: kind, Window: window} }

// Best is the estimate WebRTC used: the highest sample still in the window.
func (f *Filter) Best() float64 { return f.s[0].Rate }

// ThirdBest is the study's variant estimate: the third slot (in the non-replacing filter, with
// fewer than three samples kept, the lowest kept one).
func (f *Filter) ThirdBest() float64 {
	for i := 2; i > 0; i-- {
		if f.s[i].Rate > 0 {
			return f.s[i].Rate
		}
	}
	return f.s[0].Rate
}

// Samples returns the three slots (best first), for tests and logs.
func (f *Filter) Samples() [3]Sample { return f.s }

// Reset puts one sample in all three slots.
func (f *Filter) Reset(x Sample) { f.s = [3]Sample{x, x, x}; f.n = 1 }

// Update adds a sample taken at round x.Round.
func (f *Filter) Update(x Sample) {
	if f.Kind == NonReplacing {
		f.updateNonReplacing(x)
		return
	}
	// WebRTC windowed_filter.h Update() (2018, 0040b66a l. 92-140), line by line. l. 95-99: an
	// uninitialised best (the zero value), a new best, or the whole window expired resets all slots.
	if f.s[0].Rate == 0 || x.Rate >= f.s[0].Rate || x.Round-f.s[2].Round > f.Window {
		f.Reset(x)
		return
	}
	// A sample replaces every kept sample that is <= it.
	if x.Rate >= f.s[1].Rate {
		f.s[1], f.s[2] = x, x
	} else if x.Rate >= f.s[2].Rate {
		f.s[2] = x
	}
	// Expire and age: the best expired -> shift the others up (and once more if that one expired too).
	if x.Round-f.s[0].Round > f.Window {
		f.s[0], f.s[1], f.s[2] = f.s[1], f.s[2], x
		if x.Round-f.s[0].Round > f.Window {
			f.s[0], f.s[1] = f.s[1], f.s[2]
		}
		return
	}
	// Sub-window ageing (same source): the 2nd and 3rd slots are refreshed with newer samples so that
	// a fresh runner-up exists when the best expires.
	// windowed_filter.h compares the samples' values here, not their times (l. 126, 134 of the 2018
	// file): f.s[1].Rate == f.s[0].Rate.
	if f.s[1].Rate == f.s[0].Rate && x.Round-f.s[1].Round > f.Window>>2 {
		f.s[1], f.s[2] = x, x
		return
	}
	if f.s[2].Rate == f.s[1].Rate && x.Round-f.s[2].Round > f.Window>>1 {
		f.s[2] = x
	}
}

// updateNonReplacing keeps the three highest unexpired samples, each its own entry.
func (f *Filter) updateNonReplacing(x Sample) {
	if f.n == 0 {
		f.s, f.n = [3]Sample{x}, 1
		return
	}
	// Drop expired entries (an empty slot is a zero sample).
	kept := make([]Sample, 0, 4)
	for _, s := range f.s {
		if s.Rate > 0 && x.Round-s.Round <= f.Window {
			kept = append(kept, s)
		}
	}
	kept = append(kept, x)
	// insertion sort, highest first; ties keep the older sample first
	for i := 1; i < len(kept); i++ {
		for j := i; j > 0 && kept[j].Rate > kept[j-1].Rate; j-- {
			kept[j], kept[j-1] = kept[j-1], kept[j]
		}
	}
	f.s = [3]Sample{}
	copy(f.s[:], kept)
}
