package bbr

import "testing"

// The max-filter cases of libwebrtc 2018's windowed_filter_unittest.cc (github.com/HackWebRTC/webrtc
// 0040b66a, modules/congestion_controller/bbr/), replayed on our Filter with the same samples, times
// and expected best / second / third values. The 2018 fixture's window is 99 (ms there; the filter
// is generic in its time type, ours counts in the same int64 field it uses for rounds). The min-RTT
// cases are not ported: the 2018 controller keeps its min RTT without this filter (a single value
// with an expiry, bbr_network_controller.cc UpdateBandwidthAndMinRtt), and so does ours.

func check2018(t *testing.T, f *Filter, what string, best, second, third float64) {
	t.Helper()
	s := f.Samples()
	if s[0].Rate != best || s[1].Rate != second || s[2].Rate != third {
		t.Fatalf("%s: best/second/third %.0f/%.0f/%.0f, want %.0f/%.0f/%.0f", what, s[0].Rate, s[1].Rate, s[2].Rate,
			best, second, third)
	}
}

// InitializeMaxFilter: 1000, 900, 800, 700, 600 bps at 0, 25, 50, 75, 100 ms → best 900 (recorded at
// 25 ms), second 700 (75 ms), third 600 (100 ms).
func initializeMaxFilter2018(t *testing.T) *Filter {
	t.Helper()
	f := NewFilter(Replacing, 99)
	bw := 1000.0
	for i, now := 0, int64(0); i < 5; i++ {
		f.Update(Sample{Rate: bw, Round: now})
		now += 25
		bw -= 100
	}
	check2018(t, f, "InitializeMaxFilter", 900, 700, 600)
	return f
}

func TestWindowedFilter2018UninitializedEstimates(t *testing.T) {
	check2018(t, NewFilter(Replacing, 99), "UninitializedEstimates", 0, 0, 0)
}

func TestWindowedFilter2018MonotonicallyDecreasingMax(t *testing.T) {
	f := NewFilter(Replacing, 99)
	now, bw := int64(0), 1000.0
	f.Update(Sample{Rate: bw, Round: now})
	if f.Best() != 1000 {
		t.Fatalf("best %v, want 1000", f.Best())
	}
	for i := 0; i < 6; i++ {
		now += 25
		bw -= 100
		f.Update(Sample{Rate: bw, Round: now})
		want := 700.0
		if i < 3 {
			want = 1000
		} else if i == 3 {
			want = 900
		}
		if f.Best() != want {
			t.Fatalf("i %d (sample %.0f at %d): best %.0f, want %.0f", i, bw, now, f.Best(), want)
		}
	}
}

func TestWindowedFilter2018SampleChangesThirdBestMax(t *testing.T) {
	f := initializeMaxFilter2018(t)
	f.Update(Sample{Rate: 600 + 50, Round: 101})
	check2018(t, f, "SampleChangesThirdBestMax", 900, 700, 650)
}

func TestWindowedFilter2018SampleChangesSecondBestMax(t *testing.T) {
	f := initializeMaxFilter2018(t)
	f.Update(Sample{Rate: 700 + 50, Round: 101})
	check2018(t, f, "SampleChangesSecondBestMax", 900, 750, 750)
}

func TestWindowedFilter2018SampleChangesAllMaxs(t *testing.T) {
	f := initializeMaxFilter2018(t)
	f.Update(Sample{Rate: 900 + 50, Round: 101})
	check2018(t, f, "SampleChangesAllMaxs", 950, 950, 950)
}

// Best recorded at 25 ms: it expires at 125 ms; second and third move up, the sample is third.
func TestWindowedFilter2018ExpireBestMax(t *testing.T) {
	f := initializeMaxFilter2018(t)
	f.Update(Sample{Rate: 600 - 50, Round: 125})
	check2018(t, f, "ExpireBestMax", 700, 600, 550)
}

// Second best recorded at 75 ms: at 175 ms best and second have expired.
func TestWindowedFilter2018ExpireSecondBestMax(t *testing.T) {
	f := initializeMaxFilter2018(t)
	f.Update(Sample{Rate: 600 - 50, Round: 175})
	check2018(t, f, "ExpireSecondBestMax", 600, 550, 550)
}

// Third best recorded at 100 ms: at 200 ms everything has expired.
func TestWindowedFilter2018ExpireAllMaxs(t *testing.T) {
	f := initializeMaxFilter2018(t)
	f.Update(Sample{Rate: 600 - 50, Round: 200})
	check2018(t, f, "ExpireAllMaxs", 550, 550, 550)
}

// ExpireCounterBasedMax: a window of 2 counts; 1000 "irrelevant" samples (i % 20, zeros included)
// after each insert must not disturb the best.
func TestWindowedFilter2018ExpireCounterBasedMax(t *testing.T) {
	f := NewFilter(Replacing, 2)
	irrelevant := func(at int64) {
		for i := 0; i < 1000; i++ {
			f.Update(Sample{Rate: float64(i % 20), Round: at})
		}
	}
	for _, c := range []struct {
		sample float64
		at     int64
		best   float64
	}{
		{50000, 1, 50000}, {40000, 2, 50000}, {30000, 3, 50000},
		{20000, 4, 40000}, // 50000 (t = 1) expires: 40000 is the new best
	} {
		f.Update(Sample{Rate: c.sample, Round: c.at})
		if f.Best() != c.best {
			t.Fatalf("insert %.0f at %d: best %.0f, want %.0f", c.sample, c.at, f.Best(), c.best)
		}
		irrelevant(c.at)
		if f.Best() != c.best {
			t.Fatalf("after irrelevant samples at %d: best %.0f, want %.0f", c.at, f.Best(), c.best)
		}
	}
}
