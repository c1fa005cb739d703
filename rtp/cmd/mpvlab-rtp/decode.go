package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The viewer's decoder child (rtp/decoder/live_decoder.py): frames go in on its stdin, in frame
// order; it answers `decoded <frame>` per picture and `end <JSON>` after draining.

// Per-frame decode outcome in receiver/frames.csv; "" for a frame that was late or lost.
const (
	decDecoded     = "decoded"
	decError       = "decode_error" // fed, but the decoder put out no picture for it
	decUndecodable = "undecodable"  // on time, but a frame it depends on was not: never fed
)

type decoderChild struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	mu      sync.Mutex
	decoded map[uint32]bool
	end     map[string]any
	done    chan struct{} // closed when the child's stdout ended
	writeOK bool
}

func startDecoder(python, script, out, codec string) (*decoderChild, error) {
	cmd, in, stdout, err := startPythonChild([]string{python, script, "--codec", codec}, out, "decoder.log")
	if err != nil {
		return nil, err
	}
	d := &decoderChild{cmd: cmd, stdin: in, decoded: map[uint32]bool{}, done: make(chan struct{}), writeOK: true}
	go d.readAnswers(stdout)
	return d, nil
}

func (d *decoderChild) readAnswers(r io.Reader) {
	defer close(d.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		d.mu.Lock()
		switch kind {
		case "decoded":
			if n, err := strconv.ParseUint(rest, 10, 32); err == nil {
				d.decoded[uint32(n)] = true
			}
		case "end":
			_ = json.Unmarshal([]byte(rest), &d.end)
		}
		d.mu.Unlock()
	}
}

// feed writes one access unit; after a write error (the child died) the rest are not written and
// count as decode errors.
func (d *decoderChild) feed(frame uint32, key bool, au []byte) {
	if !d.writeOK {
		return
	}
	var h [12]byte
	binary.BigEndian.PutUint32(h[0:], frame)
	if key {
		binary.BigEndian.PutUint32(h[4:], 1)
	}
	binary.BigEndian.PutUint32(h[8:], uint32(len(au)))
	if _, err := d.stdin.Write(append(h[:], au...)); err != nil {
		d.writeOK = false
	}
}

// finish ends the child's input and waits until it drained and exited (≤ timeout, then kills it).
func (d *decoderChild) finish(timeout time.Duration) error {
	_ = d.stdin.Close()
	exited := make(chan error, 1)
	go func() {
		<-d.done
		exited <- d.cmd.Wait()
	}()
	select {
	case err := <-exited:
		return err
	case <-time.After(timeout):
		_ = d.cmd.Process.Kill()
		<-exited
		return fmt.Errorf("the decoder did not drain within %s", timeout)
	}
}

// playedFrame is a frame the playout hands to the decoder.
type playedFrame struct {
	frame uint32
	key   bool
	au    []byte
}

// isKeyframe: the access unit holds an IDR slice (NAL type 5), from which decoding can start over.
func isKeyframe(au []byte) bool {
	key := false
	forEachNAL(au, func(n []byte) {
		if len(n) > 0 && n[0]&0x1f == 5 {
			key = true
		}
	})
	return key
}
