package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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
