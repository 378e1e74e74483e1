package proctest

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// WaitTimeout bounds WaitLine, Terminate and Run.
const WaitTimeout = time.Minute

// pollInterval is how often WaitUntil checks its condition.
const pollInterval = 10 * time.Millisecond

// Process is a running command whose output the test reads line by line.
type Process struct {
	cmd     *exec.Cmd
	name    string        // the binary's base name, for messages
	mu      sync.Mutex    // guards lines and changed
	lines   []string      // its standard output and error, as they arrive
	changed chan struct{} // closed and replaced when a line arrives
	exited  chan struct{} // closed once it has exited and its output is read
	err     error         // cmd.Wait's error; valid once exited is closed
}

// Start runs cmd in the background until the test ends, capturing its
// standard output and error together. cmd must not have been started, and
// Start sets its Stdout and Stderr. When the test fails, the process's output
// is logged as the test ends.
func Start(tb testing.TB, cmd *exec.Cmd) *Process {
	tb.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatalf("proctest: %v", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		tb.Fatalf("proctest: start %s: %v", cmd.Path, err)
	}
	w.Close()
	p := &Process{cmd: cmd, name: filepath.Base(cmd.Path), changed: make(chan struct{}), exited: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	go func() {
		p.err = cmd.Wait()
		<-read
		r.Close()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if tb.Failed() {
			tb.Logf("output of %s (%v):\n%s", p.name, p.err, p.Log())
		}
	})
	return p
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// PID returns the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Log returns the output so far, one line per line.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// WaitLine waits for an output line, from the first on, that contains every
// one of subs and returns it. It fails when the process exits first or after
// WaitTimeout.
func (p *Process) WaitLine(tb testing.TB, subs ...string) string {
	tb.Helper()
	deadline := time.After(WaitTimeout)
	seen := 0
	for {
		p.mu.Lock()
		lines, changed := p.lines, p.changed
		p.mu.Unlock()
		for _, line := range lines[seen:] {
			if containsAll(line, subs) {
				return line
			}
		}
		seen = len(lines)
		select {
		case <-changed:
		case <-p.exited:
			p.mu.Lock()
			more := len(p.lines) > seen
			p.mu.Unlock()
			if !more {
				tb.Fatalf("%s exited (%v) before logging %q (output below)", p.name, p.err, subs)
			}
		case <-deadline:
			tb.Fatalf("%s logged no line with %q within %s (output below)", p.name, subs, WaitTimeout)
		}
	}
}

func containsAll(line string, subs []string) bool {
	for _, s := range subs {
		if !strings.Contains(line, s) {
			return false
		}
	}
	return true
}

// WaitUntil polls cond until it holds, failing at once when the process
// exits first, and after timeout.
func (p *Process) WaitUntil(tb testing.TB, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-p.exited:
			tb.Fatalf("%s exited early (%v) (output below)", p.name, p.err)
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("condition not met within %s (output of %s below)", timeout, p.name)
		}
	}
}

// RequireRunning fails the test at once when the process has exited.
func (p *Process) RequireRunning(tb testing.TB) {
	tb.Helper()
	select {
	case <-p.exited:
		tb.Fatalf("%s exited early (%v) (output below)", p.name, p.err)
	default:
	}
}

// Terminate sends SIGTERM, waits for the process to exit (WaitTimeout at
// most) and returns its exit code: -1 when a signal ended it.
func (p *Process) Terminate(tb testing.TB) int {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("proctest: SIGTERM %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(WaitTimeout):
		tb.Fatalf("%s still running %s after SIGTERM (output below)", p.name, WaitTimeout)
	}
	return p.cmd.ProcessState.ExitCode()
}

// Wait waits for the process to exit on its own (WaitTimeout at most) and
// returns its exit code: -1 when a signal ended it. Use it after a signal
// the test sent itself, when a second one would race the exit.
func (p *Process) Wait(tb testing.TB) int {
	tb.Helper()
	select {
	case <-p.exited:
	case <-time.After(WaitTimeout):
		tb.Fatalf("%s still running after %s (output below)", p.name, WaitTimeout)
	}
	return p.cmd.ProcessState.ExitCode()
}

// Stop sends SIGTERM and requires a clean exit: status 0.
func (p *Process) Stop(tb testing.TB) {
	tb.Helper()
	if code := p.Terminate(tb); code != 0 {
		tb.Fatalf("%s exited with %v after SIGTERM (output below)", p.name, p.err)
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatalf("proctest: SIGKILL %s: %v", p.name, err)
	}
	<-p.exited
}

// Run runs cmd to completion and returns its exit code and its standard
// output and error together. It sets cmd's Stdout and Stderr, and fails the
// test when cmd cannot start or is still running after WaitTimeout.
func Run(tb testing.TB, cmd *exec.Cmd) (int, string) {
	tb.Helper()
	var out bytes.Buffer // one writer: Stdout and Stderr are the same
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("proctest: start %s: %v", cmd.Path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(WaitTimeout):
		_ = cmd.Process.Kill()
		err = <-done // before reading out: Wait has then copied all of it
		tb.Fatalf("%s did not exit on its own within %s (%v); output:\n%s", filepath.Base(cmd.Path), WaitTimeout, err, out.String())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		tb.Fatalf("proctest: %s: %v; output:\n%s", filepath.Base(cmd.Path), err, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
}
