package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// startPythonChild starts one of the Python helpers (the live encoder, the viewer's decoder) with a
// pipe each way and its stderr in logName inside out. It dies with this process even if this process
// is killed (Pdeathsig); the run's ledger also records its pid.
func startPythonChild(argv []string, out, logName string) (*exec.Cmd, io.WriteCloser, io.ReadCloser, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(out, logName))
	if err != nil {
		return nil, nil, nil, err
	}
	cmd.Stderr = logf
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, in, stdout, nil
}

// pythonChild is a started Python helper with its pipes (the live encoder, the audio source).
type pythonChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	mu     sync.Mutex
	done   bool
}

// stop asks the child to end ("stop" on its stdin, then EOF), drains its stdout so it can flush and
// see EOF, and kills it if it has not exited within 3 s. A second call does nothing.
func (c *pythonChild) stop() {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.done = true
	_, _ = io.WriteString(c.stdin, "stop\n")
	_ = c.stdin.Close()
	c.mu.Unlock()
	exited := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c.stdout)
		_ = c.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		_ = c.cmd.Process.Kill()
		<-exited
	}
}
