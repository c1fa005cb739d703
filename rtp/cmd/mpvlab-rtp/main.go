// Command mpvlab-rtp is the live-video workload's two ends (mpvlab/runner/workloads/rtp.py):
//
//	mpvlab-rtp send …   the broadcaster: a live encoder as its child, RTP/UDP with transport-wide
//	                    sequence numbers, TWCC feedback into a congestion controller (gcc, …) whose
//	                    target drives the encoder's bitrate and the pacer
//	mpvlab-rtp recv …   the viewer: depacketises, accounts every frame (on time, late, lost),
//	                    sends TWCC feedback
//
// Both write CSVs and a JSON summary into --out; times are CLOCK_MONOTONIC ns, the run's clock.
package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mpvlab-rtp send|recv [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "send":
		err = runSend(os.Args[2:])
	case "recv":
		err = runRecv(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (send or recv)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpvlab-rtp:", err)
		os.Exit(1)
	}
}

// monotonicNs is CLOCK_MONOTONIC, the clock the run, the encoder's capture stamps and the other
// collectors share (Go's time package keeps its monotonic reading opaque).
func monotonicNs() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return ts.Nano()
}
