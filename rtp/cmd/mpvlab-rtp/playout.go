package main

import "time"

// The viewer's playout: frames leave for the decoder in frame order, each once it is complete and
// on time (complete by capture + playout deadline, the on_time status of frames.csv), or is given up
// at its deadline. Reference attribution, as libwebrtc's frame buffer decides what is decodable: the
// encoder (x264 zerolatency, ultrafast) makes no B-frames and every P-frame refers to the frame
// before it, so after a frame that was not played (late or lost) every P-frame is undecodable until
// the next keyframe (IDR); those are counted `undecodable` and not fed. With `--pli` the viewer asks
// for a key frame as libwebrtc 2018 did (recv_repair.go: no decodable frame for 3 s); otherwise, and
// until then, the encoder's own keyframe interval (keyint) ends the damage. Fed frames that the
// decoder puts out no picture for are `decode_error`s.

const playoutTick = 5 * time.Millisecond

// playout advances over the frames that can be settled at `now` (all of them when final) and
// returns those to feed; the caller holds r.mu and feeds after unlocking.
func (r *receiver) playout(now int64, final bool) []playedFrame {
	var out []playedFrame
	total := r.endFrames()
	if final {
		// without the end record (it never came), up to the highest frame seen, as writeResults counts
		total = max(total, int(r.maxFrame+1))
	}
	for total < 0 || int(r.next) < total {
		n := r.next
		f := r.frames[n]
		switch {
		case f != nil && f.completeNs != 0:
			if f.completeNs-f.captureNs <= r.cfg.deadline.Nanoseconds() {
				out = r.play(n, f, out)
			} else {
				r.refOK = false // late: not shown, and what refers to it cannot be decoded
			}
			f.au = nil
		case final || r.deadlinePassed(n, f, now):
			r.refOK = false // lost
			if f != nil {
				f.au = nil
			}
		default:
			return out // wait for it
		}
		r.next++
	}
	return out
}

func (r *receiver) play(n uint32, f *recvFrame, out []playedFrame) []playedFrame {
	if f.key {
		r.refOK = true
	}
	if !r.refOK {
		r.decode[n] = decUndecodable
		return out
	}
	r.decode[n] = decError // until the decoder answers with its picture
	return append(out, playedFrame{n, f.key, f.au})
}

// deadlinePassed: an incomplete frame's deadline is its capture time + the playout deadline; a frame
// never seen has passed it once a later frame's has (it was captured before that one).
func (r *receiver) deadlinePassed(n uint32, f *recvFrame, now int64) bool {
	dl := r.cfg.deadline.Nanoseconds()
	if f != nil {
		return now > f.captureNs+dl
	}
	for m := n + 1; int64(m) <= r.maxFrame; m++ {
		if g := r.frames[m]; g != nil {
			return now > g.captureNs+dl
		}
	}
	return false
}

// endFrames is the frame count from the sender's end record, or -1 before it arrived.
func (r *receiver) endFrames() int {
	if r.end == nil {
		return -1
	}
	if v, ok := r.end["frames"].(float64); ok {
		return int(v)
	}
	return -1
}

// runPlayout feeds the decoder every playoutTick until stop is closed.
func (r *receiver) runPlayout(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(playoutTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.mu.Lock()
			now := monotonicNs()
			out := r.playout(now, false)
			r.checkKeyFrameLocked(now, len(out)) // a PLI after 3 s without a decodable frame (recv_repair.go)
			r.mu.Unlock()
			r.feed(out)
		}
	}
}

func (r *receiver) feed(frames []playedFrame) {
	for _, p := range frames {
		r.dec.feed(p.frame, p.key, p.au)
	}
}

// finishDecoding plays out what is left, drains the decoder and settles each fed frame.
func (r *receiver) finishDecoding() error {
	r.mu.Lock()
	out := r.playout(monotonicNs(), true)
	r.mu.Unlock()
	r.feed(out)
	err := r.dec.finish(15 * time.Second)
	r.dec.mu.Lock()
	defer r.dec.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.dec.decoded {
		if r.decode[n] == decError {
			r.decode[n] = decDecoded
		}
	}
	return err
}
