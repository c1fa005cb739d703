package bbr

import (
	"math"
	"time"
)

// libwebrtc 2018's unit arithmetic (github.com/HackWebRTC/webrtc 0040b66a, api/units/), which the
// controller's rates and windows pass through: DataRate and DataSize hold whole bit/s and whole
// bytes, TimeDelta whole µs, and every product with a double is rounded back to the unit
// (std::round: half away from zero, as math.Round). These helpers are those operators, each citing
// its line; float64 stays the carrier here, always holding a whole number.

// rateTimesGain is data_rate.h l. 145-150, DataRate × double: DataRate::bps(std::round(bps × scalar)).
func rateTimesGain(bps, gain float64) float64 { return math.Round(bps * gain) }

// sizeTimesGain is data_size.h l. 116-121, DataSize × double: DataSize::bytes(std::round(bytes × scalar)).
func sizeTimesGain(bytes int64, gain float64) int64 { return int64(math.Round(float64(bytes) * gain)) }

// sizeOverTime is data_rate.h l. 164-166, DataSize / TimeDelta: bytes × 8 000 000 / µs in int64,
// truncated (data_rate_impl::Microbits).
func sizeOverTime(bytes int64, d time.Duration) float64 { return dataRate(bytes, d.Microseconds()) }

// rateTimesTime is data_rate.h l. 170-173, DataRate × TimeDelta: (bps × µs + 4 000 000) / 8 000 000
// in int64, i.e. whole bytes rounded half up.
func rateTimesTime(bps float64, d time.Duration) int64 {
	return (int64(bps)*d.Microseconds() + 4_000_000) / 8_000_000
}

// timeTimesGain is time_delta.h l. 201-206, TimeDelta × double: TimeDelta::us(std::round(us × scalar)).
func timeTimesGain(d time.Duration, gain float64) time.Duration {
	return time.Duration(math.Round(float64(d.Microseconds())*gain)) * time.Microsecond
}
