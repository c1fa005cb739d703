package main

import (
	"reflect"
	"testing"
	"time"
)

// The playout's attribution over a stream with a lost and a late frame: frames after either are
// undecodable until the next keyframe; a frame still incomplete before its deadline holds the playout
// back; a frame never seen is given up once a later frame's deadline has passed.
func TestPlayoutAttributesReferenceLoss(t *testing.T) {
	const ms = int64(time.Millisecond)
	deadline := 400 * time.Millisecond
	r := &receiver{cfg: recvConfig{deadline: deadline}, vc: mustCodec(t, "h264"), frames: map[uint32]*recvFrame{}, decode: map[uint32]string{}, maxFrame: -1}
	add := func(n uint32, key bool, latency int64) {
		capture := int64(n) * 33 * ms
		f := &recvFrame{captureNs: capture, key: key, au: []byte{byte(n)}}
		if latency >= 0 {
			f.completeNs = capture + latency*ms
		}
		r.frames[n] = f
		r.maxFrame = max(r.maxFrame, int64(n))
	}
	add(0, true, 50)
	add(1, false, 50)
	// 2: never seen (lost)
	add(3, false, 50)  // on time, but refers to 2: undecodable
	add(4, true, 60)   // keyframe: decodable again
	add(5, false, 500) // late
	add(6, false, 40)  // refers to 5: undecodable
	add(7, true, -1)   // incomplete so far

	// At 7's capture + 300 ms 3's deadline has passed, so 2 is given up; 0 … 6 settle, 7 is still
	// within its deadline and holds the playout.
	now := 7*33*ms + 300*ms
	got := r.playout(now, false)
	var fed []uint32
	for _, p := range got {
		fed = append(fed, p.frame)
	}
	if !reflect.DeepEqual(fed, []uint32{0, 1, 4}) || r.next != 7 {
		t.Fatalf("fed %v, next %d; want [0 1 4], next 7", fed, r.next)
	}
	want := map[uint32]string{0: decError, 1: decError, 3: decUndecodable, 4: decError, 6: decUndecodable}
	if !reflect.DeepEqual(r.decode, want) {
		t.Fatalf("decode %v; want %v", r.decode, want)
	}
	// Frame 8 arrives (a P-frame); 7 passes its deadline incomplete: lost, and 8 is undecodable.
	add(8, false, 30)
	if out := r.playout(7*33*ms+deadline.Nanoseconds()+ms, false); len(out) != 0 || r.decode[8] != decUndecodable {
		t.Fatalf("after 7's deadline: fed %d, 8 is %q", len(out), r.decode[8])
	}
}

// A frame never seen is waited for until a later frame's deadline has passed, not given up earlier.
func TestPlayoutWaitsForUnseenFrame(t *testing.T) {
	const ms = int64(time.Millisecond)
	r := &receiver{cfg: recvConfig{deadline: 400 * time.Millisecond}, vc: mustCodec(t, "h264"), frames: map[uint32]*recvFrame{},
		decode: map[uint32]string{}, maxFrame: -1}
	r.frames[0] = &recvFrame{captureNs: 0, completeNs: 10 * ms, key: true}
	r.frames[2] = &recvFrame{captureNs: 66 * ms, completeNs: 80 * ms}
	r.maxFrame = 2
	if r.playout(300*ms, false); r.next != 1 {
		t.Fatalf("next %d; frame 1 must be waited for", r.next)
	}
	if r.playout(467*ms, false); r.next != 3 || r.decode[2] != decUndecodable {
		t.Fatalf("next %d, frame 2 %q; want 3, undecodable", r.next, r.decode[2])
	}
}

// Without the sender's end record the final playout stops at the highest frame seen.
func TestFinalPlayoutWithoutEndRecord(t *testing.T) {
	r := &receiver{cfg: recvConfig{deadline: 400 * time.Millisecond}, vc: mustCodec(t, "h264"), frames: map[uint32]*recvFrame{},
		decode: map[uint32]string{}, maxFrame: 1}
	r.frames[1] = &recvFrame{captureNs: 33, completeNs: 50, key: true}
	if out := r.playout(0, true); len(out) != 1 || r.next != 2 {
		t.Fatalf("fed %d, next %d; want 1, 2", len(out), r.next)
	}
}
