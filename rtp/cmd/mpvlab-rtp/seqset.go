package main

// seqSet counts one RTP stream's packets by their unwrapped sequence number, each number once (the
// viewer's padding and audio streams; the video has its own, with its first number and its gaps).
type seqSet struct {
	seen map[int64]bool
	max  int64 // the highest unwrapped number seen, -1 before the first
}

func newSeqSet() seqSet { return seqSet{seen: map[int64]bool{}, max: -1} }

// add records a packet's sequence number, unwrapped against the highest seen so far; false if that
// number was seen before (a duplicate).
func (s *seqSet) add(n uint16) bool {
	seq := int64(n)
	if s.max >= 0 {
		seq = unwrap16(n, s.max)
	}
	if s.seen[seq] {
		return false
	}
	s.seen[seq] = true
	s.max = max(s.max, seq)
	return true
}
